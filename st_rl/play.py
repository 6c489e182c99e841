"""``st-rl play``: evaluate a checkpoint (:func:`play`) or an exported policy file (:func:`play_exported`) on its
task: the tracking metrics of :func:`st_rl.evaluation.metrics.evaluate_policy`, an MP4 video (MuJoCo rendering,
``MUJOCO_GL=egl`` by default) and a command-tracking plot (matplotlib)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from st_rl.deploy import OnnxPolicy, load_exported_policy
from st_rl.evaluation.metrics import _check_locomotion_env, evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, render_frame, set_default_gl_backend
from st_rl.evaluation.runs import LoadedRun, load_run, make_env_from_cfg, refuse_gymnasium_module
from st_rl.plotting import plot_tracking
from st_rl.registry import untrusted_config

__all__ = [
    "LoadedRun",
    "NonFiniteActionsError",
    "VideoRecorder",
    "evaluate_policy",
    "format_summary",
    "load_run",
    "play",
    "play_exported",
    "render_frame",
    "set_default_gl_backend",
]


def _evaluate_and_report(
    env: Any,
    policy: Any,
    task: str,
    source: str,
    label: str,
    duration_s: float,
    video: str | None,
    plot: str | None,
    command: Sequence[float] | None,
    record_env: int,
    verbose: bool,
    *recorder_args: Any,
) -> dict[str, Any]:
    """The evaluation of :func:`play` and :func:`play_exported`: metrics, video (``recorder_args``: fps, size,
    quality and camera of the :class:`VideoRecorder`), plot and summary."""
    _check_locomotion_env(env)
    fps, (width, height), quality, camera = recorder_args
    recorder = (
        None if video is None else VideoRecorder(env, video, record_env, fps, width, height, camera, quality)
    )
    try:
        metrics = evaluate_policy(env, policy, duration_s, record_env, recorder, command=command)
    finally:
        if recorder is not None:
            recorder.close()
    if plot is not None:
        title = f"{task} - {os.path.basename(source)} - env {record_env}"
        plot = plot_tracking(metrics["trace"], plot, title=title, metrics=metrics)
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


class NonFiniteActionsError(ValueError):
    """An exported policy gave NaN or Inf actions."""


class _FiniteActions:
    """Stops play with a :class:`NonFiniteActionsError` when the policy's actions hold NaN/Inf (every step)."""

    def __init__(self, policy: Any, path: str) -> None:
        self.policy = policy
        self.path = path
        self.steps = 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        actions = self.policy(obs)
        self.steps += 1
        if not bool(torch.isfinite(actions).all()):
            where = "on the first step" if self.steps == 1 else f"at step {self.steps}"
            raise NonFiniteActionsError(
                f"{self.path} gave NaN/Inf actions {where} (environments "
                f"{_nonfinite_rows(actions)}): the exported policy is broken. Export a checkpoint from before "
                "training diverged (st-rl export checks for this)."
            )
        return actions

    def reset(self, dones: torch.Tensor | None = None) -> None:
        self.policy.reset(dones)


def _nonfinite_rows(actions: torch.Tensor) -> str:
    rows = (~torch.isfinite(actions.reshape(actions.shape[0], -1))).any(dim=1).nonzero().flatten().tolist()
    return ", ".join(map(str, rows[:5])) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")


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
    trust_config: bool = False,
) -> dict[str, Any]:
    """Evaluate a checkpoint's deterministic policy; optionally film env ``record_env`` and plot its tracking.

    The runner is rebuilt by :func:`load_run` without the optimizer; play starts fresh episodes (the training
    rollout's episode state and recurrent memories are not restored).

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
        trust_config: the run's stored config may name code to import (docs/security.md).

    Returns:
        The metrics of :func:`evaluate_policy` plus ``task``, ``checkpoint``, ``iteration``, ``video`` and ``plot``.

    Raises:
        CheckpointError: the checkpoint does not fit its run's policy, or holds NaN/Inf weights or statistics
            (:class:`~st_rl.utils.checkpoint.NonFiniteCheckpointError`).
    """
    if video is not None:
        set_default_gl_backend("egl")
    run = load_run(checkpoint, task, num_envs, device, seed, trust_config=trust_config)
    assert run.task is not None
    _check_locomotion_env(run.env)
    inference = run.runner.get_inference_policy(device)
    dev = torch.device(device)

    class _Policy:
        def __call__(self, obs: torch.Tensor) -> torch.Tensor:
            return inference(obs.to(dev))

        def reset(self, dones: torch.Tensor) -> None:
            inference.reset(dones.to(dev))

    label = f"{os.path.basename(run.path)} (iteration {run.iteration})"
    metrics = _evaluate_and_report(
        run.env, _Policy(), run.task, run.path, label, duration_s, video, plot, command, record_env, verbose,
        video_fps, video_size, video_quality, camera,
    )  # fmt: skip
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
    trust_config: bool = False,
) -> dict[str, Any]:
    """Deployment check: drive a task with an exported policy file alone (no st_rl model class involved).

    ``policy_path`` (``policy.onnx`` or TorchScript ``policy.pt``) is loaded by
    :func:`st_rl.deploy.load_exported_policy` and run on the task of its metadata (or ``task``), as :func:`play`.

    Args:
        policy_path: the exported file.
        task: registered task name (default: the metadata's ``task``).
        seed: environment seed (default: the metadata's ``seed``).
        trust_config: the metadata's task may be a Gymnasium id naming a module to import.
        (other arguments as :func:`play`)

    Returns:
        The metrics of :func:`evaluate_policy` plus ``task``, ``policy``, ``format``, ``iteration``, ``video`` and
        ``plot``.

    Raises:
        ValueError: no task is known, or the task's observation/action sizes differ from the file's.
        NonFiniteActionsError: the file gives NaN/Inf actions (at the first step, or later).
    """
    if video is not None:
        set_default_gl_backend("egl")
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
    with untrusted_config(f"{policy_path} (its metadata)", trusted=trust_config or task is not None):
        refuse_gymnasium_module(name, "task")
    env = make_env_from_cfg(name, num_envs, "cpu", seed, env_cfg or {})
    num_obs, num_actions = int(env.num_obs), int(env.num_actions)
    if (num_obs, num_actions) != (policy.num_obs, policy.num_actions):
        raise ValueError(
            f"{policy_path} takes {policy.num_obs} observations and gives {policy.num_actions} actions; task "
            f"{name!r} has {num_obs} and {num_actions}. Play it on the task it was exported from "
            f"({stored_task!r})."
        )
    fmt = "onnx" if isinstance(policy, OnnxPolicy) else "torchscript"
    iteration = meta.get("iteration")
    label = f"{os.path.basename(policy_path)} ({fmt}, iteration {iteration})"
    metrics = _evaluate_and_report(
        env, _FiniteActions(policy, policy_path), name, policy_path, label, duration_s, video, plot, command,
        record_env, verbose, video_fps, video_size, video_quality, camera,
    )  # fmt: skip
    metrics.update(policy=os.path.abspath(policy_path), format=fmt, iteration=iteration)
    return metrics
