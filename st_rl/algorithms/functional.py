"""PPO math as pure functions of tensors (tested against hand-worked numbers)."""

from __future__ import annotations

import torch

from st_rl.config.defaults import PPO_SIGNATURE_DEFAULTS
from st_rl.storage.rollout_storage import compute_gae as compute_gae  # re-exported
from st_rl.storage.rollout_storage import normalize_advantages as normalize_advantages


def bootstrap_time_outs(
    rewards: torch.Tensor, values: torch.Tensor, time_outs: torch.Tensor, gamma: float
) -> torch.Tensor:
    """``r + gamma * V(s) * time_out``: the value of a truncated episode's last state is added back."""
    return rewards + gamma * values.reshape(rewards.shape) * time_outs.to(rewards.dtype)


def clipped_surrogate_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip_param: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``mean(max(-A r, -A clip(r, 1-e, 1+e)))`` and ``{"ratio", "surrogate", "surrogate_clipped"}``."""
    ratio = torch.exp(log_prob - old_log_prob.reshape(log_prob.shape))
    adv = advantages.reshape(log_prob.shape)
    surrogate = -adv * ratio
    surrogate_clipped = -adv * torch.clamp(ratio, 1.0 - clip_param, 1.0 + clip_param)
    loss = torch.max(surrogate, surrogate_clipped).mean()
    return loss, {"ratio": ratio, "surrogate": surrogate, "surrogate_clipped": surrogate_clipped}


def value_function_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    clip_param: float,
    use_clipped_value_loss: bool = PPO_SIGNATURE_DEFAULTS.use_clipped_value_loss,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Squared value error, optionally clipped, and the clipped values (None without clipping)."""
    if use_clipped_value_loss:
        value_clipped = old_values + (values - old_values).clamp(-clip_param, clip_param)
        loss = torch.max((values - returns).pow(2), (value_clipped - returns).pow(2)).mean()
        return loss, value_clipped
    return (returns - values).pow(2).mean(), None


def gaussian_kl(
    old_mu: torch.Tensor, old_sigma: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor
) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians, summed over the last dim (reference form, with its 1e-5)."""
    return torch.sum(
        torch.log(sigma / old_sigma + 1.0e-5)
        + (old_sigma.pow(2) + (old_mu - mu).pow(2)) / (2.0 * sigma.pow(2))
        - 0.5,
        dim=-1,
    )


def adaptive_learning_rate(
    learning_rate: float, kl_mean: float, desired_kl: float, min_lr: float = 1e-5, max_lr: float = 1e-2
) -> float:
    """Divide by 1.5 when KL > 2 target, multiply by 1.5 when 0 < KL < target / 2."""
    if kl_mean > desired_kl * 2.0:
        return max(min_lr, learning_rate / 1.5)
    if 0.0 < kl_mean < desired_kl / 2.0:
        return min(max_lr, learning_rate * 1.5)
    return learning_rate


def adaptive_learning_rate_tensor(
    learning_rate: torch.Tensor,
    kl_mean: torch.Tensor,
    desired_kl: float,
    min_lr: float = 1e-5,
    max_lr: float = 1e-2,
) -> torch.Tensor:
    """:func:`adaptive_learning_rate` on device tensors (no host synchronisation)."""
    down = (learning_rate / 1.5).clamp_min(min_lr)
    up = (learning_rate * 1.5).clamp_max(max_lr)
    return torch.where(
        kl_mean > desired_kl * 2.0,
        down,
        torch.where((kl_mean > 0.0) & (kl_mean < desired_kl / 2.0), up, learning_rate),
    )


__all__ = [n for n, v in globals().items() if callable(v) and n[0].islower()]  # pyright: ignore[reportUnsupportedDunderAll]
