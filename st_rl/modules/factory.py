"""Build a policy from its config, filling dimensions and layouts from the environment."""

from __future__ import annotations

import copy
from typing import Any

import torch.nn as nn

from st_rl.config.errors import ConfigError, Problem
from st_rl.env.adapter import EnvAdapter, EnvSpec
from st_rl.env.layout import segments_size
from st_rl.registry import resolve_class


def resolve_policy_kwargs(env: Any, policy_cfg: dict[str, Any], check: bool = True) -> dict[str, Any]:
    """The policy's keyword arguments: ``policy_cfg`` (copied, without ``class_name``) with the sizes, layouts and
    AMP ``input_dim`` it lacks taken from ``env`` (an ``EnvAdapter``, ``EnvSpec`` or raw env; None: the config
    is complete); with ``check`` the ones it gives must match the environment's."""
    cfg = copy.deepcopy(dict(policy_cfg))
    cfg.pop("class_name", None)
    if env is None:
        return cfg
    spec = env if isinstance(env, (EnvSpec, EnvAdapter)) else EnvSpec.from_env(env)
    if check:
        check_policy_against_env(cfg, spec)
    defaults = {
        "num_actor_obs": spec.num_obs,
        "num_critic_obs": spec.num_critic_obs or spec.num_obs,
        "num_actions": spec.num_actions,
        "obs_segments": spec.obs_segments,
    }
    if cfg.get("critic_obs_segments") is None:  # an alias of privileged_obs_segments
        defaults["privileged_obs_segments"] = spec.critic_obs_segments
    for key, value in defaults.items():
        if cfg.get(key) is None and value is not None:
            cfg[key] = value
    amp = cfg.get("amp_discriminator")
    if isinstance(amp, dict) and amp.get("input_dim") is None and spec.amp_obs_dim:
        cfg["amp_discriminator"] = {**amp, "input_dim": int(spec.amp_obs_dim)}
    return cfg


def check_policy_against_env(cfg: dict[str, Any], spec: EnvSpec | EnvAdapter) -> None:
    """Raise ``ConfigError`` naming each ``policy.<key>`` whose size or layout disagrees with the environment."""
    num_critic = spec.num_critic_obs or spec.num_obs
    problems = []
    for key, env_value, what in (
        ("num_actor_obs", spec.num_obs, "the environment's observation width"),
        ("num_critic_obs", num_critic, "the environment's critic observation width"),
        ("num_actions", spec.num_actions, "the environment's action width"),
    ):
        given = cfg.get(key)
        if given is not None and given != env_value:
            fix = f"remove it (it is taken from the environment) or set {env_value}"
            problems.append(Problem(f"policy.{key}", given, f"differs from {what} ({env_value})", fix))
    for key, width, what in (
        ("obs_segments", cfg.get("num_actor_obs") or spec.num_obs, "observation"),
        ("privileged_obs_segments", cfg.get("num_critic_obs") or num_critic, "critic observation"),
        ("critic_obs_segments", cfg.get("num_critic_obs") or num_critic, "critic observation"),
    ):
        segments = cfg.get(key)
        try:
            total = segments_size(segments) if isinstance(segments, dict) else None
        except (TypeError, ValueError):
            total = None
        if total is not None and total != width:
            why = f"its shapes add up to {total}, the {what} is {width} wide"
            fix = "make the components cover the observation exactly, or remove the key to use the environment's layout"
            problems.append(Problem(f"policy.{key}", segments, why, fix))
    amp = cfg.get("amp_discriminator")
    given = amp.get("input_dim") if isinstance(amp, dict) else None
    if isinstance(given, int) and spec.amp_obs_dim and given != spec.amp_obs_dim:
        why = f"differs from the width of the environment's AMP window ref_obs ({spec.amp_obs_dim})"
        fix = f"set {spec.amp_obs_dim} (frames x style features) or remove it (it is taken from the environment)"
        problems.append(Problem("policy.amp_discriminator.input_dim", given, why, fix))
    if problems:
        raise ConfigError(problems)


def fill_missing(cfg: dict[str, Any], resolved: dict[str, Any]) -> None:
    """Replace the ``None`` values of ``cfg`` (recursively) by those of ``resolved``, in place."""
    for key, value in cfg.items():
        if value is None and resolved.get(key) is not None:
            cfg[key] = copy.deepcopy(resolved[key])
        elif isinstance(value, dict) and isinstance(resolved.get(key), dict):
            fill_missing(value, resolved[key])


def build_actor_critic(env: Any, class_name: Any, policy_cfg: dict[str, Any]) -> Any:
    """Instantiate ``class_name`` with ``policy_cfg`` completed from ``env`` (None: the config is complete)."""
    cls = resolve_class(class_name, None, "policy", nn.Module)
    # given sizes are kept (parkour's collect.py builds its teacher with explicit sizes next to a student env)
    return cls(**resolve_policy_kwargs(env, policy_cfg, check=False))
