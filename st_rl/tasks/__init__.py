"""Built-in vectorised tasks (native st_rl API) and the task registry (:func:`make_env`)."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.env.adapters.gymnasium import make_gymnasium_env
from st_rl.tasks.base import BuiltinTask
from st_rl.tasks.cue_memory import CueMemory
from st_rl.tasks.image_goal import ImageGoal
from st_rl.tasks.locomotion import LeggedLocomotion  # MuJoCo is imported when a task is built
from st_rl.tasks.point_mass import PointMass
from st_rl.tasks.sparse_goal import SparseGoal
from st_rl.tasks.velocity_tracking import VelocityTracking

__all__ = [
    "TASKS",
    "BuiltinTask",
    "PointMass",
    "SparseGoal",
    "VelocityTracking",
    "make_env",
    "register_task",
    "CueMemory",
    "ImageGoal",
]

TASKS: dict[str, type] = {}


def register_task(name: str, cls: type, *, overwrite: bool = False) -> type:
    """Register ``cls(num_envs=, device=, seed=, **cfg)`` as ``name``; replacing a class needs ``overwrite``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"task name must be a non-empty string, got {name!r}")
    if not overwrite and name in TASKS and TASKS[name] is not cls:
        raise ValueError(f"task {name!r} is already registered as {TASKS[name].__name__}")
    TASKS[name] = cls
    return cls


def make_env(
    name: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
) -> Any:
    """Instantiate the registered task ``name`` (or ``"gym:<id>"``); ``cfg`` goes to its constructor."""
    if name.startswith("gym:"):  # a Gymnasium task through st_rl.env.adapters (needs st-rl[gymnasium])
        return make_gymnasium_env(name.removeprefix("gym:"), num_envs, seed=seed, device=device, **cfg)
    if name not in TASKS:
        available = f"{', '.join(sorted(TASKS))}, or 'gym:<Gymnasium id>'"
        raise ValueError(f"unknown task {name!r}; available tasks: {available}")
    return TASKS[name](num_envs=num_envs, device=device, seed=seed, **cfg)


register_task("point_mass", PointMass)
register_task("velocity_tracking", VelocityTracking)
register_task("cue_memory", CueMemory)
register_task("image_goal", ImageGoal)
register_task("sparse_goal", SparseGoal)


def _quadruped(terrain: str) -> Any:
    def make(
        num_envs: int = 1024, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
    ) -> Any:
        return LeggedLocomotion(num_envs=num_envs, device=device, seed=seed, terrain=terrain, **cfg)

    make.__name__ = f"quadruped_{terrain}"
    return make


# quadruped_gait: the flat task under the name of its gait-shaping training preset
for _name, _terrain in (("quadruped_flat", "flat"), ("quadruped_rough", "rough"), ("quadruped_gait", "flat")):
    register_task(_name, _quadruped(_terrain))
