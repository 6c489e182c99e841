"""The rollout side of PPO: storage, acting, recording transitions, returns."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn

import st_rl.algorithms.functional as F
from st_rl.algorithms.cuda_graph import GraphedRollout
from st_rl.algorithms.extensions.base import Extension, StorageLayout
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import RolloutStorage, Transition, compute_returns
from st_rl.utils.precision import CPU_BF16_MIN_MACS, autocast, linear_macs, measure_precision

__all__ = ["RolloutCollector"]


_MEASURED: dict[tuple[Any, ...], tuple[str, str]] = {}  # precision="auto" timings on GPUs, for this process


class RolloutCollector:
    """The rollout half of :class:`~st_rl.algorithms.ppo.PPO`: the policy acts on raw observations, extensions
    see every step, the returns are computed after the last."""

    actor_critic: Any
    device: torch.device
    precision: str
    precision_request: str
    num_mini_batches: int
    gamma: float
    lam: float
    use_ppo_loss: bool
    buffer_dilation_ratio: float
    storage: RolloutStorage | None
    transition: Transition
    compiled: bool
    _compile_clock: float | None
    extensions: dict[str, Extension]
    graphed_rollout: GraphedRollout

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The mixed-precision context of the policy's forward passes."""
        return autocast(self.device, self.precision)

    @property
    def obs_normalizer(self) -> nn.Module:
        """The policy's actor observation normaliser (identity when off); setting it switches normalisation."""
        return self.actor_critic.actor_obs_normalizer

    @obs_normalizer.setter
    def obs_normalizer(self, module: nn.Module) -> None:
        self.actor_critic.actor_obs_normalizer = module
        self.actor_critic.actor_obs_normalization = isinstance(module, EmpiricalNormalization)

    @property
    def critic_obs_normalizer(self) -> nn.Module:
        """The policy's critic observation normaliser (identity when off); setting it switches normalisation."""
        return self.actor_critic.critic_obs_normalizer

    @critic_obs_normalizer.setter
    def critic_obs_normalizer(self, module: nn.Module) -> None:
        self.actor_critic.critic_obs_normalizer = module
        self.actor_critic.critic_obs_normalization = isinstance(module, EmpiricalNormalization)

    def init_storage(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        actor_obs_shape: Sequence[int],
        critic_obs_shape: Sequence[int | None],
        action_shape: Sequence[int],
        **kwargs: Any,
    ) -> None:
        """Allocate the rollout storage with PPO's fields and every extension's."""
        storage = RolloutStorage(
            num_envs,
            num_transitions_per_env,
            actor_obs_shape,
            critic_obs_shape,
            action_shape,
            self.device,
            buffer_dilation_ratio=self.buffer_dilation_ratio,
            ring=self.buffer_dilation_ratio > 1.0,
            **kwargs,
        )
        layout = StorageLayout(
            storage.num_envs,
            storage.num_transitions_per_env,
            storage.obs_shape,
            storage.privileged_obs_shape,
            storage.actions_shape,
            dict(kwargs),
        )
        for ext in self.extensions.values():
            for name, field in ext.storage_fields(layout).items():
                storage.register(name, field)
        self.transition = Transition()
        self.storage = storage
        if self.precision_request == "auto" and self.precision == "bf16" and not self.compiled:
            batch = storage.num_envs * storage.num_transitions_per_env // max(self.num_mini_batches, 1)
            self.precision = self._measure_precision(batch, storage.obs_shape, storage.privileged_obs_shape)

    def _measure_precision(
        self, batch: int, obs_shape: Sequence[int], critic_obs_shape: Sequence[int] | None
    ) -> str:
        """``precision="auto"`` on bf16 hardware: bf16 only where it is faster for this policy and minibatch.
        On a CPU, from the policy's multiply-adds per minibatch (:data:`CPU_BF16_MIN_MACS`, measured); on a
        GPU, by timing both on a copy of the policy (kept for the process). The decision is printed."""
        policy = self.actor_critic
        if self.device.type == "cpu":
            macs = batch * linear_macs(policy)
            choice = "bf16" if macs >= CPU_BF16_MIN_MACS else "fp32"
            found = f"{macs / 1e6:.0f}M multiply-adds per pass, bf16 from {CPU_BF16_MIN_MACS / 1e6:.0f}M"
        else:
            shapes = [tuple(p.shape) for p in policy.parameters()]
            key = (str(self.device), type(policy).__name__, batch, *shapes)
            if key not in _MEASURED:
                _MEASURED[key] = self._time_precisions(batch, obs_shape, critic_obs_shape)
            choice, found = _MEASURED[key]
        print(f"[st_rl] precision auto: {choice} ({found}; minibatch of {batch})", flush=True)
        return choice

    def _time_precisions(
        self, batch: int, obs_shape: Sequence[int], critic_obs_shape: Sequence[int] | None
    ) -> tuple[str, str]:
        probe = copy.deepcopy(self.actor_critic).train()
        obs = torch.randn(batch, *obs_shape, device=self.device)
        critic_obs = (
            obs if critic_obs_shape is None else torch.randn(batch, *critic_obs_shape, device=self.device)
        )

        def step() -> None:
            if probe.is_recurrent:
                probe.detach_hidden_states()
            probe.act(obs)
            values = probe.evaluate(critic_obs)
            (probe.action_mean.float().sum() + values.float().sum()).backward()

        try:
            choice, fp32, bf16 = measure_precision(step, self.device)
        except (RuntimeError, TypeError, ValueError) as exc:  # a policy that random inputs do not fit
            return self.precision, f"not timed ({type(exc).__name__}: {exc})"
        return choice, f"a forward and backward pass: fp32 {fp32 * 1e3:.1f} ms, bf16 {bf16 * 1e3:.1f} ms"

    def _record_policy_step(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """Act on raw observations and record the values, distribution and inputs; return the actions."""
        policy, t = self.actor_critic, self.transition
        if policy.is_recurrent:
            t.hidden_states = policy.get_hidden_states()
        actions, t.values, t.action_mean, t.action_sigma = self._policy_outputs(obs, critic_obs)
        t.observations, t.critic_observations = obs, critic_obs
        return actions

    def _policy_outputs(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Sampled actions, values, action mean and std for raw observations."""
        policy = self.actor_critic
        with self.autocast():
            actions = policy.act(obs).detach()
            values = policy.evaluate(critic_obs).detach()
        return actions, values, policy.action_mean.detach(), policy.action_std.detach()

    def _sampled_step(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """:meth:`_policy_outputs` and the actions' log-probability: the rollout's policy step as one function."""
        actions, values, mean, std = self._policy_outputs(obs, critic_obs)
        return actions, values, mean, std, self.actor_critic.get_actions_log_prob(actions).detach()

    def _store_step(self, rewards: torch.Tensor, dones: torch.Tensor, infos: dict[str, Any]) -> None:
        """Bootstrap time-outs, store the transition, reset ended episodes."""
        assert self.storage is not None, "call init_storage() before collecting data"
        t = self.transition
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            rewards = F.bootstrap_time_outs(rewards, t.values, time_outs.to(self.device), self.gamma)
        t.rewards, t.dones = rewards, dones
        self.storage.add_transitions(t)
        t.clear()
        self.actor_critic.reset(dones)

    def act(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for raw observations and record what the update needs."""
        if self.compiled and self._compile_clock is None:
            self._compile_clock = time.perf_counter()
        t = self.transition
        if self.graphed_rollout.enabled(self):
            out = self.graphed_rollout.policy_step(self, self._sampled_step, obs, critic_obs)
            t.actions, t.values, t.action_mean, t.action_sigma, t.actions_log_prob = out
            t.observations, t.critic_observations = obs, critic_obs
            return t.actions
        t.actions = actions = self._record_policy_step(obs, critic_obs)
        for ext in self.extensions.values():
            replaced = ext.on_act(obs, critic_obs, t)
            if replaced is not None:
                t.actions = actions = replaced
        # Executed actions (a teacher's, say) are scored under the policy's rollout distribution.
        t.actions_log_prob = self.actor_critic.get_actions_log_prob(actions).detach()
        return actions

    def process_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        infos: dict[str, Any],
        next_obs: torch.Tensor | None = None,
        next_critic_obs: torch.Tensor | None = None,
    ) -> None:
        """Store the step (extensions may change the rewards) and update the observation statistics."""
        for ext in self.extensions.values():
            rewards = ext.on_env_step(rewards, dones, infos, self.transition, next_obs, next_critic_obs)
        self._store_step(rewards, dones, infos)
        if next_obs is None:
            return
        if self.graphed_rollout.enabled(self):
            critic_obs = next_obs if next_critic_obs is None else next_critic_obs
            self.graphed_rollout.update_normalization(self, next_obs, critic_obs)
        else:
            self.actor_critic.update_normalization(next_obs, next_critic_obs)

    def collect_transition_from_dataset(self, transition: Any, infos: dict[str, Any]) -> None:
        """Record a dataset transition as if its action had been executed (scored under the policy's
        distribution of its observations, which also update the statistics)."""
        obs = transition.observation.to(self.device)
        critic_obs = transition.privileged_observation
        critic_obs = obs if critic_obs is None else critic_obs.to(self.device)
        self.actor_critic.update_normalization(obs, critic_obs)
        self._record_policy_step(obs, critic_obs)
        t = self.transition
        t.actions = transition.action.to(self.device)
        t.actions_log_prob = self.actor_critic.get_actions_log_prob(t.actions).detach()
        for ext in self.extensions.values():
            ext.on_dataset_step(t)
        dones = transition.done.to(self.device).reshape(-1).bool()
        self._store_step(transition.reward.to(self.device).reshape(-1), dones, infos)

    def compute_returns(self, last_critic_obs: torch.Tensor) -> None:
        """GAE returns and advantages, bootstrapped from ``last_critic_obs`` (skipped without PPO losses)."""
        assert self.storage is not None
        if not self.use_ppo_loss:
            return
        policy = self.actor_critic
        # Bootstrapping must not advance a recurrent critic's rollout memory.
        saved = policy.get_hidden_states() if policy.is_recurrent else None
        with self.autocast():
            last_values = policy.evaluate(last_critic_obs).detach()
        if saved is not None:
            policy.set_hidden_states(saved)
        compute_returns(self.storage, last_values, self.gamma, self.lam)
