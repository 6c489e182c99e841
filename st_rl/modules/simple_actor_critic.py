"""The seed's minimal actor-critic (reference document 003, ``actor_critic.py`` section 1), for users' own
training loops: :class:`Actor` (Gaussian policy returning a ``torch.distributions.Normal``), :class:`Critic`
and :class:`SimpleActorCritic` (the seed's ``ActorCritic(obs_dim, act_dim)``, renamed: st_rl's
:class:`~st_rl.modules.actor_critic.ActorCritic` is the reference's richer policy that the runners build).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.distributions import Normal

__all__ = ["Actor", "Critic", "SimpleActorCritic"]

HIDDEN = 64
"""Width of the two hidden tanh layers of the seed's actor and critic."""


def _trunk(in_features: int) -> nn.Sequential:
    """Two ``HIDDEN``-wide tanh layers (``fc.0`` and ``fc.2`` hold the weights, as in the seed)."""
    return nn.Sequential(nn.Linear(in_features, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh())


class Actor(nn.Module):
    """Gaussian policy on ``obs_dim`` inputs: a 2x64 tanh MLP ``fc``, a linear ``mean`` head of ``act_dim``
    outputs and a state-independent learnable ``log_std`` (initialised at zero, i.e. std 1)."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.fc = _trunk(obs_dim)
        self.mean = nn.Linear(HIDDEN, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor) -> Normal:
        """The action distribution ``Normal(mean(obs), exp(log_std))``, batch shape ``(..., act_dim)``."""
        return Normal(self.mean(self.fc(obs)), self.log_std.exp())


class Critic(nn.Module):
    """Value network on ``obs_dim`` inputs: a 2x64 tanh MLP ``fc`` ending in one output."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.fc = _trunk(obs_dim)
        self.fc.append(nn.Linear(HIDDEN, 1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, shape ``(..., 1)``."""
        return self.fc(obs)


class SimpleActorCritic(nn.Module):
    """The seed's ``ActorCritic(obs_dim, act_dim)``: an :class:`Actor` and a :class:`Critic` on the same
    observations."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.actor = Actor(obs_dim, act_dim)
        self.critic = Critic(obs_dim)

    def forward(self, obs: torch.Tensor) -> tuple[Normal, torch.Tensor]:
        """``(action distribution, value (..., 1))``."""
        return self.actor(obs), self.critic(obs)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample actions: ``(actions (..., act_dim), log-probabilities summed over actions (...,))``."""
        dist = self.actor(obs)
        actions = dist.sample()
        return actions, dist.log_prob(actions).sum(dim=-1)

    def evaluate_actions(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log-probabilities of actions (...,), entropies (...,), values (..., 1))``, the first two summed over
        the action dimension (the terms of the PPO loss)."""
        dist = self.actor(obs)
        return dist.log_prob(actions).sum(dim=-1), dist.entropy().sum(dim=-1), self.critic(obs)
