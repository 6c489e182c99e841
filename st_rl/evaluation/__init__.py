"""Evaluating trained policies: tracking metrics, rendering and videos, envs from stored configs; rebuilding a run
from its checkpoint is :mod:`st_rl.evaluation.runs` (it loads the runners)."""

from st_rl.evaluation.metrics import SUMMARY_KEYS, evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, render_frame, set_default_gl_backend
from st_rl.evaluation.task_env import make_env_from_cfg

__all__ = [
    "SUMMARY_KEYS",
    "VideoRecorder",
    "evaluate_policy",
    "format_summary",
    "make_env_from_cfg",
    "render_frame",
    "set_default_gl_backend",
]
