"""The actor-critic policy (raw observations in), built from optional parts (:class:`PolicyParts`), and its
feed-forward presets."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import normalize_segments
from st_rl.modules.checkpoint_compat import (
    DEFAULT_NONLINEARITY_KEY,
    LegacyActivations,
    load_misaligned_state_dict,
    reconcile_normalizer_state,
    restore_legacy_activations,
    split_discriminator_state,
)
from st_rl.modules.discriminator import policy_discriminator
from st_rl.modules.distribution import gaussian_entropy, gaussian_log_prob, gaussian_sample
from st_rl.modules.encoder import (
    DEFAULT_VISUAL_KWARGS,
    EncoderLayout,
    attach_encoders,
    attach_visual_encoder,
    critic_encoder_modules,
    encoder_latent,
)
from st_rl.modules.memory import (
    AdaptorActorHiddenState,
    attach_memories,
    get_policy_hidden_states,
    load_policy_rollout_states,
    named_memories,
    set_policy_hidden_states,
    split_estimator_hidden,
)
from st_rl.modules.mlp import PolicyHead, mlp_layers
from st_rl.modules.normalizer import attach_obs_normalizers
from st_rl.modules.simple_actor_critic import Actor, Critic, SimpleActorCritic  # noqa: F401 - the seed's path
from st_rl.modules.state_predictor import attach_adaptor, attach_estimator, predict_and_substitute
from st_rl.modules.state_predictor import substitute_with_probability as substitute_with_probability
from st_rl.modules.utils import warn_unknown_kwargs
from st_rl.utils.collections import tree_map
from st_rl.utils.precision import full_precision

# Keys that st_rl / st_gym / legged_gym configs pass to every policy class; they are accepted silently.
COMMON_POLICY_KEYS = frozenset(
    {"class_name", "teacher_ac_path", "rnn_type", "rnn_hidden_size", "rnn_num_layers", "amp_discriminator"}
)


@dataclasses.dataclass(frozen=True)
class PolicyOutput:
    """One forward pass of the policy: what PPO's and the extensions' losses read. ``values`` is None when the
    critic did not run, ``estimated_state`` / ``adapted_state`` without that part (recurrent: padded)."""

    action_mean: torch.Tensor
    action_std: torch.Tensor
    values: torch.Tensor | None = None
    estimated_state: torch.Tensor | None = None
    adapted_state: torch.Tensor | None = None

    @property
    def entropy(self) -> torch.Tensor:
        return gaussian_entropy(self.action_std)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions``, summed over actions."""
        return gaussian_log_prob(actions, self.action_mean, self.action_std)


@dataclasses.dataclass(frozen=True)
class MemorySpec:
    """A recurrent memory: ``rnn_type`` (``"lstm"``/``"gru"``), ``hidden_size``, ``num_layers``."""

    rnn_type: str = "lstm"
    hidden_size: int = 256
    num_layers: int = 1


