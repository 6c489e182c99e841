"""Training runners."""

from __future__ import annotations

from typing import Any

from st_rl.runners.amp_policy_runner import AmpPolicyRunner
from st_rl.runners.dagger_saver import DaggerSaver
from st_rl.runners.demonstration import DemonstrationSaver
from st_rl.runners.interrupt import TrainingInterrupted
from st_rl.runners.on_policy_runner import InferencePolicy, OnPolicyRunner
from st_rl.runners.run_dir import RunDirectoryError, RunDirectoryLocked
from st_rl.runners.two_stage_runner import TwoStageRunner

__all__ = [
    "AmpPolicyRunner",
    "DaggerSaver",
    "DemonstrationSaver",
    "InferencePolicy",
    "OnPolicyRunner",
    "RunDirectoryError",
    "RunDirectoryLocked",
    "TrainingInterrupted",
    "TwoStageRunner",
    "build_runner",
]


def build_runner(runner_class_name: Any, *args: Any, **kwargs: Any) -> OnPolicyRunner:
    """Construct a runner by class name (``"OnPolicyRunner"`` or ``"package.module:Class"``)."""
    import st_rl.runners as runners
    from st_rl.utils.config import resolve_class

    cls = resolve_class(runner_class_name or "OnPolicyRunner", runners, "runner")
    return cls(*args, **kwargs)
