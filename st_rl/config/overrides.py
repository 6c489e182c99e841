"""Command-line overrides of a training config: ``section.key=value``, ``~key`` (delete), ``+key=value``
(Hydra style; paths in the nested form, see docs/configuration.md, "Command line")."""

from __future__ import annotations

import ast
import contextlib
import copy
import json
from typing import Any

from st_rl.config.errors import MISSING, ConfigError, Problem

__all__ = ["SECTIONS", "apply_overrides", "parse_value"]

SECTIONS = ("runner", "policy", "algorithm", "storage")  # other first parts are runner keys

# Keys that legitimately hold a number or a name (legged_gym: load_run=-1 or a run directory name).
_NUMBER_OR_TEXT_KEYS = frozenset({"load_run", "checkpoint", "load_checkpoint", "resume_path"})

_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None, "~": None}


def _error(item: str, rule: str, fix: str, value: Any = MISSING) -> ConfigError:
    return ConfigError(Problem(item, value, rule, fix), source="command-line override")


def parse_value(text: str) -> Any:
    """The value of an override: JSON, a Python literal, ``true``/``false``/``null``/``~`` (any case), a float
    (``inf``, ``nan``), else the text itself (``elu``, ``pkg.mod:Class``)."""
    stripped = text.strip()
    if not stripped:
        return ""
    for parse in (json.loads, ast.literal_eval, lambda t: _WORDS[t.lower()], float):  # float: inf, nan
        with contextlib.suppress(ValueError, SyntaxError, TypeError, KeyError, MemoryError, RecursionError):
            return parse(stripped)
    return text


def _split(item: str) -> tuple[bool, list[str], str | None]:
    """``(delete, path parts, raw value or None)`` of one override item."""
    text = item.strip()
    delete = text.startswith("~")  # `+key` / `++key`: set
    key, eq, raw = (text[1:] if delete else text.removeprefix("+").removeprefix("+")).partition("=")
    if delete and eq:
        raise _error(item, "a deletion takes no value", f"write '~{key}'")
    if not delete and not eq:
        example = f"write e.g. '{key or 'algorithm.learning_rate'}=VALUE' (no spaces around '=')"
        raise _error(item, "an override is KEY=VALUE", f"{example}, or '~KEY' to delete a key")
    parts = [p.strip() for p in key.strip().split(".")]
    if not all(parts):
        rule = "the key is empty" if parts == [""] else "the key has an empty part"
        raise _error(item, rule, "write a dotted key such as 'algorithm.learning_rate=3e-4'")
    return delete, parts, raw if eq else None


def _map_path(cfg: dict[str, Any], parts: list[str]) -> list[str]:
    """Where a nested-form path lives in ``cfg`` (flat or nested form)."""
    runner = cfg.get("runner")
    if not isinstance(runner, dict):  # flat form: runner keys are top-level keys
        return parts[1:] if parts[0] == "runner" and len(parts) > 1 else parts
    head = parts[0]
    if head == "runner" and len(parts) == 2 and parts[1] in cfg and parts[1] not in runner:
        return parts[1:]  # `runner.seed` where legged_gym keeps `seed` at the top level
    if head in SECTIONS or (head in cfg and head not in runner):
        return parts
    return ["runner", *parts]


def apply_overrides(cfg: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of ``cfg`` (flat or nested form) with ``overrides`` (``"algorithm.learning_rate=3e-4"``,
    ``"seed=3"``, ``"~algorithm.rnd_cfg"``) applied in order; a :class:`ConfigError` names a bad override."""
    out = copy.deepcopy(cfg)
    for item in overrides:
        delete, parts, raw = _split(item)
        path = _map_path(out, parts)
        node: dict[str, Any] = out
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None and not delete:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                if child is None:
                    raise _error(item, f"'{where}' does not exist", "check the key's spelling")
                rule = f"'{where}' is {child!r}, not a section, so it has no key '{path[depth + 1]}'"
                raise _error(item, rule, f"set the whole value instead: '{where}=...'")
            node = child
        last = path[-1]
        if delete:
            if last not in node:
                raise _error(item, f"there is no key '{'.'.join(path)}' to delete", "check the spelling")
            del node[last]
            continue
        assert raw is not None
        value = parse_value(raw)
        old = node.get(last)
        text_for_number = isinstance(value, str) and isinstance(old, (bool, int, float))
        if text_for_number and last not in _NUMBER_OR_TEXT_KEYS:
            kind, key = "true or false" if isinstance(old, bool) else "a number", ".".join(parts)
            rule, fix = f"expects {kind} (it is {old!r}), got text", f"write e.g. '{key}={json.dumps(old)}'"
            raise _error(key, rule, fix, value)
        node[last] = value
    return out
