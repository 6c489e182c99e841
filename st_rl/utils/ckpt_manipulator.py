"""Checkpoint manipulators: functions ``(loaded_checkpoint, current_algorithm_state) -> checkpoint`` applied
by the runner's ``load()`` when the runner config names one (``ckpt_manipulator="replace_encoder0"``).

A manipulator adapts a checkpoint to a changed model before it is loaded, e.g. a student whose first encoder
now reads a different sensor. The runner then loads the result (optimizer state only when it is kept) and
writes it into the log directory as ``model_<iter>_manipulated.pt`` so the run is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Manipulator = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def replace_encoder0(src: dict[str, Any], algo_state_dict: dict[str, Any]) -> dict[str, Any]:
    """Keep everything from ``src`` except the actor's first encoder, which keeps its fresh weights.

    For every key of the current model: ``critic_encoders.0.*`` comes from ``src``; any other key under
    ``encoders.0.`` keeps the current (freshly initialised) weights; all remaining keys come from ``src``.
    The result has no optimizer state (the parameter set changed meaning).

    Raises:
        KeyError: a key the current model needs is missing from ``src``.
    """
    current: dict[str, torch.Tensor] = algo_state_dict["model_state_dict"]
    source: dict[str, torch.Tensor] = src["model_state_dict"]
    model: dict[str, torch.Tensor] = {}
    missing = []
    for key, value in current.items():
        if key.startswith("critic_encoders.0."):
            pick_src = True
        elif key.startswith("encoders.0.") or ".encoders.0." in key:
            pick_src = False
        else:
            pick_src = True
        if pick_src:
            if key not in source:
                missing.append(key)
                continue
            model[key] = source[key]
        else:
            model[key] = value
    if missing:
        raise KeyError(
            f"replace_encoder0: the checkpoint lacks {missing[:5]}{'...' if len(missing) > 5 else ''}"
        )
    return {"model_state_dict": model, "iter": src.get("iter", 0), "infos": src.get("infos")}


MANIPULATORS: dict[str, Manipulator] = {"replace_encoder0": replace_encoder0}


def get_manipulator(name: str | Manipulator) -> Manipulator:
    """A manipulator by name (from this module, or ``"package.module:function"``) or the callable itself."""
    if callable(name):
        return name  # type: ignore[return-value]
    if name in MANIPULATORS:
        return MANIPULATORS[name]
    if isinstance(name, str) and ":" in name:
        import importlib

        module_name, _, attr = name.partition(":")
        fn = getattr(importlib.import_module(module_name), attr, None)
        if callable(fn):
            return fn  # type: ignore[return-value]
    raise ValueError(
        f"Unknown ckpt_manipulator {name!r}; available: {sorted(MANIPULATORS)} or 'package.module:function'"
    )
