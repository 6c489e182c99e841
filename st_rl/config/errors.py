"""The error every configuration mistake raises: which key, which value, which rule, and the fix."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISSING", "ConfigError", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One mistake: ``path`` (e.g. ``algorithm.max_grad_norm``), ``value`` (MISSING: none to show), ``rule``, ``fix``."""

    path: str
    value: object
    rule: str
    fix: str = ""

    def __str__(self) -> str:
        value = "" if self.value is MISSING else f" = {self.value!r}"
        text = f"{self.path}{value}: {self.rule}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
"""Placeholder value of a required key that is absent."""


class ConfigError(ValueError):
    """A config (or CLI argument) that cannot be used; one message line per problem, the first of each path."""

    def __init__(self, problems: list[Problem] | Problem, source: str = "training config") -> None:
        unique: dict[str, Problem] = {}
        for p in [problems] if isinstance(problems, Problem) else problems:
            unique.setdefault(p.path, p)
        self.problems = list(unique.values())
        self.source = source
        listed = ": " + "\n  ".join(map(str, self.problems)) if self.problems else ""
        super().__init__(f"Invalid {source}{listed}")

    @property
    def paths(self) -> list[str]:
        return [p.path for p in self.problems]
