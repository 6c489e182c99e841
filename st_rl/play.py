"""``st-rl play``: evaluate a checkpoint (:func:`play`) or an exported policy file (:func:`play_exported`) on its
task: the tracking metrics of :func:`st_rl.evaluation.metrics.evaluate_policy`, an MP4 video (MuJoCo rendering,
``MUJOCO_GL=egl`` by default) and a command-tracking plot (matplotlib)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from st_rl.deploy import NonFiniteActionsError, evaluate_and_report, play_exported
from st_rl.evaluation.metrics import _check_locomotion_env, evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, render_frame, set_default_gl_backend
from st_rl.evaluation.runs import LoadedRun, load_run

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
    metrics = evaluate_and_report(
        run.env, _Policy(), run.task, run.path, label, duration_s, video, plot, command, record_env, verbose,
        video_fps, video_size, video_quality, camera,
    )  # fmt: skip
    metrics.update(checkpoint=os.path.abspath(run.path), iteration=run.iteration)
    return metrics
