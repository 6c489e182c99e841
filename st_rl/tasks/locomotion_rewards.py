"""Reward kernels of :class:`~st_rl.tasks.locomotion.LeggedLocomotion` as pure functions of the task state.

Each returns the unweighted per-env kernel (N,); the task multiplies it by its scale (and by ``dt``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch


def tracking_lin_vel(commands: torch.Tensor, lin_vel: torch.Tensor, sigma: float) -> torch.Tensor:
    """``exp(-|cmd_xy - v_xy|^2 / sigma)``."""
    return torch.exp(-(commands[:, :2] - lin_vel[:, :2]).square().sum(1) / sigma)


def tracking_ang_vel(commands: torch.Tensor, ang_vel: torch.Tensor, sigma: float) -> torch.Tensor:
    """``exp(-(cmd_yaw - w_z)^2 / sigma)``."""
    return torch.exp(-(commands[:, 2] - ang_vel[:, 2]).square() / sigma)


def lin_vel_z(lin_vel: torch.Tensor) -> torch.Tensor:
    return lin_vel[:, 2].square()


def ang_vel_xy(ang_vel: torch.Tensor) -> torch.Tensor:
    return ang_vel[:, :2].square().sum(1)


def orientation(projected_gravity: torch.Tensor) -> torch.Tensor:
    return projected_gravity[:, :2].square().sum(1)


def torques(actuator_force: torch.Tensor) -> torch.Tensor:
    return actuator_force.float().square().sum(1)


def dof_acc(dof_vel: torch.Tensor, last_dof_vel: torch.Tensor, dt: float) -> torch.Tensor:
    return ((dof_vel - last_dof_vel) / dt).square().sum(1)


def action_rate(actions: torch.Tensor, last_actions: torch.Tensor) -> torch.Tensor:
    return (actions - last_actions).square().sum(1)


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
    """Diagonal and same-side partner of each of four feet, from their positions in the base frame.

    Raises:
        ValueError: not four feet at the corners of the base.
    """
    if len(home_feet) != 4:
        raise ValueError(f"the 'trot' reward needs four feet; this robot has {len(home_feet)}")

    def partner(f: int, flip: list[int]) -> int:
        return int(np.argmin(np.linalg.norm(home_feet - home_feet[f] * flip, axis=1)))

    diagonal = [partner(f, [-1, -1, 1]) for f in range(4)]
    lateral = [partner(f, [1, -1, 1]) for f in range(4)]
    if sorted(diagonal) != [0, 1, 2, 3] or sorted(lateral) != [0, 1, 2, 3] or diagonal == lateral:
        raise ValueError(
            "the 'trot' reward needs feet at the four corners of the base (front/hind, left/right)"
        )
    return diagonal, lateral


def reward_scales(defaults: Mapping[str, float], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``defaults`` updated with ``overrides``.

    Raises:
        TypeError: ``overrides`` names a term that is not in ``defaults``.
    """
    scales = {**defaults, **(overrides or {})}
    unknown = sorted(set(scales) - set(defaults))
    if unknown:
        raise TypeError(f"LeggedLocomotion: unknown reward terms {unknown}; available: {sorted(defaults)}")
    return scales
