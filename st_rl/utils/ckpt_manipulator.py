"""Checkpoint manipulators ``(checkpoint, current_algorithm_state) -> checkpoint`` (``runner.ckpt_manipulator``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from st_rl.registry import refuse_untrusted_import
from st_rl.utils.checkpoint import CheckpointError, describe_names, first_line

Manipulator = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _actor_encoder0(key: str) -> bool:
    return ".encoders.0." in f".{key}" and not key.startswith("critic_encoders.0.")  # at the start or nested


def replace_encoder0(src: dict[str, Any], algo_state_dict: dict[str, Any]) -> dict[str, Any]:
    """Everything from ``src`` but the actor's first encoder (``encoders.0.``), which stays fresh; no optimizer."""
    current: dict[str, torch.Tensor] = algo_state_dict["model_state_dict"]
    source: dict[str, torch.Tensor] = src["model_state_dict"]
    model = {key: value if _actor_encoder0(key) else source.get(key) for key, value in current.items()}
    missing = [key for key, value in model.items() if value is None]
    if missing:
        raise KeyError(f"replace_encoder0: the checkpoint lacks {describe_names(missing)}")
    return {"model_state_dict": model, "iter": src.get("iter", 0), "infos": src.get("infos")}


def add_amp_discriminator(src: dict[str, Any], algo_state_dict: dict[str, Any]) -> dict[str, Any]:
    """Start AMP from a checkpoint without a discriminator (e.g. PPO); discriminator, AMP normaliser and optimizer
    start fresh."""
    entry = "amp_discriminator_state_dict"  # st_rl.modules.checkpoint_compat.DISCRIMINATOR_ENTRY
    current: dict[str, torch.Tensor] = algo_state_dict["model_state_dict"]
    source: dict[str, torch.Tensor] = src["model_state_dict"]
    if entry not in algo_state_dict:
        raise ValueError("add_amp_discriminator: this policy has no AMP discriminator (use APPO/ATPPO)")
    if entry in src or any(k.startswith("discriminator.") for k in source):
        raise ValueError("add_amp_discriminator: the checkpoint already has a discriminator; resume it")
    model = {k: source.get(k) for k in current}
    missing = [k for k, v in model.items() if v is None]
    unexpected = [k for k in source if k not in current]
    if missing or unexpected:
        raise KeyError(
            f"add_amp_discriminator: the checkpoint's policy does not match this one (missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}); use the policy class family and hidden dims it was saved with"
        )
    out: dict[str, Any] = {"model_state_dict": model, "iter": src.get("iter", 0), "infos": src.get("infos")}
    return out | {k: algo_state_dict[k] for k in (entry, "amp_norm_state_dict") if k in algo_state_dict}


MANIPULATORS: dict[str, Manipulator] = {
    "replace_encoder0": replace_encoder0,
    "add_amp_discriminator": add_amp_discriminator,
}


def get_manipulator(name: str | Manipulator) -> Manipulator:
    """A manipulator by name (:data:`MANIPULATORS`, or ``"package.module:function"`` in a trusted config)."""
    if callable(name):
        return name  # type: ignore[return-value]
    if name in MANIPULATORS:
        return MANIPULATORS[name]
    if isinstance(name, str) and ":" in name:
        refuse_untrusted_import(name, "runner.ckpt_manipulator", sorted(MANIPULATORS))
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ImportError(f"ckpt_manipulator {name!r}: cannot import {module_name!r} ({e})") from e
        fn = getattr(module, attr, None)
        if callable(fn):
            return fn  # type: ignore[return-value]
    raise ValueError(
        f"Unknown ckpt_manipulator {name!r}; available: {sorted(MANIPULATORS)} or 'package.module:function'"
    )


def apply_manipulator(
    name: str | Manipulator, state: dict[str, Any], algo_state_dict: dict[str, Any], path: str
) -> dict[str, Any]:
    """Run the manipulator ``name`` on ``state`` read from ``path``; CheckpointError if it fails."""
    fn = get_manipulator(name)
    label = name if isinstance(name, str) else getattr(name, "__qualname__", repr(name))
    try:
        out = fn(state, algo_state_dict)
    except (KeyError, ValueError, TypeError) as e:
        msg = f"checkpoint manipulator {label!r} (runner.ckpt_manipulator) failed on {path}: {first_line(e)}"
        raise CheckpointError(msg) from e
    if not isinstance(out, dict) or "model_state_dict" not in out:
        got = f"keys {sorted(map(str, out))[:8]}" if isinstance(out, dict) else type(out).__name__
        msg = f"checkpoint manipulator {label!r} (runner.ckpt_manipulator) returned {got} for {path}"
        raise CheckpointError(f"{msg}; it must return the checkpoint to load, a dict with 'model_state_dict'")
    return out
