"""Reading training configs from YAML or JSON files (``st-rl train --config FILE``); in YAML, ``3e-4`` is a number
and a key given twice is an error (PyYAML alone reads text and keeps the last)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from st_rl.config.errors import MISSING, ConfigError, Problem

__all__ = ["CONFIG_FILE_SUFFIXES", "load_config_file"]

CONFIG_FILE_SUFFIXES = (".yaml", ".yml", ".json")

# YAML 1.2 floats: PyYAML (YAML 1.1) wants a dot in the mantissa, so ``3e-4`` or ``1e5`` would be strings.
_YAML_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 floats and duplicate-key errors."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: SafeLoader reports it
                continue
            if first is not key_node.start_mark:
                msg = f"duplicate key {key!r} (first given on line {first.line + 1})"
                raise yaml.constructor.ConstructorError(None, None, msg, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+0123456789."))


def _error(path: str, rule: str, fix: str, text: str = "", line: int | None = None) -> ConfigError:
    """The error of file ``path``, at ``line`` (1-based) of ``text`` when given: it quotes that line, shortened."""
    lines = text.splitlines()
    value: object = lines[line - 1].strip() if line and 1 <= line <= len(lines) else MISSING
    if isinstance(value, str) and len(value) > 60:
        value = value[:57] + "..."
    where = path if line is None else f"{path}:{line}"
    return ConfigError(Problem(where, value, rule, fix), source=f"config file {path}")


def _parse_yaml(path: str, text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = None if mark is None else mark.line + 1
        where = "" if mark is None else f" at line {line}, column {mark.column + 1}"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        fix = f"correct the YAML{where} (indent with spaces, 'key: value' with a space after the colon)"
        raise _error(path, f"not valid YAML{where}: {problem}", fix, text, line) from e


def _parse_json(path: str, text: str) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        fix = f"correct the JSON at {where} (double-quoted keys and strings, no trailing commas)"
        raise _error(path, f"not valid JSON at {where}: {e.msg}", fix, text, e.lineno) from e
    except ValueError as e:
        raise _error(path, f"not valid JSON: {e}", "give each key once per object") from e


def load_config_file(path: str) -> dict[str, Any]:
    """A training config read from a YAML or JSON file, unvalidated; a :class:`ConfigError` (with the line) when
    the file is missing, unreadable or of another type, does not parse, or is not a mapping."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in CONFIG_FILE_SUFFIXES:
        rule = f"unknown config file type {suffix or '(no extension)'!r}"
        raise _error(path, rule, "give a .yaml, .yml or .json file")
    if not os.path.isfile(path):
        rule = "is a directory, not a file" if os.path.isdir(path) else "no such file"
        raise _error(path, rule, f"check the path (relative paths start at {os.getcwd()})")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fix = "check the file's permissions and that it is UTF-8 text"
        raise _error(path, f"cannot be read: {e}", fix) from e
    data = _parse_json(path, text) if suffix == ".json" else _parse_yaml(path, text)
    if not isinstance(data, dict):
        what = "the file is empty" if data is None else f"its top level is a {type(data).__name__}"
        fix = "write 'policy:', 'algorithm:' and runner keys (or a 'runner:' section) at the top level"
        rule = f"a training config must be a mapping of keys to values; {what}"
        raise _error(path, rule, fix, text, 1 if text.strip() else None)
    return data
