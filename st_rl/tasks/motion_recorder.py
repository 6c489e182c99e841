"""Record reference motion from the locomotion task into the st_gym motion-file format.

A motion file is a pickle of plain Python data (``ancestor_spec.md`` section 3.1)::

    {trajectory_name: {"Fields": [field names], "Frames": [[values per field] per frame],
                       "FrameDuration": seconds, "MotionWeight": weight}}

:func:`save_motion_file` writes only lists, floats and strings, and :func:`load_motion_file` reads such a
file with an unpickler that refuses every class, so loading never executes code from the file.
"""

from __future__ import annotations

import io
import math
import os
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.tasks import make_env
from st_rl.utils.files import refuse_special_file

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
    """An open-loop trot for the built-in quadruped: diagonal leg pairs (FR+RL, FL+RR) swing in antiphase.

    ``stride`` (rad) swings the thighs fore-aft with the gait cycle (forward in the air, backward on the
    ground), so the robot walks: on flat ground about +-0.6 m/s at +-0.4. ``hip_amp`` (rad) swings the hip
    (abduction) joints the same way, which turns the robot. Both may be per-robot tensors of shape (N,).

    Returns a callable ``policy(obs) -> actions`` in the task's action units (offsets / ``action_scale``).
    """
    names = list(env.joint_names)
    phase_offset = torch.tensor([0.0 if n[:2] in ("FR", "RL") else math.pi for n in names])
    is_hip = torch.tensor([1.0 if "hip" in n else 0.0 for n in names])
    is_thigh = torch.tensor([1.0 if "thigh" in n else 0.0 for n in names])
    is_calf = torch.tensor([1.0 if "calf" in n else 0.0 for n in names])
    stride_t = torch.as_tensor(stride, dtype=torch.float32).reshape(-1, 1)
    hip_t = torch.as_tensor(hip_amp, dtype=torch.float32).reshape(-1, 1)
    scale = float(env.cfg["action_scale"])
    step = {"t": 0}

    def policy(obs: torch.Tensor) -> torch.Tensor:
        t = step["t"] * env.dt
        step["t"] += 1
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
    """Run ``policy`` on ``env`` and record the style fields of ``env_ids`` as one trajectory each.

    Frames are recorded every policy step (``FrameDuration = env.dt``) after ``warmup_s``; a trajectory
    that terminates is cut at the termination. ``command`` holds the velocity command fixed: one
    ``(vx, vy, yaw rate)`` for every robot, or one row per robot, ``(num_envs, 3)`` (e.g. a
    :func:`command_grid`); each trajectory then also stores its ``"Command"`` (extra key, ignored by loaders).
    """
    fields = list(fields or env.default_style_fields())
    fixed = None
    if command is not None:
        fixed = torch.as_tensor(command, dtype=torch.float32)
        if fixed.shape not in ((3,), (env.num_envs, 3)):
            raise ValueError(
                f"command must be (vx, vy, yaw) or one row per robot ({env.num_envs}, 3), got {tuple(fixed.shape)}"
            )
        fixed = fixed.expand(env.num_envs, 3)
    obs, _ = env.get_observations()
    steps = int(round(duration_s / env.dt))
    warm = int(round(warmup_s / env.dt))
    ids = torch.as_tensor(list(env_ids), dtype=torch.long, device=obs.device)
    buffer: torch.Tensor | None = None  # (steps, robots, fields), allocated with the first frame
    never = warm + steps
    end = torch.full((len(ids),), never, dtype=torch.long, device=obs.device)  # first step of a failure
    for k in range(warm + steps):
        if fixed is not None:
            env.commands[:] = fixed
        obs, _, dones, extras = env.step(policy(obs))
        failed = (dones.bool() & ~extras["time_outs"].bool())[ids]
        end = torch.where(failed & (end == never), k, end)
        if k >= warm:
            feats = env.style_features(fields)
            if buffer is None:
                buffer = torch.zeros(
                    steps, len(ids), feats.shape[-1], dtype=torch.float32, device=feats.device
                )
            buffer[k - warm] = feats[ids]
    counts = (end - warm).clamp(min=0).tolist()
    frames = (
        {} if buffer is None else {i: buffer[: counts[j], j].cpu().tolist() for j, i in enumerate(env_ids)}
    )
    motion = {}
    for i in env_ids:
        if not frames.get(i):
            continue
        traj: dict[str, Any] = {
            "Fields": fields,
            "Frames": frames[i],
            "FrameDuration": float(env.dt),
            "MotionWeight": 1.0,
        }
        if fixed is not None:
            traj["Command"] = [float(v) for v in fixed[i]]
        motion[f"{name}_{i}"] = traj
    return motion


