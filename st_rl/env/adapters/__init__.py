"""Optional adapters, imported lazily, that bring Gymnasium, mjlab, Genesis and Isaac Lab envs to st_rl."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from st_rl.env.adapters.genesis import GenesisVecEnv, wrap_genesis
    from st_rl.env.adapters.gymnasium import GymnasiumVecEnv, make_gymnasium_env
    from st_rl.env.adapters.isaaclab import isaaclab_generation, wrap_isaaclab
    from st_rl.env.adapters.mjlab import make_mjlab_env, mjlab_obs_groups, mjlab_train_config, wrap_mjlab

_EXPORTS = {  # module -> its names
    "gymnasium": ("GymnasiumVecEnv", "make_gymnasium_env"),
    "mjlab": ("make_mjlab_env", "mjlab_obs_groups", "mjlab_train_config", "wrap_mjlab"),
    "genesis": ("GenesisVecEnv", "wrap_genesis"),
    "isaaclab": ("isaaclab_generation", "wrap_isaaclab"),
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
    module = next((m for m, names in _EXPORTS.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
