"""The environment contracts st_rl trains on: the reference's abstract base class and a typing protocol.

An environment need not derive from anything here (:mod:`st_rl.env.adapters.apis` lists the accepted APIs).
:class:`VecEnv` is the reference's (rsl_rl / legged_gym) abstract base class; :class:`VecEnvLike` is the
protocol of the native API the built-in tasks implement (rsl_rl 2.x / Isaac Lab ``RslRlVecEnvWrapper``):
``get_observations() -> (obs, extras)`` with the groups in ``extras["observations"]``, and
``step(actions) -> (obs, rewards, dones, extras)`` that resets finished envs (their obs is the first after the
reset); ``extras`` may hold ``"time_outs"``, ``"log"`` (scalars logged verbatim) and ``"episode"``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["VecEnv", "VecEnvLike"]


class VecEnv(ABC):
    """The reference's abstract batched environment; subclass it and implement ``get_observations``, ``step`` and
    ``reset``.

    legged_gym environments implement the 5-tuple API below (and ``get_privileged_observations``, which by
    default returns ``privileged_obs_buf``, or None); st_gym's ``StRlVecEnvWrapper`` derives from this class too,
    with the 4-tuple API of :class:`VecEnvLike` and ``num_envs`` / ``num_obs`` / ... as properties. The adapter
    tells the two apart by what ``get_observations()`` returns.

    Attributes (set by the subclass):
        num_envs: number of parallel environments N.
        num_obs: actor observation width.
        num_privileged_obs: critic (privileged) observation width; None when the critic reads the actor
            observations.
        num_actions: action width.
        max_episode_length: episode length limit in steps.
        privileged_obs_buf: (N, num_privileged_obs) critic observations, or None.
        obs_buf: (N, num_obs) actor observations.
        rew_buf: (N,) rewards of the last step.
        reset_buf: (N,) environments that finished at the last step.
        episode_length_buf: (N,) long step counter per environment (writable: the runner randomises it when
            ``learn(init_at_random_ep_len=True)``).
        extras: the infos of the last step (``"time_outs"``, ``"episode"``, ...; see docs/environments.md).
        device: device of the buffers.
    """

    num_envs: int
    num_obs: int
    num_privileged_obs: int | None
    num_actions: int
    max_episode_length: int | torch.Tensor
    privileged_obs_buf: torch.Tensor | None
    obs_buf: torch.Tensor
    rew_buf: torch.Tensor
    reset_buf: torch.Tensor
    episode_length_buf: torch.Tensor
    extras: dict[str, Any]
    device: torch.device | str

    @abstractmethod
    def get_observations(self) -> torch.Tensor:
        """The current actor observations, (N, num_obs)."""

    def get_privileged_observations(self) -> torch.Tensor | None:
        """The current critic observations, (N, num_privileged_obs), or None without privileged observations
        (default: ``privileged_obs_buf``, else None)."""
        return getattr(self, "privileged_obs_buf", None)

    @abstractmethod
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply (N, num_actions) actions; return ``(obs, privileged_obs, rewards (N,), dones (N,), infos)``.
        Finished environments are reset inside ``step`` (their returned obs is the first after the reset)."""

    @abstractmethod
    def reset(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> Any:
        """Reset the environments ``env_ids`` (all when None; the runner calls ``reset()``)."""


@runtime_checkable
class VecEnvLike(Protocol):
    """Protocol of a batched environment in st_rl's native API (for type annotations)."""

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
