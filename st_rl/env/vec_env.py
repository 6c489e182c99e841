"""The environment contract st_rl trains on.

st_rl accepts three environment APIs (see :mod:`st_rl.env.adapter`); the built-in tasks implement the
native one described by :class:`VecEnv` (the rsl_rl 2.x / Isaac Lab ``RslRlVecEnvWrapper`` generation):

* ``get_observations() -> (obs, extras)``, with ``extras["observations"]`` a dict of observation groups
  (``"policy"`` is ``obs``; ``"critic"`` is optional).
* ``step(actions) -> (obs, rewards, dones, extras)``; finished envs are reset inside ``step`` and the
  returned obs of a done env is its first obs after the reset. ``extras`` may hold ``"time_outs"`` (bool,
  truncation), ``"log"`` (flat scalar dict, keys with "/" logged verbatim) and ``"episode"``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class VecEnv(Protocol):
    """Protocol of a batched environment in st_rl's native API."""

    num_envs: int
    num_obs: int
    num_privileged_obs: int | None
    num_actions: int
    max_episode_length: int | torch.Tensor
    episode_length_buf: torch.Tensor
    device: torch.device | str

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the current actor observations and the extras with all observation groups."""
        ...

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all environments and return ``(obs, extras)``."""
        ...

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply actions; return ``(obs, rewards, dones, extras)``."""
        ...
