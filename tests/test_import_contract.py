"""The import contract of docs/architecture.md ("Layers"): the layers of pyproject.toml's ``[tool.importlinter]``
hold, leaf modules import nothing of st_rl, nothing in st_rl imports the former-path re-export modules, and no
st_rl module is imported inside a function.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "st_rl"
LEAVES = ("st_rl/registry.py", "st_rl/config/errors.py", "st_rl/config/defaults.py", "st_rl/protocols.py")
ALIASES = ("st_rl.utils.config", "st_rl.configs")  # former paths, kept for users and docs


def _imports(path: pathlib.Path) -> list[tuple[ast.AST, str, bool]]:
    """``(node, imported st_rl module, inside a function)`` of every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    in_function = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
    }
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name == "st_rl" or name.startswith("st_rl."):
                found.append((node, name, id(node) in in_function))
    return found


def _per_file(select) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        nodes = {id(node) for node, name, inside in _imports(path) if select(path, name, inside)}
        if nodes:
            counts[path.relative_to(ROOT).as_posix()] = len(nodes)
    return dict(counts)


def test_leaf_modules_import_nothing_of_st_rl():
    for leaf in LEAVES:
        assert not _imports(ROOT / leaf), leaf


def test_no_st_rl_module_imports_a_former_path():
    counts = _per_file(lambda path, name, inside: any(name == a or name.startswith(a + ".") for a in ALIASES))
    counts = {f: n for f, n in counts.items() if f not in ("st_rl/utils/config.py", "st_rl/configs.py")}
    assert not counts, (
        f"import from st_rl.registry / st_rl.config.resolve / st_rl.config.presets instead: {counts}"
    )


def test_no_st_rl_import_inside_a_function():
    """st_rl.cli too: it catches a Ctrl-C during its module-level imports (tests/test_cli_errors.py)."""
    inside = _per_file(lambda path, name, inside: inside)
    assert not inside, f"imports of st_rl modules inside functions (file: count): {inside}"


def test_no_import_cycle_between_modules():
    """Module level (import-linter's contracts see packages): the graph of top-level imports has no cycle."""
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {
        name: {m for node, m, inside in _imports(path) if not inside and m in modules and m != name}
        for name, path in modules.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                pytest.fail(f"import cycle: {' -> '.join(stack[stack.index(dep) :] + [dep])}")
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(modules):
        if name not in state:
            visit(name)


def test_layers_contract():
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[dev]')")
    command = (
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    )
    result = subprocess.run(
        [sys.executable, "-c", command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    broken = set(re.findall(r"^- (st_rl\S*) -> (st_rl\S*) \(l\.", result.stdout, re.M))
    assert not broken and result.returncode == 0, result.stdout[-4000:]
