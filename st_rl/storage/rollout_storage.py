"""Preallocated on-policy rollout storage with minibatch generators."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import torch


class MiniBatch(NamedTuple):
    """One PPO minibatch. ``hidden_states`` and ``masks`` are ``None`` for feed-forward policies.

    Storages that record more than PPO needs fill the optional fields: ``action_labels``
    (:class:`ActionLabelRollout`), ``next_obs`` / ``next_critic_obs`` (:class:`SarsaRolloutStorage`),
    ``ref_obs`` / ``ref_motion`` (AMP storage). In recurrent minibatches observation-like fields are padded
    trajectories ``(T, n_traj, ...)``; the others are ``(T, n_envs, ...)``.
    """

    obs: torch.Tensor
    critic_obs: torch.Tensor
    actions: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    old_actions_log_prob: torch.Tensor
    old_mu: torch.Tensor
    old_sigma: torch.Tensor
    hidden_states: Any = None
    masks: torch.Tensor | None = None
    action_labels: torch.Tensor | None = None
    next_obs: torch.Tensor | None = None
    next_critic_obs: torch.Tensor | None = None
    ref_obs: torch.Tensor | None = None
    ref_motion: torch.Tensor | None = None


def _shape(shape: int | Sequence[int | None] | None) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, int):
        return (shape,)
    shape = list(shape)
    if len(shape) == 0 or shape[0] is None:
        return None
    return tuple(int(s) for s in shape if s is not None)


class RolloutStorage:
    """Buffers of shape ``(T, N, ...)`` on the training device, filled one transition at a time.

    Args:
        num_envs: N.
        num_transitions_per_env: T.
        obs_shape: actor observation shape, e.g. ``[num_obs]``.
        privileged_obs_shape: critic observation shape; ``[None]`` or ``None`` means "no separate critic
            observations" (the critic buffer then aliases the actor one).
        actions_shape: e.g. ``[num_actions]``.
        device: where the buffers live.
        **kwargs: tolerated for subclasses (e.g. ``amp_obs_shape``).
    """

    # Time-major (T, N, ...) buffers, allocated in __init__ through _alloc().
    observations: torch.Tensor
    privileged_observations: torch.Tensor | None
    rewards: torch.Tensor
    actions: torch.Tensor
    dones: torch.Tensor
    actions_log_prob: torch.Tensor
    values: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    mu: torch.Tensor
    sigma: torch.Tensor

    class Transition:
        """The fields of one environment step, filled by the algorithm."""

        def __init__(self) -> None:
            self.observations: torch.Tensor | None = None
            self.critic_observations: torch.Tensor | None = None
            self.actions: torch.Tensor | None = None
            self.rewards: torch.Tensor | None = None
            self.dones: torch.Tensor | None = None
            self.values: torch.Tensor | None = None
            self.actions_log_prob: torch.Tensor | None = None
            self.action_mean: torch.Tensor | None = None
            self.action_sigma: torch.Tensor | None = None
            self.hidden_states: Any = None

        def clear(self) -> None:
            self.__init__()

    def __init__(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        obs_shape: int | Sequence[int],
        privileged_obs_shape: int | Sequence[int | None] | None,
        actions_shape: int | Sequence[int],
        device: str | torch.device = "cpu",
        **kwargs: Any,
    ) -> None:
        self.device = torch.device(device)
        self.num_envs = int(num_envs)
        self.num_transitions_per_env = int(num_transitions_per_env)
        obs_s = _shape(obs_shape)
        act_s = _shape(actions_shape)
        if obs_s is None or act_s is None:
            raise ValueError("RolloutStorage needs obs_shape and actions_shape.")
        self.obs_shape, self.actions_shape = obs_s, act_s
        self.privileged_obs_shape = _shape(privileged_obs_shape)
        # Names of the time-major (T, N, ...) buffers; subclasses register more. Growing and rotating a
        # storage (QueueRolloutStorage) acts on exactly these plus the saved hidden states.
        self._buffer_names: list[str] = []
        self._alloc_observation_buffers(obs_s)
        self._alloc("rewards", (1,))
        self._alloc("actions", act_s)
        self._alloc("dones", (1,), torch.uint8)
        self._alloc("actions_log_prob", (1,))
        self._alloc("values", (1,))
        self._alloc("returns", (1,))
        self._alloc("advantages", (1,))
        self._alloc("mu", act_s)
        self._alloc("sigma", act_s)
        self.saved_hidden_states: Any = None
        self.step = 0

    def _alloc(self, name: str, shape: Sequence[int], dtype: torch.dtype = torch.float32) -> None:
        """Allocate a zero buffer ``(T, N, *shape)`` as attribute ``name`` and register it."""
        buf = torch.zeros(
            self.num_transitions_per_env, self.num_envs, *shape, dtype=dtype, device=self.device
        )
        setattr(self, name, buf)
        if name not in self._buffer_names:
            self._buffer_names.append(name)

    def _alloc_observation_buffers(self, obs_shape: tuple[int, ...]) -> None:
        self._alloc("observations", obs_shape)
        self.privileged_observations = None
        if self.privileged_obs_shape is not None:
            self._alloc("privileged_observations", self.privileged_obs_shape)

    # ------------------------------------------------------------------ filling
    def add_transitions(self, transition: RolloutStorage.Transition) -> None:
        """Copy one transition into row ``step``.

        Raises:
            AssertionError: when the storage is full (call ``clear()`` after each update).
        """
        assert self.step < self.num_transitions_per_env, (
            f"Rollout storage overflow: it holds {self.num_transitions_per_env} steps per env; call clear() "
            "after each update."
        )
        t = self.step
        self.observations[t].copy_(transition.observations)  # type: ignore[arg-type]
        if self.privileged_observations is not None:
            self.privileged_observations[t].copy_(transition.critic_observations)  # type: ignore[arg-type]
        self.actions[t].copy_(transition.actions)  # type: ignore[arg-type]
        self.rewards[t].copy_(transition.rewards.view(-1, 1))  # type: ignore[union-attr]
        self.dones[t].copy_(transition.dones.view(-1, 1))  # type: ignore[union-attr]
        self.values[t].copy_(transition.values.view(-1, 1))  # type: ignore[union-attr]
        self.actions_log_prob[t].copy_(transition.actions_log_prob.view(-1, 1))  # type: ignore[union-attr]
        self.mu[t].copy_(transition.action_mean)  # type: ignore[arg-type]
        self.sigma[t].copy_(transition.action_sigma)  # type: ignore[arg-type]
        self._add_extra_fields(transition, t)
        self._save_hidden_states(transition.hidden_states)
        self.step += 1

    def _add_extra_fields(self, transition: Any, t: int) -> None:
        """Copy subclass-specific transition fields into row ``t`` (hook)."""

    def _save_hidden_states(self, hidden_states: Any) -> None:
        if hidden_states is None:
            return
        from st_rl.utils.collections import tree_flatten

        flat = tree_flatten(hidden_states)
        if any(h is None for h in flat):
            return
        if self.saved_hidden_states is None:
            self.saved_hidden_states = [
                torch.zeros(self.num_transitions_per_env, *h.shape, device=self.device, dtype=h.dtype)
                for h in flat
            ]
            self._hidden_structure = hidden_states
        for buf, h in zip(self.saved_hidden_states, flat):
            buf[self.step].copy_(h.detach())

    def clear(self) -> None:
        """Start filling from row 0 again."""
        self.step = 0

    # ------------------------------------------------------------------ returns
    def compute_returns(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        """GAE returns and globally normalised advantages."""
        # Imported here: st_rl.algorithms imports this module.
        from st_rl.algorithms.functional import compute_gae, normalize_advantages

        returns, advantages = compute_gae(
            self.rewards[..., 0], self.values[..., 0], self.dones[..., 0], last_values.reshape(-1), gamma, lam
        )
        self.returns.copy_(returns.unsqueeze(-1))
        self.advantages.copy_(normalize_advantages(advantages).unsqueeze(-1))

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean trajectory length and mean reward per step (the storage is not modified)."""
        done = self.dones.clone()
        done[-1] = 1
        flat = done.permute(1, 0, 2).reshape(-1)
        done_indices = torch.cat(
            (flat.new_tensor([-1], dtype=torch.int64), flat.nonzero(as_tuple=False)[:, 0])
        )
        trajectory_lengths = done_indices[1:] - done_indices[:-1]
        return trajectory_lengths.float().mean(), self.rewards.mean()

    # ------------------------------------------------------------------ sampling
    def _critic_buffer(self) -> torch.Tensor:
        return self.privileged_observations if self.privileged_observations is not None else self.observations

    def mini_batch_generator(self, num_mini_batches: int, num_epochs: int = 8) -> Iterator[MiniBatch]:
        """Yield flat minibatches; the sample order is reshuffled every epoch, the remainder is dropped."""
        batch_size = self.num_envs * self.num_transitions_per_env
        mini_batch_size = batch_size // num_mini_batches
        if mini_batch_size == 0:
            raise ValueError(f"num_mini_batches={num_mini_batches} exceeds the batch size {batch_size}.")
        flat = {
            "obs": self.observations.flatten(0, 1),
            "critic_obs": self._critic_buffer().flatten(0, 1),
            "actions": self.actions.flatten(0, 1),
            "values": self.values.flatten(0, 1),
            "returns": self.returns.flatten(0, 1),
            "advantages": self.advantages.flatten(0, 1),
            "old_actions_log_prob": self.actions_log_prob.flatten(0, 1),
            "old_mu": self.mu.flatten(0, 1),
            "old_sigma": self.sigma.flatten(0, 1),
        }
        flat.update({k: v.flatten(0, 1) for k, v in self._extra_minibatch_fields().items()})
        for _ in range(num_epochs):
            indices = torch.randperm(batch_size, device=self.device)
            for i in range(num_mini_batches):
                idx = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                yield self.get_minibatch_from_indices(flat, idx)

    def _extra_minibatch_fields(self) -> dict[str, torch.Tensor]:
        """Subclass fields that go into minibatches as they are (``(T, N, ...)``, not padded)."""
        return {}

    def _extra_padded_fields(self) -> dict[str, torch.Tensor]:
        """Subclass observation-like fields that recurrent minibatches pad into trajectories."""
        return {}

    def get_minibatch_from_indices(self, flat: dict[str, torch.Tensor], idx: torch.Tensor) -> MiniBatch:
        """Build a minibatch from flattened buffers (override hook for subclasses adding fields)."""
        return MiniBatch(**{k: v[idx] for k, v in flat.items()})

    def recurrent_mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8
    ) -> Iterator[MiniBatch]:
        """Yield minibatches of whole trajectories for recurrent policies.

        Each minibatch covers ``N // num_mini_batches`` envs. Observations are split at dones into
        trajectories and zero-padded to length T (``masks`` marks real steps); the other fields stay (T, n, ...)
        and are matched by unpadding the policy outputs. ``hidden_states`` are the states saved at each
        trajectory's first step, shaped (layers, n_traj, H). The minibatch order is reshuffled every epoch.
        """
        from st_rl.utils.utils import split_and_pad_trajectories

        n_envs = self.num_envs
        mini_batch_size = n_envs // num_mini_batches
        if mini_batch_size == 0:
            raise ValueError(f"num_mini_batches={num_mini_batches} exceeds the number of envs {n_envs}.")
        padded_obs, traj_masks = split_and_pad_trajectories(self.observations, self.dones)
        if self.privileged_observations is not None:
            padded_critic, _ = split_and_pad_trajectories(self.privileged_observations, self.dones)
        else:
            padded_critic = padded_obs
        padded_extra = {
            k: split_and_pad_trajectories(v, self.dones)[0] for k, v in self._extra_padded_fields().items()
        }
        plain_extra = self._extra_minibatch_fields()
        dones = self.dones[..., 0].bool()
        first_step = torch.zeros_like(dones)
        first_step[0] = True
        first_step[1:] = dones[:-1]
        # Trajectory j of the padded tensors belongs to env k for cum[k] <= j < cum[k + 1] (env-major order).
        cum = torch.cat([first_step.new_zeros(1, dtype=torch.long), first_step.sum(0).cumsum(0)]).tolist()
        hidden_per_traj = None
        if self.saved_hidden_states is not None:
            hidden_per_traj = [
                h.permute(2, 0, 1, 3)[first_step.transpose(0, 1)] for h in self.saved_hidden_states
            ]
        for _ in range(num_epochs):
            for i in torch.randperm(num_mini_batches).tolist():
                start, stop = i * mini_batch_size, (i + 1) * mini_batch_size
                t0, t1 = cum[start], cum[stop]
                hidden = None
                if hidden_per_traj is not None:
                    from st_rl.utils.collections import tree_unflatten

                    leaves = [h[t0:t1].transpose(1, 0).contiguous() for h in hidden_per_traj]
                    hidden = tree_unflatten(self._hidden_structure, leaves)
                yield MiniBatch(
                    obs=padded_obs[:, t0:t1],
                    critic_obs=padded_critic[:, t0:t1],
                    actions=self.actions[:, start:stop],
                    values=self.values[:, start:stop],
                    advantages=self.advantages[:, start:stop],
                    returns=self.returns[:, start:stop],
                    old_actions_log_prob=self.actions_log_prob[:, start:stop],
                    old_mu=self.mu[:, start:stop],
                    old_sigma=self.sigma[:, start:stop],
                    hidden_states=hidden,
                    masks=traj_masks[:, t0:t1],
                    **{k: v[:, t0:t1] for k, v in padded_extra.items()},
                    **{k: v[:, start:stop] for k, v in plain_extra.items()},
                )

    # The reference's spelling, kept for existing code.
    reccurent_mini_batch_generator = recurrent_mini_batch_generator


