"""The three environment APIs :class:`~st_rl.env.EnvAdapter` accepts: ``"legged_gym"``, ``"rsl_rl2"`` and
``"tensordict"`` (``docs/environments.md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from st_rl.env.adapters.contract import describe_value

API_NAMES = ("legged_gym", "rsl_rl2", "tensordict")


@runtime_checkable
class ObservationGroups(Protocol):
    """Observations as named groups: a ``tensordict.TensorDict``, a dict, or any mapping-like object."""

    def keys(self) -> Any: ...

    def __getitem__(self, name: str) -> Any: ...


def detect_api(first_observation: Any) -> str:
    """Return the API name given what ``env.get_observations()`` returned."""
    if isinstance(first_observation, (torch.Tensor, np.ndarray)):
        return "legged_gym"
    if isinstance(first_observation, (tuple, list)) and len(first_observation) == 2:
        return "rsl_rl2"
    if isinstance(first_observation, (Mapping, ObservationGroups)):
        return "tensordict"
    got = describe_value(first_observation)
    apis = "a Tensor (legged_gym), an (obs, extras) tuple (rsl_rl 2.x) or a mapping of groups (rsl_rl >= 3)"
    raise TypeError(f"env.get_observations() returned {got}; expected {apis}.")


def group_mapping(api: str, raw: Any) -> Mapping[str, torch.Tensor]:
    """The observation groups of one raw observation payload of ``api`` (empty for legged_gym)."""
    if api == "tensordict":
        return raw
    if api == "rsl_rl2":
        extras = raw[1] if isinstance(raw, (tuple, list)) else raw
        return (extras or {}).get("observations", {}) or {}
    return {}


def _checked_names(key: str, names: Any, available: list[str]) -> list[str]:
    if key not in ("policy", "critic", "actor"):
        raise ValueError(f"obs_groups key '{key}' is not one of 'policy', 'critic' (or 'actor').")
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n in available for n in names):
        raise ValueError(f"obs_groups['{key}'] = {names!r} is not a list of available groups: {available}")
    return list(names)


def resolve_obs_groups(
    api: str, first: Any, obs_groups: Mapping[str, Sequence[str]] | None
) -> dict[str, list[str]] | None:
    """Which groups feed the actor (``"policy"``; rsl_rl 2.x default ``[]``: the obs tensor) and the critic."""
    if api == "legged_gym":
        if obs_groups:
            raise ValueError("obs_groups needs grouped observations; this env returns flat tensors")
        return None
    available = list(group_mapping(api, first).keys())
    resolved = {
        "policy" if key == "actor" else key: _checked_names(key, names, available)
        for key, names in (obs_groups or {}).items()
    }
    if "policy" not in resolved:
        if api == "rsl_rl2":
            resolved["policy"] = []  # the obs tensor step() returns, as the reference runner uses it
        elif "policy" in available or "actor" in available:
            resolved["policy"] = ["policy" if "policy" in available else "actor"]
        else:
            fix = "set obs_groups={'policy': [...], 'critic': [...]} in the runner config"
            raise ValueError(f"No actor observation group: the environment provides {available}; {fix}.")
    if "critic" not in resolved and "critic" in available:
        resolved["critic"] = ["critic"]
    return resolved
