"""Record reference motion from the locomotion task into st_gym motion files: pickles of plain data only,
``{name: {"Fields": [...], "Frames": [[value per field] per frame], "FrameDuration": s, "MotionWeight": w}}``.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.tasks import make_env
from st_rl.utils.files import refuse_special_file
from st_rl.utils.utils import atomic_write

__all__ = [
    "collect_style_windows",
    "command_grid",
    "joint_style_fields",
    "load_motion_file",
    "record_motion",
    "record_scripted_trot",
    "save_motion_file",
    "scripted_trot_policy",
]


def scripted_trot_policy(
    env: Any,
    frequency_hz: float = 2.0,
    thigh_amp: float = 0.3,
    calf_amp: float = 0.5,
    stride: float | torch.Tensor = 0.0,
    hip_amp: float | torch.Tensor = 0.0,
):
    """An open-loop trot ``policy(obs) -> actions`` for the built-in quadruped (diagonal pairs in antiphase).

    ``stride`` (rad) swings the thighs fore-aft (walking, about 0.6 m/s at 0.4), ``hip_amp`` (rad) the hips
    (turning); both may be per-robot tensors (N,)."""
    names = list(env.joint_names)
    phase_offset = torch.tensor([0.0 if n[:2] in ("FR", "RL") else math.pi for n in names])
    parts = ("hip", "thigh", "calf")
    is_hip, is_thigh, is_calf = (torch.tensor([float(part in n) for n in names]) for part in parts)
    stride_t = torch.as_tensor(stride, dtype=torch.float32).reshape(-1, 1)
    hip_t = torch.as_tensor(hip_amp, dtype=torch.float32).reshape(-1, 1)
    scale = float(env.cfg["action_scale"])
    steps = itertools.count()

    def policy(obs: torch.Tensor) -> torch.Tensor:
        t = next(steps) * env.dt
        phase = 2 * math.pi * frequency_hz * t + phase_offset
        swing = torch.clamp(torch.sin(phase), min=0.0)  # lift only during half the cycle
        fore_aft = torch.cos(phase)  # +1 at lift-off (leg back), -1 at touch-down (leg forward)
        offsets = (
            is_thigh * (-thigh_amp * swing + stride_t * fore_aft)
            + is_calf * (-calf_amp * swing)
            + is_hip * (hip_t * fore_aft)
        )
        return (offsets / scale).expand(obs.shape[0], -1).to(obs.device).clone()

    return policy


def command_grid(
    vx: Sequence[float] = (0.0,), vy: Sequence[float] = (0.0,), yaw: Sequence[float] = (0.0,)
) -> torch.Tensor:
    """Every combination of the given forward speeds, lateral speeds and turn rates, ``(K, 3)``."""
    axes = [torch.as_tensor(list(v), dtype=torch.float32).reshape(-1) for v in (vx, vy, yaw)]
    if any(a.numel() == 0 for a in axes):
        raise ValueError("command_grid: every axis needs at least one value")
    return torch.cartesian_prod(*axes).reshape(-1, 3)


@torch.inference_mode()
def record_motion(
    env: Any,
    policy: Callable[[torch.Tensor], torch.Tensor],
    duration_s: float = 10.0,
    fields: Sequence[str] | None = None,
    env_ids: Sequence[int] = (0,),
    warmup_s: float = 1.0,
    command: Sequence[float] | torch.Tensor | None = None,
    name: str = "recorded",
) -> dict[str, dict[str, Any]]:
    """Run ``policy`` on ``env`` and record the style fields of ``env_ids``, one trajectory each.

    A frame per step after ``warmup_s``, cut at a failure. ``command`` (``(vx, vy, yaw rate)`` or one row per
    robot, e.g. a :func:`command_grid`) is held fixed and stored as the trajectory's ``"Command"``."""
    fields = list(fields or env.default_style_fields())
    fixed = None
    if command is not None:
        fixed = torch.as_tensor(command, dtype=torch.float32)
        if fixed.shape not in ((3,), (env.num_envs, 3)):
            rows = f"one row per robot ({env.num_envs}, 3)"
            raise ValueError(f"command must be (vx, vy, yaw) or {rows}, got {tuple(fixed.shape)}")
        fixed = fixed.expand(env.num_envs, 3)
    obs, _ = env.get_observations()
    steps, warm = int(round(duration_s / env.dt)), int(round(warmup_s / env.dt))
    ids = torch.as_tensor(list(env_ids), dtype=torch.long, device=obs.device)
    buffer = torch.zeros(steps, len(ids), len(fields), device=obs.device)
    never = warm + steps
    end = torch.full((len(ids),), never, dtype=torch.long, device=obs.device)  # first step of a failure
    for k in range(warm + steps):
        if fixed is not None:
            env.commands[:] = fixed
        obs, _, dones, extras = env.step(policy(obs))
        failed = (dones.bool() & ~extras["time_outs"].bool())[ids]
        end = torch.where(failed & (end == never), k, end)
        if k >= warm:
            buffer[k - warm] = env.style_features(fields)[ids]
    counts = (end - warm).clamp(min=0).tolist()
    motion = {}
    for j, i in enumerate(env_ids):
        if counts[j] == 0:
            continue
        frames = buffer[: counts[j], j].cpu().tolist()
        traj: dict[str, Any] = {"Fields": fields, "Frames": frames, "FrameDuration": float(env.dt)}
        traj["MotionWeight"] = 1.0
        if fixed is not None:
            traj["Command"] = [float(v) for v in fixed[i]]
        motion[f"{name}_{i}"] = traj
    return motion


