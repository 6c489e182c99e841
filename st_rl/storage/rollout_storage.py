"""Preallocated on-policy rollout storage with minibatch generators."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import torch


class MiniBatch(NamedTuple):
    """One PPO minibatch. ``hidden_states`` and ``masks`` are ``None`` for feed-forward policies."""

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
        T, N = self.num_transitions_per_env, self.num_envs
        obs_s = _shape(obs_shape)
        act_s = _shape(actions_shape)
        if obs_s is None or act_s is None:
            raise ValueError("RolloutStorage needs obs_shape and actions_shape.")
        self.obs_shape, self.actions_shape = obs_s, act_s
        self.privileged_obs_shape = _shape(privileged_obs_shape)
        dev = self.device
        self.observations = torch.zeros(T, N, *obs_s, device=dev)
        self.privileged_observations = (
            torch.zeros(T, N, *self.privileged_obs_shape, device=dev)
            if self.privileged_obs_shape is not None
            else None
        )
        self.rewards = torch.zeros(T, N, 1, device=dev)
        self.actions = torch.zeros(T, N, *act_s, device=dev)
        self.dones = torch.zeros(T, N, 1, dtype=torch.uint8, device=dev)
        self.actions_log_prob = torch.zeros(T, N, 1, device=dev)
        self.values = torch.zeros(T, N, 1, device=dev)
        self.returns = torch.zeros(T, N, 1, device=dev)
        self.advantages = torch.zeros(T, N, 1, device=dev)
        self.mu = torch.zeros(T, N, *act_s, device=dev)
        self.sigma = torch.zeros(T, N, *act_s, device=dev)
        self.saved_hidden_states: Any = None
        self.step = 0

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
        self._save_hidden_states(transition.hidden_states)
        self.step += 1

    def _save_hidden_states(self, hidden_states: Any) -> None:
        if hidden_states is None:
            return
        flat = _flatten_hidden(hidden_states)
        if any(h is None for h in flat):
            return
        if self.saved_hidden_states is None:
            self.saved_hidden_states = [
                torch.zeros(self.num_transitions_per_env, *h.shape, device=self.device, dtype=h.dtype)
                for h in flat
            ]
            self._hidden_structure = hidden_states
        for buf, h in zip(self.saved_hidden_states, flat):
            buf[self.step].copy_(h)

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
        for _ in range(num_epochs):
            indices = torch.randperm(batch_size, device=self.device)
            for i in range(num_mini_batches):
                idx = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                yield self.get_minibatch_from_indices(flat, idx)

    def get_minibatch_from_indices(self, flat: dict[str, torch.Tensor], idx: torch.Tensor) -> MiniBatch:
        """Build a minibatch from flattened buffers (override hook for subclasses adding fields)."""
        return MiniBatch(**{k: v[idx] for k, v in flat.items()})


def _flatten_hidden(hidden_states: Any) -> list[Any]:
    if isinstance(hidden_states, torch.Tensor) or hidden_states is None:
        return [hidden_states]
    if isinstance(hidden_states, (tuple, list)):
        out: list[Any] = []
        for h in hidden_states:
            out += _flatten_hidden(h)
        return out
    raise TypeError(f"Unsupported hidden state type {type(hidden_states).__name__}")
