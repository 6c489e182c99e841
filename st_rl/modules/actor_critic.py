"""Feed-forward Gaussian actor-critic.

The class is built from parts (an actor MLP, a critic MLP, a state-independent ``std``) and exposes two
hooks, :meth:`actor_features` and :meth:`critic_features`, through which encoders and memories are added by
composition in later presets, without twin classes.
"""

from __future__ import annotations

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
from st_rl.modules.mlp import MlpModel, mlp_layers
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.modules.utils import warn_unknown_kwargs
from st_rl.utils.collections import namedarraytuple

EstimatorActorHiddenState = namedarraytuple("EstimatorActorHiddenState", ["estimator", "actor"])


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
    {
        "class_name",
        "teacher_ac_path",
        "rnn_type",
        "rnn_hidden_size",
        "rnn_num_layers",
        "amp_discriminator",
    }
)


class ActorCritic(nn.Module):
    """Gaussian actor-critic with MLP actor and critic.

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
        **kwargs: ignored with a warning, except keys every st_rl config passes (``class_name``, ...).
    """

    is_recurrent = False
    rnn_type: str | None = None

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
        **kwargs: Any,
    ) -> None:
        super().__init__()
        warn_unknown_kwargs(type(self).__name__, kwargs, COMMON_POLICY_KEYS)
        if (encoder_component_names or critic_encoder_component_names) and not self.supports_encoders:
            warnings.warn(
                f"{type(self).__name__} has no encoders; encoder_component_names are ignored (use "
                "EncoderActorCritic / EncoderActorCriticRecurrent).",
                stacklevel=2,
            )
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
        self.actor_layout: EncoderLayout | None = None
        self.critic_layout: EncoderLayout | None = None
        self.visual_layout: EncoderLayout | None = None
        if self.supports_visual:
            self._build_visual(
                visual_component_name,
                dict(visual_kwargs or {}),
                int(visual_latent_size),
                privileged_obs_segments,
            )
        if self.supports_encoders:
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
        self.discriminator: Any = None  # an AMPDiscriminator part (AMP presets); trained by the AMP extension
        self.adaptor: Any = None  # a privileged-state adaptor part (PrivilegeStateAcRecurrent)
        self.memory_s: Any = None
        self.estimated_state_: torch.Tensor | None = None
        self.use_actor_rnn = bool(use_actor_rnn)
        self.replace_state_prob = float(replace_state_prob)
        if estimator_obs_components or estimator_target_components:
            if not self.supports_estimator:
                warnings.warn(
                    f"{type(self).__name__} has no state estimator; estimator_* arguments are ignored (use StateAc, "
                    "StateAcRecurrent, EncoderStateAc or EncoderStateAcRecurrent).",
                    stacklevel=2,
                )
            else:
                self._estimator_args = (
                    list(estimator_obs_components or []),
                    list(estimator_target_components or []),
                    dict(estimator_kwargs or {}),
                )

        actor_in, critic_in = self.actor_input_size(), self.critic_input_size()
        self.actor = nn.Sequential(
            *mlp_layers(actor_in, self.actor_hidden_dims, self.num_actions, activation, mu_activation)
        )
        self.critic = nn.Sequential(*mlp_layers(critic_in, self.critic_hidden_dims, 1, activation))
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
        if self.supports_estimator and hasattr(self, "_estimator_args"):
            self._build_estimator(*self._estimator_args)

    # ------------------------------------------------------------------ observation normalisation
    def enable_obs_normalization(self, actor: bool = True, critic: bool = True) -> None:
        """Give the policy running-statistics normalisers (fresh statistics) for its actor / critic inputs."""
        device = self.std.device
        if actor and not self.actor_obs_normalization:
            self.actor_obs_normalizer = EmpiricalNormalization([self.num_actor_obs], until=int(1e8)).to(
                device
            )
            self.actor_obs_normalization = True
        if critic and not self.critic_obs_normalization:
            self.critic_obs_normalizer = EmpiricalNormalization([self.num_critic_obs], until=int(1e8)).to(
                device
            )
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

    # ------------------------------------------------------------------ encoders
    supports_encoders = False

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

    @staticmethod
    def _require_segments(segments: Any, which: str) -> Any:
        if segments is None:
            raise ValueError(f"Encoders need the {which} layout: pass {which}_segments (name -> shape)")
        return segments

    def _critic_encoder_modules(self) -> nn.ModuleList:
        return self.encoders if self.critic_encoder_component_names == "shared" else self.critic_encoders

    def encode_actor(self, observations: torch.Tensor) -> torch.Tensor:
        """Actor observations with encoded components replaced by their latents."""
        if self.visual_layout is not None:
            observations = self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))
        if self.actor_layout is None:
            return observations
        return self.actor_layout.embed(observations, self.encoders)

    # ------------------------------------------------------------------ visual encoder
    supports_visual = False
    DEFAULT_VISUAL_KWARGS: dict[str, Any] = {"channels": [64, 64], "kernel_sizes": [3, 3], "strides": [1, 1],
                                             "hidden_sizes": [256]}  # fmt: skip

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
                stacklevel=3,
            )

    def embed_visual_latent(self, observations: torch.Tensor) -> torch.Tensor:
        """Normalised observations with the image component replaced by its latent (the input of
        :meth:`act_with_embedded_latent`)."""
        if self.visual_layout is None:
            raise RuntimeError(f"{type(self).__name__} has no visual encoder")
        observations = self.normalize_actor_obs(observations)
        return self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))

    def encode_critic(self, critic_observations: torch.Tensor) -> torch.Tensor:
        """Critic observations with encoded components replaced by their latents."""
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
        return modules[i](layout.component_input(x, i))

    # ------------------------------------------------------------------ composition hooks
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
        return self.encoded_actor_width()

    def critic_input_size(self) -> int:
        """Width of the critic MLP input."""
        return self.encoded_critic_width()

    def actor_features(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Map actor observations to the actor MLP input."""
        return self.encode_actor(observations)

    def critic_features(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Map critic observations to the critic MLP input."""
        return self.encode_critic(critic_observations)

    # ------------------------------------------------------------------ policy API
    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Reset per-env state of finished envs (no-op for feed-forward policies)."""

    def get_hidden_states(self) -> Any:
        """Hidden states to store with a transition (``None`` for feed-forward policies)."""
        return None

    def set_hidden_states(self, hidden_states: Any) -> None:
        """Restore rollout hidden states returned by :meth:`get_hidden_states` (no-op for feed-forward)."""

    def detach_hidden_states(self) -> None:
        """Cut the gradient history of the rollout hidden states (no-op for feed-forward)."""

    def actor_memories(self) -> list[tuple[str, Any]]:
        """``(role, Memory)`` of the memories on the actor's path in running order (roles ``"adaptor"``,
        ``"estimator"``, ``"actor"``); what an exporter carries as explicit hidden states. Empty for
        feed-forward policies."""
        return []

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
        """Compute the action distribution for raw ``observations`` (normaliser, estimator, encoders, memory,
        then the actor MLP)."""
        self.distribution_from_normalized(
            self.normalize_actor_obs(observations),
            masks=masks,
            hidden_states=hidden_states,
            inference=inference,
            **kwargs,
        )

    def distribution_from_normalized(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        inference: bool = False,
        **kwargs: Any,
    ) -> None:
        """:meth:`update_distribution` after the normaliser."""
        est_hidden, actor_hidden = split_estimator_hidden(hidden_states)
        if self.estimator is not None and not self.use_actor_rnn:
            observations = self._estimate_and_substitute(observations, est_hidden, inference)
        features = self.actor_features(observations, masks=masks, hidden_states=actor_hidden, **kwargs)
        if self.estimator is not None and self.use_actor_rnn:
            self.estimated_state_ = self.estimator(features)
        self._mean = self.actor(features)

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Sample actions; afterwards ``action_mean``, ``action_std`` and ``entropy`` refer to this batch."""
        self.update_distribution(observations, **kwargs)
        return gaussian_sample(self.action_mean, self.action_std)

    def act_inference(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Deterministic action (the mean)."""
        self.update_distribution(observations, inference=True, **kwargs)
        return self.action_mean

    # ------------------------------------------------------------------ state estimator
    supports_estimator = False

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
        rnn_type = kwargs.pop("rnn_type", getattr(self, "rnn_type", None) or "gru")
        rnn_hidden = int(kwargs.pop("rnn_hidden_size", getattr(self, "rnn_hidden_size", 64)))
        rnn_layers = int(kwargs.pop("rnn_num_layers", getattr(self, "rnn_num_layers", 1)))
        hidden = kwargs.pop("hidden_sizes", [128, 64])
        if "nonlinearity" not in kwargs:
            kwargs["nonlinearity"] = self.activation
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
            from st_rl.modules.memory import Memory

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
        estimate = self.estimator(x)
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

    def evaluate(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """State value of raw critic observations, shape ``(..., 1)``."""
        return self.critic(self.critic_features(self.normalize_critic_obs(critic_observations), **kwargs))

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

    # ------------------------------------------------------------------ transfer between layouts
    def _feature_segments(self, segments: Any, critic: bool) -> Any:
        """Layout of the first layer's input: encoded components take ``encoder_output_size`` columns."""
        from collections import OrderedDict

        segs = normalize_segments(segments)
        if segs is None:
            return None
        layout = self.critic_layout if critic else self.actor_layout
        encoded = set(layout.component_names) if layout is not None else set()
        if not critic and self.visual_layout is not None:
            encoded.add(self.visual_component_name)
        out: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        for name, shape in segs.items():
            if name in encoded:
                size = (
                    self.visual_latent_size
                    if name == getattr(self, "visual_component_name", None)
                    else (layout.output_size if layout is not None else 0)
                )
                out[name] = (size,)
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

    @torch.no_grad()
    def clip_std(
        self,
        min: float | Sequence[float] | torch.Tensor | None = None,  # noqa: A002
        max: float | Sequence[float] | torch.Tensor | None = None,
    ) -> None:  # noqa: A002
        """Clip ``std`` in place; bounds may be scalars or per-action values."""
        lo = None if min is None else torch.as_tensor(min, dtype=self.std.dtype, device=self.std.device)
        hi = None if max is None else torch.as_tensor(max, dtype=self.std.dtype, device=self.std.device)
        self.std.copy_(torch.clamp(self.std, lo, hi))


class EncoderActorCritic(ActorCritic):
    """:class:`ActorCritic` with encoders on named observation components.

    Args:
        encoder_component_names: components of ``obs_segments`` to encode.
        encoder_class_name: ``"MlpModel"`` or ``"Conv2dHeadModel"``, once or per component.
        encoder_kwargs: encoder keyword arguments (``hidden_sizes``, conv settings), once or per component;
            defaults: MLP ``hidden_sizes=[128, 64]``, conv ``channels=[16, 32]``, ``kernel_sizes=[5, 3]``,
            ``strides=[2, 2]``, ``hidden_sizes=[64]``.
        encoder_output_size: latent width per component (default 32).
        critic_encoder_component_names: ``None`` (critic sees raw observations), ``"shared"`` (the actor's
            encoders applied to the critic observations) or a list (separate critic encoders, configured by
            ``critic_encoder_class_name`` / ``critic_encoder_kwargs``, defaulting to the actor's).
    """

    supports_encoders = True


class StateAc(ActorCritic):
    """:class:`ActorCritic` with a supervised state estimator on the raw observations.

    Args:
        estimator_obs_components: actor components the estimator reads.
        estimator_target_components: actor components it predicts (trained by EstimatorPPO against the same
            components of the critic observations).
        estimator_kwargs: ``hidden_sizes`` (default [128, 64]), ``nonlinearity``; recurrent policies also take
            ``rnn_type``, ``rnn_hidden_size``, ``rnn_num_layers`` for the estimator's own memory.
        use_actor_rnn: (recurrent) estimate from the actor memory's output instead of an own memory.
        replace_state_prob: probability of feeding the (detached) estimate to the policy in place of the
            observed target components during training; at inference the estimate is used whenever this is > 0.
    """

    supports_estimator = True


class EncoderStateAc(StateAc):
    """:class:`StateAc` with encoders: the estimator reads the raw observations, then the encoders run."""

    supports_encoders = True


class DeterministicPolicyMixin:
    """Makes ``act`` return the action mean (no sampling); adds methods only."""

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        super().act(observations, **kwargs)  # type: ignore[misc]
        return self.action_mean  # type: ignore[attr-defined]


class VisualActorCriticMixin:
    """Encodes the actor's image component (``visual_component_name``, (C, H, W)) into a latent of
    ``visual_latent_size`` with a ``Conv2dHeadModel`` (defaults ``channels=[64, 64]``, ``kernel_sizes=[3, 3]``,
    ``strides=[1, 1]``, ``hidden_sizes=[256]``, overridden by ``visual_kwargs``); the critic is unchanged.
    Adds methods only; the encoder is built by the actor-critic base."""

    supports_visual = True

    def act_with_embedded_latent(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Act (deterministically) on observations whose image component was already replaced by its latent."""
        x = observations
        layout = getattr(self, "actor_layout", None)
        if layout is not None:
            x = layout.embed(x, self.encoders)  # type: ignore[attr-defined]
        memory = getattr(self, "memory_a", None)
        if memory is not None:
            x = memory(x, kwargs.get("masks"), kwargs.get("hidden_states"))
        self._mean = self.actor(x)  # type: ignore[attr-defined]
        return self.action_mean  # type: ignore[attr-defined]


class VisualDeterministicAC(DeterministicPolicyMixin, VisualActorCriticMixin, ActorCritic):
    """Feed-forward visual policy whose ``act`` returns the mean."""
