"""Encoders replacing named observation components, in place, by learned latents (``MlpModel`` or ``Conv2dHeadModel``)."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import get_obs_slice, normalize_segments
from st_rl.modules.checkpoint_compat import record_default_activation
from st_rl.modules.conv2d import Conv2dHeadModel
from st_rl.modules.mlp import MlpModel
from st_rl.modules.utils import part_is_on

DEFAULT_ENCODER_OUTPUT_SIZE = 32
DEFAULT_ENCODER_KWARGS: dict[str, dict[str, Any]] = {
    "MlpModel": {"hidden_sizes": [128, 64]},
    "Conv2dHeadModel": {
        "channels": [16, 32],
        "kernel_sizes": [5, 3],
        "strides": [2, 2],
        "hidden_sizes": [64],
    },
}


class EncoderLayout:
    """Where the encoded components sit in a flat observation and how wide the result is."""

    def __init__(self, segments: Mapping[str, Any], component_names: Sequence[str], output_size: int) -> None:
        self.segments = segs = require_segments(normalize_segments(segments), "obs")
        self.component_names = list(component_names)
        self.output_size = int(output_size)
        self.slices = [get_obs_slice(segs, name) for name in self.component_names]
        self.input_width = sum(math.prod(s) for s in segs.values())
        encoded = sum(sl.stop - sl.start for sl, _ in self.slices)
        self.output_width = self.input_width - encoded + len(self.slices) * self.output_size
        # pieces in layout order: ("raw", column slice) or ("enc", encoder index)
        names = self.component_names
        self.pieces: list[tuple[str, Any]] = [
            ("enc", names.index(n)) if n in names else ("raw", get_obs_slice(segs, n)[0]) for n in segs
        ]

    def component_input(
        self, observations: torch.Tensor, index: int, encoder: nn.Module | None = None
    ) -> torch.Tensor:
        """Columns of component ``index``: flat for an ``MlpModel`` ``encoder``, else in the component's shape."""
        sl, shape = self.slices[index]
        columns = observations[..., sl]
        if isinstance(encoder, MlpModel):
            return columns
        return columns.reshape(*observations.shape[:-1], *shape)

    def encode(self, observations: torch.Tensor, index: int, encoders: nn.ModuleList) -> torch.Tensor:
        """Latent of component ``index`` (any leading dims)."""
        encoder = encoders[index]
        return encoder(self.component_input(observations, index, encoder))

    def embed(self, observations: torch.Tensor, encoders: nn.ModuleList) -> torch.Tensor:
        """Replace each encoded component by its latent (any leading dims)."""
        if (width := observations.shape[-1]) != self.input_width:
            raise ValueError(f"Observation width {width} does not match the layout {dict(self.segments)}")
        parts = [
            observations[..., r] if k == "raw" else self.encode(observations, r, encoders)
            for k, r in self.pieces
        ]
        return torch.cat(parts, dim=-1)


def _as_list(value: Any, n: int, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"encoder {what} has {len(value)} entries for {n} encoded components")
        return list(value)
    return [copy.deepcopy(value) for _ in range(n)]


def build_encoders(
    layout: EncoderLayout,
    class_name: str | Sequence[str] = "MlpModel",
    kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
) -> nn.ModuleList:
    """One encoder per component of ``layout`` (class names and kwargs may be given once or per component)."""
    n = len(layout.component_names)
    classes = _as_list(class_name, n, "class_name")
    kwargs_list = _as_list(kwargs if kwargs is not None else {}, n, "kwargs")
    modules = []
    for i, (cls, kw) in enumerate(zip(classes, kwargs_list)):
        if cls not in DEFAULT_ENCODER_KWARGS:
            raise ValueError(f"encoder_class_name {cls!r} is not 'MlpModel' or 'Conv2dHeadModel'")
        merged = {**DEFAULT_ENCODER_KWARGS[cls], **dict(kw or {})}
        merged.pop("output_size", None)
        hidden = merged.pop("hidden_sizes", [])
        hidden = [hidden] if isinstance(hidden, int) else list(hidden or [])
        _, shape = layout.slices[i]
        if cls == "MlpModel":
            modules.append(MlpModel(math.prod(shape), hidden + [layout.output_size], None, **merged))
        else:
            if len(shape) != 3:
                raise ValueError(
                    f"Conv2dHeadModel encodes (C, H, W) components; '{layout.component_names[i]}' has shape {shape}"
                )
            modules.append(Conv2dHeadModel(shape, hidden_sizes=hidden + [layout.output_size], **merged))
    return nn.ModuleList(modules)


