"""The import contract of docs/architecture.md ("Layers"): the layers of pyproject.toml's ``[tool.importlinter]``
hold, leaf modules import nothing of st_rl, nothing in st_rl imports the former-path re-export modules, and no
st_rl module is imported inside a function.

``PENDING_*`` list what other branches of issue 26 remove; each may only shrink (a listed entry that is gone
fails, so the list is kept exact), and the target is empty.
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

PENDING_LAYER_VIOLATIONS = {
    "st_rl.algorithms.extensions.distillation -> st_rl.config.schema",
    "st_rl.storage.rollout_storage -> st_rl.algorithms.ppo",
    "st_rl.tune -> st_rl.cli",
}
PENDING_ALIAS_IMPORTS = {
    "st_rl/algorithms/extensions/distillation.py": 1,
    "st_rl/algorithms/extensions/symmetry.py": 1,
    "st_rl/algorithms/ppo.py": 1,
    "st_rl/cli.py": 4,
    "st_rl/evaluation/runs.py": 3,
    "st_rl/export.py": 2,
    "st_rl/modules/actor_critic_mutex.py": 1,
    "st_rl/play.py": 1,
    "st_rl/runners/__init__.py": 1,
    "st_rl/runners/dagger_saver.py": 1,
    "st_rl/runners/demonstration.py": 1,
    "st_rl/runners/on_policy_runner.py": 2,
    "st_rl/tune.py": 3,
    "st_rl/utils/ckpt_manipulator.py": 1,
    "st_rl/utils/writers.py": 1,
}
PENDING_FUNCTION_IMPORTS = {
    "st_rl/algorithms/extensions/distillation.py": 5,
    "st_rl/algorithms/extensions/symmetry.py": 1,
    "st_rl/algorithms/functional.py": 1,
    "st_rl/algorithms/ppo.py": 5,
    "st_rl/cli.py": 42,
    "st_rl/datasets/motion_loader.py": 1,
    "st_rl/deploy.py": 1,
    "st_rl/env/adapter.py": 1,
    "st_rl/env/adapters/_common.py": 1,
    "st_rl/evaluation/runs.py": 8,
    "st_rl/export.py": 10,
    "st_rl/modules/actor_critic.py": 2,
    "st_rl/modules/actor_critic_mutex.py": 3,
    "st_rl/play.py": 2,
    "st_rl/plotting.py": 1,
    "st_rl/runners/__init__.py": 2,
    "st_rl/runners/on_policy_runner.py": 5,
    "st_rl/runners/two_stage_runner.py": 1,
    "st_rl/storage/rollout_storage.py": 1,
    "st_rl/tasks/__init__.py": 2,
    "st_rl/tasks/motion_recorder.py": 2,
    "st_rl/tune.py": 15,
    "st_rl/utils/ckpt_manipulator.py": 2,
    "st_rl/utils/logger.py": 4,
    "st_rl/utils/writers.py": 2,
}


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


def _within(counts: dict[str, int], pending: dict[str, int]) -> None:
    more = {f: n for f, n in counts.items() if n > pending.get(f, 0)}
    assert not more, f"new imports (file: count): {more}"
    gone = {f: n for f, n in pending.items() if counts.get(f, 0) < n}
    assert not gone, f"fewer than listed, shrink the PENDING list: {gone} (now {counts})"


def test_leaf_modules_import_nothing_of_st_rl():
    for leaf in LEAVES:
        assert not _imports(ROOT / leaf), leaf


def test_no_st_rl_module_imports_a_former_path():
    counts = _per_file(lambda path, name, inside: any(name == a or name.startswith(a + ".") for a in ALIASES))
    counts = {f: n for f, n in counts.items() if f not in ("st_rl/utils/config.py", "st_rl/configs.py")}
    _within(counts, PENDING_ALIAS_IMPORTS)


def test_no_st_rl_import_inside_a_function():
    _within(_per_file(lambda path, name, inside: inside), PENDING_FUNCTION_IMPORTS)


def test_layers_contract():
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[dev]')")
    command = (
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    )
    result = subprocess.run(
        [sys.executable, "-c", command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    broken = set(re.findall(r"^- (st_rl\S*) -> (st_rl\S*) \(l\.", result.stdout, re.M))
    broken_text = {f"{a} -> {b}" for a, b in broken}
    assert broken_text <= PENDING_LAYER_VIOLATIONS, result.stdout[-4000:]
    assert broken_text == PENDING_LAYER_VIOLATIONS, f"fixed, shrink PENDING_LAYER_VIOLATIONS: {broken_text}"
    assert (result.returncode == 0) == (not broken_text), result.stdout[-4000:]
