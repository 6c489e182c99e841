"""Returns and advantages of a rollout (pure functions: the storage and the algorithms both use them)."""

from __future__ import annotations

import torch

from st_rl.utils.distributed import global_mean_std

__all__ = ["compute_gae", "normalize_advantages"]


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
