"""Style features (AMP reference motion) of :class:`~st_rl.tasks.locomotion.LeggedLocomotion`."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.locomotion_model import quat_rotate_inverse


def foot_style_fields(foot_names: list[str]) -> list[str]:
    return [f"{foot}_pos_{a}_b" for foot in foot_names for a in "xyz"]


def available_style_fields(joint_names: list[str], foot_names: list[str]) -> list[str]:
    """Every style field, in the column order of ``all_style_features``."""
    names = [f"root_pos_{a}" for a in "xyz"] + [f"root_rot_{a}" for a in "wxyz"]
    for frame in ("b", "w"):
        names += [f"root_vel_{a}_{frame}" for a in "xyz"] + [f"root_ang_vel_{a}_{frame}" for a in "xyz"]
    names += [f"{j}_dof_pos" for j in joint_names] + [f"{j}_dof_vel" for j in joint_names]
    return names + foot_style_fields(foot_names)


def default_style_fields(joint_names: list[str], foot_names: list[str]) -> list[str]:
    """Root height, base velocities (base frame), joint positions and velocities, and feet (base frame)."""
    fields = ["root_pos_z"] + [f"root_vel_{a}_b" for a in "xyz"] + [f"root_ang_vel_{a}_b" for a in "xyz"]
    joints = [f"{j}_dof_pos" for j in joint_names] + [f"{j}_dof_vel" for j in joint_names]
    return fields + joints + foot_style_fields(foot_names)


def style_columns(available: list[str], fields: list[str]) -> torch.Tensor:
    """Column of each of ``fields`` among ``available``; ``ValueError`` for one that is not there."""
    unknown = [f for f in fields if f not in available]
    if unknown:
        raise ValueError(f"Unknown style fields {unknown}; available: {available}")
    return torch.tensor([available.index(f) for f in fields], dtype=torch.long)


def all_style_features(
    pos: torch.Tensor,
    quat: torch.Tensor,
    lin_vel_w: torch.Tensor,
    ang_vel_b: torch.Tensor,
    joints: list[torch.Tensor],
    feet: torch.Tensor | None,
) -> torch.Tensor:
    """Every style field (:func:`available_style_fields` order), the feet (base frame) optional."""
    ang_w = quat_rotate_inverse(quat * torch.tensor([1.0, -1.0, -1.0, -1.0]), ang_vel_b)
    parts = [pos, quat, quat_rotate_inverse(quat, lin_vel_w), ang_vel_b, lin_vel_w, ang_w, *joints]
    return torch.cat(parts if feet is None else [*parts, feet], dim=1)


def roll_window(window: torch.Tensor, features: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
    """``window`` (N, H, F) shifted by one frame of ``features`` (N, F); where ``reset``, filled with it."""
    rolled = torch.cat([window[:, 1:], features[:, None]], dim=1)
    return torch.where(reset.reshape(-1, 1, 1).bool(), features[:, None].expand_as(rolled), rolled)


def check_motion_source(source: Any, style_fields: list[str], frame_num: int, task_name: str) -> None:
    """Raise ``ValueError`` for a motion source whose ``style_fields`` or window length differ from the task's."""
    fields = getattr(source, "style_fields", None)
    files = getattr(source, "motion_files", None)
    name = f"Motion file {', '.join(map(str, files))}" if files else f"Motion source {type(source).__name__}"
    if fields is not None and list(fields) != list(style_fields):
        fields = list(fields)
        missing = [f for f in style_fields if f not in fields]
        extra = [f for f in fields if f not in style_fields]
        parts = {"missing from the motion": missing, "not among the task's style fields (extra)": extra}
        detail = "; ".join(f"{k}: {v}" for k, v in parts.items() if v) or "the same fields in another order"
        raise ValueError(
            f"{name} does not match the task's style fields: {detail}. The motion has {len(fields)} fields "
            f"{fields}; the task ({task_name}) has {len(style_fields)} {style_fields}. "
            "Record the motion on this task (st-rl record-motion), or build the task with style_fields="
            "MotionLoader(...).style_fields (st-rl train --motion does)."
        )
    frames = getattr(source, "amp_obs_frame_num", None)
    if frames is not None and frame_num > 0 and int(frames) != frame_num:
        task = f"the task's ref_obs holds amp_obs_frame_num={frame_num}"
        raise ValueError(f"{name} serves windows of {frames} frames but {task}: make them equal.")
