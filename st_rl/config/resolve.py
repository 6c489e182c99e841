"""Turn a training config, **flat** (st_gym ``to_dict()``: runner keys at the top level) or **nested** (legged_gym
``class_to_dict``: a ``runner`` dict), into one validated :class:`TrainConfig` (the user's object is not mutated)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch.nn as nn

from st_rl.config.errors import MISSING, ConfigError, Problem
from st_rl.config.rules import RULES
from st_rl.config.schema import (
    RUNNER_FIELDS,
    class_fields,
    validate_algorithm,
    validate_policy,
    validate_runner,
    validate_storage,
)
from st_rl.registry import class_label, resolve_class

__all__ = ["ConvertibleConfig", "TrainConfig", "env_cfg_to_jsonable", "resolve_train_cfg", "to_jsonable"]
__all__ += ["to_plain_dict"]


@dataclass
class TrainConfig:
    """A resolved training config (plain data; every dict is a private copy)."""

    runner: dict[str, Any]
    policy_class_name: Any
    policy: dict[str, Any]
    algorithm_class_name: Any
    algorithm: dict[str, Any]
    storage: dict[str, Any] = field(default_factory=dict)
    source_format: str = "flat"

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        """Nested, JSON-friendly form (``config.json``, checkpoints); ``full``: with every default too."""
        runner = dict(self.runner)
        runner["policy_class_name"] = class_label(self.policy_class_name)
        runner["algorithm_class_name"] = class_label(self.algorithm_class_name)
        policy, algorithm = dict(self.policy), dict(self.algorithm)
        if full:
            runner = {**{k: d for k, (_, d, _) in RUNNER_FIELDS.items()}, **runner}
            policy_cls = resolve_class(self.policy_class_name, None, "policy", nn.Module)
            policy = {**{k: d for k, (_, d) in class_fields(policy_cls)[0].items()}, **policy}
            algorithm_cls = resolve_class(self.algorithm_class_name, None, "algorithm")
            algorithm = {**{k: d for k, (_, d) in class_fields(algorithm_cls)[0].items()}, **algorithm}
            runner, policy, algorithm = (dict(sorted(d.items())) for d in (runner, policy, algorithm))
        return to_jsonable(
            {
                "runner": runner,
                "policy": {"class_name": class_label(self.policy_class_name), **policy},
                "algorithm": {"class_name": class_label(self.algorithm_class_name), **algorithm},
                "storage": self.storage,
            }
        )


@runtime_checkable
class ConvertibleConfig(Protocol):
    """A config object with ``to_dict()`` (st_gym / Isaac Lab configs)."""

    def to_dict(self) -> Any: ...


def to_plain_dict(cfg: Any) -> dict[str, Any]:
    """Deep copy of a config: a mapping, a dataclass, a ``to_dict()`` object or a legged_gym config class."""
    if isinstance(cfg, dict):
        return copy.deepcopy(cfg)
    if isinstance(cfg, ConvertibleConfig):
        return copy.deepcopy(dict(cfg.to_dict()))
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return copy.deepcopy(dataclasses.asdict(cfg))
    if hasattr(cfg, "__dict__") or isinstance(cfg, type):
        return _class_to_dict(cfg)
    raise TypeError(f"train_cfg must be a dict, a dataclass or a to_dict() object; got {type(cfg).__name__}")


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    """The public data attributes of a config class or object (classes included, methods left out)."""
    for key in dir(obj):
        try:
            val = getattr(obj, key)
        except Exception:  # a property that fails is not config data
            continue
        if not key.startswith("_") and not (callable(val) and not isinstance(val, type)):
            yield key, val


def _class_to_dict(obj: Any) -> dict[str, Any]:
    def plain(val: Any) -> Any:  # a nested config class as a dict, any other value copied
        return _class_to_dict(val) if isinstance(val, type) else copy.deepcopy(val)

    return {k: [plain(x) for x in v] if isinstance(v, list) else plain(v) for k, v in _attributes(obj)}


def to_jsonable(obj: Any, namespace: bool = False, depth: int = 0) -> Any:
    """JSON-friendly data: tuples and tensors as lists, classes and functions as labels, mappings, dataclasses and
    ``to_dict()`` objects as dicts, anything else as its repr (``namespace``: a class or object without another
    conversion as a dict of its attributes)."""
    if depth > 32:
        return repr(obj)
    down = depth + 1
    if hasattr(obj, "items") and hasattr(obj, "keys") and not isinstance(obj, type):
        return {str(k): to_jsonable(v, depth=down) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, depth=down) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if not isinstance(obj, type):
        data = None
        with contextlib.suppress(TypeError):  # a to_dict() that needs arguments is not the config's
            data = obj.to_dict() if callable(getattr(obj, "to_dict", None)) else None
        if isinstance(data, dict):
            return to_jsonable(data, depth=down)
        if dataclasses.is_dataclass(obj):
            return {f.name: to_jsonable(getattr(obj, f.name), depth=down) for f in dataclasses.fields(obj)}
        if hasattr(obj, "tolist"):
            return obj.tolist()
    if namespace and (isinstance(obj, type) or hasattr(obj, "__dict__")):
        return {k: to_jsonable(v, _is_nested_cfg(v, k), down) for k, v in _attributes(obj)}
    return class_label(obj) if isinstance(obj, type) or callable(obj) else repr(obj)


def env_cfg_to_jsonable(cfg: Any) -> Any:
    """An environment config (mappings, config classes, dataclasses, ``to_dict()`` objects) as ``config.json``'s ``env``."""
    return to_jsonable(cfg, namespace=True)


