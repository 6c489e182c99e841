"""Rebuild a trained run (task, env config, runner) from its checkpoint."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from typing import Any

from st_rl.config.resolve import resolve_train_cfg
from st_rl.evaluation.task_env import make_env_from_cfg, refuse_gymnasium_module
from st_rl.registry import untrusted_config
from st_rl.runners import build_runner
from st_rl.tasks import TASKS
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.files import DataFileError, read_json
from st_rl.utils.utils import get_checkpoint_path

__all__ = ["LoadedRun", "load_run", "make_env_from_cfg", "run_task"]


def _stored_task(run_cfg: dict[str, Any] | None, ckpt_cfg: dict[str, Any] | None) -> str | None:
    """``runner.task`` of config.json or the checkpoint, else the one registered task whose config keys include
    all of the stored env config's (older configs may lack some)."""
    for cfg in (run_cfg or {}, ckpt_cfg or {}):
        runner = cfg.get("runner")
        task = (runner.get("task") if isinstance(runner, dict) else None) or cfg.get("task")
        if task:
            return str(task)
    env_cfg = (run_cfg or {}).get("env")
    if not isinstance(env_cfg, dict):
        return None
    if "terrain" in env_cfg and "model_path" in env_cfg:
        name = f"quadruped_{env_cfg['terrain']}"
        return name if name in TASKS else None
    keys = set(env_cfg)
    matches = [n for n, cls in TASKS.items() if keys and keys <= set(getattr(cls, "DEFAULT_CFG", None) or {})]
    return matches[0] if len(matches) == 1 else None


def run_task(checkpoint: str, *, trust_config: bool = False) -> tuple[str, str | None]:
    """The checkpoint file of ``checkpoint`` (file or run directory) and its run's task (None: unknown), with the
    stored config checked as :func:`load_run` checks it (same errors)."""
    stored = _StoredRun(checkpoint)
    with untrusted_config(stored.source, trusted=trust_config), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown keys: said when the runner is built
        resolve_train_cfg(json.loads(json.dumps(stored.train_cfg)))
    return stored.path, stored.task


class _StoredRun:
    """A checkpoint read with its run's ``config.json``, training config (and its source) and task."""

    def __init__(self, checkpoint: str) -> None:
        self.path = path = get_checkpoint_path(checkpoint)
        self.state = load_checkpoint(path, map_location="cpu")
        ckpt_cfg = self.state.get("config") if isinstance(self.state.get("config"), dict) else None
        run_cfg_path = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
        self.run_cfg: dict[str, Any] | None = None
        if os.path.isfile(run_cfg_path):
            fix = "restore it or delete it (the checkpoint holds the config too)"
            self.run_cfg = read_json(run_cfg_path, "run config", fix)
            if not isinstance(self.run_cfg, dict):
                kind = type(self.run_cfg).__name__
                raise DataFileError(f"{run_cfg_path}: the run config holds a {kind}, not a mapping; {fix}")
        train_cfg = {k: v for k, v in (self.run_cfg or {}).items() if k != "env"} or ckpt_cfg
        if not train_cfg:
            fix = "save checkpoints with OnPolicyRunner.save, or put the run's config.json beside the file."
            raise ValueError(
                f"{path} has no stored training config (key 'config') nor config.json beside it; {fix}"
            )
        self.train_cfg: dict[str, Any] = train_cfg
        self.source = run_cfg_path if self.run_cfg else f"{path} (its stored 'config')"
        self.task = _stored_task(self.run_cfg, ckpt_cfg)


@dataclasses.dataclass
class LoadedRun:
    """A runner rebuilt from a checkpoint by :func:`load_run` (weights loaded, no optimizer), with its env.

    ``iteration`` is the checkpoint's (or its file stem); ``env_cfg`` the stored env config used (None:
    defaults)."""

    path: str
    state: dict[str, Any]
    runner: Any
    env: Any
    task: str | None
    iteration: int | str
    train_cfg: dict[str, Any]
    env_cfg: dict[str, Any] | None
    seed: int | None


def load_run(
    checkpoint: str,
    task: str | None = None,
    num_envs: int = 16,
    device: str = "cpu",
    seed: int | None = None,
    env: Any = None,
    *,
    trust_config: bool = False,
) -> LoadedRun:
    """Rebuild the runner of ``checkpoint`` (a ``model_<it>.pt`` file or a run directory: its latest) on its
    training task and load its weights (not the optimizer).

    The config is ``config.json`` beside the checkpoint, else the checkpoint's; the stored env config is reused
    unless ``task`` names another task; ``seed`` defaults to the run's; ``trust_config`` lets the stored
    config name code to import (docs/security.md, else ``UntrustedConfigError``). Raises ``ValueError`` when
    there is no training config or no task, ``CheckpointError`` for weights that do not fit or are NaN/Inf."""
    stored = _StoredRun(checkpoint)
    path, stored_task = stored.path, stored.task
    with untrusted_config(stored.source, trusted=trust_config):
        if task is not None and stored_task is not None and task != stored_task:
            warnings.warn(f"using task {task!r}; the run was trained on {stored_task!r}", stacklevel=3)
        name = task or stored_task
        env_cfg = (stored.run_cfg or {}).get("env") if stored_task == name else None
        train_cfg = json.loads(json.dumps(stored.train_cfg))  # a private copy
        runner_cfg = train_cfg.get("runner", train_cfg)
        if seed is None:
            seed = runner_cfg.get("seed") if isinstance(runner_cfg, dict) else None
        if env is None:
            if name is None:
                why = f"Cannot tell which task {path} was trained on: its config names none (key runner.task)"
                raise ValueError(f"{why}. Pass it: task='quadruped_flat' (CLI: --task quadruped_flat).")
            refuse_gymnasium_module(name, "runner.task")
            env = make_env_from_cfg(name, num_envs, device, seed, env_cfg or {})

        runner_class = runner_cfg.get("runner_class_name") or train_cfg.get("runner_class_name")
        runner = build_runner(runner_class or "OnPolicyRunner", env, train_cfg, log_dir=None, device=device)
        runner.load(path, load_optimizer=False, map_location=device)
    m = re.search(r"model_(\d+)\.pt$", os.path.basename(path))
    iteration: int | str = int(m.group(1)) if m else os.path.splitext(os.path.basename(path))[0]
    if stored.state.get("iter") is not None:
        iteration = int(stored.state["iter"])
    return LoadedRun(path, stored.state, runner, env, name, iteration, train_cfg, env_cfg, seed)
