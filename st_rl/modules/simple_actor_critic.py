"""The seed's minimal actor-critic, for users' own training loops (its ``ActorCritic`` is ``SimpleActorCritic``)."""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.distributions import Normal

HIDDEN = 64  # width of the two hidden tanh layers


def _trunk(in_features: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_features, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh())


class Actor(nn.Module):
    """Gaussian policy: a 2x64 tanh MLP ``fc``, a linear ``mean`` head and a learnable ``log_std`` (init 0)."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.fc = _trunk(obs_dim)
        self.mean = nn.Linear(HIDDEN, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor) -> Normal:
        return Normal(self.mean(self.fc(obs)), self.log_std.exp())


class Critic(nn.Module):
    """Value network: a 2x64 tanh MLP ``fc`` ending in one output."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.fc = _trunk(obs_dim)
        self.fc.append(nn.Linear(HIDDEN, 1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(obs)


class SimpleActorCritic(nn.Module):
    """The seed's ``ActorCritic(obs_dim, act_dim)``: an :class:`Actor` and a :class:`Critic`."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.actor = Actor(obs_dim, act_dim)
        self.critic = Critic(obs_dim)

    def forward(self, obs: torch.Tensor) -> tuple[Normal, torch.Tensor]:
        return self.actor(obs), self.critic(obs)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sampled actions, their log-probabilities)``."""
        dist = self.actor(obs)
        actions = dist.sample()
        return actions, dist.log_prob(actions).sum(dim=-1)

    def evaluate_actions(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log-probabilities (...,), entropies (...,), values (..., 1))``."""
        dist = self.actor(obs)
        return dist.log_prob(actions).sum(dim=-1), dist.entropy().sum(dim=-1), self.critic(obs)
