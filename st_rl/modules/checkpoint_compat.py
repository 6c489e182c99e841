"""Loading policy checkpoints written by other versions or for other observation layouts."""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import get_obs_slice, normalize_segments

DEFAULT_NONLINEARITY_KEY = "reference_default_nonlinearity"
"""Buffer marking policies built since the ReLU default of estimators / adaptors / encoders."""

LegacyActivations = dict[str, tuple[type[nn.Module], list[int] | None]]
"""Part name -> (st_rl's former default activation, indices of the modules built with the default or None: all)."""


DISCRIMINATOR_ENTRY = "amp_discriminator_state_dict"
"""Checkpoint entry of the AMP extension's discriminator; older checkpoints (ours and the reference's) hold it as
the ``discriminator.*`` keys of ``model_state_dict``."""


def split_discriminator_state(model_state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(policy entries, discriminator entries without their "discriminator." prefix)`` of a ``model_state_dict``."""
    policy = {k: v for k, v in model_state.items() if not k.startswith("discriminator.")}
    return policy, {k.removeprefix("discriminator."): v for k, v in model_state.items() if k not in policy}


def discriminator_state(checkpoint: Mapping[str, Any]) -> dict[str, Any] | None:
    """The AMP discriminator's state in a checkpoint of either layout, or None."""
    if DISCRIMINATOR_ENTRY in checkpoint:
        return checkpoint[DISCRIMINATOR_ENTRY]
    return split_discriminator_state(checkpoint.get("model_state_dict") or {})[1] or None


def record_default_activation(
    record: LegacyActivations, name: str, kwargs: Any, count: int | None, former: type[nn.Module] | None
) -> None:
    """Record the modules of part ``name`` (``count`` of them, or one) whose kwargs name no nonlinearity."""
    if former is None:
        return
    if count is None:
        if "nonlinearity" not in (kwargs or {}):
            record[name] = (former, None)
        return
    per_module = list(kwargs) if isinstance(kwargs, (list, tuple)) else [kwargs] * count
    indices = [i for i, kw in enumerate(per_module) if "nonlinearity" not in (kw or {})]
    if indices:
        record[name] = (former, indices)


def _replace_relu(module: nn.Module, cls: type[nn.Module]) -> None:
    for name, child in module.named_children():
        if type(child) is nn.ReLU:
            setattr(module, name, cls())
        else:
            _replace_relu(child, cls)


def restore_legacy_activations(policy: nn.Module, record: LegacyActivations) -> None:
    """Put the former default activations back in the parts built with the ReLU default (an older checkpoint)."""
    changed = []
    for name, (old_cls, indices) in record.items():
        module = getattr(policy, name, None)
        if module is None or old_cls is nn.ReLU:
            continue
        for target in [module[i] for i in indices] if indices is not None else [module]:
            _replace_relu(target, old_cls)
        changed.append(name)
    if changed:
        msg = f"The checkpoint predates the ReLU default nonlinearity of estimators and encoders: {changed} keep "
        warnings.warn(
            msg + "the activation they were trained with (set their nonlinearity to silence this).",
            stacklevel=3,
        )


def reconcile_normalizer_state(
    state: dict[str, Any], own: Mapping[str, Any], enabled: Mapping[str, bool]
) -> None:
    """In ``state``, drop the statistics of normalisers that are off and fill missing ones from ``own`` (warned)."""
    for name, on in enabled.items():
        prefix = name + "."
        keys = [k for k in state if k.startswith(prefix)]
        if keys and not on:
            msg = f"The checkpoint has observation statistics ({name}) but empirical_normalization is off: ignored."
            warnings.warn(msg, stacklevel=3)
            for k in keys:
                del state[k]
        elif on and not keys:
            warnings.warn(
                f"The checkpoint has no observation statistics for {name}; they start fresh.", stacklevel=3
            )
            state.update({k: v for k, v in own.items() if k.startswith(prefix)})


def feature_segments(policy: Any, segments: Any, critic: bool) -> Any:
    """Layout of the first layer's input: encoded components take the encoder's output width."""
    segs = normalize_segments(segments)
    if segs is None:
        return None
    layout = policy.critic_layout if critic else policy.actor_layout
    encoded = set(layout.component_names) if layout is not None else set()
    visual = None if critic else policy.visual_component_name
    out: OrderedDict[str, tuple[int, ...]] = OrderedDict()
    for name, shape in segs.items():
        if name == visual:
            out[name] = (policy.visual_latent_size,)
        elif name in encoded:
            out[name] = (layout.output_size if layout is not None else 0,)
        else:
            out[name] = shape
    return out


def _remap_columns(
    key: str,
    value: torch.Tensor,
    target: torch.Tensor,
    layouts: tuple[Any, Any],
    report: dict[str, list[str]],
) -> bool:
    """Copy ``value``'s column blocks into ``target`` by component; False if they are not input layers."""
    src, dst = layouts
    if not (
        value.dim() == 2
        and target.dim() == 2
        and value.shape[0] == target.shape[0]
        and src is not None
        and dst is not None
        and value.shape[1] == sum(math.prod(v) for v in src.values())
        and target.shape[1] == sum(math.prod(v) for v in dst.values())
    ):
        return False
    side = "critic" if key.startswith(("critic", "memory_c")) else "actor"
    for name, shape in dst.items():
        if name in src and src[name] == shape:
            target[:, get_obs_slice(dst, name)[0]] = value[:, get_obs_slice(src, name)[0]]
        elif f"{side}:{name}" not in report["new_components"]:
            report["new_components"].append(f"{side}:{name}")
    report["remapped"].append(key)
    return True


@torch.no_grad()
def load_misaligned_state_dict(
    policy: nn.Module,
    module: nn.Module | Mapping[str, torch.Tensor],
    obs_segments: Mapping[str, Any],
    critic_obs_segments: Mapping[str, Any] | None = None,
) -> dict[str, list[str]]:
    """Load the parameters of a policy (or state dict) trained with another observation layout. Equal shapes
    are copied; input layers column block by block for each component of the same size in both layouts (new
    components keep their initialisation); the rest is skipped. ``obs_segments`` / ``critic_obs_segments``:
    the source's layouts. Returns (and prints) the ``loaded``, ``remapped``, ``skipped`` and
    ``new_components`` keys."""
    src = module.state_dict() if isinstance(module, nn.Module) else dict(module)
    old = {
        False: feature_segments(policy, obs_segments, False),
        True: feature_segments(policy, critic_obs_segments or obs_segments, True),
    }
    new = {
        False: feature_segments(policy, policy.obs_segments, False),
        True: feature_segments(policy, policy.privileged_obs_segments, True),
    }
    report: dict[str, list[str]] = {"loaded": [], "remapped": [], "skipped": [], "new_components": []}
    for key, target in policy.state_dict().items():
        if key not in src:
            report["skipped"].append(f"{key} (absent in source)")
            continue
        value = src[key]
        if tuple(value.shape) == tuple(target.shape):
            target.copy_(value)
            report["loaded"].append(key)
            continue
        critic = key.startswith(("critic", "memory_c"))
        if not _remap_columns(key, value, target, (old[critic], new[critic]), report):
            report["skipped"].append(f"{key} (shape {tuple(value.shape)} -> {tuple(target.shape)})")
    print(
        f"[st_rl] load_misaligned_state_dict: {len(report['loaded'])} loaded, {len(report['remapped'])} remapped "
        f"by component, skipped {report['skipped']}, new components {report['new_components']}"
    )
    return report
