"""Adapters that bring simulators' environments to st_rl's runners (optional extras, imported lazily).

Each adapter turns a simulator's environment into one of the APIs :class:`st_rl.env.EnvAdapter` accepts:

* :func:`make_gymnasium_env` / :class:`GymnasiumVecEnv`: Gymnasium 1.x vector envs (MuJoCo tasks included);
  ``pip install "st-rl[gymnasium]"``.
* :func:`make_mjlab_env` / :func:`wrap_mjlab`, :func:`mjlab_train_config`: mjlab tasks;
  ``pip install "st-rl[mjlab]"``.
* :func:`wrap_genesis` / :class:`GenesisVecEnv`: Genesis locomotion envs; ``pip install "st-rl[genesis]"``.
* :func:`wrap_isaaclab`: Isaac Lab's ``RslRlVecEnvWrapper`` (rsl_rl 2.x and TensorDict generations).

legged_gym environments need no adapter. Nothing here imports a simulator until it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from st_rl.env.adapters.genesis import GenesisVecEnv, wrap_genesis
    from st_rl.env.adapters.gymnasium import GymnasiumVecEnv, make_gymnasium_env
    from st_rl.env.adapters.isaaclab import isaaclab_generation, wrap_isaaclab
    from st_rl.env.adapters.mjlab import make_mjlab_env, mjlab_obs_groups, mjlab_train_config, wrap_mjlab

_EXPORTS = {
    "GymnasiumVecEnv": "gymnasium",
    "make_gymnasium_env": "gymnasium",
    "make_mjlab_env": "mjlab",
    "mjlab_obs_groups": "mjlab",
    "mjlab_train_config": "mjlab",
    "wrap_mjlab": "mjlab",
    "GenesisVecEnv": "genesis",
    "wrap_genesis": "genesis",
    "isaaclab_generation": "isaaclab",
    "wrap_isaaclab": "isaaclab",
}

__all__ = [
    "GenesisVecEnv",
    "GymnasiumVecEnv",
    "isaaclab_generation",
    "make_gymnasium_env",
    "make_mjlab_env",
    "mjlab_obs_groups",
    "mjlab_train_config",
    "wrap_genesis",
    "wrap_isaaclab",
    "wrap_mjlab",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