def require_segments(segments: Any, which: str) -> Any:
    """``segments``, or a ValueError naming the ``{which}_segments`` argument when it is None."""
    if segments is None:
        raise ValueError(f"Encoders need the {which} layout: pass {which}_segments (name -> shape)")
    return segments


def attach_encoders(
    policy: Any,
    names: Sequence[str] | None,
    class_name: Any,
    kwargs: Any,
    output_size: int | None,
    critic_names: Sequence[str] | str | None,
    critic_class_name: Any,
    critic_kwargs: Any,
) -> None:
    """Give ``policy`` ``actor_layout`` / ``encoders`` for ``names`` and, by ``critic_names``: nothing,
    ``"shared"`` (the actor's encoders on the critic layout) or ``critic_layout`` / ``critic_encoders``.
    Nothing where its parts have no encoders."""
    if not part_is_on(policy, "encoders", names, critic_names):
        return
    names = list(names or [])
    out = int(output_size) if output_size is not None else DEFAULT_ENCODER_OUTPUT_SIZE
    policy.encoder_component_names = names
    policy.encoder_output_size = out
    policy.critic_encoder_component_names = critic_names
    if names:
        policy.actor_layout = EncoderLayout(policy.obs_segments, names, out)
        policy.encoders = build_encoders(policy.actor_layout, class_name, kwargs)
        record_default_activation(policy._legacy_activations, "encoders", kwargs, len(names), nn.ELU)
    if not critic_names:
        return
    if critic_names == "shared" and not names:
        raise ValueError("critic_encoder_component_names='shared' needs encoder_component_names")
    critic_segments = require_segments(policy.privileged_obs_segments, "privileged_obs")
    critic_list = names if critic_names == "shared" else list(critic_names)
    policy.critic_layout = EncoderLayout(critic_segments, critic_list, out)
    if critic_names != "shared":
        critic_kwargs = critic_kwargs if critic_kwargs is not None else kwargs
        critic_class_name = critic_class_name if critic_class_name is not None else class_name
        policy.critic_encoders = build_encoders(policy.critic_layout, critic_class_name, critic_kwargs)
        record_default_activation(
            policy._legacy_activations, "critic_encoders", critic_kwargs, len(critic_names), nn.ELU
        )


def critic_encoder_modules(policy: Any) -> nn.ModuleList:
    """The encoders that read the critic observations."""
    return policy.encoders if policy.critic_encoder_component_names == "shared" else policy.critic_encoders


def encoder_latent(
    self: Any, observations: torch.Tensor, obs_component: str, critic: bool = False
) -> torch.Tensor:
    """Latent of one encoded component of raw observations (``ValueError`` if it has no encoder)."""
    component, layout = obs_component, self.critic_layout if critic else self.actor_layout
    if layout is None or component not in layout.component_names:
        known = layout.component_names if layout is not None else []
        raise ValueError(
            f"No {'critic' if critic else 'actor'} encoder for component '{component}'; encoded components: {known}"
        )
    modules = critic_encoder_modules(self) if critic else self.encoders
    x = self.normalize_critic_obs(observations) if critic else self.normalize_actor_obs(observations)
    return layout.encode(x, layout.component_names.index(component), modules)


DEFAULT_VISUAL_KWARGS: dict[str, Any] = {
    "channels": [64, 64],
    "kernel_sizes": [3, 3],
    "strides": [1, 1],
    "hidden_sizes": [256],
}


def attach_visual_encoder(
    policy: Any, component: str, kwargs: Mapping[str, Any] | None, latent: int, privileged_segments: Any
) -> None:
    """Give ``policy`` ``visual_layout`` and ``visual_encoder`` (image ``component`` -> ``latent`` columns);
    ``kwargs`` update the policy's ``DEFAULT_VISUAL_KWARGS``. Nothing where its parts have no visual encoder."""
    if not policy.parts.visual:
        return
    kwargs, latent = {**policy.DEFAULT_VISUAL_KWARGS, **(kwargs or {})}, int(latent)
    layout = EncoderLayout(policy.obs_segments, [component], latent)
    _, shape = layout.slices[0]
    if len(shape) != 3:
        raise ValueError(f"The visual component '{component}' must be an image (C, H, W); got shape {shape}")
    policy.visual_component_name = component
    policy.visual_latent_size = latent
    policy.visual_layout = layout
    policy.visual_encoder = Conv2dHeadModel(shape, output_size=latent, **kwargs)
    if privileged_segments is not None:
        warnings.warn("The critic of a visual policy reads its observations unencoded.", stacklevel=4)
