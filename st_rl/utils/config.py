"""Turn the training configs users write into validated keyword arguments.

Two shapes are accepted (``reference/ancestor_spec.md`` section 3):

* **flat** (st_gym ``RslRlOnPolicyRunnerCfg.to_dict()``): runner keys at the top level, with ``policy`` and
  ``algorithm`` dicts that carry their own ``class_name``;
* **nested** (legged_gym ``class_to_dict(train_cfg)``): ``runner`` dict with ``policy_class_name`` and
  ``algorithm_class_name``, next to ``policy`` and ``algorithm``.

The user's object is deep-copied, never mutated. Every key is validated against the schema
(:mod:`st_rl.config.schema`); mistakes raise :class:`st_rl.config.ConfigError` naming the key path.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import difflib
import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, runtime_checkable


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
        """Nested, JSON-friendly form (what is written to ``config.json`` and checkpoints).

        Args:
            full: also list every key left at its default, with that default (``st-rl train
                --print-config``); the saved form holds the given keys only.
        """
        runner = dict(self.runner)
        runner["policy_class_name"] = class_label(self.policy_class_name)
        runner["algorithm_class_name"] = class_label(self.algorithm_class_name)
        policy, algorithm = dict(self.policy), dict(self.algorithm)
        if full:
            runner, policy, algorithm = self._with_defaults(runner, policy, algorithm)
        return to_jsonable(
            {
                "runner": runner,
                "policy": {"class_name": class_label(self.policy_class_name), **policy},
                "algorithm": {"class_name": class_label(self.algorithm_class_name), **algorithm},
                "storage": self.storage,
            }
        )

    def _with_defaults(self, runner: dict, policy: dict, algorithm: dict) -> tuple[dict, dict, dict]:
        import torch.nn as nn

        import st_rl.algorithms as algorithms
        import st_rl.modules as modules
        from st_rl.config.schema import RUNNER_FIELDS, class_fields

        runner = {**{k: d for k, (_, d, _) in RUNNER_FIELDS.items()}, **runner}
        policy_cls = resolve_class(self.policy_class_name, modules, "policy", nn.Module)
        algorithm_cls = resolve_class(self.algorithm_class_name, algorithms, "algorithm")
        policy = {**{k: d for k, (_, d) in class_fields(policy_cls)[0].items()}, **policy}
        algorithm = {**{k: d for k, (_, d) in class_fields(algorithm_cls)[0].items()}, **algorithm}
        return dict(sorted(runner.items())), dict(sorted(policy.items())), dict(sorted(algorithm.items()))


def class_label(obj: Any) -> str:
    """A string naming a class (``"Name"`` for st_rl classes, ``"module:Qualname"`` otherwise)."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", "")
    qual = getattr(obj, "__qualname__", repr(obj))
    return qual if module.startswith("st_rl.") else f"{module}:{qual}"


@runtime_checkable
class ConvertibleConfig(Protocol):
    """A config object that converts itself to a dict (``to_dict()``), as st_gym / Isaac Lab configs do."""

    def to_dict(self) -> Any: ...


def to_plain_dict(cfg: Any) -> dict[str, Any]:
    """Deep copy of a config given as a mapping, a dataclass, an object with ``to_dict()`` or a legged_gym
    config class/instance (``class_to_dict``)."""
    if isinstance(cfg, dict):
        return copy.deepcopy(cfg)
    if isinstance(cfg, ConvertibleConfig):
        return copy.deepcopy(dict(cfg.to_dict()))
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return copy.deepcopy(dataclasses.asdict(cfg))
    if hasattr(cfg, "__dict__") or isinstance(cfg, type):
        return _class_to_dict(cfg)
    raise TypeError(
        f"train_cfg must be a dict, a dataclass or a config object with to_dict(); got {type(cfg).__name__}"
    )


def _class_to_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in dir(obj):
        if key.startswith("_"):
            continue
        val = getattr(obj, key)
        if callable(val) and not isinstance(val, type):
            continue
        if isinstance(val, type):
            out[key] = _class_to_dict(val)
        elif isinstance(val, list):
            out[key] = [_class_to_dict(v) if isinstance(v, type) else copy.deepcopy(v) for v in val]
        else:
            out[key] = copy.deepcopy(val)
    return out