def save_motion_file(motion: dict[str, dict[str, Any]], path: str) -> None:
    """Write a motion dict (plain data only) atomically.

    Raises:
        OSError: ``path`` is a folder, a device, FIFO or socket (it is never replaced).
    """
    refuse_special_file(path, "motion file")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            pickle.dump(motion, f, protocol=4)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):  # an earlier file at ``path`` stays as it was
            os.remove(tmp)
        raise


class MotionFileError(ValueError, pickle.UnpicklingError):
    """A motion file that cannot be read (the message names it); also an ``UnpicklingError``, as a refused
    class reference used to be reported."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"Motion files may only hold plain data; this one references {module}.{name}. Convert it to "
            "dicts, lists, floats and strings (see st_rl.tasks.motion_recorder)."
        )


def load_motion_file(path: str) -> dict[str, dict[str, Any]]:
    """Read a motion file without executing code from it (no classes are resolved).

    Every trajectory is checked: ``Fields`` a list of names, ``Frames`` a non-empty list of rows of
    ``len(Fields)`` finite numbers, ``FrameDuration`` a finite number > 0 and ``MotionWeight`` (optional) a finite
    number >= 0.

    Raises:
        FileNotFoundError: there is no such file.
        MotionFileError: (a ``ValueError``) the file is not such a motion dict; the message names the file, the
            trajectory and the entry (for NaN / Inf: the frame and field).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"motion file not found: {path}")
    try:
        with open(path, "rb") as f:
            data = _PlainUnpickler(io.BytesIO(f.read())).load()
    except (pickle.UnpicklingError, EOFError, ValueError, IndexError, TypeError) as e:
        raise MotionFileError(
            f"{path}: not a readable motion file ({type(e).__name__}: {e}); record it again with "
            "st-rl record-motion"
        ) from e
    if not isinstance(data, dict):
        raise MotionFileError(
            f"{path}: a motion file holds a dict of trajectories, got {type(data).__name__}"
        )
    for key, traj in data.items():
        _check_trajectory(path, key, traj)
    return data


