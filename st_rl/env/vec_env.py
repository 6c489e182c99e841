"""The reference's abstract environment base class and the typing protocol of st_rl's native API (an environment
need not derive from either)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["VecEnv", "VecEnvLike"]


class VecEnv(ABC):
    """The reference's abstract batched environment (legged_gym's 5-tuple API; st_gym's wrapper derives from it
    with the 4-tuple API of :class:`VecEnvLike`).

    ``num_privileged_obs`` is None when the critic reads the actor observations; ``episode_length_buf`` must be
    writable (``init_at_random_ep_len``); ``extras`` holds the infos of the last step."""

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
        """The current critic observations, (N, num_privileged_obs), or None (default: ``privileged_obs_buf``)."""
        return getattr(self, "privileged_obs_buf", None)

    @abstractmethod
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply actions; return ``(obs, privileged_obs, rewards (N,), dones (N,), infos)``, resetting finished
        environments (their obs is the first after the reset)."""

    @abstractmethod
    def reset(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> Any:
        """Reset the environments ``env_ids`` (all when None; the runner calls ``reset()``)."""


@runtime_checkable
class VecEnvLike(Protocol):
    """Protocol of a batched environment in st_rl's native API (rsl_rl 2.x / Isaac Lab ``RslRlVecEnvWrapper``)."""

    num_envs: int
    num_obs: int
    num_privileged_obs: int | None
    num_actions: int
    max_episode_length: int | torch.Tensor
    episode_length_buf: torch.Tensor
    device: torch.device | str

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """The actor observations and extras with every group in ``extras["observations"]``."""
        ...

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]: ...

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply actions; return ``(obs, rewards, dones, extras)`` (``extras``: ``time_outs``, ``log``, ...)."""
        ...
