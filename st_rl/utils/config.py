"""Turn the training configs users write into validated keyword arguments.

Two shapes are accepted (``reference/ancestor_spec.md`` section 3):

* **flat** (st_gym ``RslRlOnPolicyRunnerCfg.to_dict()``): runner keys at the top level, with ``policy`` and
  ``algorithm`` dicts that carry their own ``class_name``;
* **nested** (legged_gym ``class_to_dict(train_cfg)``): ``runner`` dict with ``policy_class_name`` and
  ``algorithm_class_name``, next to ``policy`` and ``algorithm``.

The user's object is deep-copied, never mutated. Unknown runner keys are reported with a warning that names
close matches.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib
import inspect
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

# Every runner-level key st_rl understands, with what it means (documented in docs/configuration.md).
RUNNER_KEYS: dict[str, str] = {
    "seed": "global RNG seed set when the runner is built (None: leave the RNGs alone)",
    "device": "informational; the runner's device argument decides",
    "num_steps_per_env": "rollout length T per iteration",
    "max_iterations": "used by the CLI / training scripts as the default number of iterations",
    "empirical_normalization": "normalise observations with running statistics (algorithm key wins)",
    "save_interval": "save model_<it>.pt every this many iterations",
    "log_interval": "log every this many iterations",
    "experiment_name": "log directory name under the log root",
    "run_name": "suffix of the run directory",
    "logger": "'tensorboard' (default), 'wandb', 'neptune', 'none' or a custom writer (docs/logging.md)",
    "neptune_project": "Neptune project (logger='neptune')",
    "neptune_mode": "Neptune mode: 'async' (default), 'sync', 'offline', 'debug'",
    "neptune_run_id": "continue this Neptune run",
    "wandb_project": "W&B project (logger='wandb')",
    "wandb_entity": "W&B entity (team or user)",
    "wandb_mode": "W&B mode: 'online' (default), 'offline', 'disabled'",
    "wandb_run_id": "continue this W&B run",
    "resume": "resume from a checkpoint (training scripts)",
    "load_run": "regex of the run directory to resume",
    "load_checkpoint": "regex of the checkpoint file to resume (st_gym)",
    "checkpoint": "checkpoint index or -1 (legged_gym)",
    "resume_path": "explicit checkpoint path (legged_gym)",
    "runner_class_name": "runner class",
    "policy_class_name": "policy class (legged_gym nested form)",
    "algorithm_class_name": "algorithm class (legged_gym nested form)",
    "storage": "extra keyword arguments of the rollout storage",
    "inference_mode_rollout": "collect rollouts under torch.inference_mode (default True)",
    "obs_groups": "observation groups feeding the actor ('policy') and critic ('critic')",
    "check_finite": "'rollout' (default), 'step' or 'off': NaN/Inf checks of env outputs",
    "clip_actions": "informational; environments clip actions",
    "class_name": "runner class (alternative spelling)",
    "task": "built-in task name (written by st-rl train; read by st-rl play)",
    "distributed_timeout_s": "multi-rank runs: seconds before a blocked collective fails (default 600)",
    "ckpt_manipulator": "function applied to a checkpoint before loading it (e.g. 'replace_encoder0')",
    "pretrain_iterations": "TwoStageRunner: iterations fed from pretrain_dataset before RL (negative: forever)",
    "pretrain_dataset": "TwoStageRunner: RolloutDataset arguments (data_dir, dataset_loops, ...)",
}


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

    def to_dict(self) -> dict[str, Any]:
        """Nested, JSON-friendly form (what is written to ``config.json`` and checkpoints)."""
        runner = dict(self.runner)
        runner["policy_class_name"] = class_label(self.policy_class_name)
        runner["algorithm_class_name"] = class_label(self.algorithm_class_name)
        return to_jsonable(
            {
                "runner": runner,
                "policy": {"class_name": class_label(self.policy_class_name), **self.policy},
                "algorithm": {"class_name": class_label(self.algorithm_class_name), **self.algorithm},
                "storage": self.storage,
            }
        )


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


def _warn_unknown(where: str, keys: list[str], known: list[str]) -> None:
    if not keys:
        return
    hints = []
    for k in keys:
        close = difflib.get_close_matches(k, known, n=1)
        hints.append(f"'{k}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    warnings.warn(f"Unknown {where} keys are ignored: {', '.join(hints)}", stacklevel=3)


def resolve_train_cfg(train_cfg: Any) -> TrainConfig:
    """Validate and normalise a user's training config (flat or nested) without mutating it.

    Raises:
        ValueError: when ``policy`` or ``algorithm`` is missing or not a dict.
    """
    cfg = to_plain_dict(train_cfg)
    if isinstance(cfg.get("runner"), dict):
        fmt = "nested"
        runner = dict(cfg.pop("runner"))
        for key in ("seed", "runner_class_name"):
            if key in cfg and key not in runner:
                runner[key] = cfg.pop(key)
            else:
                cfg.pop(key, None)
    else:
        fmt = "flat"
        runner = {}
    policy = cfg.pop("policy", None)
    algorithm = cfg.pop("algorithm", None)
    if not isinstance(policy, dict) or not isinstance(algorithm, dict):
        raise ValueError(
            "The training config needs 'policy' and 'algorithm' dicts, at the top level (st_gym flat form) or "
            "next to a 'runner' dict (legged_gym nested form). Got keys: "
            + str(sorted(cfg) + ["runner"] * (fmt == "nested"))
        )
    storage = dict(cfg.pop("storage", None) or {})
    runner.update(cfg)  # flat form: everything else is a runner key
    storage.update(runner.pop("storage", None) or {})
    unknown = [k for k in runner if k not in RUNNER_KEYS]
    _warn_unknown("runner", unknown, list(RUNNER_KEYS))
    for k in unknown:
        runner.pop(k)

    policy_cls = policy.pop("class_name", None) or runner.get("policy_class_name") or "ActorCritic"
    algorithm_cls = algorithm.pop("class_name", None) or runner.get("algorithm_class_name") or "PPO"
    if "empirical_normalization" not in algorithm and runner.get("empirical_normalization") is not None:
        algorithm["empirical_normalization"] = runner["empirical_normalization"]
    return TrainConfig(runner, policy_cls, policy, algorithm_cls, algorithm, storage, fmt)


def available_classes(namespace: ModuleType, base: type | None = None) -> list[str]:
    """Public class names exported by a namespace module (optionally subclasses of ``base``)."""
    names = []
    for name in getattr(namespace, "__all__", dir(namespace)):
        obj = getattr(namespace, name, None)
        if inspect.isclass(obj) and (base is None or issubclass(obj, base)):
            names.append(name)
    return sorted(names)


def resolve_class(name: Any, namespace: ModuleType, kind: str, base: type | None = None) -> type:
    """Resolve a ``class_name``: a class, a short name exported by ``namespace``, or ``"pkg.module:Class"``.

    Raises:
        ValueError: for an unknown name, listing the available ones.
    """
    if inspect.isclass(name):
        return name
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} class_name must be a non-empty string or a class, got {name!r}")
    if ":" in name or ("." in name and not hasattr(namespace, name)):
        module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"Cannot import {kind} class '{name}': {e}") from e
        if not inspect.isclass(obj):
            raise ValueError(f"{kind} '{name}' is not a class")
        return obj
    obj = getattr(namespace, name, None)
    if inspect.isclass(obj) and (base is None or issubclass(obj, base)):
        return obj
    names = available_classes(namespace, base)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise ValueError(
        f"Unknown {kind} class_name '{name}'.{hint} Available: {names}; or give 'package.module:ClassName'."
    )
