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
        for _ in range(num_epochs):
            indices = torch.randperm(batch_size, device=self.device)
            for i in range(num_mini_batches):
                idx = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                yield self.get_minibatch_from_indices(flat, idx)

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
                )

    # The reference's spelling, kept for existing code.
    reccurent_mini_batch_generator = recurrent_mini_batch_generator
