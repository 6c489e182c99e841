"""Class names in configs, resolved at call time among a package's exports (:data:`NAMESPACES`), and the trust
rules of configs read back from disk. A leaf: it imports nothing of st_rl."""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import importlib
import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

__all__ = ["NAMESPACES", "TRUST_OPT_IN", "UntrustedConfigError", "available_classes", "class_label"]
__all__ += ["imports_allowed", "refuse_untrusted_import", "resolve_class", "untrusted_config"]

NAMESPACES: dict[str, str] = {
    "policy": "st_rl.modules",
    "teacher policy": "st_rl.modules",
    "algorithm": "st_rl.algorithms",
    "extension": "st_rl.algorithms.extensions",
    "runner": "st_rl.runners",
}

TRUST_OPT_IN = (
    "pass --trust-config (st-rl play / export / record-motion) or trust_config=True (Python) if you trust "
    "that file"
)

# Where each kind of class is named in a training config, for error messages.
_CLASS_KEYS = {
    "policy": "policy.class_name (or runner.policy_class_name)",
    "algorithm": "algorithm.class_name (or runner.algorithm_class_name)",
    "runner": "runner_class_name (or runner.runner_class_name)",
    "extension": "algorithm.extensions[].class_name",
    "teacher policy": "teacher_policy.class_name",
    "logger": "logger",
}


def class_label(obj: Any) -> str:
    """A string naming a class (``"Name"`` for st_rl classes, ``"module:Qualname"`` otherwise)."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", "")
    qual = getattr(obj, "__qualname__", repr(obj))
    return qual if module.startswith("st_rl.") else f"{module}:{qual}"


def _namespace(namespace: ModuleType | str | None, kind: str) -> ModuleType:
    if isinstance(namespace, ModuleType):
        return namespace
    return importlib.import_module(namespace or NAMESPACES[kind])


def available_classes(namespace: ModuleType | str, base: type | None = None) -> list[str]:
    """Public class names exported by a namespace module (optionally subclasses of ``base``)."""
    module = _namespace(namespace, "")
    names = []
    for name in getattr(module, "__all__", dir(module)):
        obj = getattr(module, name, None)
        if inspect.isclass(obj) and (base is None or issubclass(obj, base)):
            names.append(name)
    return sorted(names)


class UntrustedConfigError(ImportError):
    """A config read back from disk names code to import (``"package.module:Name"``) without an opt-in."""


# (source, opt-in text) inside untrusted_config()
_UNTRUSTED: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "st_rl_untrusted", default=None
)


@contextlib.contextmanager
def untrusted_config(source: str, opt_in: str = TRUST_OPT_IN, trusted: bool = False) -> Iterator[None]:
    """Inside the block (unless ``trusted``), import paths in configs raise :class:`UntrustedConfigError` naming
    ``source`` (a run's ``config.json``, a checkpoint) and ``opt_in``."""
    token = None if trusted else _UNTRUSTED.set((str(source), opt_in))
    try:
        yield
    finally:
        if token is not None:
            _UNTRUSTED.reset(token)


def imports_allowed() -> bool:
    """False inside :func:`untrusted_config`."""
    return _UNTRUSTED.get() is None


def refuse_untrusted_import(spec: str, key: str, registered: list[str] | None = None) -> None:
    """Raise :class:`UntrustedConfigError` inside :func:`untrusted_config` for the import path ``spec`` at ``key``
    (``registered``: the names that resolve without an import)."""
    context = _UNTRUSTED.get()
    if context is None:
        return
    source, opt_in = context
    registered = list(registered or [])
    more = f", ... ({len(registered) - 8} more)" if len(registered) > 8 else ""
    names = f" ({', '.join(registered[:8])}{more})" if registered else ""
    raise UntrustedConfigError(
        f"{source} sets {key} = {spec!r}, an import path: loading it would import and run code named by "
        f"that file. A config read back from a run directory or checkpoint may only name st_rl's registered "
        f"classes and functions{names}. Fix: {opt_in}, or use a registered name."
    )


def _import_path(name: str, kind: str) -> type:
    module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"Cannot import {kind} class '{name}': {e}") from e
    if not inspect.isclass(obj):
        raise ValueError(f"{kind} '{name}' is not a class")
    return obj


def resolve_class(
    name: Any,
    namespace: ModuleType | str | None,
    kind: str,
    base: type | None = None,
    *,
    allow_import: bool | None = None,
    key: str | None = None,
) -> type:
    """Resolve a ``class_name`` (a class, a name exported by ``namespace``, default ``NAMESPACES[kind]``, or
    ``"pkg.module:Class"``) to a subclass of ``base``. Import paths: ``allow_import``, default True outside
    :func:`untrusted_config`; ``key``: the config key, for messages. Unknown names: a ValueError listing all."""
    if allow_import is None:
        allow_import = imports_allowed()
    if inspect.isclass(name):
        return name
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} class_name must be a non-empty string or a class, got {name!r}")
    module = _namespace(namespace, kind)
    if ":" in name or ("." in name and not hasattr(module, name)):
        if not allow_import:
            key = key or _CLASS_KEYS.get(kind, f"{kind} class_name")
            registered = available_classes(module, base)
            if imports_allowed():  # refused by the caller, not by a context: no file to name
                raise UntrustedConfigError(
                    f"{key} = {name!r} is an import path, which is not allowed here; use one of st_rl's "
                    f"{kind} classes: {registered}."
                )
            refuse_untrusted_import(name, key, registered)
        return _import_path(name, kind)
    obj = getattr(module, name, None)
    registered_only = not allow_import and not getattr(obj, "__module__", "").startswith("st_rl.")
    if inspect.isclass(obj) and (base is None or issubclass(obj, base)) and not registered_only:
        return obj
    names = available_classes(module, base)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise ValueError(
        f"Unknown {kind} class_name '{name}'.{hint} Available: {names}; or give 'package.module:ClassName'."
    )
