"""Helpers shared by the simulator adapters."""

from __future__ import annotations

from typing import Any


def forwarded(name: str) -> Any:
    """A read-write property forwarding attribute ``name`` to ``self.env``."""
    return property(lambda self: getattr(self.env, name), lambda self, value: setattr(self.env, name, value))


def require_attributes(env: Any, names: str, what: str, fix: str) -> None:
    """Raise ``TypeError`` naming every attribute of the space-separated ``names`` that ``env`` (``what``) lacks."""
    missing = [n for n in names.split() if not hasattr(env, n)]
    if missing:
        raise TypeError(f"{type(env).__name__} is not {what}: it has no {', '.join(missing)}. {fix}")
