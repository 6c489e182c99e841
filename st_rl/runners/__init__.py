"""Training runners."""

from __future__ import annotations

import sys
from typing import Any

from st_rl.registry import resolve_class
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
    """Construct a runner by class name (``"OnPolicyRunner"`` or ``"package.module:Class"``; ``None``: the
    default ``OnPolicyRunner``; an empty name is an error)."""
    name = "OnPolicyRunner" if runner_class_name is None else runner_class_name
    cls = resolve_class(name, sys.modules[__name__], "runner", key="runner_class_name")
    return cls(*args, **kwargs)