def _check_trajectory(path: str, key: Any, traj: Any) -> None:
    """Raise :class:`MotionFileError` naming ``path``, the trajectory ``key`` and the entry when ``traj`` is not
    a trajectory that :class:`~st_rl.datasets.MotionLoader` can sample (see :func:`load_motion_file`)."""

    def error(message: str) -> MotionFileError:
        return MotionFileError(f"{path}: trajectory {key!r}: {message}; fix or re-record the file")

    missing = [
        k for k in ("Fields", "Frames", "FrameDuration") if not isinstance(traj, dict) or k not in traj
    ]
    if missing:
        raise MotionFileError(f"{path}: trajectory {key!r} lacks {missing}")
    fields = traj["Fields"]
    if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) for f in fields):
        raise error("'Fields' must be a list of field names")
    frames = traj["Frames"]
    if not isinstance(frames, (list, tuple)):
        raise error(f"'Frames' must be a list of frames, got {type(frames).__name__}")
    width = len(fields)
    for i, frame in enumerate(frames):
        if not isinstance(frame, (list, tuple)) or len(frame) != width:
            raise MotionFileError(
                f"{path}: trajectory {key!r} has frames whose length differs from len(Fields)={width} "
                f"(frame {i})"
            )
    if len(frames) == 0:
        raise error("'Frames' is empty")
    try:
        values = np.asarray(frames, dtype=np.float64).reshape(len(frames), width)
    except (TypeError, ValueError) as e:
        raise error(f"'Frames' must hold numbers ({e})") from None
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        frame, column = (int(v) for v in bad[0])
        raise error(
            f"frame {frame} holds {values[frame, column]} (field {fields[column]!r}; {len(bad)} non-finite "
            f"value(s) in all) -- NaN/Inf frames cannot serve as a reference"
        )
    duration = traj["FrameDuration"]
    if isinstance(duration, bool) or not isinstance(duration, (int, float, np.number)):
        raise error(f"'FrameDuration' must be a number of seconds, got {duration!r}")
    if not math.isfinite(duration) or duration <= 0:
        raise error(f"'FrameDuration' must be a finite number of seconds > 0, got {duration!r}")
    weight = traj.get("MotionWeight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)):
        raise error(f"'MotionWeight' must be a number >= 0, got {weight!r}")
    if not math.isfinite(weight) or weight < 0:
        raise error(f"'MotionWeight' must be a finite number >= 0, got {weight!r}")


def joint_style_fields(env: Any) -> list[str]:
    """Style fields describing a gait independent of heading and speed: joint positions and velocities."""
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
    """Record the scripted trot of the built-in quadruped (no pushes, no noise, zero command) to ``path``.

    With ``moving=True`` the reference covers walking, not only trotting in place: ``num_robots`` is
    ignored and 27 robots trot with every combination of 9 strides in [-0.4, 0.4] rad (about -0.6 to 0.6
    m/s) and 3 hip swings (-0.15, 0, 0.15 rad, turning), one trajectory each.

    Returns the recorded style fields (default: :func:`joint_style_fields`).
    """
    stride: float | torch.Tensor = 0.0
    hip: float | torch.Tensor = 0.0
    if moving:
        grid = torch.cartesian_prod(torch.linspace(-0.4, 0.4, 9), torch.tensor([-0.15, 0.0, 0.15]))
        stride, hip = grid[:, 0], grid[:, 1]
        num_robots = grid.shape[0]
    env = make_env(task, num_envs=num_robots, seed=seed, max_push_vel_xy=0.0, noise_level=0.0)
    fields = list(fields or joint_style_fields(env))
    motion = record_motion(
        env,
        scripted_trot_policy(env, stride=stride, hip_amp=hip),
        duration_s,
        fields=fields,
        env_ids=range(num_robots),
        command=[0.0, 0.0, 0.0],
    )
    if not motion:
        raise RuntimeError("every scripted-trot robot fell before recording started")
    save_motion_file(motion, path)
    return fields


@torch.inference_mode()
def collect_style_windows(
    env: Any, policy: Callable[[torch.Tensor], torch.Tensor], duration_s: float, warmup_s: float = 1.0
) -> torch.Tensor:
    """Run ``policy`` from a reset and gather the flattened ``ref_obs`` windows of robots that did not just
    finish, after ``warmup_s`` (the task needs ``amp_obs_frame_num > 0``). Returns ``(M, H * F)``."""
    env.reset()
    obs, extras = env.get_observations()
    if "ref_obs" not in (extras.get("observations") or {}):
        raise ValueError("the environment provides no ref_obs windows; build it with amp_obs_frame_num > 0")
    out = []
    for k in range(int(round(duration_s / env.dt))):
        obs, _, dones, extras = env.step(policy(obs))
        if k * env.dt >= warmup_s:
            alive = ~dones
            out.append(extras["observations"]["ref_obs"][alive].reshape(int(alive.sum()), -1))
    return torch.cat(out)
