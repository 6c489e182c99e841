"""Helpers shared by the simulator adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def require_attributes(env: Any, names: Sequence[str], what: str, fix: str) -> None:
    """Raise ``TypeError`` naming every attribute of ``names`` that ``env`` (expected to be ``what``) lacks."""
    missing = [n for n in names if not hasattr(env, n)]
    if missing:
        raise TypeError(f"{type(env).__name__} is not {what}: it has no {', '.join(missing)}. {fix}")
