"""Recurrent memory (LSTM or GRU) that owns its rollout hidden state."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from st_rl.utils.collections import namedarraytuple
from st_rl.utils.precision import autocast_enabled, full_precision, has_fast_bf16
from st_rl.utils.utils import unpad_trajectories

LstmHiddenState = namedarraytuple("LstmHiddenState", ["hidden", "cell"])
ActorCriticHiddenState = namedarraytuple("ActorCriticHiddenState", ["actor", "critic"])
EstimatorActorHiddenState = namedarraytuple("EstimatorActorHiddenState", ["estimator", "actor"])
AdaptorActorHiddenState = namedarraytuple("AdaptorActorHiddenState", ["adaptor", "actor"])


class Memory(nn.Module):
    """An LSTM or GRU. Rollout mode: ``x`` (B, D) -> (B, H) with the stored hidden state. Batch mode: padded
    trajectories (T, B, D) from ``hidden_states`` -> (T, B, H), unpadded to (T, N, H) with ``masks``."""

    def __init__(
        self, input_size: int, type: str = "lstm", num_layers: int = 1, hidden_size: int = 256
    ) -> None:  # noqa: A002
        super().__init__()
        kind = str(type).lower()
        if kind not in ("lstm", "gru"):
            raise ValueError(f"Memory type must be 'lstm' or 'gru', got {type!r}")
        rnn_cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = rnn_cls(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        self.memory_type = kind
        self._parts = ["hidden", "cell"] if kind == "lstm" else ["hidden"]
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.hidden_states: Any = None

    def _split(self, state: Any) -> tuple[torch.Tensor, ...]:
        return tuple(state) if self.memory_type == "lstm" else (state,)

    def _join(self, tensors: Any) -> Any:
        tensors = tuple(tensors)
        return LstmHiddenState(*tensors) if self.memory_type == "lstm" else tensors[0]

    def forward(
        self, x: torch.Tensor, masks: torch.Tensor | None = None, hidden_states: Any = None
    ) -> torch.Tensor:
        if hidden_states is not None:
            if self.memory_type == "lstm" and not isinstance(hidden_states, tuple):
                raise ValueError("An LSTM memory needs (hidden, cell) hidden states in batch mode")
            out, _ = self._run(x, hidden_states)
            return unpad_trajectories(out, masks) if masks is not None else out
        if self.hidden_states is None:
            dtype = torch.promote_types(x.dtype, torch.float32)
            self.hidden_states = self.initial_state(x.shape[0], x.device, dtype)
        out, new_state = self._run(x.unsqueeze(0), self.hidden_states)
        # Under bfloat16 autocast an LSTM returns bfloat16 states; the rollout memory stays in full precision.
        self.hidden_states = self._join(full_precision(h) for h in self._split(new_state))
        return out.squeeze(0)

    def _run(self, x: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        state = tuple(state) if self.memory_type == "lstm" else state
        if x.device.type == "cpu" and autocast_enabled("cpu") and not has_fast_bf16("cpu"):
            # oneDNN has no bfloat16 LSTM on CPUs without AVX512-BF16/AMX
            with torch.autocast("cpu", enabled=False):
                return self.rnn(x.float(), state)
        return self.rnn(x, state)

    def initial_state(
        self, batch_size: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> Any:
        """Zero hidden state for ``batch_size`` sequences."""
        shape = (self.num_layers, batch_size, self.hidden_size)
        return self._join(torch.zeros(shape, device=device, dtype=dtype) for _ in self._parts)

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the hidden state of the finished sequences (all when ``dones`` is None)."""
        if self.hidden_states is None:
            return
        first = self._split(self.hidden_states)[0]
        if dones is None:
            keep = torch.zeros((), dtype=first.dtype, device=first.device)
        else:
            keep = (~dones.reshape(1, -1, 1).bool()).to(first.dtype)
        self.hidden_states = self._join(h * keep for h in self._split(self.hidden_states))

    def detach_hidden_states(self) -> None:
        if self.hidden_states is not None:
            self.hidden_states = self._join(h.detach() for h in self._split(self.hidden_states))

    def rollout_state(self) -> dict[str, torch.Tensor]:
        """A copy of the rollout state: ``{"hidden": (L, B, H)[, "cell": ...]}``, ``{}`` before the first step."""
        if self.hidden_states is None:
            return {}
        return {k: h.detach().clone() for k, h in zip(self._parts, self._split(self.hidden_states))}

    def check_rollout_state(self, state: Any, batch_size: int | None = None) -> None:
        """Raise ``ValueError`` if ``state`` does not fit (``batch_size`` sequences; None accepts any)."""
        if not isinstance(state, dict):
            raise ValueError(f"expected a dict of tensors, got a {type(state).__name__}")
        if not state:
            return
        if sorted(state) != sorted(self._parts):
            raise ValueError(f"a {self.memory_type.upper()} state has {self._parts}, got {sorted(state)}")
        layers, hidden = self.num_layers, self.hidden_size
        for part in self._parts:
            value = state[part]
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                raise ValueError(f"{part!r} is not a floating-point tensor")
            if value.dim() != 3 or value.shape[0] != layers or value.shape[2] != hidden:
                raise ValueError(f"{part!r} has shape {tuple(value.shape)}, not ({layers}, batch, {hidden})")
            if batch_size is not None and value.shape[1] != batch_size:
                raise ValueError(f"{part!r} holds {value.shape[1]} sequences, expected {batch_size}")

    def load_rollout_state(self, state: dict[str, torch.Tensor], batch_size: int | None = None) -> None:
        """Restore a :meth:`rollout_state` (``{}``: the next step starts from zeros); ValueError if it does not fit."""
        self.check_rollout_state(state, batch_size)
        param = next(self.rnn.parameters())
        loaded = (state[k].to(param.device, param.dtype).clone() for k in self._parts)
        self.hidden_states = self._join(loaded) if state else None


