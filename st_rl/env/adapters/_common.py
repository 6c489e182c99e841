"""Helpers shared by the simulator adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from st_rl.env.adapters.apis import detect_api


def missing_attributes(env: Any, names: Sequence[str]) -> list[str]:
    """The attributes of ``names`` that ``env`` lacks, in order."""
    return [n for n in names if not hasattr(env, n)]


def require_attributes(env: Any, names: Sequence[str], what: str, fix: str) -> None:
    """Raise ``TypeError`` naming every attribute of ``names`` that ``env`` lacks.

    Args:
        env: the object to check.
        names: attribute names it must have.
        what: what ``env`` should be (used in the message), e.g. ``"an Isaac Lab RslRlVecEnvWrapper"``.
        fix: how to obtain such an object (appended to the message).
    """
    missing = missing_attributes(env, names)
    if missing:
        raise TypeError(f"{type(env).__name__} is not {what}: it has no {', '.join(missing)}. {fix}")


def observation_api(env: Any) -> str:
    """Which of EnvAdapter's APIs ``env.get_observations()`` follows (see :func:`st_rl.env.detect_api`)."""
    return detect_api(env.get_observations())
