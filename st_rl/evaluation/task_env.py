"""Building a task's environment from a stored config (a run's ``config.json``, an exported policy's metadata)."""

from __future__ import annotations

import re
from typing import Any

from st_rl.registry import refuse_untrusted_import
from st_rl.tasks import make_env


def refuse_gymnasium_module(task: str, key: str) -> None:
    """Refuse a Gymnasium id naming a module to import (``"gym:pkg.mod:Env-v0"``) inside an untrusted config."""
    if task.startswith("gym:") and ":" in task.removeprefix("gym:"):
        refuse_untrusted_import(task, key)


def make_env_from_cfg(
    task: str, num_envs: int, device: str, seed: int | None, env_cfg: dict[str, Any]
) -> Any:
    """``make_env`` with the run's stored env config, dropping keys the task factory sets itself."""
    cfg = dict(env_cfg)
    while True:  # each retry drops one key
        try:
            return make_env(task, num_envs=num_envs, device=device, seed=seed, **cfg)
        except TypeError as e:
            m = re.search(r"multiple values for keyword argument '(\w+)'", str(e))
            if not m or m.group(1) not in cfg:
                raise
            cfg.pop(m.group(1))
