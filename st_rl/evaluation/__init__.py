"""Evaluating trained policies: tracking metrics (``metrics``), rendering and videos (``rendering``) and
rebuilding a run from its checkpoint (``runs``). :mod:`st_rl.play` combines them for ``st-rl play``."""

from st_rl.evaluation.metrics import SUMMARY_KEYS, evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, render_frame, set_default_gl_backend
from st_rl.evaluation.runs import LoadedRun, load_run, make_env_from_cfg

__all__ = [
    "SUMMARY_KEYS",
    "LoadedRun",
    "VideoRecorder",
    "evaluate_policy",
    "format_summary",
    "load_run",
    "make_env_from_cfg",
    "render_frame",
    "set_default_gl_backend",
]
