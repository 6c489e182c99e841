"""The config schema, built from the constructors' signatures (``Cls(**cfg)``) and checked by pydantic; value rules
come from :mod:`st_rl.config.rules`, the runner's keys are declared here (:data:`RUNNER_FIELDS`)."""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

import st_rl.algorithms.extensions as extensions
from st_rl.algorithms.extensions.base import Extension
from st_rl.algorithms.extensions.rnd import RandomNetworkDistillation
from st_rl.algorithms.extensions.symmetry import Symmetry
from st_rl.algorithms.ppo import PPO
from st_rl.config.defaults import PPO_SIGNATURE_DEFAULTS, RUNNER_DEFAULTS
from st_rl.config.errors import MISSING, ConfigError, Problem
from st_rl.config.rules import RULES, SEGMENT_SHAPE, STORAGE_RULES, Rule, _num, rule_for
from st_rl.modules.amp_discriminator import AMPDiscriminator
from st_rl.registry import resolve_class
from st_rl.storage.rollout_files.rollout_dataset import _CONFIG_KEYS as _DATASET_KEYS
from st_rl.storage.rollout_files.rollout_dataset import RolloutDataset
from st_rl.storage.rollout_storage import RolloutStorage

__all__ = ["RUNNER_FIELDS", "check_minibatches", "class_fields", "schema_for", "signature_fields"]
__all__ += ["storage_fields", "validate_algorithm", "validate_policy", "validate_runner", "validate_storage"]

_STRICT = ConfigDict(strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)


def _model(name: str, spec: Mapping[str, Any], extra: str = "forbid") -> type[BaseModel]:
    """A strict pydantic model of ``{key: (type, default)}``; ``extra``: what unknown keys do."""
    create: Any = create_model  # field definitions are built at run time
    return create(name, __config__=ConfigDict(**_STRICT, extra=extra), **spec)  # type: ignore[typeddict-item]


# Arguments the runner passes itself, never read from a config.
_INJECTED = frozenset({"self", "actor_critic", "device", "parts"})

# Runner keys: name -> (type, default, meaning). Documented in docs/configuration.md.
_R, _MAP = RUNNER_DEFAULTS, Mapping[str, Any] | None
RUNNER_FIELDS: dict[str, tuple[Any, Any, str]] = {
    "seed": (int | None, None, "global RNG seed set when the runner is built (None: leave the RNGs alone)"),
    "device": (str | None, None, "informational; the runner's device argument decides"),
    "num_steps_per_env": (int, _R.num_steps_per_env, "rollout length T per iteration"),
    "max_iterations": (int | None, None, "number of learning iterations the CLI and training scripts run"),
    "empirical_normalization": (bool | None, None, "running-statistics obs normalisation (algorithm wins)"),
    "save_interval": (int, _R.save_interval, "save model_<it>.pt every this many iterations"),
    "log_interval": (int, _R.log_interval, "log every this many iterations"),
    "experiment_name": (str, "", "log directory name under the log root"),
    "run_name": (str, "", "suffix of the run directory"),
    "logger": (Any, _R.logger, "'tensorboard', 'wandb', 'neptune', 'none' or a custom writer class"),
    "neptune_project": (str | None, None, "Neptune project (logger='neptune')"),
    "neptune_mode": (str | None, None, "Neptune mode: 'async' (default), 'sync', 'offline', 'debug'"),
    "neptune_run_id": (str | None, None, "continue this Neptune run"),
    "wandb_project": (str | None, None, "W&B project (logger='wandb')"),
    "wandb_entity": (str | None, None, "W&B entity (team or user)"),
    "wandb_mode": (str | None, None, "W&B mode: 'online' (default), 'offline', 'disabled'"),
    "wandb_run_id": (str | None, None, "continue this W&B run"),
    "resume": (bool, False, "resume from a checkpoint (training scripts)"),
    "overwrite": (bool, False, "replace an earlier run in the log directory (deleted when learn() starts)"),
    "load_run": (str | int | None, None, "regex of the run directory to resume"),
    "load_checkpoint": (str | int | None, None, "regex of the checkpoint file to resume (st_gym)"),
    "checkpoint": (int | str | None, None, "checkpoint index or -1 (legged_gym)"),
    "resume_path": (str | None, None, "explicit checkpoint path (legged_gym)"),
    "runner_class_name": (Any, _R.runner_class_name, "runner class"),
    "policy_class_name": (Any, None, "policy class (legged_gym nested form)"),
    "algorithm_class_name": (Any, None, "algorithm class (legged_gym nested form)"),
    "storage": (_MAP, None, "extra keyword arguments of the rollout storage"),
    "inference_mode_rollout": (bool, True, "collect rollouts under torch.inference_mode"),
    "obs_groups": (_MAP, None, "observation groups feeding the actor ('policy') and critic ('critic')"),
    "check_finite": (str, _R.check_finite, "'rollout', 'step' or 'off': NaN/Inf checks of env outputs"),
    "clip_actions": (Any, None, "informational; environments clip actions"),
    "class_name": (Any, None, "runner class (alternative spelling)"),
    "task": (str | None, None, "built-in task name (written by st-rl train; read by st-rl play)"),
    "distributed_timeout_s": (float, _R.distributed_timeout_s, "seconds before a blocked collective fails"),
    "ckpt_manipulator": (Any, None, "function applied to a checkpoint before loading it"),
    "pretrain_iterations": (int, 0, "TwoStageRunner: iterations on pretrain_dataset first (<0: forever)"),
    "pretrain_dataset": (_MAP, None, "TwoStageRunner: RolloutDataset arguments"),
    "init_member_classes": (Any, None, "ignored (legged_gym's class_to_dict exports this method as {})"),
}