class QueueRolloutStorage(RolloutStorage):
    """A rollout storage that keeps the last ``buffer_dilation_ratio * T`` steps per env (a ring buffer).

    Each iteration still collects T steps. ``clear()`` keeps the write cursor: while the buffer is shorter
    than ``ratio * T`` it grows once by ``min(ratio * T - length, T)`` rows (``expand_buffer_once``), so the
    next iteration appends after the previous one; once the buffer has its full length, writes wrap around
    and overwrite the oldest rows. Before returns are computed or minibatches drawn the ring is "untied"
    (:meth:`untie_buffer_loop`): rows are rotated oldest-first, so GAE runs forward in time and recurrent
    trajectories are contiguous. With ``ratio == 1`` it behaves like :class:`RolloutStorage`.

    Older rows keep the values and log-probabilities of the policy that collected them, so with ratio > 1
    PPO terms are off-policy; the dilation is meant for supervised (distillation) losses.

    Args:
        buffer_dilation_ratio: maximum stored length as a multiple of T (>= 1).
        (other arguments as :class:`RolloutStorage`)
    """

    def __init__(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        *args: Any,
        buffer_dilation_ratio: float = 1.0,
        **kwargs: Any,
    ) -> None:
        if buffer_dilation_ratio < 1.0:
            raise ValueError(f"buffer_dilation_ratio must be >= 1, got {buffer_dilation_ratio}")
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)
        self.buffer_dilation_ratio = float(buffer_dilation_ratio)
        self.collect_length = int(num_transitions_per_env)
        self.max_length = max(int(self.buffer_dilation_ratio * self.collect_length), self.collect_length)

    @property
    def buffer_full(self) -> bool:
        """Whether the buffer has reached its maximum length."""
        return self.num_transitions_per_env >= self.max_length

    def add_transitions(self, transition: RolloutStorage.Transition) -> None:
        if self.step >= self.num_transitions_per_env and self.buffer_full:
            self.step = 0  # ring wrap: overwrite the oldest row
        super().add_transitions(transition)

    def clear(self) -> None:
        """Keep the cursor; grow the buffer once if it is not at full length yet."""
        if not self.buffer_full:
            self.expand_buffer_once()
        elif self.step >= self.num_transitions_per_env:
            self.step = 0

    def expand_buffer_once(self) -> None:
        """Append ``min(max_length - length, T)`` zero rows to every buffer, hidden states included."""
        from st_rl.utils.buffer import buffer_expand

        extra = min(self.max_length - self.num_transitions_per_env, self.collect_length)
        if extra <= 0:
            return
        for name in self._buffer_names:
            setattr(self, name, buffer_expand(getattr(self, name), extra))
        if self.saved_hidden_states is not None:
            self.saved_hidden_states = [buffer_expand(h, extra) for h in self.saved_hidden_states]
        self.num_transitions_per_env += extra

    def swap_from_cursor(self, buffer: Any, cursor: int | None = None) -> Any:
        """``buffer`` rotated so the row at ``cursor`` (default: the write cursor) comes first."""
        from st_rl.utils.buffer import buffer_swap

        return buffer_swap(buffer, self.step if cursor is None else cursor)

    def untie_buffer_loop(self) -> None:
        """Rotate all buffers oldest-first when writes have wrapped (the cursor is inside the buffer)."""
        cursor = self.step % self.num_transitions_per_env
        if not self.buffer_full or cursor == 0:
            return
        for name in self._buffer_names:
            setattr(self, name, self.swap_from_cursor(getattr(self, name), cursor))
        if self.saved_hidden_states is not None:
            self.saved_hidden_states = [self.swap_from_cursor(h, cursor) for h in self.saved_hidden_states]
        self.step = self.num_transitions_per_env

    def compute_returns(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        self.untie_buffer_loop()
        super().compute_returns(last_values, gamma, lam)

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.untie_buffer_loop()
        return super().get_statistics()

    def mini_batch_generator(self, num_mini_batches: int, num_epochs: int = 8) -> Iterator[MiniBatch]:
        self.untie_buffer_loop()
        return super().mini_batch_generator(num_mini_batches, num_epochs)

    def recurrent_mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8
    ) -> Iterator[MiniBatch]:
        self.untie_buffer_loop()
        return super().recurrent_mini_batch_generator(num_mini_batches, num_epochs)

    reccurent_mini_batch_generator = recurrent_mini_batch_generator


