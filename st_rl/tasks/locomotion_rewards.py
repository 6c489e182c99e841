"""Reward kernels (unweighted, per env) and failures of :class:`~st_rl.tasks.locomotion.LeggedLocomotion`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch


def feet_air_time(
    air_time: torch.Tensor,
    contact: torch.Tensor,
    last_contacts: torch.Tensor,
    moving: torch.Tensor,
    target: float,
) -> torch.Tensor:
    """Sum over feet touching down of ``air time - target``, while the robot is commanded to move."""
    first_contact = (air_time > 0) & (contact | last_contacts)
    return ((air_time - target) * first_contact).sum(dim=1) * moving


def trot(
    contact: torch.Tensor, diagonal: list[int], lateral: list[int], moving: torch.Tensor
) -> torch.Tensor:
    """1 where diagonal feet share their contact state and the two feet of each side differ, while moving."""
    phase = (contact == contact[:, diagonal]).all(dim=1) & (contact != contact[:, lateral]).all(dim=1)
    return phase.float() * moving


def failures(
    trunk_contact: torch.Tensor,
    gravity: torch.Tensor,
    qpos: torch.Tensor,
    ground: Callable[[torch.Tensor], torch.Tensor],
    cfg: Mapping[str, Any],
) -> torch.Tensor:
    """Failure terms (N, 3) bool: ``trunk_contact``, ``tilt``, ``base_height`` (above the ``ground``)."""
    trunk = trunk_contact & bool(cfg["terminate_on_trunk_contact"])
    tilt = gravity[:, 2] > -math.cos(float(cfg["max_tilt_rad"]))
    height = qpos[:, 2].float() - ground(qpos[:, 0:2].float()) < cfg["min_base_height"]
    return torch.stack([trunk, tilt, height], dim=1)


def gait_partners(home_feet: np.ndarray) -> tuple[list[int], list[int]]:
    """Diagonal and same-side partner of each of four corner feet (positions in the base frame)."""
    if len(home_feet) != 4:
        raise ValueError(f"the 'trot' reward needs four feet; this robot has {len(home_feet)}")

    def partner(f: int, flip: list[int]) -> int:
        return int(np.argmin(np.linalg.norm(home_feet - home_feet[f] * flip, axis=1)))

    diagonal = [partner(f, [-1, -1, 1]) for f in range(4)]
    lateral = [partner(f, [1, -1, 1]) for f in range(4)]
    if sorted(diagonal) != [0, 1, 2, 3] or sorted(lateral) != [0, 1, 2, 3] or diagonal == lateral:
        raise ValueError("the 'trot' reward needs feet at the four corners of the base")
    return diagonal, lateral


def reward_scales(defaults: Mapping[str, float], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``defaults`` updated with ``overrides``; ``TypeError`` for an unknown term."""
    scales = {**defaults, **(overrides or {})}
    unknown = sorted(set(scales) - set(defaults))
    if unknown:
        raise TypeError(f"LeggedLocomotion: unknown reward terms {unknown}; available: {sorted(defaults)}")
    return scales