# ---------------------------------------------------------------------------------------------- fields
def _annotation(func: Callable[..., Any], param: inspect.Parameter) -> Any:
    """The parameter's type, evaluated in its function's module; ``Any`` where it cannot be used."""
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return Any
    try:
        if isinstance(ann, str):  # eval: annotations of our own and the user's classes
            ann = eval(ann, {**vars(typing), **getattr(func, "__globals__", {})})  # noqa: S307
        TypeAdapter(ann, config=_STRICT)
    except Exception:
        return Any
    return ann


def signature_fields(init: Callable[..., Any], kinds: tuple[Any, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """``{name: (type, default or None)}`` of ``init``'s named parameters (of ``kinds`` only, when given)."""
    return {
        p.name: (_annotation(init, p), None if p.default is p.empty else p.default)
        for p in inspect.signature(init).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and (not kinds or p.kind in kinds)
    }


def _declared(cls: type, name: str) -> Any:
    """The class attribute ``name`` as the nearest class of ``cls.__mro__`` declares it, else None."""
    return next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)


@functools.cache
def class_fields(cls: type) -> tuple[dict[str, tuple[Any, Any]], frozenset[str], bool]:
    """The config keys ``cls`` takes: ``({name: (type, default)}, tolerated, open)``, from the constructors of
    ``cls.__mro__`` while they forward ``**kwargs`` and from its ``config_sources`` classes. ``tolerated``: its
    ``config_tolerated`` keys (accepted, ignored); ``open``: a user's ``**kwargs`` class, unknown keys cannot be judged."""
    fields: dict[str, tuple[Any, Any]] = {}
    open_kwargs = False
    for klass in cls.__mro__:
        module = klass.__module__  # object, torch's base classes and the extension base take no config keys
        if klass is object or module.startswith("torch.") or module == "st_rl.algorithms.extensions.base":
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        for name, (tp, default) in signature_fields(init).items():
            if name not in _INJECTED:
                fields.setdefault(name, (tp if default is not None or tp is Any else tp | None, default))
        open_kwargs = any(p.kind == p.VAR_KEYWORD for p in params)
        if not open_kwargs:
            break
    for klass in cls.__mro__:
        for source in klass.__dict__.get("config_sources", ()):
            for name, spec in class_fields(source)[0].items():
                fields.setdefault(name, spec)
    declared = _declared(cls, "config_tolerated")
    return fields, frozenset(declared or ()), open_kwargs and declared is None


@functools.cache
def schema_for(cls: type) -> type[BaseModel]:
    """The strict pydantic model of ``cls``'s config keys (unknown keys forbidden unless ``cls`` is open)."""
    fields, tolerated, open_kwargs = class_fields(cls)
    spec = {**{name: (Any, None) for name in tolerated}, **fields}
    return _model(f"{cls.__name__}Config", spec, "allow" if open_kwargs else "forbid")


_OPEN = _model("OpenSection", {}, "allow")  # any keys: checked by rules only
_RUNNER = _model("RunnerConfig", {name: (tp, default) for name, (tp, default, _) in RUNNER_FIELDS.items()})


# ------------------------------------------------------------------------------------------ validation
def _problems(
    model: type[BaseModel],
    values: Mapping[str, Any],
    prefix: str,
    rules: Callable[[str], Rule | None] = rule_for,
    skip: Callable[[str], bool] = lambda key: False,
    unknown_fix: str = "remove it (see docs/configuration.md)",
) -> list[Problem]:
    """The first problem per key: pydantic's (unknown keys, unless ``skip``, get ``unknown_fix``), then ``rules``."""
    try:
        model.model_validate(dict(values))
        errors = []
    except ValidationError as e:
        errors = e.errors()
    problems: dict[str, Problem] = {}
    for err in errors:
        key = str(err["loc"][0])
        path = f"{prefix}.{key}".lstrip(".")
        if path in problems or (err["type"] == "extra_forbidden" and skip(key)):
            continue
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else unknown_fix
            problems[path] = Problem(path, err["input"], "unknown key", fix)
            continue
        expected = type_name(model.model_fields[key].annotation) if key in model.model_fields else ""
        rule = err["msg"].replace("Input should be", "should be")
        problems[path] = Problem(path, values.get(key, MISSING), rule, f"give {expected}" if expected else "")
    for key, value in values.items():
        rule, path = rules(key), f"{prefix}.{key}".lstrip(".")
        if rule is not None and path not in problems and rule.violated(value):
            problems[path] = Problem(path, value, rule.text, rule.fix)
    return list(problems.values())


def type_name(tp: Any, verbose: bool = True) -> str:
    """``float or None``, ``a list of int``, ... for the fix text (``verbose``) and the docs."""
    if tp is None or tp is Any:
        return ""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a, verbose) or "anything" for a in args if a is not type(None)]
        return " or ".join(names + ["None"] * (type(None) in args))
    if origin in (list, tuple, set, Sequence, Iterable):
        inner = type_name(args[0], verbose) if args else ""
        return f"a list of {inner}" if inner else "a list"
    if origin in (dict, Mapping):
        return "a mapping"
    if tp is bool:
        return "true or false (a boolean, not a string)" if verbose else "bool"
    if isinstance(tp, type):
        return tp.__name__
    return origin.__name__ if isinstance(origin, type) else str(tp)