def save_motion_file(motion: dict[str, dict[str, Any]], path: str) -> None:
    """Write a motion dict (plain data only) atomically; ``OSError`` for a folder, device, FIFO or socket."""
    refuse_special_file(path, "motion file")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, lambda f: pickle.dump(motion, f, protocol=4))


class MotionFileError(ValueError, pickle.UnpicklingError):
    """A motion file that cannot be read (the message names it); also an ``UnpicklingError``."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        why = f"Motion files may only hold plain data; this one references {module}.{name}"
        fix = "Convert it to dicts, lists, floats and strings (see st_rl.tasks.motion_recorder)."
        raise pickle.UnpicklingError(f"{why}. {fix}")


def load_motion_file(path: str) -> dict[str, dict[str, Any]]:
    """Read and check a motion file without executing code from it (no classes are resolved); a
    :class:`MotionFileError` names the file, trajectory and entry (frame and field) at fault."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"motion file not found: {path}")
    try:
        with open(path, "rb") as f:
            data = _PlainUnpickler(f).load()
    except (pickle.UnpicklingError, EOFError, ValueError, IndexError, TypeError) as e:
        why = f"not a readable motion file ({type(e).__name__}: {e})"
        raise MotionFileError(f"{path}: {why}; record it again with st-rl record-motion") from e
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise MotionFileError(f"{path}: a motion file holds a dict of trajectories, not {kind}")
    for key, traj in data.items():
        _check_trajectory(path, key, traj)
    return data


def _check_trajectory(path: str, key: Any, traj: Any) -> None:
    def error(message: str) -> MotionFileError:
        return MotionFileError(f"{path}: trajectory {key!r}: {message}; fix or re-record the file")

    required = ("Fields", "Frames", "FrameDuration")
    missing = [k for k in required if not isinstance(traj, dict) or k not in traj]
    if missing:
        raise error(f"it lacks {missing}")
    fields, frames = traj["Fields"], traj["Frames"]
    if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) for f in fields):
        raise error("'Fields' must be a list of field names")
    if not isinstance(frames, (list, tuple)) or not frames:
        raise error(f"'Frames' must be a non-empty list of frames, got {type(frames).__name__}")
    width = len(fields)
    for i, frame in enumerate(frames):
        if not isinstance(frame, (list, tuple)) or len(frame) != width:
            raise error(f"frame {i} is not a list of len(Fields)={width} values")
    try:
        values = np.asarray(frames, dtype=np.float64).reshape(len(frames), width)
    except (TypeError, ValueError) as e:
        raise error(f"'Frames' must hold numbers ({e})") from None
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        frame, column = (int(v) for v in bad[0])
        at = f"frame {frame} holds {values[frame, column]} (field {fields[column]!r}, one of {len(bad)} such)"
        raise error(f"{at} -- NaN/Inf frames cannot serve as a reference")
    for name, bound in (("FrameDuration", "of seconds > 0"), ("MotionWeight", ">= 0")):
        value = traj.get(name, 1.0)
        number = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
        if not number or not math.isfinite(value) or value < 0 or (value == 0 and name == "FrameDuration"):
            raise error(f"{name!r} must be a finite number {bound}, got {value!r}")


def joint_style_fields(env: Any) -> list[str]:
    """Joint positions and velocities: style fields independent of heading and speed."""
    return [f"{j}_dof_pos" for j in env.joint_names] + [f"{j}_dof_vel" for j in env.joint_names]


def record_scripted_trot(
    task: str,
    path: str,
    seed: int = 0,
    fields: Sequence[str] | None = None,
    num_robots: int = 8,
    duration_s: float = 10.0,
    moving: bool = False,
) -> list[str]:
    """Record the scripted trot (no pushes, noise or command) to ``path``; return the fields recorded.

    ``moving=True`` records 27 robots instead: 9 strides in [-0.4, 0.4] rad times 3 hip swings (turning)."""
    stride, hip = 0.0, 0.0
    if moving:
        grid = torch.cartesian_prod(torch.linspace(-0.4, 0.4, 9), torch.tensor([-0.15, 0.0, 0.15]))
        stride, hip = grid[:, 0], grid[:, 1]
        num_robots = grid.shape[0]
    env = make_env(task, num_envs=num_robots, seed=seed, max_push_vel_xy=0.0, noise_level=0.0)
    fields = list(fields or joint_style_fields(env))
    policy = scripted_trot_policy(env, stride=stride, hip_amp=hip)
    motion = record_motion(env, policy, duration_s, fields, range(num_robots), command=[0.0] * 3)
    if not motion:
        raise RuntimeError("every scripted-trot robot fell before recording started")
    save_motion_file(motion, path)
    return fields


@torch.inference_mode()
def collect_style_windows(
    env: Any, policy: Callable[[torch.Tensor], torch.Tensor], duration_s: float, warmup_s: float = 1.0
) -> torch.Tensor:
    """The flattened ``ref_obs`` windows ``(M, H * F)`` of robots not just reset, after ``warmup_s``."""
    env.reset()
    obs, extras = env.get_observations()
    if "ref_obs" not in (extras.get("observations") or {}):
        raise ValueError("the environment provides no ref_obs windows; build it with amp_obs_frame_num > 0")
    out = []
    for k in range(int(round(duration_s / env.dt))):
        obs, _, dones, extras = env.step(policy(obs))
        if k * env.dt >= warmup_s:
            out.append(extras["observations"]["ref_obs"][~dones].flatten(1))
    return torch.cat(out)