class NoMemory(nn.Module):
    """The memory part of a feed-forward policy: a pass-through."""

    hidden_states: Any = None

    def forward(
        self, x: torch.Tensor, masks: torch.Tensor | None = None, hidden_states: Any = None
    ) -> torch.Tensor:
        return x

    def reset(self, dones: torch.Tensor | None = None) -> None:
        pass

    def detach_hidden_states(self) -> None:
        pass


# the memories of a policy: actor, critic, state estimator, privileged-state adaptor
POLICY_MEMORIES = ("memory_a", "memory_c", "memory_s", "memory_p")


def attach_memories(policy: Any, spec: Any) -> None:
    """Give ``policy`` ``memory_a`` / ``memory_c`` for a ``MemorySpec`` (None: none, as legged_gym's exporter expects)
    and the unregistered references ``_actor_memory`` / ``_critic_memory`` the forward passes use."""
    actor_memory: nn.Module = NoMemory()
    critic_memory: nn.Module = actor_memory
    if spec is not None:
        rnn = (spec.rnn_type, spec.num_layers, spec.hidden_size)
        policy.memory_a = actor_memory = Memory(policy.encoded_actor_width(), *rnn)
        policy.memory_c = critic_memory = Memory(policy.encoded_critic_width(), *rnn)
    object.__setattr__(policy, "_actor_memory", actor_memory)
    object.__setattr__(policy, "_critic_memory", critic_memory)


def named_memories(policy: nn.Module) -> dict[str, Memory]:
    """The policy's :class:`Memory` attributes among :data:`POLICY_MEMORIES`."""
    return {n: m for n in POLICY_MEMORIES if isinstance(m := getattr(policy, n, None), Memory)}


def split_estimator_hidden(hidden_states: Any) -> tuple[Any, Any]:
    """``(estimator_hidden, actor_hidden)`` of an actor-side hidden state."""
    if isinstance(hidden_states, EstimatorActorHiddenState):
        return hidden_states.estimator, hidden_states.actor
    return None, hidden_states


def get_policy_hidden_states(policy: Any) -> Any:
    """``ActorCriticHiddenState(actor, critic)`` of the rollout memories (the actor field nests the adaptor's and
    estimator's states); ``None`` for feed-forward policies."""
    if not policy.is_recurrent:
        return None
    actor = policy.memory_a.hidden_states
    if policy.memory_s is not None:
        actor = EstimatorActorHiddenState(policy.memory_s.hidden_states, actor)
    if policy.memory_p is not None:
        actor = AdaptorActorHiddenState(policy.memory_p.hidden_states, actor)
    return ActorCriticHiddenState(actor, policy.memory_c.hidden_states)


def set_policy_hidden_states(policy: Any, hidden_states: Any) -> None:
    """Restore what :func:`get_policy_hidden_states` returned (``None``: nothing to restore)."""
    if hidden_states is None:
        return
    actor = hidden_states.actor
    if isinstance(actor, AdaptorActorHiddenState):
        policy.memory_p.hidden_states, actor = actor.adaptor, actor.actor
    est, policy.memory_a.hidden_states = split_estimator_hidden(actor)
    if policy.memory_s is not None:
        policy.memory_s.hidden_states = est
    policy.memory_c.hidden_states = hidden_states.critic


def load_policy_rollout_states(policy: nn.Module, state: Any, batch_size: int | None = None) -> None:
    """Restore the policy's ``rollout_state_dict()`` (name -> :meth:`Memory.rollout_state`): all memories or
    none, ``ValueError`` naming a memory that does not fit."""
    memories = named_memories(policy)
    if not isinstance(state, dict):
        raise ValueError(f"expected a dict of memory states, got a {type(state).__name__}")
    if sorted(state) != sorted(memories):
        raise ValueError(f"the policy's memories are {sorted(memories)}, the state has {sorted(state)}")
    for name, memory in memories.items():
        try:
            memory.check_rollout_state(state[name], batch_size)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from e
    for name, memory in memories.items():
        memory.load_rollout_state(state[name], batch_size)