def validate_runner(runner: Mapping[str, Any], prefix: str = "runner") -> list[Problem]:
    """Problems of the runner keys and of ``pretrain_dataset`` (TwoStageRunner)."""
    problems = _problems(_RUNNER, runner, prefix)
    dataset = runner.get("pretrain_dataset")
    if isinstance(dataset, Mapping):
        model = _DATASET
        fix = f"remove it (num_envs and device come from the runner); the keys are {', '.join(model.model_fields)}"
        problems += _problems(model, dataset, f"{prefix}.pretrain_dataset".lstrip("."), unknown_fix=fix)
    return problems


# RolloutDataset's config keys, and legged_gym's legacy `scan_dir` and `keep_latest_ratio`.
_DATASET_FIELDS = {k: class_fields(RolloutDataset)[0][k] for k in _DATASET_KEYS}
_DATASET = _model(
    "PretrainDatasetConfig", {**_DATASET_FIELDS, "scan_dir": (Any, None), "keep_latest_ratio": (Any, None)}
)
_SET_BY_ALGORITHM = ("buffer_dilation_ratio", "ring")  # rollout-storage arguments; STORAGE_RULES reject them
# The keyword-only arguments of RolloutStorage the storage section may set.
_KEYWORD_ONLY = signature_fields(RolloutStorage.__init__, (inspect.Parameter.KEYWORD_ONLY,))
_STORAGE_KWARGS = {k: v for k, v in _KEYWORD_ONLY.items() if k not in _SET_BY_ALGORITHM}


