"""On-policy rollout storage with fields registered by name; the reference's storage classes configure it."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from st_rl.utils.buffer import buffer_expand, buffer_from_example, buffer_swap
from st_rl.utils.collections import tree_flatten, tree_unflatten
from st_rl.utils.distributed import global_mean_std
from st_rl.utils.utils import pad_trajectories, trajectory_layout, trajectory_masks

__all__ = [
    "ActionLabelRollout",
    "AmpRolloutStorage",
    "Field",
    "MiniBatch",
    "QueueRolloutStorage",
    "RolloutStorage",
    "SarsaRolloutStorage",
    "Transition",
    "compute_gae",
    "compute_returns",
    "normalize_advantages",
]


@dataclasses.dataclass(frozen=True)
class Field:
    """A ``(T, N, *shape)`` buffer; ``trajectory``: padded in recurrent minibatches; ``minibatch`` / ``transition``:
    its name there (None: the field's; ``""``: absent)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    trajectory: bool = False
    minibatch: str | None = None
    transition: str | None = None


class Transition(types.SimpleNamespace):
    """The values of one environment step by field name (unset ones read as ``None``)."""

    def __getattr__(self, name: str) -> Any:  # only for names not set
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def get(self, name: str, default: Any = None) -> Any:
        value = self.__dict__.get(name)
        return default if value is None else value

    def clear(self) -> None:
        self.__dict__.clear()


class MiniBatch:
    """One minibatch's tensors by name, as attributes (``hidden_states`` / ``masks``: ``None`` if feed-forward)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update({"hidden_states": None, "masks": None, **fields})

    def __getattr__(self, name: str) -> Any:  # only for names not set
        raise AttributeError(
            f"the minibatch has no field {name!r} (registered fields: {sorted(self.__dict__)})"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("MiniBatch is immutable; use _replace(**fields)")

    def __contains__(self, name: str) -> bool:
        return self.__dict__.get(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        value = self.__dict__.get(name)
        return default if value is None else value

    def keys(self) -> list[str]:
        return list(self.__dict__)

    def _replace(self, **fields: Any) -> MiniBatch:
        return MiniBatch(**{**self.__dict__, **fields})


def _required(transition: Transition, source: str, why: str) -> Any:
    value = transition.get(source)
    if value is None:
        raise ValueError(f"transition.{source} is missing: {why}")
    return value


def _shape(shape: int | Sequence[int | None] | None) -> tuple[int, ...] | None:
    shape = [shape] if isinstance(shape, int) else list(shape or [])
    if not shape or shape[0] is None:
        return None
    return tuple(int(s) for s in shape if s is not None)


def compute_returns(storage: RolloutStorage, last_values: torch.Tensor, gamma: float, lam: float) -> None:
    """GAE returns and globally normalised advantages of the stored rollout, written into the storage."""
    storage.untie_buffer_loop()  # ring storages: oldest step first
    rewards, values, dones = (storage.rewards[..., 0], storage.values[..., 0], storage.dones[..., 0])
    returns, advantages = compute_gae(rewards, values, dones, last_values.reshape(-1), gamma, lam)
    storage.returns.copy_(returns.unsqueeze(-1))
    storage.advantages.copy_(normalize_advantages(advantages).unsqueeze(-1))


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE ``(returns, advantages)`` of ``(T, N)`` rewards, values and dones and ``(N,)`` ``last_values``."""
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    gae = torch.zeros_like(last_values)
    next_values = last_values
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * not_done[t] * next_values - values[t]
        gae = delta + gamma * lam * not_done[t] * gae
        advantages[t] = gae
        next_values = values[t]
    return advantages + values, advantages


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero-mean, unit-std advantages over the whole tensor (over all ranks' tensors in a multi-rank run)."""
    mean, std = global_mean_std(advantages)
    return (advantages - mean) / (std + eps)


class RolloutStorage:
    """Buffers of shape ``(T, N, ...)`` on the training device, filled one transition at a time.

    ``privileged_obs_shape`` ``None`` / ``[None]``: ``critic_obs`` is ``obs``. A ``ring`` wraps at ``T``; with
    ``buffer_dilation_ratio > 1`` it grows by one rollout per :meth:`clear` up to ``ratio * T`` steps first.
    ``next_observations``: also keep ``next_obs`` / ``next_critic_obs``. Other ``kwargs`` are ignored (the
    reference passes storage-class-specific keys to every storage).
    """

    def __init__(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        obs_shape: int | Sequence[int],
        privileged_obs_shape: int | Sequence[int | None] | None,
        actions_shape: int | Sequence[int],
        device: str | torch.device = "cpu",
        *,
        fields: dict[str, Field] | None = None,
        buffer_dilation_ratio: float = 1.0,
        ring: bool = False,
        next_observations: bool = False,
        **kwargs: Any,
    ) -> None:
        if next_observations and (ring or buffer_dilation_ratio > 1.0):
            raise ValueError("next_observations cannot be combined with ring or buffer_dilation_ratio > 1")
        self.device = torch.device(device)
        self.num_envs = int(num_envs)
        self.num_transitions_per_env = int(num_transitions_per_env)
        self.collect_length = self.num_transitions_per_env
        self.buffer_dilation_ratio = float(buffer_dilation_ratio)
        self.max_length = max(int(self.buffer_dilation_ratio * self.collect_length), self.collect_length)
        self.ring = bool(ring) or self.buffer_dilation_ratio > 1.0
        self.has_next_observations = bool(next_observations)
        obs_s, act_s = _shape(obs_shape), _shape(actions_shape)
        if obs_s is None or act_s is None:
            raise ValueError("RolloutStorage needs obs_shape and actions_shape.")
        self.obs_shape, self.actions_shape = obs_s, act_s
        self.privileged_obs_shape = _shape(privileged_obs_shape)
        self.fields: dict[str, Field] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self._all_obs: dict[str, torch.Tensor] = {}  # (T + 1, N, ...) buffers with next_observations

        self.register("observations", Field(obs_s, trajectory=True, minibatch="obs"))
        critic_shape = self.privileged_obs_shape
        if critic_shape is not None:
            field = Field(
                critic_shape, trajectory=True, minibatch="critic_obs", transition="critic_observations"
            )
            self.register("privileged_observations", field)
        self.register("actions", Field(act_s))
        self.register("rewards", Field((1,), minibatch=""))
        self.register("dones", Field((1,), torch.uint8, minibatch=""))
        self.register("values", Field((1,)))
        self.register("actions_log_prob", Field((1,), minibatch="old_actions_log_prob"))
        self.register("mu", Field(act_s, minibatch="old_mu", transition="action_mean"))
        self.register("sigma", Field(act_s, minibatch="old_sigma", transition="action_sigma"))
        self.register("returns", Field((1,), transition=""))
        self.register("advantages", Field((1,), transition=""))
        for name, spec in (fields or {}).items():
            self.register(name, spec)
        self.saved_hidden_states: list[torch.Tensor] | None = None
        self._hidden_structure: Any = None
        # what get_minibatch_from_indices() reads while a generator runs
        self._generator_fields: dict[str, tuple[Field, torch.Tensor]] | None = None
        self._padded_trajectories: tuple[Any, ...] | None = None
        self.step = 0

    def register(self, name: str, field: Field) -> None:
        """Allocate a zero ``(T, N, *field.shape)`` buffer ``name`` (also an attribute); idempotent."""
        if name in self.fields:
            if self.fields[name] != field:
                raise ValueError(f"storage field {name!r} is already registered as {self.fields[name]}")
            return
        shape = tuple(int(s) for s in field.shape)
        field = dataclasses.replace(field, shape=shape)
        T, with_next = self.num_transitions_per_env, self.has_next_observations and field.trajectory
        full = torch.zeros(T + with_next, self.num_envs, *shape, dtype=field.dtype, device=self.device)
        if with_next:
            self._all_obs[name] = full
        self.buffers[name] = full[:T] if with_next else full
        self.fields[name] = field

    def has_field(self, name: str) -> bool:
        return name in self.fields

    def __getattr__(self, name: str) -> Any:
        buffers = self.__dict__.get("buffers") or {}
        if name in buffers or name == "privileged_observations":  # None without privileged observations
            return buffers.get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute or field {name!r}")

    @property
    def next_observations(self) -> torch.Tensor:
        return self._next("observations")

    @property
    def next_privileged_observations(self) -> torch.Tensor | None:
        return self._next("privileged_observations") if "privileged_observations" in self.fields else None

    def _next(self, name: str) -> torch.Tensor:
        if not self.has_next_observations:
            raise AttributeError("this storage keeps no next observations (next_observations=False)")
        return self._all_obs[name][1:]

    Transition = Transition

    def add_transitions(self, transition: Transition) -> None:
        """Copy one transition into row ``step`` (every registered field must be set)."""
        if self.step >= self.num_transitions_per_env:
            assert self.ring and self.buffer_full, (
                f"Rollout storage overflow ({self.num_transitions_per_env} steps per env): call clear() after each update"
            )
            self.step = 0  # ring wrap: overwrite the oldest row
        t = self.step
        rows, values = [], []
        for name, field in self.fields.items():
            source = name if field.transition is None else field.transition
            if not source:
                continue
            value = _required(transition, source, f"the storage field {name!r} needs it at every step")
            rows.append(self.buffers[name][t])
            values.append(value.reshape(rows[-1].shape))
        torch._foreach_copy_(rows, values)  # one multi-tensor kernel per dtype on a GPU
        if self.has_next_observations and t == self.num_transitions_per_env - 1:
            self._add_next_observations(transition)
        self._save_hidden_states(transition.hidden_states)
        self.step += 1

    def _add_next_observations(self, transition: Transition) -> None:
        for name, source in (
            ("observations", "next_observations"),
            ("privileged_observations", "next_privileged_observations"),
        ):
            if name in self._all_obs:
                self._all_obs[name][-1].copy_(_required(transition, source, "needed at the last step"))

    def _save_hidden_states(self, hidden_states: Any) -> None:
        flat = tree_flatten(hidden_states)  # [None] for None
        if any(h is None for h in flat):
            return
        if self.saved_hidden_states is None:
            self.saved_hidden_states = list(buffer_from_example(tuple(flat), self.num_transitions_per_env))
            self._hidden_structure = hidden_states
        for buf, h in zip(self.saved_hidden_states, flat):
            buf[self.step].copy_(h.detach())

    def clear(self) -> None:
        """Start the next rollout (a ring keeps its cursor and grows once while shorter than its maximum)."""
        if not self.ring or (self.buffer_full and self.step >= self.num_transitions_per_env):
            self.step = 0
        elif not self.buffer_full:
            self.expand_buffer_once()

    @property
    def buffer_full(self) -> bool:
        return self.num_transitions_per_env >= self.max_length

    def expand_buffer_once(self) -> None:
        """Append ``min(max_length - length, T)`` zero rows to every buffer, hidden states included."""
        extra = min(self.max_length - self.num_transitions_per_env, self.collect_length)
        if extra > 0:
            self._map_buffers(lambda b: buffer_expand(b, extra))
            self.num_transitions_per_env += extra

    def _map_buffers(self, fn: Any) -> None:
        for name, buf in self.buffers.items():
            self.buffers[name] = fn(buf)
        if self.saved_hidden_states is not None:
            self.saved_hidden_states = [fn(h) for h in self.saved_hidden_states]

    def swap_from_cursor(self, buffer: Any, cursor: int | None = None) -> Any:
        """``buffer`` rotated so the row at ``cursor`` (default: the write cursor) comes first."""
        return buffer_swap(buffer, self.step if cursor is None else cursor)

    def untie_buffer_loop(self) -> None:
        """Rotate all buffers oldest-first when writes have wrapped (the cursor is inside the buffer)."""
        cursor = self.step % self.num_transitions_per_env
        if self.ring and self.buffer_full and cursor != 0:
            self._map_buffers(lambda b: self.swap_from_cursor(b, cursor))
            self.step = self.num_transitions_per_env

    compute_returns = compute_returns  # (self, last_values, gamma, lam)

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean trajectory length and mean reward per step (the stored steps are not modified)."""
        self.untie_buffer_loop()
        done = self.dones.clone()
        done[-1] = 1
        ends = done.permute(1, 0, 2).reshape(-1).nonzero()[:, 0]
        trajectory_lengths = torch.diff(ends, prepend=ends.new_tensor([-1]))
        return trajectory_lengths.float().mean(), self.rewards.mean()

    def _minibatch_fields(self) -> dict[str, tuple[Field, torch.Tensor]]:
        out = {f.minibatch or n: (f, self.buffers[n]) for n, f in self.fields.items() if f.minibatch != ""}
        out.setdefault("critic_obs", out["obs"])
        if self.has_next_observations:
            obs_field = self.fields["observations"]
            out["next_obs"] = (obs_field, self.next_observations)
            nxt_critic = self.next_privileged_observations
            out["next_critic_obs"] = (obs_field, self.next_observations if nxt_critic is None else nxt_critic)
        return out

    def mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8, permutations: torch.Tensor | None = None
    ) -> Iterator[MiniBatch]:
        """Yield flat minibatches, reshuffled every epoch (the remainder is dropped); ``permutations``
        (``(num_epochs, batch_size)``) gives each epoch's order instead of a fresh ``randperm``."""
        self.untie_buffer_loop()
        batch_size = self.num_envs * self.num_transitions_per_env
        mini_batch_size = batch_size // num_mini_batches
        if mini_batch_size == 0:
            raise ValueError(f"num_mini_batches={num_mini_batches} exceeds the batch size {batch_size}.")
        self._generator_fields = self._minibatch_fields()
        try:
            for epoch in range(num_epochs):
                indices = (
                    torch.randperm(batch_size, device=self.device)
                    if permutations is None
                    else permutations[epoch]
                )
                for i in range(num_mini_batches):
                    idx = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                    yield self.get_minibatch_from_indices(idx // self.num_envs, idx % self.num_envs)
        finally:
            self._generator_fields = None

    def recurrent_mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8
    ) -> Iterator[MiniBatch]:
        """Minibatches of the trajectories of ``N // num_mini_batches`` envs: trajectory fields zero-padded to T
        (``masks``: real steps), the others ``(T, n, ...)``; ``hidden_states`` at each trajectory's first step."""
        self.untie_buffer_loop()
        n_envs = self.num_envs
        mini_batch_size = n_envs // num_mini_batches
        if mini_batch_size == 0:
            raise ValueError(f"num_mini_batches={num_mini_batches} exceeds the number of envs {n_envs}.")
        index, offsets = trajectory_layout(self.dones)  # the update's one read of the device before its end
        num_traj = offsets[-1]
        fields = self._minibatch_fields()
        # critic_obs may alias obs: each buffer is padded once
        unique = {id(buf): buf for field, buf in fields.values() if field.trajectory}
        padded_by_id = {i: pad_trajectories(buf, index, num_traj) for i, buf in unique.items()}
        padded = {name: padded_by_id[id(buf)] for name, (field, buf) in fields.items() if field.trajectory}
        plain = {name: buf for name, (field, buf) in fields.items() if not field.trajectory}
        traj_masks = pad_trajectories(torch.ones_like(self.dones[..., 0], dtype=torch.bool), index, num_traj)
        dones = self.dones[..., 0].bool()
        first_step = torch.cat([torch.ones_like(dones[:1]), dones[:-1]])
        hidden_per_traj = None
        if self.saved_hidden_states is not None:  # each trajectory's hidden state at its first step
            step_starts = torch.arange(index.shape[1], device=index.device) - index[0]
            starts = index[1].new_zeros(num_traj).scatter_(0, index[1], step_starts)
            hidden_per_traj = [h.permute(2, 0, 1, 3).flatten(0, 1)[starts] for h in self.saved_hidden_states]
        self._padded_trajectories = (padded, plain, traj_masks, hidden_per_traj, index)
        try:
            for _ in range(num_epochs):
                for i in torch.randperm(num_mini_batches).tolist():
                    start, stop = i * mini_batch_size, (i + 1) * mini_batch_size
                    yield self.get_minibatch_from_indices(
                        slice(None),
                        slice(start, stop),
                        padded_B_slice=slice(offsets[start], offsets[stop]),
                        prev_done_mask=first_step,
                    )
        finally:
            self._padded_trajectories = None

    def get_minibatch_from_indices(
        self,
        T_slice: Any,  # noqa: N803 - the reference's argument names
        B_slice: Any,  # noqa: N803
        padded_B_slice: slice | None = None,  # noqa: N803
        prev_done_mask: torch.Tensor | None = None,
    ) -> MiniBatch:
        """The minibatch at ``[T_slice, B_slice]`` (recurrent: also ``padded_B_slice`` of the padded tensors)."""
        if padded_B_slice is None:
            fields = self._generator_fields or self._minibatch_fields()
            return MiniBatch(**{k: buf[T_slice, B_slice] for k, (_, buf) in fields.items()})
        if self._padded_trajectories is None:
            raise RuntimeError("padded_B_slice is only valid inside recurrent_mini_batch_generator()")
        padded, plain, traj_masks, hidden_per_traj, index = self._padded_trajectories
        hidden = None
        if hidden_per_traj is not None:
            leaves = [h[padded_B_slice].transpose(1, 0).contiguous() for h in hidden_per_traj]
            hidden = tree_unflatten(self._hidden_structure, leaves)
        return MiniBatch(
            hidden_states=hidden,
            masks=self._minibatch_masks(traj_masks, index, T_slice, B_slice, padded_B_slice),
            **{k: v[T_slice, padded_B_slice] for k, v in padded.items()},
            **{k: v[T_slice, B_slice] for k, v in plain.items()},
        )

    def _minibatch_masks(
        self, masks: torch.Tensor, index: torch.Tensor, t_slice: Any, env_slice: Any, traj_slice: slice
    ) -> torch.Tensor:
        """The minibatch's masks (:class:`TrajectoryMasks` for the whole trajectories of a range of envs)."""
        masks = masks[t_slice, traj_slice]
        whole = t_slice == slice(None) and isinstance(env_slice, slice) and env_slice.step in (None, 1)
        if not whole or traj_slice.start is None:
            return masks
        steps = masks.shape[0]
        start, stop, _ = env_slice.indices(self.num_envs)
        sub = index[:, start * steps : stop * steps]
        return trajectory_masks(masks, torch.stack([sub[0], sub[1] - traj_slice.start]))

    reccurent_mini_batch_generator = recurrent_mini_batch_generator  # reference name (st_rl/compat.py)


class QueueRolloutStorage(RolloutStorage):
    """A ring :class:`RolloutStorage`: ``clear()`` keeps the collected steps (see ``buffer_dilation_ratio``)."""

    def __init__(self, num_envs: int, num_transitions_per_env: int, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("ring", True)
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)


class ActionLabelRollout(QueueRolloutStorage):
    """:class:`QueueRolloutStorage` that also records ``action_labels`` (e.g. a teacher's actions)."""

    def __init__(self, num_envs: int, num_transitions_per_env: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)
        self.register("action_labels", Field(self.actions_shape))


class SarsaRolloutStorage(RolloutStorage):
    """:class:`RolloutStorage` with ``next_obs`` / ``next_critic_obs`` (after a done: the next episode's first)."""

    def __init__(self, num_envs: int, num_transitions_per_env: int, *args: Any, **kwargs: Any) -> None:
        kwargs["next_observations"] = True
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)


class AmpRolloutStorage(ActionLabelRollout):
    """:class:`ActionLabelRollout` with the AMP windows ``ref_obs`` / ``ref_motion`` of shape ``amp_obs_shape``."""

    def __init__(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        *args: Any,
        amp_obs_shape: int | Sequence[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)
        shape = _shape(amp_obs_shape)
        if shape is None:
            raise ValueError("AmpRolloutStorage needs amp_obs_shape, e.g. (frames * style_features,)")
        self.amp_obs_shape = shape
        self.register("ref_obs", Field(shape))
        self.register("ref_motion", Field(shape))