def to_jsonable(obj: Any) -> Any:
    """Convert to JSON-friendly data (tuples -> lists, classes -> labels, tensors -> lists)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, type) or callable(obj):
        return class_label(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return repr(obj)


_ENV_CFG_MAX_DEPTH = 32


def env_cfg_to_jsonable(cfg: Any) -> Any:
    """An environment config of any kind as plain JSON data (what ``config.json``'s ``env`` entry holds).

    Accepted kinds, nested freely: mappings; legged_gym class-based configs (a class or an instance, with
    nested classes: every public non-method attribute, inherited ones included); dataclasses; Isaac Lab
    configclasses and other objects with ``to_dict()``. Leaves go through :func:`to_jsonable` (tuples ->
    lists, tensors and arrays -> lists, classes and functions -> labels, anything else -> ``repr``).
    """
    return _env_cfg_value(cfg, 0, is_root=True)


def _is_nested_cfg_class(value: Any, name: str) -> bool:
    """A legged_gym nested config class: defined inside another class under the attribute's name."""
    qual = getattr(value, "__qualname__", "")
    return isinstance(value, type) and "." in qual and qual.rsplit(".", 1)[-1] == name


def _cfg_namespace(obj: Any, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in dir(obj):
        if key.startswith("_"):
            continue
        try:
            val = getattr(obj, key)
        except Exception:  # a property that fails is not config data
            continue
        if _is_nested_cfg_class(val, key) or _is_nested_cfg_class(type(val), key):
            out[key] = _env_cfg_value(val, depth + 1, is_root=True)
        elif inspect.isroutine(val):
            continue  # methods of the config class (e.g. legged_gym's init_member_classes)
        else:
            out[key] = _env_cfg_value(val, depth + 1)
    return out


def _env_cfg_value(obj: Any, depth: int, is_root: bool = False) -> Any:
    if depth > _ENV_CFG_MAX_DEPTH:
        return repr(obj)
    is_mapping = hasattr(obj, "items") and hasattr(obj, "keys") and not isinstance(obj, type)
    if isinstance(obj, dict) or is_mapping:
        return {str(k): _env_cfg_value(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_env_cfg_value(v, depth + 1) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if not isinstance(obj, type):
        to_dict = getattr(obj, "to_dict", None)
        if callable(to_dict):
            try:
                data = to_dict()
            except TypeError:
                data = None
            if isinstance(data, dict):
                return _env_cfg_value(data, depth + 1)
        if dataclasses.is_dataclass(obj):
            return {f.name: _env_cfg_value(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj)}
        if hasattr(obj, "tolist"):
            return obj.tolist()
    if is_root and (isinstance(obj, type) or hasattr(obj, "__dict__")):
        return _cfg_namespace(obj, depth)
    return to_jsonable(obj)


def resolve_train_cfg(train_cfg: Any) -> TrainConfig:
    """Validate and normalise a user's training config (flat or nested) without mutating it.

    Every key is checked against the schema of the classes it configures (:mod:`st_rl.config.schema`):
    types, ranges, unknown keys (with the closest known one) and conflicts between the two forms.

    Raises:
        st_rl.config.ConfigError: listing every problem with its key path, value, rule and fix.
    """
    from st_rl.config.errors import MISSING, ConfigError, Problem

    cfg = to_plain_dict(train_cfg)
    problems: list[Problem] = []
    if isinstance(cfg.get("runner"), dict):
        fmt, prefix = "nested", "runner."
        runner = dict(cfg.pop("runner"))
        for key in [k for k in cfg if k not in ("policy", "algorithm", "storage")]:
            value = cfg.pop(key)
            if key in runner and runner[key] != value:
                problems.append(
                    Problem(
                        key,
                        value,
                        f"conflicts with runner.{key} = {runner[key]!r} (the nested form reads runner.{key})",
                        f"remove the top-level '{key}' or give it only in 'runner'",
                    )
                )
            else:
                runner[key] = value
    else:
        fmt, prefix = "flat", ""
        runner = {}
    policy = cfg.pop("policy", MISSING)
    algorithm = cfg.pop("algorithm", MISSING)
    for name, section in (("policy", policy), ("algorithm", algorithm)):
        if not isinstance(section, dict):
            problems.append(
                Problem(
                    name,
                    section,
                    "the training config needs a 'policy' and an 'algorithm' mapping",
                    "put them at the top level (st_gym flat form) or next to a 'runner' mapping "
                    "(legged_gym nested form)",
                )
            )
    if problems and not (isinstance(policy, dict) and isinstance(algorithm, dict)):
        raise ConfigError(problems)
    assert isinstance(policy, dict) and isinstance(algorithm, dict)
    storage: dict[str, Any] = {}
    storage_sources: list[tuple[str, dict[str, Any]]] = []  # (where, section): checked with the algorithm
    top_storage = cfg.pop("storage", None)
    runner.update(cfg)  # flat form: everything else is a runner key
    for where, value in (("storage", top_storage), (f"{prefix}storage", runner.pop("storage", None))):
        if isinstance(value, dict):
            storage.update(value)
            storage_sources.append((where, value))
        elif value is not None:
            problems.append(
                Problem(
                    where, value, "must be a mapping of rollout-storage arguments", "e.g. {} or remove it"
                )
            )

    from st_rl.config.schema import validate_algorithm, validate_policy, validate_runner, validate_storage

    problems += validate_runner(runner, prefix.rstrip("."))
    policy_cls = _pick_class(policy, runner, "policy", prefix, "ActorCritic", problems)
    algorithm_cls = _pick_class(algorithm, runner, "algorithm", prefix, "PPO", problems)
    if "empirical_normalization" not in algorithm and runner.get("empirical_normalization") is not None:
        algorithm["empirical_normalization"] = runner["empirical_normalization"]
    import torch.nn as nn

    import st_rl.algorithms as algorithms
    import st_rl.modules as modules

    resolved_algorithm: type | None = None
    for section, name, namespace, base, validate in (
        ("policy", policy_cls, modules, nn.Module, validate_policy),
        ("algorithm", algorithm_cls, algorithms, None, validate_algorithm),
    ):
        try:
            cls = resolve_class(name, namespace, section, base)
        except ValueError as e:
            given_in_runner = runner.get(f"{section}_class_name") is not None and name is runner.get(
                f"{section}_class_name"
            )
            where = f"{prefix}{section}_class_name" if given_in_runner else f"{section}.class_name"
            problems.append(Problem(where, class_label(name), str(e)))
            continue
        if section == "algorithm":
            resolved_algorithm = cls
        problems += validate(cls, policy if section == "policy" else algorithm, section)
    if resolved_algorithm is not None:  # else the storage's keys cannot be known
        for where, section in storage_sources:
            problems += validate_storage(resolved_algorithm, algorithm, section, where)
    if (
        algorithm.get("schedule") == "linear"
        and algorithm.get("lr_anneal_iterations") is None
        and runner.get("max_iterations") is None
    ):
        problems.append(
            Problem(
                "algorithm.lr_anneal_iterations",
                MISSING,
                "schedule='linear' needs the number of iterations over which the learning rate decays",
                f"set it, or set {prefix}max_iterations (the runner then uses the run length)",
            )
        )
    if problems:
        raise ConfigError(problems)
    return TrainConfig(runner, policy_cls, policy, algorithm_cls, algorithm, storage, fmt)


def _pick_class(section: dict[str, Any], runner: dict[str, Any], name: str, prefix: str, default: str,
                problems: list[Any]) -> Any:  # fmt: skip
    """``section['class_name']`` or ``runner['<name>_class_name']`` (they must agree), else ``default``. An empty
    name is a mistake, not a request for the default (the runner's key is checked by its rule)."""
    from st_rl.config.errors import Problem
    from st_rl.config.rules import RUNNER_RULES

    own = section.pop("class_name", None)
    other = runner.get(f"{name}_class_name")
    rule = RUNNER_RULES["class_name"]
    if rule.violated(own):
        problems.append(Problem(f"{name}.class_name", own, rule.text, rule.fix))
        own = None
    if rule.violated(other):
        other = None  # reported by validate_runner
    if own is not None and other is not None and class_label(own) != class_label(other):
        problems.append(
            Problem(
                f"{name}.class_name",
                class_label(own),
                f"conflicts with {prefix}{name}_class_name = {class_label(other)!r}",
                "give the class in one place only",
            )
        )
    return own or other or default


def available_classes(namespace: ModuleType, base: type | None = None) -> list[str]:
    """Public class names exported by a namespace module (optionally subclasses of ``base``)."""
    names = []
    for name in getattr(namespace, "__all__", dir(namespace)):
        obj = getattr(namespace, name, None)
        if inspect.isclass(obj) and (base is None or issubclass(obj, base)):
            names.append(name)
    return sorted(names)


# ---------------------------------------------------------------------------------------------- trust
TRUST_OPT_IN = (
    "pass --trust-config (st-rl play / export / record-motion) or trust_config=True (Python) if you trust "
    "that file"
)
"""The opt-in named by errors about configs read back from a run directory or checkpoint."""

# Where each kind of class is named in a training config, for error messages.
_CLASS_KEYS = {
    "policy": "policy.class_name (or runner.policy_class_name)",
    "algorithm": "algorithm.class_name (or runner.algorithm_class_name)",
    "runner": "runner_class_name (or runner.runner_class_name)",
    "extension": "algorithm.extensions[].class_name",
    "teacher policy": "teacher_policy.class_name",
    "logger": "logger",
}


class UntrustedConfigError(ImportError):
    """A config read back from a run directory or checkpoint names code to import, and nobody opted in.

    Such a config resolves ``class_name`` only among st_rl's registered classes (and checkpoint manipulators
    only among st_rl's named ones); an import path (``"package.module:Name"``) would run code chosen by whoever
    wrote the file. The message names the file, the key and the opt-in. An ``ImportError`` (the import was
    refused), so that no config validation or fallback turns it into another error.
    """


@dataclass(frozen=True)
class _UntrustedSource:
    source: str
    opt_in: str


_UNTRUSTED: contextvars.ContextVar[_UntrustedSource | None] = contextvars.ContextVar(
    "st_rl_untrusted_config", default=None
)


@contextlib.contextmanager
def untrusted_config(source: str, opt_in: str = TRUST_OPT_IN, trusted: bool = False) -> Iterator[None]:
    """Treat every config resolved in the block as read back from ``source`` (a run's ``config.json``, a
    checkpoint): :func:`resolve_class`, checkpoint manipulators and other names of code then refuse import
    paths with :class:`UntrustedConfigError`.

    Args:
        source: the file the config was read from (named by the error).
        opt_in: how the user trusts the file (named by the error).
        trusted: the user opted in: the block runs unrestricted.
    """
    if trusted:
        yield
        return
    token = _UNTRUSTED.set(_UntrustedSource(str(source), opt_in))
    try:
        yield
    finally:
        _UNTRUSTED.reset(token)


def imports_allowed() -> bool:
    """Whether names from the config being resolved may be imported (False inside :func:`untrusted_config`)."""
    return _UNTRUSTED.get() is None


def refuse_untrusted_import(spec: str, key: str, registered: list[str] | None = None) -> None:
    """Raise :class:`UntrustedConfigError` if ``spec``, an import path found at config key ``key``, comes from an
    untrusted config (see :func:`untrusted_config`); do nothing otherwise.

    Args:
        spec: the import path (``"package.module:Name"``).
        key: where the config names it (e.g. ``"runner.ckpt_manipulator"``).
        registered: the names that resolve without importing anything (listed in the message).
    """
    context = _UNTRUSTED.get()
    if context is None:
        return
    shown = list(registered or [])[:8]
    more = f", ... ({len(registered or []) - len(shown)} more)" if len(registered or []) > len(shown) else ""
    names = f" ({', '.join(shown)}{more})" if shown else ""
    raise UntrustedConfigError(
        f"{context.source} sets {key} = {spec!r}, an import path: loading it would import and run code named by "
        f"that file. A config read back from a run directory or checkpoint may only name st_rl's registered "
        f"classes and functions{names}. Fix: {context.opt_in}, or use a registered name."
    )


def resolve_class(
    name: Any,
    namespace: ModuleType,
    kind: str,
    base: type | None = None,
    *,
    allow_import: bool | None = None,
    key: str | None = None,
) -> type:
    """Resolve a ``class_name``: a class, a short name exported by ``namespace``, or ``"pkg.module:Class"``.

    Args:
        name: the class, or its name.
        namespace: the module whose exported classes short names refer to (``st_rl.modules``, ...).
        kind: what the class is, for messages (``"policy"``, ``"algorithm"``, ...).
        base: the class must be a subclass of this.
        allow_import: whether an import path may be imported. ``None`` (default): yes, except inside
            :func:`untrusted_config` (a config read back from a run directory or checkpoint), where only
            st_rl's classes exported by ``namespace`` resolve.
        key: the config key that names the class, for messages (default: the usual key of ``kind``).

    Raises:
        UntrustedConfigError: an import path (or a name that is not one of st_rl's exported classes) while
            imports are not allowed.
        ValueError: for an unknown name, listing the available ones.
    """
    if allow_import is None:
        allow_import = imports_allowed()
    if inspect.isclass(name):
        return name
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} class_name must be a non-empty string or a class, got {name!r}")
    if ":" in name or ("." in name and not hasattr(namespace, name)):
        if not allow_import:
            key = key or _CLASS_KEYS.get(kind, f"{kind} class_name")
            registered = available_classes(namespace, base)
            if imports_allowed():  # refused by the caller, not by a context: no file to name
                raise UntrustedConfigError(
                    f"{key} = {name!r} is an import path, which is not allowed here; use one of st_rl's "
                    f"{kind} classes: {registered}."
                )
            refuse_untrusted_import(name, key, registered)
        module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"Cannot import {kind} class '{name}': {e}") from e
        if not inspect.isclass(obj):
            raise ValueError(f"{kind} '{name}' is not a class")
        return obj
    obj = getattr(namespace, name, None)
    registered_only = not allow_import and not getattr(obj, "__module__", "").startswith("st_rl.")
    if inspect.isclass(obj) and (base is None or issubclass(obj, base)) and not registered_only:
        return obj
    names = available_classes(namespace, base)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise ValueError(
        f"Unknown {kind} class_name '{name}'.{hint} Available: {names}; or give 'package.module:ClassName'."
    )
