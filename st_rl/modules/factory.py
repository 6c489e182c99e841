"""Build a policy from its config, filling dimensions and layouts from the environment."""

from __future__ import annotations

import copy
from typing import Any

import torch.nn as nn


def resolve_policy_kwargs(env: Any, policy_cfg: dict[str, Any]) -> dict[str, Any]:
    """The policy's keyword arguments: ``policy_cfg`` (copied, without ``class_name``) completed from ``env``.

    ``num_actor_obs``, ``num_critic_obs`` and ``num_actions`` are filled when missing or ``None``;
    ``obs_segments`` / ``privileged_obs_segments`` are injected when the config lacks them; an
    ``amp_discriminator`` config without ``input_dim`` gets the width of the env's AMP windows. ``env`` may be
    an :class:`st_rl.env.EnvAdapter` or any env with ``num_obs`` / ``num_privileged_obs`` (0 or ``None``
    meaning "critic sees the actor observations").
    """
    cfg = copy.deepcopy(dict(policy_cfg))
    cfg.pop("class_name", None)
    num_obs = getattr(env, "num_obs", None)
    num_critic = getattr(env, "num_critic_obs", None) or getattr(env, "num_privileged_obs", None) or num_obs
    defaults = {"num_actor_obs": num_obs, "num_critic_obs": num_critic, "num_actions": env.num_actions}
    for key, value in defaults.items():
        if cfg.get(key) is None:
            cfg[key] = value
    obs_segments = getattr(env, "obs_segments", None)
    critic_segments = getattr(env, "critic_obs_segments", None) or getattr(
        env, "privileged_obs_segments", None
    )
    if cfg.get("obs_segments") is None and obs_segments is not None:
        cfg["obs_segments"] = obs_segments
    has_critic_layout = (
        cfg.get("privileged_obs_segments") is not None or cfg.get("critic_obs_segments") is not None
    )
    if not has_critic_layout and critic_segments is not None:
        cfg["privileged_obs_segments"] = critic_segments
    amp = cfg.get("amp_discriminator")
    if isinstance(amp, dict) and amp.get("input_dim") is None:
        amp_dim = getattr(env, "amp_obs_dim", None)
        if amp_dim:
            cfg["amp_discriminator"] = {**amp, "input_dim": int(amp_dim)}
    return cfg


def fill_missing(cfg: dict[str, Any], resolved: dict[str, Any]) -> None:
    """Replace the ``None`` values of ``cfg`` (recursively in dicts) by those of ``resolved``, in place.

    Used on the runner's private copy of the config, so that ``config.json`` records the sizes that were
    taken from the environment.
    """
    for key, value in cfg.items():
        if value is None and resolved.get(key) is not None:
            cfg[key] = copy.deepcopy(resolved[key])
        elif isinstance(value, dict) and isinstance(resolved.get(key), dict):
            fill_missing(value, resolved[key])


def build_actor_critic(env: Any, class_name: Any, policy_cfg: dict[str, Any]) -> Any:
    """Instantiate ``class_name`` with ``policy_cfg`` (copied, never mutated), completed from ``env`` by
    :func:`resolve_policy_kwargs` (``env=None``: the config is complete)."""
    import st_rl.modules as modules
    from st_rl.utils.config import resolve_class

    cls = resolve_class(class_name, modules, "policy", nn.Module)
    if env is None:
        cfg = copy.deepcopy(dict(policy_cfg))
        cfg.pop("class_name", None)
    else:
        cfg = resolve_policy_kwargs(env, policy_cfg)
    return cls(**cfg)
