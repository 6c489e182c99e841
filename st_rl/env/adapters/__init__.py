"""Optional adapters that bring Gymnasium, mjlab, Genesis and Isaac Lab envs to st_rl (each imports its
simulator only when used)."""

from __future__ import annotations

from st_rl.env.adapters.genesis import GenesisVecEnv, wrap_genesis
from st_rl.env.adapters.gymnasium import GymnasiumVecEnv, make_gymnasium_env
from st_rl.env.adapters.isaaclab import isaaclab_generation, wrap_isaaclab
from st_rl.env.adapters.mjlab import make_mjlab_env, mjlab_obs_groups, mjlab_train_config, wrap_mjlab

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
