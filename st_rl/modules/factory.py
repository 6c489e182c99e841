"""Build a policy from its config, filling dimensions and layouts from the environment."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch.nn as nn

from st_rl.config.errors import ConfigError, Problem
from st_rl.env.adapter import EnvAdapter, EnvSpec
from st_rl.registry import resolve_class


def resolve_policy_kwargs(env: Any, policy_cfg: dict[str, Any], check: bool = True) -> dict[str, Any]:
    """The policy's keyword arguments: ``policy_cfg`` (copied, without ``class_name``) completed from ``env`` (an
    :class:`~st_rl.env.EnvAdapter`, an :class:`~st_rl.env.EnvSpec` or any env :meth:`EnvSpec.from_env` reads).

    Sizes missing or ``None`` are filled, the observation layouts injected when absent, and an
    ``amp_discriminator`` without ``input_dim`` gets the width of the env's AMP windows. With ``check`` (the
    runner's policy) the sizes and layouts the config gives must match the environment's.
    """
    spec = env if isinstance(env, (EnvSpec, EnvAdapter)) else EnvSpec.from_env(env)
    cfg = copy.deepcopy(dict(policy_cfg))
    cfg.pop("class_name", None)
    if check:
        check_policy_against_env(cfg, spec)
    num_critic = spec.num_critic_obs or spec.num_obs
    defaults = {"num_actor_obs": spec.num_obs, "num_critic_obs": num_critic, "num_actions": spec.num_actions}
    for key, value in defaults.items():
        if cfg.get(key) is None:
            cfg[key] = value
    if cfg.get("obs_segments") is None and spec.obs_segments is not None:
        cfg["obs_segments"] = spec.obs_segments
    has_critic_layout = (
        cfg.get("privileged_obs_segments") is not None or cfg.get("critic_obs_segments") is not None
    )
    if not has_critic_layout and spec.critic_obs_segments is not None:
        cfg["privileged_obs_segments"] = spec.critic_obs_segments
    amp = cfg.get("amp_discriminator")
    if isinstance(amp, dict) and amp.get("input_dim") is None:
        amp_dim = spec.amp_obs_dim
        if amp_dim:
            cfg["amp_discriminator"] = {**amp, "input_dim": int(amp_dim)}
    return cfg


def _width(segments: Any) -> int | None:
    try:
        return sum(math.prod(int(d) for d in (s if isinstance(s, (list, tuple)) else [s]))
                   for s in segments.values())  # fmt: skip
    except (TypeError, ValueError, AttributeError):
        return None


def check_policy_against_env(cfg: dict[str, Any], spec: EnvSpec | EnvAdapter) -> None:
    """Compare the sizes and layouts a policy config gives with the environment's, before the first step.

    Raises:
        st_rl.config.ConfigError: naming each ``policy.<key>`` that disagrees with the environment.
    """
    num_critic = spec.num_critic_obs or spec.num_obs
    problems = []
    for key, env_value, what in (
        ("num_actor_obs", spec.num_obs, "the environment's observation width"),
        ("num_critic_obs", num_critic, "the environment's critic observation width"),
        ("num_actions", spec.num_actions, "the environment's action width"),
    ):
        given = cfg.get(key)
        if given is not None and given != env_value:
            problems.append(
                Problem(
                    f"policy.{key}",
                    given,
                    f"differs from {what} ({env_value})",
                    f"remove it (it is taken from the environment) or set {env_value}",
                )  # fmt: skip
            )
    for key, width, what in (
        ("obs_segments", cfg.get("num_actor_obs") or spec.num_obs, "observation"),
        ("privileged_obs_segments", cfg.get("num_critic_obs") or num_critic, "critic observation"),
        ("critic_obs_segments", cfg.get("num_critic_obs") or num_critic, "critic observation"),
    ):
        segments = cfg.get(key)
        total = _width(segments) if isinstance(segments, dict) else None
        if total is not None and total != width:
            problems.append(
                Problem(
                    f"policy.{key}",
                    segments,
                    f"its shapes add up to {total}, the {what} is {width} wide",
                    "make the components cover the observation exactly, or remove the key to use the "
                    "environment's layout",
                )  # fmt: skip
            )
    amp = cfg.get("amp_discriminator")
    given = amp.get("input_dim") if isinstance(amp, dict) else None
    if isinstance(given, int) and spec.amp_obs_dim and given != spec.amp_obs_dim:
        problems.append(
            Problem(
                "policy.amp_discriminator.input_dim",
                given,
                f"differs from the width of the environment's AMP window ref_obs ({spec.amp_obs_dim})",
                f"set {spec.amp_obs_dim} (frames x style features) or remove it (it is taken from the environment)",
            )
        )
    if problems:
        raise ConfigError(problems)


def fill_missing(cfg: dict[str, Any], resolved: dict[str, Any]) -> None:
    """Replace the ``None`` values of ``cfg`` (recursively in dicts) by those of ``resolved``, in place (the
    runner's copy of the config, so that ``config.json`` records the sizes taken from the environment)."""
    for key, value in cfg.items():
        if value is None and resolved.get(key) is not None:
            cfg[key] = copy.deepcopy(resolved[key])
        elif isinstance(value, dict) and isinstance(resolved.get(key), dict):
            fill_missing(value, resolved[key])


def build_actor_critic(env: Any, class_name: Any, policy_cfg: dict[str, Any]) -> Any:
    """Instantiate ``class_name`` with ``policy_cfg`` (copied, never mutated), completed from ``env`` by
    :func:`resolve_policy_kwargs` (``env=None``: the config is complete)."""
    cls = resolve_class(class_name, None, "policy", nn.Module)
    if env is None:
        cfg = copy.deepcopy(dict(policy_cfg))
        cfg.pop("class_name", None)
    else:
        # The reference fills what is missing or None and keeps what is given: parkour's collect.py builds its
        # teacher for the privileged observations with explicit sizes next to the student's env.
        cfg = resolve_policy_kwargs(env, policy_cfg, check=False)
    return cls(**cfg)
