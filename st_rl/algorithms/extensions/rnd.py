"""Random network distillation (RND): a curiosity reward for states the agent has rarely visited."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.algorithms.extensions.base import Extension, masked_mean
from st_rl.env.layout import get_subobs_by_components
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.modules.mlp import MlpModel
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import MiniBatch, Transition

__all__ = ["RandomNetworkDistillation", "intrinsic_weight"]


def intrinsic_weight(schedule: dict[str, Any] | None, weight: float, iteration: int) -> float:
    """The intrinsic-reward weight at ``iteration``: ``weight``, or per ``schedule`` ``{"mode": "step",
    "final_step": s, "final_value": v}`` (``v`` from ``s`` on) or ``{"mode": "linear", "initial_step": a, ...}``
    (linear from ``weight`` at ``a`` to ``v`` at ``s``)."""
    if schedule is None:
        return weight
    mode = schedule.get("mode")
    final = float(schedule["final_value"])
    end = int(schedule["final_step"])
    if mode == "step":
        return weight if iteration < end else final
    if mode == "linear":
        start = int(schedule.get("initial_step", 0))
        if iteration <= start:
            return weight
        if iteration >= end:
            return final
        return weight + (final - weight) * (iteration - start) / (end - start)
    raise ValueError(f"weight_schedule mode must be 'step' or 'linear', got {mode!r}")


def _normalizer(enabled: bool, width: int) -> nn.Module:
    return EmpiricalNormalization([width], until=int(1e8)) if enabled else nn.Identity()


class RandomNetworkDistillation(Extension):
    """Curiosity (Burda et al., 2018): the intrinsic reward ``||predictor(s') - target(s')||^2`` of a fixed
    random target network and a predictor trained on the visited states (``rnd_loss``, own Adam) joins the
    task reward; arguments: ``rnd_cfg`` in docs/configuration.md."""

    name = "rnd"

    def __init__(
        self,
        weight: float = 1.0,
        weight_schedule: dict[str, Any] | None = None,
        use_critic_obs: bool = False,
        obs_components: Sequence[str] | None = None,
        state_normalization: bool = True,
        reward_normalization: bool = True,
        predictor_hidden_dims: Sequence[int] = (64, 64),
        target_hidden_dims: Sequence[int] = (64, 64),
        num_outputs: int = 16,
        activation: str = "elu",
        learning_rate: float = 1e-3,
    ) -> None:
        super().__init__()
        if weight < 0:
            raise ValueError(f"rnd weight must be >= 0, got {weight}")
        intrinsic_weight(weight_schedule, weight, 0)  # validates the schedule
        self.weight = float(weight)
        self.weight_schedule = dict(weight_schedule) if weight_schedule is not None else None
        self.use_critic_obs = bool(use_critic_obs)
        self.obs_components = list(obs_components) if obs_components else None
        self.state_normalization = bool(state_normalization)
        self.reward_normalization = bool(reward_normalization)
        self.predictor_hidden_dims = list(predictor_hidden_dims)
        self.target_hidden_dims = list(target_hidden_dims)
        self.num_outputs = int(num_outputs)
        self.activation = activation
        self.learning_rate = float(learning_rate)

    def setup(self, policy: Any, device: torch.device) -> None:
        super().setup(policy, device)
        p: Any = policy
        self.segments = p.privileged_obs_segments if self.use_critic_obs else p.obs_segments
        if self.obs_components is not None:
            if self.segments is None:
                raise ValueError("rnd obs_components need the policy's observation layout (obs_segments)")
            missing = [c for c in self.obs_components if c not in self.segments]
            if missing:
                raise ValueError(f"rnd obs_components {missing} are not in the layout {list(self.segments)}")
            width = sum(int(torch.Size(self.segments[c]).numel()) for c in self.obs_components)
        else:
            width = int(p.num_critic_obs if self.use_critic_obs else p.num_actor_obs)
        self.input_width = width
        self.predictor = MlpModel(width, self.predictor_hidden_dims, self.num_outputs, self.activation)
        self.target = MlpModel(width, self.target_hidden_dims, self.num_outputs, self.activation)
        self.target.requires_grad_(False)
        self.state_normalizer = _normalizer(self.state_normalization, width)
        self.reward_normalizer = _normalizer(self.reward_normalization, 1)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=self.learning_rate)

    def _named_modules(self) -> dict[str, nn.Module]:
        return {
            "predictor": self.predictor,
            "target": self.target,
            "state_normalizer": self.state_normalizer,
            "reward_normalizer": self.reward_normalizer,
        }

    def modules(self) -> list[nn.Module]:
        return list(self._named_modules().values())

    def parameters(self) -> list[nn.Parameter]:
        return list(self.predictor.parameters())

    def train(self, mode: bool = True) -> None:
        self.predictor.train(mode)
        self.target.eval()

    def state(self, obs: torch.Tensor, critic_obs: torch.Tensor | None) -> torch.Tensor:
        """The RND input of raw observations, before normalisation."""
        x = critic_obs if self.use_critic_obs and critic_obs is not None else obs
        if self.obs_components is not None:
            x = get_subobs_by_components(x, self.obs_components, self.segments)
        return x

    def _normalized(self, x: torch.Tensor) -> torch.Tensor:
        return self.state_normalizer.normalize(x) if self.state_normalization else x  # type: ignore[operator]

    def prediction_error(self, x: torch.Tensor) -> torch.Tensor:
        """``||predictor(x) - target(x)||^2`` per sample of normalised inputs."""
        return (self.predictor(x) - self.target(x)).pow(2).sum(dim=-1)

    @property
    def current_weight(self) -> float:
        return intrinsic_weight(self.weight_schedule, self.weight, self.iteration)

    @torch.no_grad()
    def intrinsic_reward(
        self, obs: torch.Tensor, critic_obs: torch.Tensor | None, update: bool
    ) -> torch.Tensor:
        """Normalised intrinsic reward of raw observations; ``update`` merges them into the statistics."""
        x = self.state(obs, critic_obs)
        if update and self.state_normalization:
            self.state_normalizer.update(x)  # type: ignore[operator]
        reward = self.prediction_error(self._normalized(x))
        if self.reward_normalization:
            if update:
                self.reward_normalizer.update(reward.unsqueeze(-1))  # type: ignore[operator]
            std = self.reward_normalizer._std.reshape(())  # type: ignore[union-attr]
            reward = reward / (std + self.reward_normalizer.eps)  # type: ignore[operator]
        return reward

    def on_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        infos: dict[str, Any],
        transition: Transition,
        next_obs: torch.Tensor | None,
        next_critic_obs: torch.Tensor | None,
    ) -> torch.Tensor:
        if next_obs is None:
            raise ValueError("RND needs the next observations: pass next_obs to alg.process_env_step")
        intrinsic = self.intrinsic_reward(next_obs, next_critic_obs, update=self.predictor.training)
        self.record(rnd_intrinsic_reward=intrinsic.mean())
        return rewards + self.current_weight * intrinsic

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        x = self._normalized(self.state(minibatch.obs, minibatch.critic_obs))
        return {"rnd_loss": masked_mean(self.prediction_error(x), minibatch.masks)}

    def log_scalars(self) -> dict[str, float]:
        return {"rnd_weight": self.current_weight, **super().log_scalars()}

    def state_dict(self) -> dict[str, Any]:
        state = {name: module.state_dict() for name, module in self._named_modules().items()}
        return {
            "rnd_state_dict": {**state, "optimizer": self.optimizer.state_dict() if self.optimizer else {}}
        }

    def load_state_dict(self, checkpoint: dict[str, Any], load_optimizer: bool = True) -> None:
        state = checkpoint.get("rnd_state_dict")
        if state is None:
            warnings.warn("The checkpoint has no RND state (rnd_state_dict); RND starts fresh.", stacklevel=3)
            return
        for name, module in self._named_modules().items():
            module.load_state_dict(state[name])
        if load_optimizer and self.optimizer is not None and state.get("optimizer"):
            self.optimizer.load_state_dict(state["optimizer"])