def _is_nested_cfg(value: Any, name: str) -> bool:
    """A config class nested in another under its own name (legged_gym's ``class runner:``), or an instance of one."""
    qual = (value if isinstance(value, type) else type(value)).__qualname__
    return "." in qual and qual.rsplit(".", 1)[-1] == name


def resolve_train_cfg(train_cfg: Any) -> TrainConfig:
    """Validate a training config against the schema of the classes it configures (a :class:`TrainConfig` is
    copied unchecked); raises a :class:`ConfigError` listing every problem with its path, rule and fix."""
    if isinstance(train_cfg, TrainConfig):
        return copy.deepcopy(train_cfg)
    cfg = to_plain_dict(train_cfg)
    problems: list[Problem] = []
    runner, fmt, prefix = _runner_section(cfg, problems)
    policy, algorithm = cfg.pop("policy", MISSING), cfg.pop("algorithm", MISSING)
    for name, section in (("policy", policy), ("algorithm", algorithm)):
        if not isinstance(section, dict):
            rule = "the training config needs a 'policy' and an 'algorithm' mapping"
            fix = "put them at the top level (flat form) or next to a 'runner' mapping (nested form)"
            problems.append(Problem(name, section, rule, fix))
    if not (isinstance(policy, dict) and isinstance(algorithm, dict)):
        raise ConfigError(problems)
    top_storage = cfg.pop("storage", None)
    runner.update(cfg)  # flat form: everything else is a runner key
    storage_sources = [("storage", top_storage), (f"{prefix}storage", runner.pop("storage", None))]
    problems += validate_runner(runner, prefix.rstrip("."))
    policy_name, policy_cls = _section_class(policy, runner, "policy", prefix, problems)
    algorithm_name, algorithm_cls = _section_class(algorithm, runner, "algorithm", prefix, problems)
    if "empirical_normalization" not in algorithm and runner.get("empirical_normalization") is not None:
        algorithm["empirical_normalization"] = runner["empirical_normalization"]
    if policy_cls is not None:
        problems += validate_policy(policy_cls, policy)
    if algorithm_cls is not None:
        problems += validate_algorithm(algorithm_cls, algorithm)
    storage: dict[str, Any] = {}
    for where, value in storage_sources:
        if isinstance(value, dict):
            storage.update(value)
            problems += validate_storage(algorithm_cls, algorithm, value, where) if algorithm_cls else []
        elif value is not None:
            problems.append(
                Problem(where, value, "must be a mapping of rollout-storage arguments", "e.g. {}")
            )
    no_length = algorithm.get("lr_anneal_iterations") is None and runner.get("max_iterations") is None
    if algorithm.get("schedule") == "linear" and no_length:
        rule = "schedule='linear' needs the number of iterations over which the learning rate decays"
        fix = f"set it, or set {prefix}max_iterations (the runner then uses the run length)"
        problems.append(Problem("algorithm.lr_anneal_iterations", MISSING, rule, fix))
    if problems:
        raise ConfigError(problems)
    return TrainConfig(runner, policy_name, policy, algorithm_name, algorithm, storage, fmt)


def _runner_section(cfg: dict[str, Any], problems: list[Problem]) -> tuple[dict[str, Any], str, str]:
    """``(runner keys, form, key prefix)``; the nested form's top-level runner keys move into ``runner``."""
    if not isinstance(cfg.get("runner"), dict):
        return {}, "flat", ""
    runner = dict(cfg.pop("runner"))
    for key in [k for k in cfg if k not in ("policy", "algorithm", "storage")]:
        value = cfg.pop(key)
        if key in runner and runner[key] != value:
            rule = f"conflicts with runner.{key} = {runner[key]!r} (the nested form reads runner.{key})"
            fix = f"remove the top-level '{key}' or give it only in 'runner'"
            problems.append(Problem(key, value, rule, fix))
        else:
            runner[key] = value
    return runner, "nested", "runner."


def _section_class(
    section: dict[str, Any], runner: dict[str, Any], name: str, prefix: str, problems: list[Problem]
) -> tuple[Any, type | None]:
    """``(name, class or None)``: ``section['class_name']`` or ``runner['<name>_class_name']``, else the default."""
    own, other = section.pop("class_name", None), runner.get(f"{name}_class_name")
    empty = RULES["class_name"]
    if empty.violated(own):
        problems.append(Problem(f"{name}.class_name", own, empty.text, empty.fix))
        own = None
    if empty.violated(other):
        other = None  # reported by validate_runner
    if own is not None and other is not None and class_label(own) != class_label(other):
        rule = f"conflicts with {prefix}{name}_class_name = {class_label(other)!r}"
        problems.append(
            Problem(f"{name}.class_name", class_label(own), rule, "give the class in one place only")
        )
    chosen = own or other or ("ActorCritic" if name == "policy" else "PPO")
    try:
        return chosen, resolve_class(chosen, None, name, nn.Module if name == "policy" else None)
    except ValueError as e:
        where = f"{prefix}{name}_class_name" if chosen is other else f"{name}.class_name"
        problems.append(Problem(where, class_label(chosen), str(e)))
        return chosen, None
