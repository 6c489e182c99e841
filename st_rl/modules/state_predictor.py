"""Policy parts that predict observation components from others: the state estimator (``estimator``,
``memory_s``) and the privileged-state adaptor (``adaptor``, ``memory_p``), attributes of the policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from st_rl.env.layout import get_subobs_by_components, get_subobs_size, substitute_estimated_state
from st_rl.modules.checkpoint_compat import record_default_activation
from st_rl.modules.encoder import require_segments
from st_rl.modules.memory import Memory
from st_rl.modules.mlp import MlpModel
from st_rl.modules.utils import get_activation_Cls, part_is_on
from st_rl.utils.precision import full_precision


def substitute_with_probability(
    observations: torch.Tensor,
    estimate: torch.Tensor,
    components: Sequence[str],
    segments: Any,
    prob: float,
    inference: bool,
) -> torch.Tensor:
    """Observations whose ``components`` hold the detached ``estimate``, per sample with probability ``prob``
    (always at inference when ``prob > 0``)."""
    if prob <= 0:
        return observations
    observations = observations.clone()
    if inference:
        replaced = estimate.detach()
    else:
        target = get_subobs_by_components(observations, components, segments)
        use = torch.rand(estimate.shape[:-1] + (1,), device=estimate.device) < prob
        replaced = torch.where(use, estimate.detach(), target)
    return substitute_estimated_state(observations, components, replaced, segments)


_PARTS = {
    "estimator": ("memory_s", "replace_state_prob"),
    "adaptor": ("memory_p", "privilege_replace_state_prob"),
}


def predict_and_substitute(
    policy: Any, part: str, observations: torch.Tensor, hidden: Any, inference: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(observations with the targets substituted, prediction)`` of the policy's ``part``."""
    memory_name, prob_name = _PARTS[part]
    segments = policy.obs_segments
    x = get_subobs_by_components(observations, getattr(policy, f"{part}_obs_components"), segments)
    memory = getattr(policy, memory_name)
    if memory is not None:
        x = memory(x, None, hidden)  # batch mode stays padded, like the observations
    estimate = full_precision(getattr(policy, part)(x))
    targets = getattr(policy, f"{part}_target_components")
    prob = getattr(policy, prob_name)
    return substitute_with_probability(observations, estimate, targets, segments, prob, inference), estimate


def _attach(
    policy: Any,
    part: str,
    obs_components: Any,
    target_components: Any,
    kwargs: dict[str, Any],
    in_size: int | None = None,
) -> tuple[Memory | None, MlpModel]:
    """``(memory or None, mlp)`` of a predictor on the policy's actor layout; ``in_size``: a memoryless MLP on a
    feature of that width."""
    segments = require_segments(policy.obs_segments, "obs")
    setattr(policy, f"{part}_obs_components", list(obs_components))
    setattr(policy, f"{part}_target_components", list(target_components))
    width, out_size = get_subobs_size(segments, obs_components), get_subobs_size(segments, target_components)
    former = get_activation_Cls(policy.activation)
    record_default_activation(policy._legacy_activations, part, kwargs, None, former)
    rnn_type = kwargs.pop("rnn_type", policy.rnn_type or "gru")
    rnn_hidden = int(kwargs.pop("rnn_hidden_size", policy.rnn_hidden_size))
    rnn_layers = int(kwargs.pop("rnn_num_layers", policy.rnn_num_layers))
    hidden = kwargs.pop("hidden_sizes", [128, 64])
    if in_size is not None or not policy.is_recurrent:
        return None, MlpModel(width if in_size is None else in_size, hidden, out_size, **kwargs)
    memory = Memory(width, rnn_type, rnn_layers, rnn_hidden)
    return memory, MlpModel(rnn_hidden, hidden, out_size, **kwargs)


def attach_estimator(policy: Any, obs_components: Any, target_components: Any, kwargs: Any) -> None:
    """Give ``policy`` a state estimator (and its own memory in recurrent policies without ``use_actor_rnn``)
    where its parts have one and components are given."""
    if not part_is_on(policy, "estimator", obs_components, target_components):
        return
    if not (obs_components or target_components):
        return
    if not obs_components or not target_components:
        raise ValueError("A state estimator needs estimator_obs_components and estimator_target_components")
    in_size = None
    if policy.use_actor_rnn:
        if not policy.is_recurrent:
            raise ValueError("use_actor_rnn needs a recurrent policy (StateAcRecurrent, ...)")
        if policy.replace_state_prob != 0:
            raise ValueError("replace_state_prob must be 0 with use_actor_rnn (the estimate is the memory's)")
        in_size = policy.actor_input_size()
    policy.memory_s, policy.estimator = _attach(
        policy, "estimator", obs_components, target_components, dict(kwargs or {}), in_size
    )


def attach_adaptor(policy: Any, obs_components: Any, target_components: Any, kwargs: Any) -> None:
    """Give ``policy`` a privileged-state adaptor (and its own memory in recurrent policies) where its parts
    have one."""
    if not part_is_on(policy, "adaptor", obs_components, target_components):
        return
    if not obs_components or not target_components:
        raise ValueError(f"{type(policy).__name__} lacks adaptor_obs_components or adaptor_target_components")
    policy.memory_p, policy.adaptor = _attach(
        policy, "adaptor", obs_components, target_components, dict(kwargs or {})
    )
