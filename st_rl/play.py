"""Evaluate a trained policy: tracking metrics, an MP4 video and a command-tracking plot.

:func:`play` rebuilds the runner of a checkpoint, runs its deterministic policy on the training task and reports
velocity-tracking metrics; :func:`evaluate_policy` does the measuring for any policy callable.

Metric rules (:func:`evaluate_policy`):

* **Samples.** After every policy step, each environment contributes one sample: the command in force during the
  step against the base velocity reached at its end (base frame, as the task defines ``base_lin_vel``).
* **Warm-up exclusion.** A sample counts only once the environment has run ``warmup_s`` (default 1 s) under its
  current command: the first ``round(warmup_s / dt)`` steps after every reset and after every change of
  ``env.commands`` are left out, and so is the step that ends an episode (its end state is already the next
  episode's first state).
* **velrmsd** = ``sqrt(mean(|cmd_xy - v_xy|^2))`` over the counted samples of all environments (m/s);
  **yaw_rmsd** the same for ``cmd_yaw - base_ang_vel_z`` (rad/s; NaN for tasks without a yaw command);
  **cmd_rms_xy** = ``sqrt(mean(|cmd_xy|^2))`` over the same samples, the velrmsd of a robot standing still.
* **CoT**: the mean over environments of the task's ``env.CoT`` at the end (each environment's current episode,
  or its last finished one while the current one is shorter than the task's metric warm-up); NaN if absent.
* **survival**: fraction of environments that never ended an episode by failure; a failure is
  ``done & ~extras["time_outs"]`` (time-outs are not failures). **falls_per_env_min** = failures / (envs * minutes).

Rendering (``video=...``) needs an OpenGL backend chosen *before* MuJoCo is imported: ``MUJOCO_GL=egl`` (headless
GPU or Mesa EGL, the default :func:`play` sets when the variable is unset) or ``MUJOCO_GL=osmesa`` (pure software;
``apt-get install libosmesa6``). Writing MP4 needs ``imageio`` and ``imageio-ffmpeg``; plots need ``matplotlib``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "LoadedRun",
    "VideoRecorder",
    "evaluate_policy",
    "format_summary",
    "load_run",
    "play",
    "play_exported",
    "render_frame",
    "set_default_gl_backend",
]

SUMMARY_KEYS = (
    ("velrmsd", "velocity tracking RMSD xy (m/s)"),
    ("yaw_rmsd", "yaw-rate RMSD (rad/s)"),
    ("cmd_rms_xy", "command RMS xy (m/s, standing-still RMSD)"),
    ("CoT", "cost of transport"),
    ("survival", "survival (envs without a fall)"),
    ("falls_per_env_min", "falls per env-minute"),
    ("mean_reward_per_step", "mean reward per step"),
)


def set_default_gl_backend(backend: str = "egl") -> str | None:
    """Set ``MUJOCO_GL`` to ``backend`` when it is unset, MuJoCo is not imported yet and the OS is Linux.

    MuJoCo picks its OpenGL backend when it is imported, so this must run first. Returns the value in force.
    """
    if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules and platform.system() == "Linux":
        os.environ["MUJOCO_GL"] = backend
    return os.environ.get("MUJOCO_GL")


# ---------------------------------------------------------------------------------------------- evaluation
def _actor_obs(obs: Any) -> torch.Tensor:
    if isinstance(obs, torch.Tensor):
        return obs
    if isinstance(obs, (tuple, list)):  # (obs, extras)
        return _actor_obs(obs[0])
    if hasattr(obs, "keys"):
        return obs["policy"]
    raise TypeError(f"cannot read actor observations from a {type(obs).__name__}")


def _check_locomotion_env(env: Any) -> None:
    missing = [name for name in ("commands", "base_lin_vel") if getattr(env, name, None) is None]
    if missing:
        raise ValueError(
            f"evaluate_policy needs a velocity-command task with 'commands' and 'base_lin_vel'; "
            f"{type(env).__name__} has no {' or '.join(repr(m) for m in missing)} "
            "(tasks that have them: quadruped_flat, quadruped_rough, velocity_tracking)."
        )
    if not hasattr(env, "dt"):
        raise ValueError(f"{type(env).__name__} has no 'dt' (seconds per policy step)")


def evaluate_policy(
    env: Any,
    policy: Callable[[torch.Tensor], torch.Tensor],
    duration_s: float,
    record_env: int = 0,
    render: Callable[[Any], None] | None = None,
    *,
    command: Sequence[float] | None = None,
    warmup_s: float = 1.0,
    reset: bool = True,
) -> dict[str, Any]:
    """Run ``policy`` on a velocity-command task for ``duration_s`` seconds and measure the tracking.

    Args:
        env: a task of the native st_rl API with ``commands`` (N, 2 or 3), ``base_lin_vel`` (N, >= 2),
            optionally ``base_ang_vel`` and ``CoT``, and ``dt``.
        policy: deterministic ``obs -> actions``; called under ``torch.inference_mode``.
        duration_s: simulated seconds; ``round(duration_s / env.dt)`` policy steps (at least 1).
        record_env: the environment whose commanded and achieved velocities are returned in ``trace``.
        render: called with ``env`` after the (re)set and after every step (e.g. a :class:`VideoRecorder`).
        command: fix ``env.commands`` of all environments to these values (vx, vy[, yaw rate]): written before
            every step, and after any step whose reset or resampling changed them (the observations are then
            recomputed so the policy never sees another command).
        warmup_s: seconds under a new command (or after a reset) left out of the tracking metrics.
        reset: reset all environments first, so every episode starts inside the evaluation.

    Returns:
        Floats ``velrmsd``, ``yaw_rmsd``, ``cmd_rms_xy``, ``CoT``, ``survival``, ``falls_per_env_min``,
        ``mean_reward_per_step``, ints ``falls``, ``num_envs``, ``num_steps``, ``num_samples``, floats
        ``duration_s``, ``dt``, ``warmup_s``, and ``trace``: numpy arrays ``time`` (T,), ``cmd`` (T, 3) and
        ``vel`` (T, 3) (vx, vy, yaw rate; NaN where the task has no yaw), ``done``, ``fall`` and ``counted``
        (sample used by the metrics) (T,) bool, of env ``record_env`` (see the module docstring for the rules).

    Raises:
        ValueError: the task has no velocity commands, or ``record_env`` / ``duration_s`` is out of range.
    """
    _check_locomotion_env(env)
    num_envs = int(env.num_envs)
    if not 0 <= record_env < num_envs:
        raise ValueError(f"record_env={record_env} is out of range for {num_envs} environments")
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    dt = float(env.dt)
    num_steps = max(1, int(round(duration_s / dt)))
    warmup_steps = int(round(warmup_s / dt))
    num_cmd = int(env.commands.shape[1])
    has_yaw = num_cmd >= 3 and getattr(env, "base_ang_vel", None) is not None
    fixed: torch.Tensor | None = None
    if command is not None:
        values = [float(v) for v in command]
        if not 2 <= len(values) <= num_cmd:
            raise ValueError(
                f"command has {len(values)} values; this task takes {num_cmd} (vx, vy[, yaw rate])"
            )
        values += [0.0] * (num_cmd - len(values))
        fixed = torch.tensor(values, dtype=env.commands.dtype, device=env.commands.device)

    def apply_fixed_command() -> bool:
        """Overwrite the commands; True when they had been changed (observations are stale)."""
        assert fixed is not None
        stale = bool((env.commands != fixed).any())
        if stale:
            env.commands = fixed.expand_as(env.commands).clone()
        return stale

    def refresh_obs() -> Any:
        compute = getattr(env, "_compute_observations", None)
        if callable(compute):
            compute()
        return env.get_observations()[0]

    with torch.inference_mode():
        if reset and hasattr(env, "reset"):
            env.reset()
        obs = env.get_observations()[0]
        if fixed is not None and apply_fixed_command():
            obs = refresh_obs()
        dev = env.commands.device
        age = torch.zeros(num_envs, dtype=torch.long, device=dev)  # steps under the current command
        err_xy_sum = torch.zeros((), dtype=torch.float64, device=dev)
        err_yaw_sum = torch.zeros((), dtype=torch.float64, device=dev)
        cmd_sq_sum = torch.zeros((), dtype=torch.float64, device=dev)
        count = torch.zeros((), dtype=torch.float64, device=dev)
        reward_sum = torch.zeros((), dtype=torch.float64, device=dev)
        fell = torch.zeros(num_envs, dtype=torch.bool, device=dev)
        falls = torch.zeros((), dtype=torch.long, device=dev)
        tr_cmd = torch.full((num_steps, 3), float("nan"))
        tr_vel = torch.full((num_steps, 3), float("nan"))
        tr_done = torch.zeros(num_steps, dtype=torch.bool)
        tr_fall = torch.zeros(num_steps, dtype=torch.bool)
        tr_counted = torch.zeros(num_steps, dtype=torch.bool)
        if render is not None:
            render(env)

        for t in range(num_steps):
            cmd = env.commands.clone()
            actions = policy(_actor_obs(obs))
            obs, rewards, dones, extras = env.step(actions)
            dones = dones.to(dev).bool()
            reset_policy = getattr(policy, "reset", None)
            if callable(reset_policy):
                reset_policy(dones)  # recurrent policies forget finished episodes
            time_outs = extras.get("time_outs") if isinstance(extras, dict) else None
            if time_outs is None:
                time_outs = torch.zeros_like(dones)
            failed = dones & ~time_outs.to(dev).bool()

            vel = env.base_lin_vel
            err_xy = (cmd[:, :2] - vel[:, :2]).double().square().sum(dim=1)
            counted = (age >= warmup_steps) & ~dones
            w = counted.double()
            err_xy_sum += (err_xy * w).sum()
            cmd_sq_sum += (cmd[:, :2].double().square().sum(dim=1) * w).sum()
            count += w.sum()
            yaw_rate = env.base_ang_vel[:, 2] if has_yaw else None
            if yaw_rate is not None:
                err_yaw_sum += ((cmd[:, 2] - yaw_rate).double().square() * w).sum()
            reward_sum += rewards.to(dev).double().sum()
            fell |= failed
            falls += failed.long().sum()

            tr_cmd[t, : min(num_cmd, 3)] = cmd[record_env, :3].float().cpu()
            tr_vel[t, :2] = vel[record_env, :2].float().cpu()
            if yaw_rate is not None:
                tr_vel[t, 2] = float(yaw_rate[record_env])
            tr_done[t] = bool(dones[record_env])
            tr_fall[t] = bool(failed[record_env])
            tr_counted[t] = bool(counted[record_env])

            if fixed is not None and apply_fixed_command():
                obs = refresh_obs()
            changed = dones | (env.commands != cmd).any(dim=1)
            age = torch.where(changed, torch.zeros_like(age), age + 1)
            if render is not None:
                render(env)

        n = float(count)
        nan = float("nan")
        cot = getattr(env, "CoT", None)
        minutes = num_steps * dt / 60.0
        metrics: dict[str, Any] = {
            "velrmsd": math.sqrt(float(err_xy_sum) / n) if n else nan,
            "yaw_rmsd": math.sqrt(float(err_yaw_sum) / n) if n and has_yaw else nan,
            "cmd_rms_xy": math.sqrt(float(cmd_sq_sum) / n) if n else nan,
            "CoT": float(torch.as_tensor(cot).float().mean()) if cot is not None else nan,
            "survival": float((~fell).float().mean()),
            "falls_per_env_min": float(falls) / (num_envs * minutes),
            "falls": int(falls),
            "mean_reward_per_step": float(reward_sum) / (num_envs * num_steps),
            "num_envs": num_envs,
            "num_steps": num_steps,
            "num_samples": int(n),
            "duration_s": num_steps * dt,
            "dt": dt,
            "warmup_s": warmup_steps * dt,
            "trace": {
                "env": record_env,
                "time": (np.arange(1, num_steps + 1) * dt),
                "cmd": tr_cmd.numpy(),
                "vel": tr_vel.numpy(),
                "done": tr_done.numpy(),
                "fall": tr_fall.numpy(),
                "counted": tr_counted.numpy(),
            },
        }
    if n == 0:
        warnings.warn(
            f"evaluate_policy: no samples after the {warmup_steps * dt:.2f} s warm-up; run longer than that",
            stacklevel=2,
        )
    return metrics


def format_summary(metrics: dict[str, Any], title: str = "Evaluation") -> str:
    """A two-column text table of the scalar metrics of :func:`evaluate_policy`."""
    rows = [(label, metrics[key]) for key, label in SUMMARY_KEYS if key in metrics]
    rows += [
        ("falls", metrics.get("falls")),
        ("envs x seconds", f"{metrics.get('num_envs')} x {metrics.get('duration_s', float('nan')):.1f}"),
        ("samples (after warm-up)", metrics.get("num_samples")),
    ]
    width = max(len(label) for label, _ in rows) + 2
    lines = [title, "-" * (width + 12)]
    for label, value in rows:
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        lines.append(f"{label:<{width}}{text:>12}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- rendering
QUALITIES = ("fast", "medium", "high")
DEFAULT_GEOM_GROUPS = (0, 1, 2, 3)


def _check_renderable(env: Any) -> None:
    batch = getattr(env, "batch", None)
    if batch is None or not hasattr(batch, "get_model") or not hasattr(batch, "get_data"):
        raise ValueError(
            f"{type(env).__name__} has no MuJoCo simulation to render (video needs a MuJoCo task such as "
            "quadruped_flat / quadruped_rough); run without a video (--no-video, video=None)."
        )


def _import_mujoco() -> Any:
    import mujoco

    return mujoco


def _make_renderer(model: Any, width: int, height: int) -> Any:
    mujoco = _import_mujoco()
    try:
        return mujoco.Renderer(model, height=height, width=width)
    except Exception as e:
        backend = os.environ.get("MUJOCO_GL", "<unset>")
        raise RuntimeError(
            f"MuJoCo offscreen rendering failed with MUJOCO_GL={backend}: {type(e).__name__}: {e}. "
            "Set MUJOCO_GL before Python imports MuJoCo: MUJOCO_GL=egl (needs libEGL: a GPU driver or Mesa) or "
            "MUJOCO_GL=osmesa (software; apt-get install libosmesa6). Or run without a video (--no-video)."
        ) from e


class VideoRecorder:
    """Renders one environment of a MuJoCo task into an MP4 while :func:`evaluate_policy` runs.

    Call it with the env after each step (``render=recorder``); it keeps every ``stride``-th state so the video
    plays in real time at ``1 / (stride * dt)`` fps (``stride = round(1 / (fps * dt))``). Use as a context
    manager or call :meth:`close`.

    Args:
        env: a MuJoCo task exposing ``batch`` (``mujoco.batch.Batch``) and ``dt``.
        path: output ``.mp4`` path (its folder is created).
        env_id: which simulation to film.
        fps: target frame rate.
        width, height: frame size in pixels (multiples of 8 are encoded without resizing).
        camera: camera name of the model (``"track"`` follows the trunk); ``None`` or a missing name: a free
            camera that tracks the base body.
        quality: ``"fast"`` (no shadows, reflections or anti-aliasing: cheapest in software GL), ``"medium"``
            (1024 px shadows, no anti-aliasing) or ``"high"`` (the model's own visual settings).
        geom_groups: geom groups drawn (default 0-3: the built-in quadruped's leg capsules are in group 3).
    """

    def __init__(
        self,
        env: Any,
        path: str,
        env_id: int = 0,
        fps: float = 25.0,
        width: int = 640,
        height: int = 360,
        camera: str | None = "track",
        quality: str = "medium",
        geom_groups: Sequence[int] = DEFAULT_GEOM_GROUPS,
    ) -> None:
        _check_renderable(env)
        if quality not in QUALITIES:
            raise ValueError(f"quality must be one of {QUALITIES}, got {quality!r}")
        mujoco = _import_mujoco()

        try:
            import imageio.v2 as iio
        except ImportError as e:
            raise ImportError(
                "Writing videos needs imageio and imageio-ffmpeg: pip install imageio imageio-ffmpeg"
            ) from e
        self.mujoco = mujoco
        self.env_id = int(env_id)
        self.stride = max(1, int(round(1.0 / (float(fps) * float(env.dt)))))
        self.fps = 1.0 / (self.stride * float(env.dt))
        self.path = path
        self.model = env.batch.get_model(self.env_id)
        _apply_quality(mujoco, self.model, quality)
        self.data = mujoco.MjData(self.model)
        self.renderer: Any = _make_renderer(self.model, width, height)
        self._flags = _scene_flags(mujoco, quality)
        self.scene_option = _scene_option(mujoco, geom_groups)
        self.camera = _camera_for(mujoco, self.model, camera, getattr(env, "base_body", 1))
        self.num_frames = 0
        self._calls = 0
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        try:
            self.writer: Any = iio.get_writer(
                path,
                format="FFMPEG",  # type: ignore[arg-type]
                mode="I",
                fps=self.fps,
                codec="libx264",
                pixelformat="yuv420p",
                quality=7,
                macro_block_size=8,
            )
        except Exception as e:
            self.renderer.close()
            raise RuntimeError(
                f"Cannot open an MP4 writer for {path}: {e}. Install the ffmpeg plugin: pip install imageio-ffmpeg"
            ) from e

    def frame(self, env: Any) -> np.ndarray:
        """Render the current state of the filmed environment (H, W, 3) uint8."""
        env.batch.get_data(self.env_id, self.data)
        self.mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera, scene_option=self.scene_option)
        for flag, value in self._flags.items():
            self.renderer.scene.flags[flag] = value
        return self.renderer.render()

    def __call__(self, env: Any) -> None:
        if self._calls % self.stride == 0:
            self.writer.append_data(self.frame(env))
            self.num_frames += 1
        self._calls += 1

    def close(self) -> None:
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.close()
            self.writer = None
        renderer = getattr(self, "renderer", None)
        if renderer is not None:
            renderer.close()
            self.renderer = None

    def __enter__(self) -> VideoRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _apply_quality(mujoco: Any, model: Any, quality: str) -> None:
    if quality in ("fast", "medium"):
        model.vis.quality.offsamples = 0
    if quality == "medium":
        model.vis.quality.shadowsize = min(int(model.vis.quality.shadowsize), 1024)


def _scene_flags(mujoco: Any, quality: str) -> dict[Any, int]:
    if quality != "fast":
        return {}
    flag = mujoco.mjtRndFlag
    return {flag.mjRND_SHADOW: 0, flag.mjRND_REFLECTION: 0}


def _scene_option(mujoco: Any, geom_groups: Sequence[int]) -> Any:
    opt = mujoco.MjvOption()
    for g in range(len(opt.geomgroup)):
        opt.geomgroup[g] = 1 if g in geom_groups else 0
    return opt


def _camera_for(mujoco: Any, model: Any, camera: str | None, base_body: int) -> Any:
    if camera is not None and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera) >= 0:
        return camera
    if camera is not None:
        warnings.warn(f"model has no camera {camera!r}; using a free camera tracking the base", stacklevel=3)
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    cam.trackbodyid = int(base_body)
    cam.distance, cam.elevation, cam.azimuth = 2.0, -20.0, 90.0
    return cam


def render_frame(
    env: Any,
    path: str | None = None,
    env_id: int = 0,
    width: int = 640,
    height: int = 360,
    camera: str | None = "track",
    quality: str = "high",
    geom_groups: Sequence[int] = DEFAULT_GEOM_GROUPS,
) -> np.ndarray:
    """Render one frame of a MuJoCo task (and write it to ``path`` as PNG when given)."""
    _check_renderable(env)
    mujoco = _import_mujoco()
    model = env.batch.get_model(env_id)
    _apply_quality(mujoco, model, quality)
    data = env.batch.get_data(env_id)
    mujoco.mj_forward(model, data)
    renderer = _make_renderer(model, width, height)
    try:
        cam = _camera_for(mujoco, model, camera, getattr(env, "base_body", 1))
        renderer.update_scene(data, camera=cam, scene_option=_scene_option(mujoco, geom_groups))
        for flag, value in _scene_flags(mujoco, quality).items():
            renderer.scene.flags[flag] = value
        image = renderer.render()
    finally:
        renderer.close()
    if path is not None:
        import imageio.v2 as iio

        iio.imwrite(path, image)
    return image


# ---------------------------------------------------------------------------------------------- play
def _read_json(path: str) -> dict[str, Any] | None:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else None


def _infer_task_from_env_cfg(env_cfg: dict[str, Any]) -> str | None:
    """The registered task whose constructor config keys include all keys of ``env_cfg`` (unique match)."""
    from st_rl.envs import TASKS

    if "terrain" in env_cfg and "model_path" in env_cfg:
        name = f"quadruped_{env_cfg['terrain']}"
        return name if name in TASKS else None
    keys = set(env_cfg)
    # A saved config may predate options added later, so its keys only need to be a subset.
    matches = [n for n, cls in TASKS.items() if keys and keys <= set(getattr(cls, "DEFAULT_CFG", {}) or {})]
    return matches[0] if len(matches) == 1 else None


def _stored_task(run_cfg: dict[str, Any] | None, ckpt_cfg: dict[str, Any] | None) -> str | None:
    """The task a run was trained on: ``runner.task`` of config.json or the checkpoint, else inferred."""
    for cfg in (run_cfg, ckpt_cfg):
        if not cfg:
            continue
        runner = cfg.get("runner")
        if isinstance(runner, dict) and runner.get("task"):
            return str(runner["task"])
        if cfg.get("task"):
            return str(cfg["task"])
    if run_cfg and isinstance(run_cfg.get("env"), dict):
        return _infer_task_from_env_cfg(run_cfg["env"])
    return None


def _make_env_from_cfg(
    task: str, num_envs: int, device: str, seed: int | None, env_cfg: dict[str, Any]
) -> Any:
    """``make_env`` with the run's stored env config, dropping keys the task factory sets itself."""
    from st_rl.envs import make_env

    cfg = dict(env_cfg)
    for _ in range(len(cfg) + 1):
        try:
            return make_env(task, num_envs=num_envs, device=device, seed=seed, **cfg)
        except TypeError as e:
            m = re.search(r"multiple values for keyword argument '(\w+)'", str(e))
            if not m or m.group(1) not in cfg:
                raise
            cfg.pop(m.group(1))
    raise RuntimeError("unreachable")  # pragma: no cover


def _iteration_of(path: str, state_iter: Any) -> int | str:
    if state_iter is not None:
        return int(state_iter)
    m = re.search(r"model_(\d+)\.pt$", os.path.basename(path))
    return int(m.group(1)) if m else os.path.splitext(os.path.basename(path))[0]


@dataclasses.dataclass
class LoadedRun:
    """A runner rebuilt from a checkpoint by :func:`load_run`.

    Attributes:
        path: the checkpoint file.
        state: the loaded checkpoint dictionary.
        runner: the runner, weights loaded (no optimizer).
        env: its environment.
        task: the task name the environment was made from (None when ``env`` was passed in).
        iteration: the checkpoint's iteration (or its file stem).
        train_cfg: the stored training config (``config.json`` without ``env``, else the checkpoint's).
        env_cfg: the stored env config used to build the environment (None: task defaults).
        seed: the environment seed used.
    """

    path: str
    state: dict[str, Any]
    runner: Any
    env: Any
    task: str | None
    iteration: int | str
    train_cfg: dict[str, Any]
    env_cfg: dict[str, Any] | None
    seed: int | None


def load_run(
    checkpoint: str,
    task: str | None = None,
    num_envs: int = 16,
    device: str = "cpu",
    seed: int | None = None,
    env: Any = None,
) -> LoadedRun:
    """Rebuild the runner of a checkpoint on its training task and load its weights (without the optimizer).

    The training config is ``config.json`` next to the checkpoint when present, else the checkpoint's
    ``config``. The task is the run's (``runner.task`` in ``config.json`` or the checkpoint, else inferred from the
    stored env config) unless ``task`` is given; when it is the run's task the stored env config (``config.json``
    key ``env``) is reused.

    Args:
        checkpoint: a ``model_<it>.pt`` file, or a run directory (its highest-numbered checkpoint).
        task: registered task name; overrides the stored one.
        num_envs: parallel environments.
        device: policy device.
        seed: environment seed (default: the run's seed).
        env: use this environment instead of making one (``task`` is then only recorded).

    Raises:
        ValueError: the checkpoint has no training config, or its task cannot be told.
    """
    from st_rl.runners import build_runner
    from st_rl.utils import checkpoint as ckpt
    from st_rl.utils.utils import get_checkpoint_path

    path = get_checkpoint_path(checkpoint)
    state = ckpt.load_checkpoint(path, map_location="cpu")
    ckpt_cfg = state.get("config") if isinstance(state.get("config"), dict) else None
    run_cfg = _read_json(os.path.join(os.path.dirname(os.path.abspath(path)), "config.json"))
    train_cfg = {k: v for k, v in (run_cfg or {}).items() if k != "env"} or ckpt_cfg
    if not train_cfg:
        raise ValueError(
            f"{path} has no stored training config (key 'config') and there is no config.json next to it; "
            "save checkpoints with OnPolicyRunner.save, or put the run's config.json beside the file."
        )
    stored_task = _stored_task(run_cfg, ckpt_cfg)
    if task is not None and stored_task is not None and task != stored_task:
        warnings.warn(f"using task {task!r}; the run was trained on {stored_task!r}", stacklevel=3)
    name = task or stored_task
    env_cfg = (run_cfg or {}).get("env") if stored_task == name else None
    runner_cfg = train_cfg.get("runner", train_cfg)
    if seed is None:
        seed = runner_cfg.get("seed") if isinstance(runner_cfg, dict) else None
    if env is None:
        if name is None:
            raise ValueError(
                f"Cannot tell which task {path} was trained on: neither config.json next to it nor the "
                "checkpoint's config names one (key runner.task). Pass it: task='quadruped_flat' (CLI: --task "
                "quadruped_flat)."
            )
        env = _make_env_from_cfg(name, num_envs, device, seed, env_cfg or {})
    train_cfg = json.loads(json.dumps(train_cfg))  # a private copy
    runner = build_runner(
        train_cfg.get("runner", {}).get("runner_class_name")
        or train_cfg.get("runner_class_name")
        or "OnPolicyRunner",
        env,
        train_cfg,
        log_dir=None,
        device=device,
    )
    runner.load(path, load_optimizer=False, map_location=device)
    return LoadedRun(
        path=path,
        state=state,
        runner=runner,
        env=env,
        task=name,
        iteration=_iteration_of(path, state.get("iter")),
        train_cfg=train_cfg,
        env_cfg=env_cfg,
        seed=seed,
    )


def _evaluate_and_report(
    env: Any,
    policy: Callable[[torch.Tensor], torch.Tensor],
    *,
    task: str,
    source: str,
    label: str,
    duration_s: float,
    video: str | None,
    plot: str | None,
    command: Sequence[float] | None,
    record_env: int,
    video_fps: float,
    video_size: tuple[int, int],
    video_quality: str,
    camera: str | None,
    verbose: bool,
) -> dict[str, Any]:
    """The evaluation shared by :func:`play` and :func:`play_exported`: metrics, video, plot and summary."""
    _check_locomotion_env(env)
    recorder = None
    if video is not None:
        recorder = VideoRecorder(
            env, video, record_env, video_fps, video_size[0], video_size[1], camera, video_quality
        )
    try:
        metrics = evaluate_policy(env, policy, duration_s, record_env, recorder, command=command)
    finally:
        if recorder is not None:
            recorder.close()
    if plot is not None:
        from st_rl.plotting import plot_tracking

        title = f"{task} - {os.path.basename(source)} - env {record_env}"
        plot_tracking(metrics["trace"], plot, title=title, metrics=metrics)
    metrics.update(
        task=task,
        video=os.path.abspath(video) if video else None,
        video_frames=recorder.num_frames if recorder is not None else 0,
        plot=os.path.abspath(plot) if plot else None,
    )
    if verbose:
        print(format_summary(metrics, f"[st-rl play] {task}, {label}"))
        for key in ("video", "plot"):
            if metrics[key]:
                print(f"{key}: {metrics[key]}")
    return metrics


def play(
    checkpoint: str,
    task: str | None = None,
    num_envs: int = 16,
    duration_s: float = 20.0,
    video: str | None = None,
    plot: str | None = None,
    device: str = "cpu",
    command: Sequence[float] | None = None,
    *,
    seed: int | None = None,
    record_env: int = 0,
    video_fps: float = 25.0,
    video_size: tuple[int, int] = (640, 360),
    video_quality: str = "medium",
    camera: str | None = "track",
    verbose: bool = True,
) -> dict[str, Any]:
    """Evaluate a checkpoint's deterministic policy; optionally film env ``record_env`` and plot its tracking.

    The runner is rebuilt by :func:`load_run` (stored training config, the run's task and env config unless
    ``task`` is given) and loaded without the optimizer.

    Args:
        checkpoint: a ``model_<it>.pt`` file, or a run directory (its highest-numbered checkpoint).
        task: registered task name; overrides the stored one.
        num_envs: parallel environments evaluated.
        duration_s: simulated seconds.
        video: MP4 path for a video of env ``record_env`` (None: no video).
        plot: PNG path for commanded vs achieved vx, vy and yaw rate of env ``record_env`` (None: no plot).
        device: policy device.
        command: fixed ``(vx, vy, yaw_rate)`` for all environments (None: the task's random commands).
        seed: environment seed (default: the run's seed).
        record_env, video_fps, video_size, video_quality, camera: see :class:`VideoRecorder`.
        verbose: print the summary table.

    Returns:
        The metrics of :func:`evaluate_policy` plus ``task``, ``checkpoint``, ``iteration``, ``video`` and ``plot``.
    """
    if video is not None:
        set_default_gl_backend("egl")
    run = load_run(checkpoint, task, num_envs, device, seed)
    assert run.task is not None
    _check_locomotion_env(run.env)
    inference = run.runner.get_inference_policy(device)
    dev = torch.device(device)

    class _Policy:
        def __call__(self, obs: torch.Tensor) -> torch.Tensor:
            return inference(obs.to(dev))

        def reset(self, dones: torch.Tensor) -> None:
            inference.reset(dones.to(dev))

    metrics = _evaluate_and_report(
        run.env,
        _Policy(),
        task=run.task,
        source=run.path,
        label=f"{os.path.basename(run.path)} (iteration {run.iteration})",
        duration_s=duration_s,
        video=video,
        plot=plot,
        command=command,
        record_env=record_env,
        video_fps=video_fps,
        video_size=video_size,
        video_quality=video_quality,
        camera=camera,
        verbose=verbose,
    )
    metrics.update(checkpoint=os.path.abspath(run.path), iteration=run.iteration)
    return metrics


def play_exported(
    policy_path: str,
    task: str | None = None,
    num_envs: int = 16,
    duration_s: float = 20.0,
    video: str | None = None,
    plot: str | None = None,
    command: Sequence[float] | None = None,
    *,
    seed: int | None = None,
    record_env: int = 0,
    video_fps: float = 25.0,
    video_size: tuple[int, int] = (640, 360),
    video_quality: str = "medium",
    camera: str | None = "track",
    verbose: bool = True,
) -> dict[str, Any]:
    """Deployment check: drive a task with an exported policy file alone (no st_rl model class involved).

    ``policy_path`` (``policy.onnx``, run by onnxruntime, or TorchScript ``policy.pt``) is loaded with its
    metadata (:func:`st_rl.deploy.load_exported_policy`); the task named there (or ``task``) is made with the
    stored env config, raw observations are fed to the file and the hidden state of recurrent policies is carried
    between steps and zeroed for environments that reset. The evaluation, video and plot are those of :func:`play`.

    Args:
        policy_path: the exported file.
        task: registered task name (default: the metadata's ``task``).
        seed: environment seed (default: the metadata's ``seed``).
        (other arguments as :func:`play`)

    Returns:
        The metrics of :func:`evaluate_policy` plus ``task``, ``policy``, ``format``, ``iteration``, ``video`` and
        ``plot``.

    Raises:
        ValueError: no task is known, or the task's observation/action sizes differ from the file's.
    """
    if video is not None:
        set_default_gl_backend("egl")
    from st_rl.deploy import OnnxPolicy, load_exported_policy

    policy = load_exported_policy(policy_path)
    meta = policy.metadata
    stored_task = meta.get("task")
    if task is not None and stored_task is not None and task != stored_task:
        warnings.warn(f"playing task {task!r}; the policy was exported from {stored_task!r}", stacklevel=2)
    name = task or stored_task
    if name is None:
        raise ValueError(
            f"{policy_path} does not name its task (metadata key 'task'); pass task='quadruped_flat' "
            "(CLI: --task quadruped_flat)."
        )
    env_cfg = meta.get("env_cfg") if name == stored_task else None
    if seed is None:
        seed = meta.get("seed")
    env = _make_env_from_cfg(name, num_envs, "cpu", seed, env_cfg or {})
    num_obs, num_actions = int(env.num_obs), int(env.num_actions)
    if (num_obs, num_actions) != (policy.num_obs, policy.num_actions):
        raise ValueError(
            f"{policy_path} takes {policy.num_obs} observations and gives {policy.num_actions} actions; task "
            f"{name!r} has {num_obs} and {num_actions}. Play it on the task it was exported from "
            f"({stored_task!r})."
        )
    fmt = "onnx" if isinstance(policy, OnnxPolicy) else "torchscript"
    iteration = meta.get("iteration")
    metrics = _evaluate_and_report(
        env,
        policy,
        task=name,
        source=policy_path,
        label=f"{os.path.basename(policy_path)} ({fmt}, iteration {iteration})",
        duration_s=duration_s,
        video=video,
        plot=plot,
        command=command,
        record_env=record_env,
        video_fps=video_fps,
        video_size=video_size,
        video_quality=video_quality,
        camera=camera,
        verbose=verbose,
    )
    metrics.update(policy=os.path.abspath(policy_path), format=fmt, iteration=iteration)
    return metrics