class ActionLabelRollout(QueueRolloutStorage):
    """:class:`QueueRolloutStorage` that also records ``action_labels`` (e.g. a teacher's actions).

    ``Transition.action_labels`` is stored per step and returned as ``MiniBatch.action_labels``, kept through
    growth and ring rotation.
    """

    action_labels: torch.Tensor

    class Transition(RolloutStorage.Transition):
        def __init__(self) -> None:
            super().__init__()
            self.action_labels: torch.Tensor | None = None

    def __init__(self, num_envs: int, num_transitions_per_env: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(num_envs, num_transitions_per_env, *args, **kwargs)
        self._alloc("action_labels", self.actions_shape)

    def _add_extra_fields(self, transition: Any, t: int) -> None:
        super()._add_extra_fields(transition, t)
        labels = getattr(transition, "action_labels", None)
        if labels is None:
            raise ValueError("ActionLabelRollout needs transition.action_labels at every step")
        self.action_labels[t].copy_(labels)

    def _extra_minibatch_fields(self) -> dict[str, torch.Tensor]:
        return {**super()._extra_minibatch_fields(), "action_labels": self.action_labels}


class SarsaRolloutStorage(RolloutStorage):
    """:class:`RolloutStorage` that also yields the next observations (``MiniBatch.next_obs`` /
    ``next_critic_obs``) for SARSA-style or model-learning losses.

    Observations live in one ``(T + 1, N, ...)`` buffer: ``observations`` is rows ``[:-1]`` and
    ``next_observations`` rows ``[1:]``. The next observation of step t is therefore the observation of step
    t + 1, which for an env that finished at step t is the first observation of its new episode (mask with
    ``dones``). The transition's ``next_observations`` / ``next_privileged_observations`` are copied only at
    the last step (they fill row T). In recurrent minibatches the next observations are padded like the
    observations.
    """

    class Transition(RolloutStorage.Transition):
        def __init__(self) -> None:
            super().__init__()
            self.next_observations: torch.Tensor | None = None
            self.next_privileged_observations: torch.Tensor | None = None

    def _alloc_observation_buffers(self, obs_shape: tuple[int, ...]) -> None:
        T, N, dev = self.num_transitions_per_env, self.num_envs, self.device
        self.all_observations = torch.zeros(T + 1, N, *obs_shape, device=dev)
        self.all_privileged_observations: torch.Tensor | None = None
        if self.privileged_obs_shape is not None:
            self.all_privileged_observations = torch.zeros(T + 1, N, *self.privileged_obs_shape, device=dev)

    @property
    def observations(self) -> torch.Tensor:  # type: ignore[override]
        return self.all_observations[:-1]

    @observations.setter
    def observations(self, value: torch.Tensor) -> None:
        self.all_observations[:-1] = value

    @property
    def next_observations(self) -> torch.Tensor:
        return self.all_observations[1:]

    @property
    def privileged_observations(self) -> torch.Tensor | None:  # type: ignore[override]
        buf = self.all_privileged_observations
        return None if buf is None else buf[:-1]

    @privileged_observations.setter
    def privileged_observations(self, value: torch.Tensor | None) -> None:
        if value is not None and self.all_privileged_observations is not None:
            self.all_privileged_observations[:-1] = value

    @property
    def next_privileged_observations(self) -> torch.Tensor | None:
        buf = self.all_privileged_observations
        return None if buf is None else buf[1:]

    def _add_extra_fields(self, transition: Any, t: int) -> None:
        super()._add_extra_fields(transition, t)
        if t != self.num_transitions_per_env - 1:
            return
        nxt = getattr(transition, "next_observations", None)
        if nxt is None:
            raise ValueError(
                "SarsaRolloutStorage needs transition.next_observations at the last step of the rollout"
            )
        self.all_observations[-1].copy_(nxt)
        if self.all_privileged_observations is not None:
            nxt_priv = getattr(transition, "next_privileged_observations", None)
            if nxt_priv is None:
                raise ValueError(
                    "SarsaRolloutStorage has a critic buffer and needs transition.next_privileged_observations "
                    "at the last step of the rollout"
                )
            self.all_privileged_observations[-1].copy_(nxt_priv)

    def _next_critic_buffer(self) -> torch.Tensor:
        nxt = self.next_privileged_observations
        return nxt if nxt is not None else self.next_observations

    def mini_batch_generator(self, num_mini_batches: int, num_epochs: int = 8) -> Iterator[MiniBatch]:
        # Feed-forward minibatches take next observations as plain (T, N) fields.
        self._sarsa_padded = False
        return super().mini_batch_generator(num_mini_batches, num_epochs)

    def recurrent_mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8
    ) -> Iterator[MiniBatch]:
        self._sarsa_padded = True
        return super().recurrent_mini_batch_generator(num_mini_batches, num_epochs)

    reccurent_mini_batch_generator = recurrent_mini_batch_generator

    def _extra_minibatch_fields(self) -> dict[str, torch.Tensor]:
        fields = super()._extra_minibatch_fields()
        if not getattr(self, "_sarsa_padded", False):
            fields.update(next_obs=self.next_observations, next_critic_obs=self._next_critic_buffer())
        return fields

    def _extra_padded_fields(self) -> dict[str, torch.Tensor]:
        fields = super()._extra_padded_fields()
        if getattr(self, "_sarsa_padded", False):
            fields.update(next_obs=self.next_observations, next_critic_obs=self._next_critic_buffer())
        return fields