def _extension_classes(algorithm_cfg: Mapping[str, Any]) -> list[type]:
    """Every extension class st_rl exports, and those the config's ``extensions`` list names."""
    classes = [c for c in vars(extensions).values() if isinstance(c, type) and issubclass(c, Extension)]
    for item in algorithm_cfg.get("extensions") or ():
        if isinstance(item, Extension):
            classes.append(type(item))
        elif isinstance(item, Mapping):
            with contextlib.suppress(ValueError, ImportError):  # reported by validate_algorithm
                classes.append(resolve_class(item.get("class_name"), extensions, "extension"))
    return classes


def storage_fields(algorithm_cfg: Mapping[str, Any] | None = None) -> dict[str, tuple[Any, Any]]:
    """``{key: (type, default)}`` of the ``storage`` section: the rollout storage's keyword arguments and the
    extensions' ``storage_options`` (st_rl's and those ``extensions`` names), e.g. ``amp_obs_shape``."""
    fields = dict(_STORAGE_KWARGS)
    for ext in _extension_classes(algorithm_cfg or {}):
        for key, tp in getattr(ext, "storage_options", {}).items():
            fields.setdefault(key, (tp, None))
    return dict(sorted(fields.items()))


def validate_storage(
    algorithm_cls: type | None, algorithm_cfg: Mapping[str, Any], storage: Mapping[str, Any], prefix: str
) -> list[Problem]:
    """Problems of a ``storage`` section (:func:`storage_fields`); any key goes for an algorithm class that
    builds its own storage (overrides ``init_storage``)."""
    if algorithm_cls is not None and getattr(algorithm_cls, "init_storage", None) is not PPO.init_storage:
        return []
    fields = storage_fields(algorithm_cfg)
    model = _model("StorageConfig", {**fields, **dict.fromkeys(_SET_BY_ALGORITHM, (Any, None))})
    fix = f"remove it; the storage section takes {', '.join(fields)}"
    return _problems(model, storage, prefix, STORAGE_RULES.get, unknown_fix=fix)


# Sections checked against a class of their own where the outer class takes (or tolerates) the key.
_NESTED = {
    "rnd_cfg": RandomNetworkDistillation,
    "symmetry_cfg": Symmetry,
    "ppo": PPO,
    "amp_discriminator": AMPDiscriminator,
}


def validate_algorithm(cls: type, cfg: Mapping[str, Any], prefix: str = "algorithm") -> list[Problem]:
    """Problems of an algorithm (or policy) config for class ``cls``, its nested sections and extensions included."""
    has_user_extensions = bool(cfg.get("extensions"))
    coef_keys_ok = bool(_declared(cls, "config_accepts_coefs"))

    def skip(key: str) -> bool:
        # `<name>_coef` weighs a user extension's loss `<name>`; 0 (loss off) is harmless without one (st_gym's
        # PPO config carries `mimic_loss_coef=0.0` and `discriminator_loss_coef=0.0`).
        zero = _num(cfg.get(key)) and cfg.get(key) == 0
        return coef_keys_ok and key.endswith("_coef") and (has_user_extensions or zero)

    problems = _problems(schema_for(cls), cfg, prefix, skip=skip)
    if coef_keys_ok:
        rule = f"unknown key: {cls.__name__} builds no loss term that uses this weight"
        fix = "; a weight of 0 is accepted (the loss is off)"
        unused = [p for p in problems if p.rule == "unknown key" and p.path.endswith("_coef")]
        problems = [Problem(p.path, p.value, rule, p.fix + fix) if p in unused else p for p in problems]
    problems += _algorithm_cross_checks(cfg, prefix)
    fields, tolerated, _ = class_fields(cls)
    for key, sub_cls in _NESTED.items():
        if isinstance(cfg.get(key), Mapping) and (key in fields or key in tolerated):
            problems += validate_algorithm(sub_cls, cfg[key], f"{prefix}.{key}")
    problems += _extension_list_problems(cfg.get("extensions"), f"{prefix}.extensions")
    teacher = cfg.get("teacher_policy")  # its other keys are checked when the teacher is built
    if isinstance(teacher, Mapping):
        problems += _problems(
            _OPEN, teacher, f"{prefix}.teacher_policy", {"teacher_ac_path": RULES["teacher_ac_path"]}.get
        )
    return problems