@dataclasses.dataclass(frozen=True)
class PolicyParts:
    """The optional parts a preset switches on, built from the keyword arguments: ``memory`` (None: none),
    ``encoders``, ``estimator``, ``adaptor`` (privileged state), ``visual`` (on ``visual_component_name``),
    ``discriminator`` (from ``amp_discriminator``), ``deterministic`` (``act`` returns the mean)."""

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
        activation: a ``torch.nn`` activation name (any case); ``mu_activation``: optional, of the mean.
        obs_segments: actor observation layout (name -> shape); ``privileged_obs_segments`` (alias
            ``critic_obs_segments``): the critic's (default: the actor's).
        actor_obs_normalization: a running-statistics ``actor_obs_normalizer``, updated only by
            :meth:`update_normalization`; ``critic_obs_normalization``: the critic's (default: as the actor).
        parts: default the class's ``parts``; the presets with a part describe its arguments, ignored with a
            warning elsewhere, as are unknown ``**kwargs`` (keys all st_rl configs pass are accepted).
    """

    DEFAULT_VISUAL_KWARGS = DEFAULT_VISUAL_KWARGS
    parts = PolicyParts()
    config_tolerated = COMMON_POLICY_KEYS
    is_recurrent = False
    rnn_type: str | None = None
    _actor_memory: nn.Module  # the memory, or a pass-through
    _critic_memory: nn.Module
    encoders: nn.ModuleList
    critic_encoders: nn.ModuleList
    visual_encoder: nn.Module
    rnn_hidden_size: int = 64  # width of an estimator's own memory in feed-forward policies
    rnn_num_layers: int = 1

    def __init_subclass__(cls, **parts: Any) -> None:
        """A preset adds the parts it names: ``class StateAc(ActorCritic, estimator=True)``."""
        super().__init_subclass__()
        if parts:
            cls.parts = cls.parts.add(**parts)

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
        self.parts = parts = parts if parts is not None else type(self).parts
        warn_unknown_kwargs(type(self).__name__, kwargs, COMMON_POLICY_KEYS)
        privileged_obs_segments = (
            critic_obs_segments if privileged_obs_segments is None else privileged_obs_segments
        )
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
        self.use_actor_rnn = bool(use_actor_rnn)
        self.replace_state_prob = float(replace_state_prob)
        self.privilege_replace_state_prob = float(privilege_replace_state_prob)
        self._init_part_state(amp_discriminator)
        attach_visual_encoder(
            self, visual_component_name, visual_kwargs, visual_latent_size, privileged_obs_segments
        )
        attach_encoders(
            self,
            encoder_component_names,
            encoder_class_name,
            encoder_kwargs,
            encoder_output_size,
            critic_encoder_component_names,
            critic_encoder_class_name,
            critic_encoder_kwargs,
        )
        # Heads, then the estimator, then the memories, then the adaptor: the order the parameters are drawn in.
        self._build_heads(actor_obs_normalization, critic_obs_normalization)
        attach_estimator(self, estimator_obs_components, estimator_target_components, estimator_kwargs)
        attach_memories(self, self.parts.memory)
        attach_adaptor(self, adaptor_obs_components, adaptor_target_components, adaptor_kwargs)
        if self._legacy_activations:  # marks checkpoints written since the default became ReLU
            self.register_buffer(DEFAULT_NONLINEARITY_KEY, torch.ones(()))

    def _init_part_state(self, amp_discriminator: Mapping[str, Any] | None) -> None:
        if self.parts.discriminator and not amp_discriminator:
            msg = "dict in the policy config (AMPDiscriminator's arguments, e.g. input_dim None: the env's)"
            raise ValueError(f"{type(self).__name__} needs an 'amp_discriminator' {msg}")
        self.amp_discriminator = dict(amp_discriminator or {}) if self.parts.discriminator else None
        if self.parts.memory is not None:
            self.is_recurrent = True
            self.rnn_type = str(self.parts.memory.rnn_type).lower()
            self.rnn_hidden_size = int(self.parts.memory.hidden_size)
            self.rnn_num_layers = int(self.parts.memory.num_layers)
        self._legacy_activations: LegacyActivations = {}
        self.actor_layout: EncoderLayout | None = None
        self.critic_layout: EncoderLayout | None = None
        self.visual_layout: EncoderLayout | None = None
        self.visual_component_name: str | None = None
        self.estimator: Any = None
        self.memory_s: Any = None
        self.estimated_state_: torch.Tensor | None = None
        self.adaptor: Any = None
        self.memory_p: Any = None
        self.adapted_state_: torch.Tensor | None = None

    def _build_heads(self, actor_obs_normalization: bool, critic_obs_normalization: bool | None) -> None:
        self.actor = PolicyHead(
            *mlp_layers(
                self.actor_input_size(),
                self.actor_hidden_dims,
                self.num_actions,
                self.activation,
                self.mu_activation,
            )
        )
        critic_in = self.rnn_hidden_size if self.is_recurrent else self.encoded_critic_width()
        self.critic = PolicyHead(*mlp_layers(critic_in, self.critic_hidden_dims, 1, self.activation))
        self.std = nn.Parameter(self.init_noise_std * torch.ones(self.num_actions))
        self._mean: torch.Tensor | None = None
        self.actor_obs_normalizer: nn.Module = nn.Identity()
        self.critic_obs_normalizer: nn.Module = nn.Identity()
        self.actor_obs_normalization = self.critic_obs_normalization = False
        critic = actor_obs_normalization if critic_obs_normalization is None else critic_obs_normalization
        self.enable_obs_normalization(bool(actor_obs_normalization), bool(critic))

    enable_obs_normalization = attach_obs_normalizers

    @torch.no_grad()
    def update_normalization(self, obs: torch.Tensor, critic_obs: torch.Tensor | None = None) -> None:
        """Merge a batch of raw observations into the normalisers' running statistics."""
        if self.actor_obs_normalization:
            self.actor_obs_normalizer.update(obs)  # type: ignore[operator]
        if self.critic_obs_normalization:
            self.critic_obs_normalizer.update(obs if critic_obs is None else critic_obs)  # type: ignore[operator]

    def normalize_actor_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor_obs_normalizer.normalize(obs) if self.actor_obs_normalization else obs  # type: ignore[operator]

    def normalize_critic_obs(self, critic_obs: torch.Tensor) -> torch.Tensor:
        if not self.critic_obs_normalization:
            return critic_obs
        return self.critic_obs_normalizer.normalize(critic_obs)  # type: ignore[operator]

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """``nn.Module.load_state_dict``; statistics of a normaliser the policy lacks are ignored, and a normaliser
        missing from ``state_dict`` keeps its own, each with a warning."""
        state, own = dict(state_dict), self.state_dict()
        if "discriminator" not in self._modules:  # an old AMP checkpoint: drop the AMP extension's part
            state = split_discriminator_state(state)[0]
        if DEFAULT_NONLINEARITY_KEY in own and DEFAULT_NONLINEARITY_KEY not in state and state:
            restore_legacy_activations(self, self._legacy_activations)
            state[DEFAULT_NONLINEARITY_KEY] = own[DEFAULT_NONLINEARITY_KEY]
        enabled = {
            "actor_obs_normalizer": self.actor_obs_normalization,
            "critic_obs_normalizer": self.critic_obs_normalization,
        }
        reconcile_normalizer_state(state, own, enabled)
        return super().load_state_dict(state, strict=strict, assign=assign)

    discriminator = property(policy_discriminator)
    load_misaligned_state_dict = load_misaligned_state_dict

    def encode_actor(self, observations: torch.Tensor, visual: bool = True) -> torch.Tensor:
        """Normalised actor observations with encoded components (``visual``: the image too) replaced by latents."""
        if visual and self.visual_layout is not None:
            observations = self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))
        layout = self.actor_layout
        return observations if layout is None else layout.embed(observations, self.encoders)

    def encode_critic(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """Normalised critic observations with encoded components replaced by their latents."""
        layout = self.critic_layout
        return critic_obs if layout is None else layout.embed(critic_obs, critic_encoder_modules(self))

    get_encoder_latent = encoder_latent

    def embed_visual_latent(self, observations: torch.Tensor) -> torch.Tensor:
        """Normalised observations with the image component replaced by its latent."""
        if self.visual_layout is None:
            raise RuntimeError(f"{type(self).__name__} has no visual encoder")
        observations = self.normalize_actor_obs(observations)
        return self.visual_layout.embed(observations, nn.ModuleList([self.visual_encoder]))

    def act_with_embedded_latent(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """The action mean of :meth:`embed_visual_latent`'s output."""
        if self.visual_layout is None:
            raise RuntimeError(f"{type(self).__name__} has no visual encoder")
        x = self.encode_actor(observations, visual=False)
        self._mean = self.actor(self._actor_memory(x, kwargs.get("masks"), kwargs.get("hidden_states")))
        return self.action_mean

    def get_estimated_state(self) -> torch.Tensor:
        """The estimator output of the last ``act`` / ``act_inference`` call."""
        if self.estimated_state_ is None:
            raise RuntimeError("No estimate yet: call act() or act_inference() first")
        return self.estimated_state_

    def get_adapted_state(self) -> torch.Tensor:
        """The adaptor output of the last ``act`` call."""
        if self.adapted_state_ is None:
            raise RuntimeError("No adaptor estimate yet: call act() or act_inference() first")
        return self.adapted_state_

    def encoded_actor_width(self) -> int:
        layout = self.actor_layout or self.visual_layout
        return self.num_actor_obs if layout is None else layout.output_width

    def encoded_critic_width(self) -> int:
        return self.critic_layout.output_width if self.critic_layout is not None else self.num_critic_obs

    def actor_input_size(self) -> int:
        return self.rnn_hidden_size if self.is_recurrent else self.encoded_actor_width()

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

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the memories of finished envs (bool or 0/1 ``dones``; all envs when None)."""
        for memory in named_memories(self).values():
            memory.reset(dones)

    get_hidden_states = get_policy_hidden_states
    set_hidden_states = set_policy_hidden_states

    def detach_hidden_states(self) -> None:
        for memory in named_memories(self).values():
            memory.detach_hidden_states()

    def clone_hidden_states(self) -> Any:
        return tree_map(lambda t: t.clone(), self.get_hidden_states())

    def rollout_state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        """The memories' rollout hidden states for a checkpoint, by attribute name."""
        return {name: memory.rollout_state() for name, memory in named_memories(self).items()}

    load_rollout_state_dict = load_policy_rollout_states

    def actor_memories(self) -> list[tuple[str, Any]]:
        """``(role, Memory)`` on the actor's path in running order (``"adaptor"``, ``"estimator"``, ``"actor"``)."""
        memories = named_memories(self)
        roles = (("adaptor", "memory_p"), ("estimator", "memory_s"), ("actor", "memory_a"))
        return [(role, memories[name]) for role, name in roles if name in memories]

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Not callable by design (the reference contract)."""
        raise NotImplementedError("Use act(), act_inference() or evaluate() on an actor-critic.")

    def update_distribution(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        inference: bool = False,
        **kwargs: Any,
    ) -> PolicyOutput:
        """The action distribution of raw ``observations`` (normaliser, adaptor, estimator, encoders, memory,
        actor MLP); ``action_mean`` etc. then refer to it."""
        observations = self.normalize_actor_obs(observations)
        adapted = estimated = None
        if self.adaptor is not None:
            adaptor_hidden = None
            if isinstance(hidden_states, AdaptorActorHiddenState):
                adaptor_hidden, hidden_states = hidden_states.adaptor, hidden_states.actor
            observations, adapted = predict_and_substitute(
                self, "adaptor", observations, adaptor_hidden, inference
            )
        est_hidden, actor_hidden = split_estimator_hidden(hidden_states)
        if self.estimator is not None and not self.use_actor_rnn:
            observations, estimated = predict_and_substitute(
                self, "estimator", observations, est_hidden, inference
            )
        features = self.actor_features(observations, masks=masks, hidden_states=actor_hidden, **kwargs)
        if self.estimator is not None and self.use_actor_rnn:
            estimated = full_precision(self.estimator(features))
        self._mean = full_precision(self.actor(features))
        self.estimated_state_, self.adapted_state_ = estimated, adapted
        return PolicyOutput(self._mean, self.action_std, None, estimated, adapted)

    def policy_output(
        self,
        observations: torch.Tensor,
        critic_observations: torch.Tensor | None = None,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
    ) -> PolicyOutput:
        """The update-time forward pass of raw (minibatch) observations; ``values`` only with
        ``critic_observations``. Recurrent policies take the padded trajectories' ``masks`` and their initial
        ``ActorCriticHiddenState(actor, critic)``; without them the rollout memories are used and advanced."""
        output = self.update_distribution(observations, masks, getattr(hidden_states, "actor", None))
        if critic_observations is None:
            return output
        critic_hidden = getattr(hidden_states, "critic", None)
        values = self.evaluate(critic_observations, masks=masks, hidden_states=critic_hidden)
        return dataclasses.replace(output, values=values)

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Sample actions (the mean for deterministic presets); ``action_mean`` etc. then refer to this batch."""
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
        features = self.critic_features(self.normalize_critic_obs(critic_observations), **kwargs)
        return full_precision(self.critic(features))

    def evaluate_actions(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        critic_observations: torch.Tensor | None = None,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, values)``, the seed's form of :meth:`policy_output` (critic observations
        default to ``observations``)."""
        critic_obs = observations if critic_observations is None else critic_observations
        output = self.policy_output(observations, critic_obs, masks, hidden_states)
        return output.log_prob(actions), output.entropy, output.values  # type: ignore[return-value]

    def get_actions_log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions`` under the last distribution."""
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
        """Clip ``std`` in place to scalar or per-action bounds."""
        if (min is None or isinstance(min, (int, float))) and (max is None or isinstance(max, (int, float))):
            self.std.copy_(torch.clamp(self.std, min, max))  # no host-to-device copy (a sync on a GPU)
            return
        lo = None if min is None else torch.as_tensor(min, dtype=self.std.dtype, device=self.std.device)
        hi = None if max is None else torch.as_tensor(max, dtype=self.std.dtype, device=self.std.device)
        self.std.copy_(torch.clamp(self.std, lo, hi))


class EncoderActorCritic(ActorCritic, encoders=True):
    """:class:`ActorCritic` with encoders on named observation components (docs/policies.md); their default
    kwargs: ``st_rl.modules.encoder.DEFAULT_ENCODER_KWARGS``."""


class StateAc(ActorCritic, estimator=True):
    """:class:`ActorCritic` with a state estimator (EstimatorPPO trains it) predicting
    ``estimator_target_components``; ``use_actor_rnn``: from the actor memory's output (docs/policies.md);
    ``estimator_kwargs``: ``hidden_sizes`` (default [128, 64]), ``nonlinearity`` (ReLU), recurrent ``rnn_*``."""


class EncoderStateAc(StateAc, encoders=True):
    """:class:`StateAc` with encoders: the estimator reads the observations, then the encoders run."""


class PrivilegeStateAc(StateAc, adaptor=True):
    """:class:`StateAc` plus a privileged-state ``adaptor`` predicting ``adaptor_target_components`` from
    ``adaptor_obs_components`` before the estimator runs (docs/policies.md)."""


class VisualDeterministicAC(ActorCritic, visual=True, deterministic=True):
    """Feed-forward visual policy whose ``act`` returns the mean: a ``Conv2dHeadModel`` (``visual_kwargs`` over
    :attr:`DEFAULT_VISUAL_KWARGS`) encodes the actor's image component ``visual_component_name`` (C, H, W) into
    ``visual_latent_size``."""