class AmpRolloutStorage(ActionLabelRollout):
    """:class:`ActionLabelRollout` that also records AMP windows: ``ref_obs`` (the policy's style-feature
    window after each step) and ``ref_motion`` (a reference-motion window), both raw (unnormalised), returned
    as ``MiniBatch.ref_obs`` / ``MiniBatch.ref_motion``. Extending the action-label storage lets ATPPO keep the
    teacher's labels and the buffer dilation.

    Args:
        amp_obs_shape: shape of one flattened window, e.g. ``(H * F,)``.
        (other arguments as :class:`ActionLabelRollout`)
    """

    ref_obs: torch.Tensor
    ref_motion: torch.Tensor

    class Transition(ActionLabelRollout.Transition):
        def __init__(self) -> None:
            super().__init__()
            self.ref_obs: torch.Tensor | None = None
            self.ref_motion: torch.Tensor | None = None

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
        self._alloc("ref_obs", shape)
        self._alloc("ref_motion", shape)

    def _add_extra_fields(self, transition: Any, t: int) -> None:
        super()._add_extra_fields(transition, t)
        for name in ("ref_obs", "ref_motion"):
            value = getattr(transition, name, None)
            if value is None:
                raise ValueError(f"AmpRolloutStorage needs transition.{name} at every step")
            getattr(self, name)[t].copy_(value.reshape(self.num_envs, *self.amp_obs_shape))

    def _extra_minibatch_fields(self) -> dict[str, torch.Tensor]:
        return {**super()._extra_minibatch_fields(), "ref_obs": self.ref_obs, "ref_motion": self.ref_motion}