def _extension_list_problems(items: Any, prefix: str) -> list[Problem]:
    """``extensions`` is a list of extension objects or ``{"class_name": ..., **kwargs}`` dicts."""
    example = 'e.g. [{"class_name": "RandomNetworkDistillation", "weight": 0.5}]'
    if not isinstance(items, (list, tuple)):
        return [] if items is None else [Problem(prefix, items, "must be a list of extensions", example)]
    problems = []
    for i, item in enumerate(items):
        where = f"{prefix}[{i}]"
        if not isinstance(item, Mapping):
            if not isinstance(item, Extension):
                rule = "must be an extension object or a dict with its class_name"
                problems.append(Problem(where, item, rule, example))
        elif item.get("class_name") is None:
            problems.append(Problem(f"{where}.class_name", MISSING, "an extension entry needs a class_name"))
        else:
            try:
                ext_cls = resolve_class(item["class_name"], extensions, "extension")
            except ValueError as e:
                problems.append(Problem(f"{where}.class_name", item["class_name"], str(e)))
                continue
            problems += validate_algorithm(
                ext_cls, {k: v for k, v in item.items() if k != "class_name"}, where
            )
    return problems


def _algorithm_cross_checks(cfg: Mapping[str, Any], prefix: str) -> list[Problem]:
    problems = []
    if cfg.get("schedule") == "adaptive" and "desired_kl" in cfg and cfg["desired_kl"] is None:
        rule = "schedule='adaptive' needs a KL target > 0"
        problems.append(Problem(f"{prefix}.desired_kl", None, rule, "typical: 0.01, or set schedule='fixed'"))
    symmetry = cfg.get("symmetry_cfg")
    mirror_or_augment = ("use_mirror_loss", True), ("use_data_augmentation", False)
    if isinstance(symmetry, Mapping) and not any(symmetry.get(k, d) for k, d in mirror_or_augment):
        rule = "symmetry needs the mirror loss and/or data augmentation"
        fix = "set use_mirror_loss=True or use_data_augmentation=True, or remove symmetry_cfg"
        problems.append(Problem(f"{prefix}.symmetry_cfg.use_mirror_loss", False, rule, fix))
    return problems


def validate_policy(cls: type, cfg: Mapping[str, Any], prefix: str = "policy") -> list[Problem]:
    """Problems of a policy config for class ``cls`` (sizes may be absent: the environment fills them)."""
    problems = []
    if "rnn_type" in cfg and cfg["rnn_type"] is None and "rnn_type" in class_fields(cls)[0]:
        # st_gym's feed-forward rnn_type=None on a recurrent class (the only ones taking rnn_type)
        rule = f"{cls.__name__} is a recurrent policy and needs a memory type ('lstm' or 'gru')"
        fix = "set rnn_type='lstm' or 'gru', or pick the feed-forward class (e.g. ActorCritic) for rnn_type=None"
        problems.append(Problem(f"{prefix}.rnn_type", None, rule, fix))
    for key in ("obs_segments", "privileged_obs_segments", "critic_obs_segments"):
        if isinstance(cfg.get(key), Mapping):
            problems += _problems(_OPEN, cfg[key], f"{prefix}.{key}", lambda _: SEGMENT_SHAPE)
    return problems + validate_algorithm(cls, cfg, prefix)


def check_minibatches(algorithm: Mapping[str, Any], num_envs: int, num_steps: int, recurrent: bool) -> None:
    """Raise a :class:`ConfigError` unless the rollout splits into ``num_mini_batches`` non-empty minibatches
    (of whole environments for a recurrent policy)."""
    n = algorithm.get("num_mini_batches", PPO_SIGNATURE_DEFAULTS.num_mini_batches)
    limit, unit = (num_envs, "environments") if recurrent else (num_envs * num_steps, "samples per rollout")
    if isinstance(n, int) and n > limit:
        why = " (a recurrent policy's minibatches hold whole environments)" if recurrent else ""
        rule = f"more minibatches than the {limit} {unit}{why}"
        raise ConfigError(Problem("algorithm.num_mini_batches", n, rule, f"use at most {limit}"))
