"""Diagonal Gaussian policy distribution as plain functions of tensors."""

from __future__ import annotations

import math

import torch

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def gaussian_sample(mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Draw one sample per row."""
    return mean + std * torch.randn_like(mean)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Log-density summed over the last (action) dimension."""
    return (-((actions - mean) ** 2) / (2 * std * std) - torch.log(std) - _LOG_SQRT_2PI).sum(dim=-1)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Entropy summed over the last (action) dimension."""
    return (0.5 + _LOG_SQRT_2PI + torch.log(std)).sum(dim=-1)
