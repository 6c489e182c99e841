"""Base class of datasets that replay recorded rollouts as if they came from a vectorised environment."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import IterableDataset

__all__ = ["DatasetExhausted", "RolloutFileBase"]


def is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class DatasetExhausted(Exception):
    """No trajectory is left to hand out (all allowed loops are used)."""


class RolloutFileBase(IterableDataset, ABC):
    """Abstract rollout-file dataset with one handler (trajectory and frame) per environment slot ``N``."""

    def __init__(
        self, data_dir: str | Sequence[str], num_envs: int, device: str | torch.device = "cuda"
    ) -> None:
        super().__init__()
        if not is_integer(num_envs) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            msg = f"{type(self).__name__}: no CUDA for device {str(device)!r}; pass device='cpu'."
            raise RuntimeError(msg)
        self.data_dir = data_dir
        self.num_envs = int(num_envs)
        self.all_env_ids = torch.arange(self.num_envs, device=self.device)
        self._initialized = False
        self.exhausted = False

    def reset(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Re-read the data and start over (``env_ids=None``), or give new trajectories to ``env_ids``."""
        if env_ids is None:
            self.exhausted = False
            self.reset_all()
            self._initialized = True
            env_ids = self.all_env_ids
        elif not self._initialized:
            return self.reset()
        try:
            self.refresh_handlers(env_ids)
        except DatasetExhausted:
            self.exhausted = True

    def get_batch(self, num_transitions_per_env: int | None = None) -> Any:
        """The next transitions of every slot, ``(N, ...)`` or ``(T, N, ...)``; ``None`` when exhausted."""
        if not self._initialized:
            self.reset()
        if self.exhausted:
            return None
        buffer = self.get_buffer(num_transitions_per_env)
        try:
            steps = [None] if num_transitions_per_env is None else range(int(num_transitions_per_env))
            for t in steps:
                self.fill_transition(buffer if t is None else buffer[t])
        except DatasetExhausted:
            self.exhausted = True
            return None
        return buffer

    def get_transition_batch(self) -> tuple[Any, dict[str, torch.Tensor]]:
        """``(buffer, {"time_outs": buffer.timeout})`` as an environment step; ``(None, {})`` when exhausted."""
        buffer = self.get_batch()
        if buffer is None:
            return None, {}
        timeout = buffer._asdict().get("timeout")  # a namedarraytuple (see get_buffer)
        return buffer, ({"time_outs": timeout} if timeout is not None else {})

    def __iter__(self) -> RolloutFileBase:
        self.reset()
        return self

    def __next__(self) -> Any:
        batch = self.get_batch()
        if batch is None:
            raise StopIteration
        return batch

    @abstractmethod
    def reset_all(self) -> None:
        """Re-read the data and rebuild the per-env handlers."""

    @abstractmethod
    def refresh_handlers(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Give new trajectories to the handlers of ``env_ids`` (all when ``None``)."""

    @abstractmethod
    def get_buffer(self, num_transitions_per_env: int | None = None) -> Any:
        """A new, unfilled namedarraytuple buffer with leading dims ``(N,)`` or ``(T, N)``."""

    @abstractmethod
    def fill_transition(self, buffer: Any, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Write the next transition of ``env_ids`` (all when ``None``) into ``buffer`` and advance."""
