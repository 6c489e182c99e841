"""The actor-critic policy, built from parts, and the feed-forward presets.

:class:`ActorCritic` is one model family. Its parts, each optional and each switched on by the preset that
needs it (:class:`PolicyParts`):

* observation normalisers (``actor_obs_normalizer``, ``critic_obs_normalizer``; identity when off);
* a visual encoder on an image component (``visual_encoder``);
* encoders on named observation components (``encoders``, ``critic_encoders``);
* a supervised state estimator (``estimator``, with its own memory ``memory_s`` in recurrent policies) and a
  privileged-state adaptor (``adaptor``, with ``memory_p`` in recurrent policies);
* memories (``memory_a``, ``memory_c``: LSTM/GRU, attributes of recurrent policies only; feed-forward policies
  run a :class:`NoMemory` pass-through whose methods are no-ops, so recurrence needs no twin classes);
* the actor and critic MLP heads (``actor``, ``critic``) and a Gaussian distribution with a state-independent
  ``std`` (deterministic presets return its mean from ``act``);
* an AMP discriminator (``discriminator``; trained by the AMP extension, not used to act).

Every reference class name is a thin preset over it with the reference's keyword arguments
(:class:`EncoderActorCritic`, :class:`StateAc`, :class:`PrivilegeStateAc`, ... here; the recurrent ones in
:mod:`st_rl.modules.actor_critic_recurrent`; the AMP ones in :mod:`st_rl.modules.amp_discriminator`).
The policy takes raw observations everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import (
    get_obs_slice,
    get_subobs_by_components,
    get_subobs_size,
    normalize_segments,
    substitute_estimated_state,
)
from st_rl.modules.distribution import gaussian_entropy, gaussian_log_prob, gaussian_sample
from st_rl.modules.encoder import DEFAULT_ENCODER_OUTPUT_SIZE, EncoderLayout, build_encoders
from st_rl.modules.memory import ActorCriticHiddenState, Memory, NoMemory
from st_rl.modules.mlp import MlpModel, PolicyHead, mlp_layers
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.modules.simple_actor_critic import Actor as Actor  # the seed's module path (docs/policies.md)
from st_rl.modules.simple_actor_critic import Critic as Critic
from st_rl.modules.simple_actor_critic import SimpleActorCritic as SimpleActorCritic
from st_rl.modules.utils import get_activation_Cls, warn_unknown_kwargs
from st_rl.utils.collections import namedarraytuple, tree_map
from st_rl.utils.precision import full_precision

EstimatorActorHiddenState = namedarraytuple("EstimatorActorHiddenState", ["estimator", "actor"])
AdaptorActorHiddenState = namedarraytuple("AdaptorActorHiddenState", ["adaptor", "actor"])


DEFAULT_NONLINEARITY_KEY = "reference_default_nonlinearity"
"""Buffer of policies whose estimator / adaptor / encoders use the default nonlinearity (ReLU, the
reference's); a checkpoint without it predates that default (see ``ActorCritic.load_state_dict``)."""


def _replace_relu(module: nn.Module, cls: type[nn.Module]) -> None:
    """Replace every ``nn.ReLU`` inside ``module`` by ``cls()``, in place."""
    for name, child in module.named_children():
        if type(child) is nn.ReLU:
            setattr(module, name, cls())
        else:
            _replace_relu(child, cls)


def split_estimator_hidden(hidden_states: Any) -> tuple[Any, Any]:
    """``(estimator_hidden, actor_hidden)`` of an actor-side hidden state."""
    if isinstance(hidden_states, EstimatorActorHiddenState):
        return hidden_states.estimator, hidden_states.actor
    return None, hidden_states


def substitute_with_probability(
    observations: torch.Tensor,
    estimate: torch.Tensor,
    components: Sequence[str],
    segments: Any,
    prob: float,
    inference: bool,
) -> torch.Tensor:
    """Observations whose ``components`` hold the detached ``estimate``: per sample with probability ``prob``
    in training, always at inference when ``prob > 0``; unchanged when ``prob <= 0``."""
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


# Keys that st_rl / st_gym / legged_gym configs pass to every policy class; they are accepted silently.
COMMON_POLICY_KEYS = frozenset(
    {"class_name", "teacher_ac_path", "rnn_type", "rnn_hidden_size", "rnn_num_layers", "amp_discriminator"}
)


@dataclasses.dataclass(frozen=True)
class MemorySpec:
    """A recurrent memory: ``rnn_type`` (``"lstm"``/``"gru"``), ``hidden_size``, ``num_layers``."""

    rnn_type: str = "lstm"
    hidden_size: int = 256
    num_layers: int = 1


@dataclasses.dataclass(frozen=True)
class PolicyParts:
    """The optional parts a preset switches on (arguments of the parts come from the keyword arguments).

    Attributes:
        memory: actor and critic memories (recurrent presets), None for feed-forward.
        encoders: encoders on named observation components (``encoder_component_names``, ...).
        estimator: a state estimator (``estimator_obs_components``, ``estimator_target_components``, ...).
        adaptor: a privileged-state adaptor (``adaptor_obs_components``, ...).
        visual: a convolutional encoder on the image component ``visual_component_name``.
        discriminator: an AMP discriminator from ``amp_discriminator``.
        deterministic: ``act`` returns the action mean (no sampling).
    """

    memory: MemorySpec | None = None
    encoders: bool = False
    estimator: bool = False
    adaptor: bool = False
    visual: bool = False
    discriminator: bool = False
    deterministic: bool = False

    def add(self, **changes: Any) -> PolicyParts:
        """These parts with ``changes`` (a subclass preset adds its parts to its parent's)."""
        return dataclasses.replace(self, **changes)


class ActorCritic(nn.Module):
    """Gaussian actor-critic with MLP actor and critic; the base of every policy preset.

    Args:
        num_actor_obs: actor observation width.
        num_critic_obs: critic observation width.
        num_actions: action width.
        actor_hidden_dims: hidden sizes of the actor MLP.
        critic_hidden_dims: hidden sizes of the critic MLP.
        activation: activation name (``"elu"``, ``"relu"``, ``"tanh"``, any ``torch.nn`` name).
        init_noise_std: initial action standard deviation.
        mu_activation: optional activation applied to the action mean (e.g. ``"tanh"``).
        obs_segments: actor observation layout (name -> shape).
        privileged_obs_segments: critic observation layout; ``critic_obs_segments`` is an alias. Defaults to
            ``obs_segments``.
        actor_obs_normalization: normalise the actor observations with running statistics
            (``actor_obs_normalizer``, an :class:`EmpiricalNormalization`; identity when off). The policy takes
            raw observations everywhere; the statistics are updated only by :meth:`update_normalization`.
        critic_obs_normalization: the same for the critic observations (default: as the actor).
        parts: the optional parts (default: the class's ``parts``, which is how presets declare theirs; see
            :class:`PolicyParts`). The arguments of the encoder,
            estimator, visual and discriminator parts are described by the presets that use them
            (:class:`EncoderActorCritic`, :class:`StateAc`, :class:`VisualDeterministicAC`, ``AmpActorCritic``);
            given to a preset without that part they are ignored with a warning.
        **kwargs: ignored with a warning, except keys every st_rl config passes (``class_name``, ...).
    """

    DEFAULT_VISUAL_KWARGS: dict[str, Any] = {"channels": [64, 64], "kernel_sizes": [3, 3], "strides": [1, 1],
                                             "hidden_sizes": [256]}  # fmt: skip
    parts = PolicyParts()
    config_tolerated = COMMON_POLICY_KEYS  # passed to every policy by reference configs, ignored here
    is_recurrent = False
    rnn_type: str | None = None
    _actor_memory: nn.Module  # the actor's memory, or a pass-through (see __init__)
    _critic_memory: nn.Module
    rnn_hidden_size: int = 64  # width of an estimator's own memory in feed-forward policies
    rnn_num_layers: int = 1

    def __init__(
        self,
        num_actor_obs: int,
        num_critic_obs: int,
        num_actions: int,
        actor_hidden_dims: Sequence[int] = (256, 256, 256),
        critic_hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        init_noise_std: float = 1.0,
        mu_activation: str | None = None,
        obs_segments: Mapping[str, Any] | None = None,
        privileged_obs_segments: Mapping[str, Any] | None = None,
        critic_obs_segments: Mapping[str, Any] | None = None,
        encoder_component_names: Sequence[str] | None = None,
        encoder_class_name: str | Sequence[str] = "MlpModel",
        encoder_kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        encoder_output_size: int | None = None,
        critic_encoder_component_names: Sequence[str] | str | None = None,
        critic_encoder_class_name: str | Sequence[str] | None = None,
        critic_encoder_kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        estimator_obs_components: Sequence[str] | None = None,
        estimator_target_components: Sequence[str] | None = None,
        estimator_kwargs: Mapping[str, Any] | None = None,
        use_actor_rnn: bool = False,
        replace_state_prob: float = 0.0,
        visual_component_name: str = "forward_depth",
        visual_kwargs: Mapping[str, Any] | None = None,
        visual_latent_size: int = 256,
        actor_obs_normalization: bool = False,
        critic_obs_normalization: bool | None = None,
        *,
        parts: PolicyParts | None = None,
        adaptor_obs_components: Sequence[str] | None = None,
        adaptor_target_components: Sequence[str] | None = None,
        adaptor_kwargs: Mapping[str, Any] | None = None,
        privilege_replace_state_prob: float = 0.0,
        amp_discriminator: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        parts = parts if parts is not None else type(self).parts
        self.parts = parts
        warn_unknown_kwargs(type(self).__name__, kwargs, COMMON_POLICY_KEYS)
        self._warn_unused_parts(parts, encoder_component_names or critic_encoder_component_names,
                                estimator_obs_components or estimator_target_components,
                                adaptor_obs_components or adaptor_target_components)  # fmt: skip
        if privileged_obs_segments is None:
            privileged_obs_segments = critic_obs_segments
        self.num_actor_obs = int(num_actor_obs)
        self.num_critic_obs = int(num_critic_obs)
        self.num_actions = int(num_actions)
        self.actor_hidden_dims = list(actor_hidden_dims)
        self.critic_hidden_dims = list(critic_hidden_dims)
        self.activation = activation
        self.init_noise_std = float(init_noise_std)
        self.mu_activation = mu_activation
        self.obs_segments = normalize_segments(obs_segments)
        self.privileged_obs_segments = normalize_segments(privileged_obs_segments) or self.obs_segments
        if parts.memory is not None:
            self.is_recurrent = True
            self.rnn_type = str(parts.memory.rnn_type).lower()
            self.rnn_hidden_size = int(parts.memory.hidden_size)
            self.rnn_num_layers = int(parts.memory.num_layers)
        # parts built with the default nonlinearity (ReLU, the reference's) -> the activation st_rl used before
        self._legacy_activations: dict[str, tuple[type[nn.Module], list[int] | None]] = {}
        self.actor_layout: EncoderLayout | None = None
        self.critic_layout: EncoderLayout | None = None
        self.visual_layout: EncoderLayout | None = None
        self.visual_component_name: str | None = None
        if parts.visual:
            self._build_visual(visual_component_name, dict(visual_kwargs or {}), int(visual_latent_size),
                               privileged_obs_segments)  # fmt: skip
        if parts.encoders:
            self._build_encoders(
                list(encoder_component_names or []),
                encoder_class_name,
                encoder_kwargs,
                encoder_output_size,
                critic_encoder_component_names,
                critic_encoder_class_name,
                critic_encoder_kwargs,
            )
        self.estimator: Any = None
        self.memory_s: Any = None
        self.estimated_state_: torch.Tensor | None = None
        self.use_actor_rnn = bool(use_actor_rnn)
        self.replace_state_prob = float(replace_state_prob)

        # Heads, then the estimator, then the memories, then the adaptor: the order the parameters are drawn in.
        self.actor = PolicyHead(
            *mlp_layers(
                self.actor_input_size(), self.actor_hidden_dims, self.num_actions, activation, mu_activation
            )
        )
        self.critic = PolicyHead(
            *mlp_layers(self.critic_input_size(), self.critic_hidden_dims, 1, activation)
        )
        self.std = nn.Parameter(self.init_noise_std * torch.ones(self.num_actions))
        self._mean: torch.Tensor | None = None
        self.actor_obs_normalizer: nn.Module = nn.Identity()
        self.critic_obs_normalizer: nn.Module = nn.Identity()
        self.actor_obs_normalization = False
        self.critic_obs_normalization = False
        if actor_obs_normalization or critic_obs_normalization:
            self.enable_obs_normalization(
                bool(actor_obs_normalization),
                bool(
                    actor_obs_normalization if critic_obs_normalization is None else critic_obs_normalization
                ),
            )
        if parts.estimator and (estimator_obs_components or estimator_target_components):
            self._build_estimator(
                list(estimator_obs_components or []),
                list(estimator_target_components or []),
                dict(estimator_kwargs or {}),
            )
        # `memory_a` / `memory_c` exist only on recurrent policies: legged_gym's exporter takes any policy with a
        # `memory_a` for an LSTM one. The forward passes use `_actor_memory` / `_critic_memory`, plain references
        # (not registered twice) to those memories or to a pass-through.
        actor_memory: nn.Module = NoMemory()
        critic_memory: nn.Module = actor_memory
        if parts.memory is not None:
            rnn = (parts.memory.rnn_type, parts.memory.num_layers, parts.memory.hidden_size)
            self.memory_a = actor_memory = Memory(self.encoded_actor_width(), *rnn)
            self.memory_c = critic_memory = Memory(self.encoded_critic_width(), *rnn)
        object.__setattr__(self, "_actor_memory", actor_memory)
        object.__setattr__(self, "_critic_memory", critic_memory)
        self.adaptor: Any = None
        self.memory_p: Any = None
        self.adapted_state_: torch.Tensor | None = None
        if parts.adaptor:
            self._build_adaptor(adaptor_obs_components, adaptor_target_components, dict(adaptor_kwargs or {}),
                                privilege_replace_state_prob)  # fmt: skip
        self.discriminator: Any = None
        if parts.discriminator:
            self._build_discriminator(amp_discriminator)
        if self._legacy_activations:
            # marks checkpoints written since the default became ReLU (see load_state_dict)
            self.register_buffer(DEFAULT_NONLINEARITY_KEY, torch.ones(()))

    def _warn_unused_parts(
        self, parts: PolicyParts, encoder_args: Any, estimator_args: Any, adaptor_args: Any
    ) -> None:
        if encoder_args and not parts.encoders:
            warnings.warn(
                f"{type(self).__name__} has no encoders; encoder_component_names are ignored (use "
                "EncoderActorCritic / EncoderActorCriticRecurrent).",
                stacklevel=3,
            )
        if estimator_args and not parts.estimator:
            warnings.warn(
                f"{type(self).__name__} has no state estimator; estimator_* arguments are ignored (use StateAc, "
                "StateAcRecurrent, EncoderStateAc or EncoderStateAcRecurrent).",
                stacklevel=3,
            )
        if adaptor_args and not parts.adaptor:
            warnings.warn(
                f"{type(self).__name__} has no privileged-state adaptor; adaptor_* arguments are ignored (use "
                "PrivilegeStateAc or PrivilegeStateAcRecurrent).",
                stacklevel=3,
            )

    # ------------------------------------------------------------------ observation normalisation
    def enable_obs_normalization(self, actor: bool = True, critic: bool = True) -> None:
        """Give the policy running-statistics normalisers (fresh statistics) for its actor / critic inputs."""
        device = self.std.device
        if actor and not self.actor_obs_normalization:
            self.actor_obs_normalizer = EmpiricalNormalization(
                [self.num_actor_obs], until=int(1e8), name="actor_obs_normalizer"
            ).to(device)
            self.actor_obs_normalization = True
        if critic and not self.critic_obs_normalization:
            self.critic_obs_normalizer = EmpiricalNormalization(
                [self.num_critic_obs], until=int(1e8), name="critic_obs_normalizer"
            ).to(device)
            self.critic_obs_normalization = True

    @torch.no_grad()
    def update_normalization(self, obs: torch.Tensor, critic_obs: torch.Tensor | None = None) -> None:
        """Merge a batch of raw observations into the normalisers' running statistics."""
        if self.actor_obs_normalization:
            self.actor_obs_normalizer.update(obs)  # type: ignore[operator]
        if self.critic_obs_normalization:
            self.critic_obs_normalizer.update(obs if critic_obs is None else critic_obs)  # type: ignore[operator]

    def normalize_actor_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw actor observations as the actor's networks see them."""
        return self.actor_obs_normalizer.normalize(obs) if self.actor_obs_normalization else obs  # type: ignore[operator]

    def normalize_critic_obs(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """Raw critic observations as the critic's networks see them."""
        if not self.critic_obs_normalization:
            return critic_obs
        return self.critic_obs_normalizer.normalize(critic_obs)  # type: ignore[operator]

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """``nn.Module.load_state_dict``, tolerant of normaliser statistics: statistics for a normaliser the
        policy does not have are ignored, and a normaliser missing from ``state_dict`` keeps its statistics,
        each with a warning."""
        state = dict(state_dict)
        own = self.state_dict()
        if DEFAULT_NONLINEARITY_KEY in own and DEFAULT_NONLINEARITY_KEY not in state and state:
            self._restore_legacy_activations()
            state[DEFAULT_NONLINEARITY_KEY] = own[DEFAULT_NONLINEARITY_KEY]
        for prefix, enabled in (("actor_obs_normalizer.", self.actor_obs_normalization),
                                ("critic_obs_normalizer.", self.critic_obs_normalization)):  # fmt: skip
            keys = [k for k in state if k.startswith(prefix)]
            if keys and not enabled:
                warnings.warn(
                    f"The checkpoint has observation statistics ({prefix[:-1]}) but this policy does not normalise "
                    "its observations (empirical_normalization is off): the statistics are ignored.",
                    stacklevel=2,
                )
                for k in keys:
                    del state[k]
            elif enabled and not keys:
                warnings.warn(
                    f"The checkpoint has no observation statistics for {prefix[:-1]}; they start fresh.",
                    stacklevel=2,
                )
                state.update({k: v for k, v in own.items() if k.startswith(prefix)})
        return super().load_state_dict(state, strict=strict, assign=assign)

    def _restore_legacy_activations(self) -> None:
        """A checkpoint from before the reference's ReLU default: its estimator / adaptor used the policy's
        activation and its encoders ELU; put those back in the parts built with the default."""
        changed = []
        for name, (old_cls, indices) in self._legacy_activations.items():
            module = getattr(self, name, None)
            if module is None or old_cls is nn.ReLU:
                continue
            targets = [module[i] for i in indices] if indices is not None else [module]
            for target in targets:
                _replace_relu(target, old_cls)
            changed.append(name)
        if changed:
            warnings.warn(
                f"The checkpoint predates the ReLU default nonlinearity of estimators and encoders: {changed} keep "
                "the activation they were trained with (set the nonlinearity in estimator_kwargs / "
                "encoder_kwargs / adaptor_kwargs to silence this).",
                stacklevel=3,
            )

    # ------------------------------------------------------------------ encoders
    def _build_encoders(
        self,
        names: list[str],
        class_name: Any,
        kwargs: Any,
        output_size: int | None,
        critic_names: Sequence[str] | str | None,
        critic_class_name: Any,
        critic_kwargs: Any,
    ) -> None:
        out = int(output_size) if output_size is not None else DEFAULT_ENCODER_OUTPUT_SIZE
        self.encoder_component_names = names
        self.encoder_output_size = out
        self.critic_encoder_component_names = critic_names
        if names:
            self.actor_layout = EncoderLayout(self._require_segments(self.obs_segments, "obs"), names, out)
            self.encoders = build_encoders(self.actor_layout, class_name, kwargs)
            self._record_default_activation("encoders", kwargs, len(names), nn.ELU)
        if critic_names == "shared":
            if not names:
                raise ValueError("critic_encoder_component_names='shared' needs encoder_component_names")
            critic_segments = self._require_segments(self.privileged_obs_segments, "privileged_obs")
            self.critic_layout = EncoderLayout(critic_segments, names, out)
        elif critic_names:
            critic_segments = self._require_segments(self.privileged_obs_segments, "privileged_obs")
            self.critic_layout = EncoderLayout(critic_segments, list(critic_names), out)
            self.critic_encoders = build_encoders(
                self.critic_layout,
                critic_class_name if critic_class_name is not None else class_name,
                critic_kwargs if critic_kwargs is not None else kwargs,
            )
            self._record_default_activation(
                "critic_encoders",
                critic_kwargs if critic_kwargs is not None else kwargs,
                len(critic_names),
                nn.ELU,
            )

    def _record_default_activation(
        self, name: str, kwargs: Any, count: int | None, former: type[nn.Module] | None
    ) -> None:
        """Note that part ``name`` (``count`` modules, or one when None) got the default nonlinearity where its
        kwargs name none; ``former`` is the activation st_rl used by default before."""
        if former is None:
            return
        if count is None:
            if "nonlinearity" not in (kwargs or {}):
                self._legacy_activations[name] = (former, None)
            return
        per_module = list(kwargs) if isinstance(kwargs, (list, tuple)) else [kwargs] * count
        indices = [i for i, kw in enumerate(per_module) if "nonlinearity" not in (kw or {})]
        if indices:
            self._legacy_activations[name] = (former, indices)

    @staticmethod
    def _require_segments(segments: Any, which: str) -> Any:
        if segments is None:
            raise ValueError(f"Encoders need the {which} layout: pass {which}_segments (name -> shape)")
        return segments

    def _critic_encoder_modules(self) -> nn.ModuleList:
        return self.encoders if self.critic_encoder_component_names == "shared" else self.critic_encoders

    def encode_actor(self, observations: torch.Tensor) -> torch.Tensor:
        """Normalised actor observations with encoded components replaced by their latents."""
        if self.visual_layout is not None:
            observations = self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))
        if self.actor_layout is None:
            return observations
        return self.actor_layout.embed(observations, self.encoders)

    def encode_critic(self, critic_observations: torch.Tensor) -> torch.Tensor:
        """Normalised critic observations with encoded components replaced by their latents."""
        if self.critic_layout is None:
            return critic_observations
        return self.critic_layout.embed(critic_observations, self._critic_encoder_modules())

    def get_encoder_latent(
        self, observations: torch.Tensor, obs_component: str, critic: bool = False
    ) -> torch.Tensor:
        """Latent of one encoded component of raw observations.

        Raises:
            ValueError: the component has no encoder on that side.
        """
        layout = self.critic_layout if critic else self.actor_layout
        if layout is None or obs_component not in layout.component_names:
            side = "critic" if critic else "actor"
            known = layout.component_names if layout is not None else []
            raise ValueError(
                f"No {side} encoder for component '{obs_component}'; encoded components: {known}"
            )
        i = layout.component_names.index(obs_component)
        modules = self._critic_encoder_modules() if critic else self.encoders
        x = self.normalize_critic_obs(observations) if critic else self.normalize_actor_obs(observations)
        return layout.encode(x, i, modules)

    # ------------------------------------------------------------------ visual encoder
    def _build_visual(self, component: str, kwargs: dict, latent: int, privileged_segments: Any) -> None:
        from st_rl.modules.conv2d import Conv2dHeadModel

        segments = self._require_segments(self.obs_segments, "obs")
        self.visual_component_name = component
        self.visual_latent_size = latent
        self.visual_layout = EncoderLayout(segments, [component], latent)
        _, shape = self.visual_layout.slices[0]
        if len(shape) != 3:
            raise ValueError(
                f"The visual component '{component}' must be an image (C, H, W); got shape {shape}"
            )
        merged = {**self.DEFAULT_VISUAL_KWARGS, **kwargs}
        self.visual_encoder = Conv2dHeadModel(shape, output_size=latent, **merged)
        if privileged_segments is not None:
            warnings.warn(
                "Visual policies encode the actor's image only; the critic reads its observations unchanged.",
                stacklevel=4,
            )

    def embed_visual_latent(self, observations: torch.Tensor) -> torch.Tensor:
        """Normalised observations with the image component replaced by its latent (the input of
        :meth:`act_with_embedded_latent`)."""
        if self.visual_layout is None:
            raise RuntimeError(f"{type(self).__name__} has no visual encoder")
        observations = self.normalize_actor_obs(observations)
        return self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))

    def act_with_embedded_latent(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Act (deterministically) on observations whose image component was already replaced by its latent
        (:meth:`embed_visual_latent`)."""
        if self.visual_layout is None:
            raise RuntimeError(f"{type(self).__name__} has no visual encoder")
        x = observations
        if self.actor_layout is not None:
            x = self.actor_layout.embed(x, self.encoders)
        x = self._actor_memory(x, kwargs.get("masks"), kwargs.get("hidden_states"))
        self._mean = self.actor(x)
        return self.action_mean

    # ------------------------------------------------------------------ widths
    def encoded_actor_width(self) -> int:
        if self.actor_layout is not None:
            return self.actor_layout.output_width
        if self.visual_layout is not None:
            return self.visual_layout.output_width
        return self.num_actor_obs

    def encoded_critic_width(self) -> int:
        return self.critic_layout.output_width if self.critic_layout is not None else self.num_critic_obs

    def actor_input_size(self) -> int:
        """Width of the actor MLP input (encoders and memory change it)."""
        return self.rnn_hidden_size if self.is_recurrent else self.encoded_actor_width()

    def critic_input_size(self) -> int:
        """Width of the critic MLP input."""
        return self.rnn_hidden_size if self.is_recurrent else self.encoded_critic_width()

    def actor_features(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """Normalised actor observations -> the actor MLP input (encoders, then the memory)."""
        return self._actor_memory(self.encode_actor(observations), masks, hidden_states)

    def critic_features(
        self,
        critic_observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """Normalised critic observations -> the critic MLP input."""
        return self._critic_memory(self.encode_critic(critic_observations), masks, hidden_states)

    # ------------------------------------------------------------------ memories (no-ops when feed-forward)
    def _memories(self) -> list[Any]:
        memories = (self._actor_memory, self._critic_memory, self.memory_s, self.memory_p)
        return [m for m in dict.fromkeys(memories) if m is not None]

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the memories of finished envs (bool or 0/1 ``dones``; all envs when None); a no-op for
        feed-forward policies."""
        for memory in self._memories():
            memory.reset(dones)

    def get_hidden_states(self) -> Any:
        """Hidden states to store with a transition: ``ActorCriticHiddenState(actor, critic)`` of the rollout
        memories (the actor field nests ``AdaptorActorHiddenState`` / ``EstimatorActorHiddenState`` when those
        parts have memories); ``None`` for feed-forward policies."""
        if not self.is_recurrent:
            return None
        actor = self.memory_a.hidden_states
        if self.memory_s is not None:
            actor = EstimatorActorHiddenState(self.memory_s.hidden_states, actor)
        if self.memory_p is not None:
            actor = AdaptorActorHiddenState(self.memory_p.hidden_states, actor)
        return ActorCriticHiddenState(actor, self.memory_c.hidden_states)

    def set_hidden_states(self, hidden_states: Any) -> None:
        """Restore rollout hidden states returned by :meth:`get_hidden_states` (no-op for feed-forward)."""
        if hidden_states is None:
            return
        actor = hidden_states.actor
        if isinstance(actor, AdaptorActorHiddenState):
            self.memory_p.hidden_states = actor.adaptor
            actor = actor.actor
        est, actor = split_estimator_hidden(actor)
        self.memory_a.hidden_states = actor
        if self.memory_s is not None:
            self.memory_s.hidden_states = est
        self.memory_c.hidden_states = hidden_states.critic

    def detach_hidden_states(self) -> None:
        """Cut the gradient history of the rollout hidden states (no-op for feed-forward)."""
        for memory in self._memories():
            memory.detach_hidden_states()

    def clone_hidden_states(self) -> Any:
        """A copy of the rollout hidden states."""
        return tree_map(lambda t: t.clone(), self.get_hidden_states())

    def rollout_state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        """The rollout hidden states of the memories for a checkpoint, by attribute name (``memory_a``,
        ``memory_c``, ``memory_s``, ``memory_p``; see :meth:`st_rl.modules.memory.Memory.rollout_state`).
        Empty for feed-forward policies."""
        if not self.is_recurrent:
            return {}
        return {name: memory.rollout_state() for name, memory in self._named_memories()}

    def check_rollout_state_dict(self, state: Any, batch_size: int | None = None) -> None:
        """Raise ``ValueError`` naming the memory if :meth:`load_rollout_state_dict` would refuse ``state``."""
        if not isinstance(state, dict):
            raise ValueError(f"expected a dict of memory states, got a {type(state).__name__}")
        memories = dict(self._named_memories()) if self.is_recurrent else {}
        if sorted(state) != sorted(memories):
            raise ValueError(f"the policy's memories are {sorted(memories)}, the state has {sorted(state)}")
        for name, memory in memories.items():
            try:
                memory.check_rollout_state(state[name], batch_size)
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from e

    def load_rollout_state_dict(self, state: dict[str, Any], batch_size: int | None = None) -> None:
        """Restore :meth:`rollout_state_dict` (all memories or, on a ``ValueError``, none)."""
        self.check_rollout_state_dict(state, batch_size)
        for name, memory in self._named_memories() if self.is_recurrent else []:
            memory.load_rollout_state(state[name], batch_size)

    def _named_memories(self) -> list[tuple[str, Any]]:
        names = ("memory_a", "memory_c", "memory_s", "memory_p")
        return [(n, getattr(self, n)) for n in names if isinstance(getattr(self, n, None), Memory)]

    def actor_memories(self) -> list[tuple[str, Any]]:
        """``(role, Memory)`` of the memories on the actor's path in running order (roles ``"adaptor"``,
        ``"estimator"``, ``"actor"``); what an exporter carries as explicit hidden states. Empty for
        feed-forward policies."""
        if not self.is_recurrent:
            return []
        roles = (("adaptor", self.memory_p), ("estimator", self.memory_s), ("actor", self.memory_a))
        return [(role, memory) for role, memory in roles if memory is not None]

    # ------------------------------------------------------------------ policy API
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Not callable by design (the reference contract): an actor-critic has several entry points."""
        raise NotImplementedError("Use act(), act_inference() or evaluate() on an actor-critic.")

    def update_distribution(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        inference: bool = False,
        **kwargs: Any,
    ) -> None:
        """Compute the action distribution for raw ``observations`` (normaliser, adaptor, estimator, encoders,
        memory, then the actor MLP)."""
        observations = self.normalize_actor_obs(observations)
        if self.adaptor is not None:
            adaptor_hidden = None
            if isinstance(hidden_states, AdaptorActorHiddenState):
                adaptor_hidden, hidden_states = hidden_states.adaptor, hidden_states.actor
            observations = self._adapt_and_substitute(observations, adaptor_hidden, inference)
        est_hidden, actor_hidden = split_estimator_hidden(hidden_states)
        if self.estimator is not None and not self.use_actor_rnn:
            observations = self._estimate_and_substitute(observations, est_hidden, inference)
        features = self.actor_features(observations, masks=masks, hidden_states=actor_hidden, **kwargs)
        if self.estimator is not None and self.use_actor_rnn:
            self.estimated_state_ = full_precision(self.estimator(features))
        self._mean = full_precision(self.actor(features))

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Sample actions (the mean for deterministic presets); afterwards ``action_mean``, ``action_std`` and
        ``entropy`` refer to this batch."""
        self.update_distribution(observations, **kwargs)
        if self.parts.deterministic:
            return self.action_mean
        return gaussian_sample(self.action_mean, self.action_std)

    def act_inference(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Deterministic action (the mean): the deployable function."""
        self.update_distribution(observations, inference=True, **kwargs)
        return self.action_mean

    def evaluate(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """State value of raw critic observations, shape ``(..., 1)``."""
        return full_precision(
            self.critic(self.critic_features(self.normalize_critic_obs(critic_observations), **kwargs))
        )

    def evaluate_actions(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        critic_observations: torch.Tensor | None = None,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The terms of the PPO loss for given actions, as the seed's ``evaluate_actions``.

        Computes the action distribution of raw ``observations`` (as :meth:`act`, without sampling) and the
        values of ``critic_observations`` (default: ``observations``, for a critic that reads the actor's
        observations). Recurrent policies take the padded trajectories' ``masks`` and their initial
        ``ActorCriticHiddenState(actor, critic)`` as ``hidden_states``; without them the rollout memories are
        used and advanced, as :meth:`act` and :meth:`evaluate` do.

        Returns:
            ``(log_prob, entropy, values)``: :meth:`get_actions_log_prob` and :attr:`entropy` (summed over the
            action dimension) and :meth:`evaluate` (``(..., 1)``).
        """
        actor_hidden = None if hidden_states is None else hidden_states.actor
        critic_hidden = None if hidden_states is None else hidden_states.critic
        self.update_distribution(observations, masks=masks, hidden_states=actor_hidden)
        critic_obs = observations if critic_observations is None else critic_observations
        values = self.evaluate(critic_obs, masks=masks, hidden_states=critic_hidden)
        return self.get_actions_log_prob(actions), self.entropy, values

    def get_actions_log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions`` under the last distribution, summed over actions."""
        return gaussian_log_prob(actions, self.action_mean, self.action_std)

    @property
    def action_mean(self) -> torch.Tensor:
        if self._mean is None:
            raise RuntimeError("No action distribution yet: call act() or act_inference() first.")
        return self._mean

    @property
    def action_std(self) -> torch.Tensor:
        return self.std.expand_as(self.action_mean)

    @property
    def entropy(self) -> torch.Tensor:
        return gaussian_entropy(self.action_std)

    @torch.no_grad()
    def clip_std(
        self,
        min: float | Sequence[float] | torch.Tensor | None = None,  # noqa: A002
        max: float | Sequence[float] | torch.Tensor | None = None,  # noqa: A002
    ) -> None:
        """Clip ``std`` in place; bounds may be scalars or per-action values."""
        lo = None if min is None else torch.as_tensor(min, dtype=self.std.dtype, device=self.std.device)
        hi = None if max is None else torch.as_tensor(max, dtype=self.std.dtype, device=self.std.device)
        self.std.copy_(torch.clamp(self.std, lo, hi))

    # ------------------------------------------------------------------ state estimator
    def _build_estimator(self, obs_components: list[str], target_components: list[str], kwargs: dict) -> None:
        if not obs_components or not target_components:
            raise ValueError(
                "A state estimator needs estimator_obs_components and estimator_target_components"
            )
        segments = self._require_segments(self.obs_segments, "obs")
        self.estimator_obs_components = obs_components
        self.estimator_target_components = target_components
        in_size = get_subobs_size(segments, obs_components)
        out_size = get_subobs_size(segments, target_components)
        kwargs = dict(kwargs)
        rnn_type = kwargs.pop("rnn_type", self.rnn_type or "gru")
        rnn_hidden = int(kwargs.pop("rnn_hidden_size", self.rnn_hidden_size))
        rnn_layers = int(kwargs.pop("rnn_num_layers", self.rnn_num_layers))
        hidden = kwargs.pop("hidden_sizes", [128, 64])
        # no default nonlinearity: MlpModel's ReLU, as the reference's estimator (not the policy's activation)
        self._record_default_activation("estimator", kwargs, None, get_activation_Cls(self.activation))
        if self.use_actor_rnn:
            if not self.is_recurrent:
                raise ValueError(
                    "use_actor_rnn needs a recurrent policy (StateAcRecurrent, EncoderStateAcRecurrent)"
                )
            if self.replace_state_prob != 0:
                raise ValueError(
                    "replace_state_prob must be 0 with use_actor_rnn (the estimate comes after the memory)"
                )
            self.estimator = MlpModel(self.actor_input_size(), hidden, out_size, **kwargs)
        elif self.is_recurrent:
            self.memory_s = Memory(in_size, rnn_type, rnn_layers, rnn_hidden)
            self.estimator = MlpModel(rnn_hidden, hidden, out_size, **kwargs)
        else:
            self.estimator = MlpModel(in_size, hidden, out_size, **kwargs)

    def _estimate_and_substitute(
        self, observations: torch.Tensor, est_hidden: Any, inference: bool
    ) -> torch.Tensor:
        segments = self.obs_segments
        assert segments is not None and self.estimator is not None
        x = get_subobs_by_components(observations, self.estimator_obs_components, segments)
        if self.memory_s is not None:
            x = self.memory_s(x, None, est_hidden)  # batch mode stays padded, like the observations
        estimate = full_precision(self.estimator(x))
        self.estimated_state_ = estimate
        return substitute_with_probability(
            observations,
            estimate,
            self.estimator_target_components,
            segments,
            self.replace_state_prob,
            inference,
        )

    def get_estimated_state(self) -> torch.Tensor:
        """The estimator output of the last ``act`` / ``act_inference`` call."""
        if self.estimated_state_ is None:
            raise RuntimeError("No estimate yet: call act() or act_inference() first")
        return self.estimated_state_

    # ------------------------------------------------------------------ privileged-state adaptor
    def _build_adaptor(
        self,
        obs_components: Sequence[str] | None,
        target_components: Sequence[str] | None,
        kw: dict,
        prob: float,
    ) -> None:
        if not obs_components or not target_components:
            raise ValueError(
                f"{type(self).__name__} needs adaptor_obs_components and adaptor_target_components"
            )
        segments = self._require_segments(self.obs_segments, "obs")
        self.adaptor_obs_components = list(obs_components)
        self.adaptor_target_components = list(target_components)
        self.privilege_replace_state_prob = float(prob)
        rnn_type = kw.pop("rnn_type", self.rnn_type or "gru")
        hidden_size = int(kw.pop("rnn_hidden_size", self.rnn_hidden_size))
        layers = int(kw.pop("rnn_num_layers", self.rnn_num_layers))
        hidden = kw.pop("hidden_sizes", [128, 64])
        # no default nonlinearity: MlpModel's ReLU, as the reference's adaptor
        self._record_default_activation("adaptor", kw, None, get_activation_Cls(self.activation))
        in_size = get_subobs_size(segments, self.adaptor_obs_components)
        if self.is_recurrent:  # feed-forward policies: an MLP on the components, no memory
            self.memory_p = Memory(in_size, rnn_type, layers, hidden_size)
            in_size = hidden_size
        self.adaptor = MlpModel(
            in_size, hidden, get_subobs_size(segments, self.adaptor_target_components), **kw
        )

    def _adapt_and_substitute(self, observations: torch.Tensor, hidden: Any, inference: bool) -> torch.Tensor:
        segments = self._require_segments(self.obs_segments, "obs")
        x = get_subobs_by_components(observations, self.adaptor_obs_components, segments)
        if self.memory_p is not None:
            x = self.memory_p(x, None, hidden)
        estimate = full_precision(self.adaptor(x))
        self.adapted_state_ = estimate
        return substitute_with_probability(
            observations, estimate, self.adaptor_target_components, segments, self.privilege_replace_state_prob,
            inference,
        )  # fmt: skip

    def get_adapted_state(self) -> torch.Tensor:
        """The adaptor output of the last ``act`` call."""
        if self.adapted_state_ is None:
            raise RuntimeError("No adaptor estimate yet: call act() or act_inference() first")
        return self.adapted_state_

    # ------------------------------------------------------------------ AMP discriminator
    def _build_discriminator(self, cfg: Mapping[str, Any] | None) -> None:
        from st_rl.modules.amp_discriminator import AMPDiscriminator

        if not cfg:
            raise ValueError(
                f"{type(self).__name__} needs an 'amp_discriminator' dict in the policy config, e.g. "
                "{'input_dim': None, 'style_reward_coef': 1.0, 'hidden_dims': [512, 256], "
                "'discriminator_grad_pen': 10.0, 'task_reward_lerp': 0.0}."
            )
        self.discriminator = AMPDiscriminator(**dict(cfg))

    # ------------------------------------------------------------------ transfer between layouts
    def _feature_segments(self, segments: Any, critic: bool) -> Any:
        """Layout of the first layer's input: encoded components take ``encoder_output_size`` columns."""
        from collections import OrderedDict

        segs = normalize_segments(segments)
        if segs is None:
            return None
        layout = self.critic_layout if critic else self.actor_layout
        encoded = set(layout.component_names) if layout is not None else set()
        visual = None if critic else self.visual_component_name
        out: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        for name, shape in segs.items():
            if name == visual:
                out[name] = (self.visual_latent_size,)
            elif name in encoded:
                out[name] = (layout.output_size if layout is not None else 0,)
            else:
                out[name] = shape
        return out

    @torch.no_grad()
    def load_misaligned_state_dict(
        self,
        module: nn.Module | Mapping[str, torch.Tensor],
        obs_segments: Mapping[str, Any],
        critic_obs_segments: Mapping[str, Any] | None = None,
    ) -> dict[str, list[str]]:
        """Load the parameters of a policy trained with another observation layout.

        Parameters of equal shape are copied. Input layers that read the (encoded) observations are copied
        column block by column block for every component present in both layouts with the same size; columns
        of new components keep their initialisation. Everything else is skipped.

        Args:
            module: the source policy or its state dict.
            obs_segments: the source's actor layout.
            critic_obs_segments: the source's critic layout (default: ``obs_segments``).

        Returns:
            ``{"loaded": [...], "remapped": [...], "skipped": [...], "new_components": [...]}`` (also printed).
        """
        src = module.state_dict() if isinstance(module, nn.Module) else dict(module)
        old = {False: self._feature_segments(obs_segments, False),
               True: self._feature_segments(critic_obs_segments or obs_segments, True)}  # fmt: skip
        new = {False: self._feature_segments(self.obs_segments, False),
               True: self._feature_segments(self.privileged_obs_segments, True)}  # fmt: skip
        report: dict[str, list[str]] = {"loaded": [], "remapped": [], "skipped": [], "new_components": []}
        own = self.state_dict()
        for key, target in own.items():
            if key not in src:
                report["skipped"].append(f"{key} (absent in source)")
                continue
            value = src[key]
            if tuple(value.shape) == tuple(target.shape):
                target.copy_(value)
                report["loaded"].append(key)
                continue
            critic = key.startswith(("critic", "memory_c"))
            src_layout, dst_layout = old[critic], new[critic]
            if (
                value.dim() == 2
                and target.dim() == 2
                and value.shape[0] == target.shape[0]
                and src_layout is not None
                and dst_layout is not None
                and value.shape[1] == sum(math.prod(v) for v in src_layout.values())
                and target.shape[1] == sum(math.prod(v) for v in dst_layout.values())
            ):
                for name, shape in dst_layout.items():
                    if name in src_layout and src_layout[name] == shape:
                        s_slice, _ = get_obs_slice(src_layout, name)
                        d_slice, _ = get_obs_slice(dst_layout, name)
                        target[:, d_slice] = value[:, s_slice]
                    elif f"{'critic' if critic else 'actor'}:{name}" not in report["new_components"]:
                        report["new_components"].append(f"{'critic' if critic else 'actor'}:{name}")
                report["remapped"].append(key)
            else:
                report["skipped"].append(f"{key} (shape {tuple(value.shape)} -> {tuple(target.shape)})")
        print(
            f"[st_rl] load_misaligned_state_dict: {len(report['loaded'])} loaded, {len(report['remapped'])} remapped "
            f"by component, skipped {report['skipped']}, new components {report['new_components']}"
        )
        return report


# ---------------------------------------------------------------------------- feed-forward presets
class EncoderActorCritic(ActorCritic):
    """:class:`ActorCritic` with encoders on named observation components.

    Args:
        encoder_component_names: components of ``obs_segments`` to encode.
        encoder_class_name: ``"MlpModel"`` or ``"Conv2dHeadModel"``, once or per component.
        encoder_kwargs: encoder keyword arguments (``hidden_sizes``, conv settings), once or per component;
            defaults: MLP ``hidden_sizes=[128, 64]``, conv ``channels=[16, 32]``, ``kernel_sizes=[5, 3]``,
            ``strides=[2, 2]``, ``hidden_sizes=[64]``, ``nonlinearity`` ReLU (the reference's). An MLP encoder
            reads its component flattened, a conv encoder in its (C, H, W) shape.
        encoder_output_size: latent width per component (default 32).
        critic_encoder_component_names: ``None`` (critic sees raw observations), ``"shared"`` (the actor's
            encoders applied to the critic observations) or a list (separate critic encoders, configured by
            ``critic_encoder_class_name`` / ``critic_encoder_kwargs``, defaulting to the actor's).
    """

    parts = PolicyParts(encoders=True)


class StateAc(ActorCritic):
    """:class:`ActorCritic` with a supervised state estimator on the (normalised) observations.

    Args:
        estimator_obs_components: actor components the estimator reads.
        estimator_target_components: actor components it predicts (trained by EstimatorPPO against the same
            components of the critic observations).
        estimator_kwargs: ``hidden_sizes`` (default [128, 64]), ``nonlinearity`` (default ReLU, the reference's
            ``MlpModel`` default, not the policy's ``activation``); recurrent policies also take
            ``rnn_type``, ``rnn_hidden_size``, ``rnn_num_layers`` for the estimator's own memory.
        use_actor_rnn: (recurrent) estimate from the actor memory's output instead of an own memory.
        replace_state_prob: probability of feeding the (detached) estimate to the policy in place of the
            observed target components during training; at inference the estimate is used whenever this is > 0.
    """

    parts = PolicyParts(estimator=True)


class EncoderStateAc(StateAc):
    """:class:`StateAc` with encoders: the estimator reads the observations, then the encoders run."""

    parts = PolicyParts(encoders=True, estimator=True)


class PrivilegeStateAc(StateAc):
    """:class:`StateAc` plus a feed-forward privileged-state adaptor (the feed-forward
    :class:`~st_rl.modules.actor_critic_recurrent.PrivilegeStateAcRecurrent`).

    The adaptor, an MLP ``adaptor`` without memory, reads ``adaptor_obs_components`` and predicts
    ``adaptor_target_components``; with probability ``privilege_replace_state_prob`` its detached estimate
    replaces those components before the state estimator and the policy run (always at inference when the
    probability is > 0). Its output is kept apart from the estimator's (:meth:`get_adapted_state`), and
    EstimatorPPO trains it with ``adaptor_loss`` against the critic observations.

    Args:
        adaptor_obs_components: actor components the adaptor reads.
        adaptor_target_components: actor components it predicts.
        adaptor_kwargs: ``hidden_sizes`` (default [128, 64]), ``nonlinearity`` (default ReLU).
        privilege_replace_state_prob: substitution probability during training.
        (other arguments as :class:`StateAc`)
    """

    parts = PolicyParts(estimator=True, adaptor=True)


class VisualDeterministicAC(ActorCritic):
    """Feed-forward visual policy whose ``act`` returns the mean.

    The actor's image component (``visual_component_name``, (C, H, W)) is encoded into a latent of
    ``visual_latent_size`` by a ``Conv2dHeadModel`` (defaults ``channels=[64, 64]``, ``kernel_sizes=[3, 3]``,
    ``strides=[1, 1]``, ``hidden_sizes=[256]``, overridden by ``visual_kwargs``); the critic is unchanged.
    """

    parts = PolicyParts(visual=True, deterministic=True)
