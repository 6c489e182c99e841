"""Observation, command, initial-state, reward and termination terms of
:class:`~st_rl.tasks.locomotion.LeggedLocomotion`, as functions of the task's state and config."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from st_rl.tasks.base import Segments
from st_rl.tasks.locomotion_model import yaw_quat


def observation_layout(
    num_actions: int, num_feet: int, cfg: dict[str, Any], height_scan: bool
) -> tuple[Segments, Segments, torch.Tensor | None]:
    """Actor and critic segments, and the height-scan points (P, 2) in the yaw frame (or None)."""
    segments: Segments = [(name, (3,)) for name in ("base_ang_vel", "projected_gravity", "commands")]
    segments += [(name, (num_actions,)) for name in ("dof_pos", "dof_vel", "last_actions")]
    points = None
    if height_scan:
        (x0, x1, nx), (y0, y1, ny) = cfg["height_scan_x"], cfg["height_scan_y"]
        segments.append(("height_measurements", (1, int(nx), int(ny))))
        xs, ys = torch.linspace(x0, x1, int(nx)), torch.linspace(y0, y1, int(ny))
        mx, my = torch.meshgrid(xs, ys, indexing="ij")
        points = torch.stack([mx.flatten(), my.flatten()], dim=-1)
    privileged = [("base_lin_vel", (3,)), *segments, ("friction", (1,)), ("added_mass", (1,))]
    return segments, [*privileged, ("foot_contact", (num_feet,))], points


def observation_scales(cfg: dict[str, Any], a: int, scan: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and uniform-noise half-width of every actor observation column (``a`` actions, ``scan`` points)."""
    lin, ang, vel = cfg["obs_scale_lin_vel"], cfg["obs_scale_ang_vel"], cfg["obs_scale_dof_vel"]
    scale = [ang] * 3 + [1.0] * 3 + [lin, lin, ang] + [1.0] * a + [vel] * a + [1.0] * (a + scan)
    noise = [cfg["noise_ang_vel"] * ang] * 3 + [cfg["noise_gravity"]] * 3 + [0.0] * 3
    noise += [cfg["noise_dof_pos"]] * a + [cfg["noise_dof_vel"] * vel] * a
    noise += [0.0] * a + [cfg["noise_height"]] * scan
    return torch.tensor(scale), torch.tensor(noise) * float(cfg["noise_level"])


def height_scan(
    quat: torch.Tensor,
    base_pos: torch.Tensor,
    points: torch.Tensor,
    ground: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Base height above the ground (minus 0.3 m, clipped to +-1) at ``points`` around the base (yaw frame)."""
    w, x, y, z = quat.unbind(dim=1)
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y.square() + z.square()))
    cos, sin = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
    px, py = points[:, 0][None], points[:, 1][None]
    wx = base_pos[:, :1] + cos * px - sin * py
    wy = base_pos[:, 1:2] + sin * px + cos * py
    return (base_pos[:, 2:3] - 0.3 - ground(torch.stack([wx, wy], dim=-1))).clamp(-1.0, 1.0)


def sample_commands(rand: Callable[..., torch.Tensor], n: int, cfg: dict[str, Any]) -> torch.Tensor:
    """``(vx, vy, yaw rate)`` commands (N, 3), uniform in their ranges, zero with ``zero_command_prob``."""
    keys = ("lin_vel_x", "lin_vel_y", "ang_vel_yaw")
    cmd = torch.stack([rand(n, low=cfg[k][0], high=cfg[k][1]) for k in keys], 1)
    return torch.where((rand(n) < cfg["zero_command_prob"])[:, None], 0.0, cmd)


def initial_state(
    rand: Callable[..., torch.Tensor],
    n: int,
    default_qpos: torch.Tensor,
    actuated: Any,
    nv: int,
    cfg: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Initial ``qpos``, ``qvel`` (N, nq), (N, nv) float64: the standing pose with scaled joints and a random
    yaw (and, on rough terrain, xy offset), and a random base velocity."""
    qpos = default_qpos.expand(n, -1).clone()
    lo, hi = cfg["init_joint_scale_range"]
    qpos[:, actuated] *= rand(n, qpos[:, actuated].shape[1], low=lo, high=hi).double()
    qpos[:, 3:7] = yaw_quat(rand(n, low=-math.pi, high=math.pi)).double()
    if cfg["terrain"] == "rough":
        qpos[:, 0:2] = rand(n, 2, low=-0.25, high=0.25).double()
    qvel = torch.zeros(n, nv, dtype=torch.float64)
    v0 = float(cfg["init_base_vel"])
    qvel[:, 0:6] = rand(n, 6, low=-v0, high=v0).double() * torch.tensor([1, 1, 0.2, 0.5, 0.5, 0.5])
    return qpos, qvel


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
