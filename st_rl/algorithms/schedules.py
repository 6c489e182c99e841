"""Probability schedules of teacher-student training."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

ProbFunc = Callable[[int], float]


def GET_PROB_FUNC(option: str, iteration_scale: float) -> ProbFunc:  # noqa: N802 - reference name
    """A schedule ``f(iteration) -> probability`` decaying from 1 to 0 (``"linear"``, ``"exp"``, ``"tanh"``)."""
    scale = float(iteration_scale)
    if scale <= 0:
        raise ValueError(f"update_times_scale must be > 0, got {iteration_scale}")
    options: dict[str, ProbFunc] = {
        "linear": lambda x: max(0.0, 1.0 - x / scale),
        "exp": lambda x: max(0.0, (1.0 - 1.0 / scale) ** x),
        "tanh": lambda x: max(0.0, 0.5 * (1.0 - math.tanh((x - scale) / scale))),
    }
    if option not in options:
        raise ValueError(f"Unknown probability schedule {option!r}; choose one of {sorted(options)}")
    return options[option]


def as_schedule(value: Any, iteration_scale: float, what: str = "teacher_act_prob") -> ProbFunc:
    """Turn a schedule name, a callable or a number into ``f(iteration) -> float``."""
    if isinstance(value, str):
        return GET_PROB_FUNC(value, iteration_scale)
    if callable(value):
        return value  # type: ignore[return-value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        constant = float(value)
        return lambda _x: constant
    raise TypeError(f"{what} must be 'linear', 'exp', 'tanh', a callable or a number; got {value!r}")
