"""Evaluating trained policies: tracking metrics (``metrics``), rendering and videos (``rendering``), a task's
environment from a stored config (``task_env``) and rebuilding a run from its checkpoint (``runs``, which loads
the runners: import it as :mod:`st_rl.evaluation.runs`). :mod:`st_rl.play` combines them for ``st-rl play``;
:func:`st_rl.deploy.play_exported` plays an exported policy file without any st_rl model class."""

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
