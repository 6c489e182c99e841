"""``st-rl play``: evaluate a checkpoint (:func:`play`) or an exported policy (:func:`play_exported`): tracking
metrics, an MP4 video (``MUJOCO_GL=egl`` by default) and a command-tracking plot."""

from __future__ import annotations

import os
from typing import Any

import torch

from st_rl.deploy import NonFiniteActionsError, PlayOptions, evaluate_and_report, play_exported
from st_rl.evaluation.metrics import evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, render_frame, set_default_gl_backend
from st_rl.evaluation.runs import LoadedRun, load_run

__all__ = ["LoadedRun", "NonFiniteActionsError", "VideoRecorder", "evaluate_policy", "format_summary"]
__all__ += ["PlayOptions", "load_run", "play", "play_exported", "render_frame", "set_default_gl_backend"]


def play(checkpoint: str, task: str | None = None, *, device: str = "cpu", **options: Any) -> dict[str, Any]:
    """Evaluate a checkpoint's (or run directory's latest) deterministic policy on fresh episodes of ``task``
    (default: the run's) on ``device`` (``options``: :class:`st_rl.deploy.PlayOptions`). Returns the metrics of
    :func:`evaluate_policy` plus ``task``, ``checkpoint``, ``iteration``, ``video`` and ``plot``."""
    o = PlayOptions(**options)
    if o.video is not None:
        set_default_gl_backend("egl")
    run = load_run(checkpoint, task, o.num_envs, device, o.seed, trust_config=o.trust_config)
    assert run.task is not None
    inference = run.runner.get_inference_policy(device)
    dev = torch.device(device)

    class _Policy:
        def __call__(self, obs: torch.Tensor) -> torch.Tensor:
            return inference(obs.to(dev))

        def reset(self, dones: torch.Tensor) -> None:
            inference.reset(dones.to(dev))

    label = f"{os.path.basename(run.path)} (iteration {run.iteration})"
    metrics = evaluate_and_report(run.env, _Policy(), run.task, run.path, label, o)
    metrics.update(checkpoint=os.path.abspath(run.path), iteration=run.iteration)
    return metrics
