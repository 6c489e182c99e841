"""Policy contracts outside code may rely on; st_rl policies implement all (Mutex policies have no ``std``), a
user's policy any subset (checked with ``isinstance`` where optional)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class DeterministicActor(Protocol):
    """A policy with a deterministic action: ``act_inference(obs) -> actions`` (raw observations in)."""

    def act_inference(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor: ...


@runtime_checkable
class StochasticActor(Protocol):
    """A policy that samples its actions: ``act(obs) -> actions``."""

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor: ...


@runtime_checkable
class ResettablePolicy(Protocol):
    """A policy with per-environment state (a memory) that ``reset(dones)`` clears for finished episodes."""

    def reset(self, dones: torch.Tensor | None = None) -> None: ...


@runtime_checkable
class GaussianPolicy(Protocol):
    """A policy whose action noise is the learnable standard deviation ``std`` (one value per action)."""

    std: torch.Tensor


@runtime_checkable
class DeclaresRecurrence(Protocol):
    """A policy that declares its memory: ``is_recurrent``, ``rnn_type`` (``"lstm"``, ``"gru"`` or None)."""

    is_recurrent: bool
    rnn_type: str | None
