"""Each shared default is written once, in st_rl/config/defaults.py, and every user takes it from there."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib

from st_rl.algorithms import PPO
from st_rl.config.defaults import CONFIG_CLASS_DEFAULTS, PPO_SIGNATURE_DEFAULTS, RUNNER_DEFAULTS
from st_rl.config.presets import AlgorithmCfg, TrainCfg
from st_rl.config.schema import RUNNER_FIELDS

ROOT = pathlib.Path(__file__).resolve().parents[2] / "st_rl"
HOME = ROOT / "config" / "defaults.py"
# Same-named keys that are not the shared default: RND's own optimiser, a config the mjlab adapter writes.
UNRELATED = {"st_rl/algorithms/extensions/rnd.py: learning_rate", "st_rl/env/adapters/mjlab.py: logger"}
PPO_KEYS = [f.name for f in dataclasses.fields(PPO_SIGNATURE_DEFAULTS)]
RUNNER_KEYS = [f.name for f in dataclasses.fields(RUNNER_DEFAULTS)]


def test_the_two_ppo_default_sets_are_the_reference_ones():
    sig = dataclasses.asdict(PPO_SIGNATURE_DEFAULTS)
    legged_gym = dataclasses.asdict(CONFIG_CLASS_DEFAULTS)
    assert {
        k: sig[k] for k in ("num_learning_epochs", "num_mini_batches", "gamma", "schedule", "entropy_coef")
    } == {
        "num_learning_epochs": 1,
        "num_mini_batches": 1,
        "gamma": 0.998,
        "schedule": "fixed",
        "entropy_coef": 0.0,
    }
    assert {k: legged_gym[k] for k in sig if sig[k] != legged_gym[k]} == {
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "gamma": 0.99,
        "schedule": "adaptive",
        "entropy_coef": 0.01,
    }


def test_users_take_the_named_defaults():
    params = inspect.signature(PPO.__init__).parameters
    assert {k: params[k].default for k in PPO_KEYS} == dataclasses.asdict(PPO_SIGNATURE_DEFAULTS)
    algorithm = AlgorithmCfg()
    assert {k: getattr(algorithm, k) for k in PPO_KEYS} == dataclasses.asdict(CONFIG_CLASS_DEFAULTS)
    assert {k: RUNNER_FIELDS[k][1] for k in RUNNER_KEYS} == dataclasses.asdict(RUNNER_DEFAULTS)
    train = TrainCfg()
    shared = [k for k in RUNNER_KEYS if hasattr(train, k)]
    assert shared and all(getattr(train, k) == getattr(RUNNER_DEFAULTS, k) for k in shared)


def _same(value: object, defaults: list[object]) -> bool:
    return any(type(value) is type(d) and value == d for d in defaults)


def _literal_defaults(tree: ast.AST, defaults: dict[str, list[object]]) -> list[tuple[int, str]]:
    """``(line, key)`` of every literal default of a key: a parameter default, a class field, ``.get(key, x)``,
    a dict entry ``key: x`` or ``key: (type, x, ...)``."""
    found = []

    def check(key: object, node: ast.AST | None) -> None:
        constant = isinstance(key, str) and key in defaults and isinstance(node, ast.Constant)
        if constant and _same(node.value, defaults[key]):
            found.append((node.lineno, key))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
                check(arg.arg, default)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                check(arg.arg, default)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            check(node.target.id, node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if len(node.args) == 2 and isinstance(node.args[0], ast.Constant):
                check(node.args[0].value, node.args[1])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant):
                    entry = value.elts[1] if isinstance(value, ast.Tuple) and len(value.elts) > 1 else value
                    check(key.value, entry)
    return found


def test_no_literal_copy_of_a_shared_default_in_st_rl():
    defaults: dict[str, list[object]] = {k: [getattr(RUNNER_DEFAULTS, k)] for k in RUNNER_KEYS}
    for k in PPO_KEYS:
        defaults[k] = [getattr(PPO_SIGNATURE_DEFAULTS, k), getattr(CONFIG_CLASS_DEFAULTS, k)]
    copies = []
    for path in sorted(ROOT.rglob("*.py")):
        if path != HOME:
            tree = ast.parse(path.read_text(), str(path))
            where = path.relative_to(ROOT.parent).as_posix()
            found = _literal_defaults(tree, defaults)
            copies += [f"{where}:{line}: {key}" for line, key in found if f"{where}: {key}" not in UNRELATED]
    assert not copies, "defaults written outside st_rl/config/defaults.py:\n" + "\n".join(copies)


def test_the_scan_finds_a_copy():
    tree = ast.parse("def f(num_steps_per_env=24, gamma: float = 0.998): return cfg.get('save_interval', 50)")
    defaults = {"num_steps_per_env": [24], "gamma": [0.998, 0.99], "save_interval": [50]}
    assert sorted(key for _, key in _literal_defaults(tree, defaults)) == [
        "gamma",
        "num_steps_per_env",
        "save_interval",
    ]
