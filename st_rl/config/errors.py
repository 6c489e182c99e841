"""The error every configuration mistake raises: which key, which value, which rule, and the fix."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISSING", "ConfigError", "Problem", "TextProblem"]


@dataclass(frozen=True)
class Problem:
    """One mistake: the key ``path`` (nested form, e.g. ``algorithm.max_grad_norm``), ``value``, ``rule``, ``fix``."""

    path: str
    value: object
    rule: str
    fix: str = ""

    def __str__(self) -> str:
        value = "<missing>" if self.value is MISSING else repr(self.value)
        text = f"{self.path} = {value}: {self.rule}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


class TextProblem(Problem):
    """A problem with a file or an override's text as a whole: ``path: rule[: value]``."""

    def __str__(self) -> str:
        text = f"{self.path}: {self.rule}" + ("" if self.value is MISSING else f": {self.value!r}")
        return f"{text}. Fix: {self.fix}" if self.fix else text


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
"""Placeholder value of a required key that is absent."""


class ConfigError(ValueError):
    """A training config (or CLI argument) that cannot be used; one message line per item of ``problems``."""

    def __init__(self, problems: list[Problem] | Problem, source: str = "training config") -> None:
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        self.source = source
        listed = ": " + "\n  ".join(map(str, self.problems)) if self.problems else ""
        super().__init__(f"Invalid {source}{listed}")

    @property
    def paths(self) -> list[str]:
        return [p.path for p in self.problems]
