"""Recurrent actor-critic: an LSTM/GRU memory in front of each MLP head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from st_rl.env.layout import get_subobs_by_components, get_subobs_size
from st_rl.modules.actor_critic import (
    ActorCritic,
    DeterministicPolicyMixin,
    EstimatorActorHiddenState,
    VisualActorCriticMixin,
    split_estimator_hidden,
    substitute_with_probability,
)
from st_rl.modules.memory import ActorCriticHiddenState, Memory
from st_rl.modules.mlp import MlpModel
from st_rl.utils.collections import namedarraytuple, tree_map


class ActorCriticRecurrent(ActorCritic):
    """Gaussian actor-critic whose actor and critic each read their observations through a memory.

    ``memory_a`` (actor) and ``memory_c`` (critic) are :class:`Memory` modules; the MLP heads take
    ``rnn_hidden_size`` inputs. In rollouts the memories keep their own hidden states (reset per finished env
    by :meth:`reset`); in updates ``act``/``evaluate`` receive padded trajectories, ``masks`` and the initial
    hidden states.

    Args:
        rnn_type: ``"lstm"`` or ``"gru"``.
        rnn_hidden_size: memory width.
        rnn_num_layers: stacked memory layers.
        (other arguments as :class:`ActorCritic`)
    """

    is_recurrent = True

    def __init__(
        self,
        *args: Any,
        rnn_type: str = "lstm",
        rnn_hidden_size: int = 256,
        rnn_num_layers: int = 1,
        **kwargs: Any,
    ) -> None:
        self.rnn_type = str(rnn_type).lower()
        self.rnn_hidden_size = int(rnn_hidden_size)
        self.rnn_num_layers = int(rnn_num_layers)
        super().__init__(*args, **kwargs)
        self.memory_a = Memory(
            self.actor_memory_input_size(), self.rnn_type, self.rnn_num_layers, self.rnn_hidden_size
        )
        self.memory_c = Memory(
            self.critic_memory_input_size(), self.rnn_type, self.rnn_num_layers, self.rnn_hidden_size
        )

    # ------------------------------------------------------------------ composition hooks
    def actor_memory_input_size(self) -> int:
        """Width fed to the actor memory (encoders change it)."""
        return self.encoded_actor_width()

    def critic_memory_input_size(self) -> int:
        return self.encoded_critic_width()

    def actor_input_size(self) -> int:
        return self.rnn_hidden_size

    def critic_input_size(self) -> int:
        return self.rnn_hidden_size

    def actor_features(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        return self.memory_a(self.encode_actor(observations), masks, hidden_states)

    def critic_features(
        self,
        critic_observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        return self.memory_c(self.encode_critic(critic_observations), masks, hidden_states)

    # ------------------------------------------------------------------ recurrent API
    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the memories of finished envs (bool or 0/1 ``dones``; all envs when None)."""
        self.memory_a.reset(dones)
        self.memory_c.reset(dones)
        if self.memory_s is not None:
            self.memory_s.reset(dones)

    def get_hidden_states(self) -> Any:
        """``ActorCriticHiddenState(actor, critic)`` of the rollout memories (fields None before the first step).

        With an estimator memory the actor field is ``EstimatorActorHiddenState(estimator, actor)``.
        """
        actor = self.memory_a.hidden_states
        if self.memory_s is not None:
            actor = EstimatorActorHiddenState(self.memory_s.hidden_states, actor)
        return ActorCriticHiddenState(actor, self.memory_c.hidden_states)

    def set_hidden_states(self, hidden_states: Any) -> None:
        """Restore rollout hidden states returned by :meth:`get_hidden_states`."""
        est, actor = split_estimator_hidden(hidden_states.actor)
        self.memory_a.hidden_states = actor
        if self.memory_s is not None:
            self.memory_s.hidden_states = est
        self.memory_c.hidden_states = hidden_states.critic

    def detach_hidden_states(self) -> None:
        self.memory_a.detach_hidden_states()
        self.memory_c.detach_hidden_states()
        if self.memory_s is not None:
            self.memory_s.detach_hidden_states()

    def actor_memories(self) -> list[tuple[str, Any]]:
        memories: list[tuple[str, Any]] = [("estimator", self.memory_s)] if self.memory_s is not None else []
        return memories + [("actor", self.memory_a)]

    def clone_hidden_states(self) -> Any:
        """A copy of the rollout hidden states."""
        return tree_map(lambda t: t.clone(), self.get_hidden_states())


class EncoderActorCriticRecurrent(ActorCriticRecurrent):
    """:class:`ActorCriticRecurrent` with encoders on named observation components (the latents feed the
    memories); encoder arguments as :class:`~st_rl.modules.actor_critic.EncoderActorCritic`."""

    supports_encoders = True


class StateAcRecurrent(ActorCriticRecurrent):
    """:class:`ActorCriticRecurrent` with a state estimator (own memory, or on the actor memory with
    ``use_actor_rnn``); arguments as :class:`~st_rl.modules.actor_critic.StateAc`."""

    supports_estimator = True


class EncoderStateAcRecurrent(StateAcRecurrent):
    """:class:`StateAcRecurrent` with encoders (estimator on the raw observations, then encoders)."""

    supports_encoders = True


class VisualDeterministicRecurrent(DeterministicPolicyMixin, VisualActorCriticMixin, ActorCriticRecurrent):
    """Recurrent visual policy (image latent into the actor memory) whose ``act`` returns the mean."""


AdaptorActorHiddenState = namedarraytuple("AdaptorActorHiddenState", ["adaptor", "actor"])


class PrivilegeStateAcRecurrent(StateAcRecurrent):
    """:class:`StateAcRecurrent` plus a privileged-state adaptor.

    The adaptor (own memory and MLP head) reads ``adaptor_obs_components`` and predicts
    ``adaptor_target_components`` (e.g. friction or payload carried in the actor observation during training);
    with probability ``privilege_replace_state_prob`` its detached estimate replaces those components before the
    state estimator and the policy run (always at inference when the probability is > 0). Its output is kept
    apart from the estimator's (:meth:`get_adapted_state`), and EstimatorPPO trains it with ``adaptor_loss``
    against the critic observations. Hidden states nest adaptor -> estimator -> actor.

    Args:
        adaptor_obs_components: actor components the adaptor reads.
        adaptor_target_components: actor components it predicts.
        adaptor_kwargs: ``hidden_sizes`` (default [128, 64]), ``rnn_type``, ``rnn_hidden_size``,
            ``rnn_num_layers`` (default: the policy's).
        privilege_replace_state_prob: substitution probability during training.
        (other arguments as :class:`StateAcRecurrent`)
    """

    def __init__(
        self,
        *args: Any,
        adaptor_obs_components: Sequence[str] | None = None,
        adaptor_target_components: Sequence[str] | None = None,
        adaptor_kwargs: dict[str, Any] | None = None,
        privilege_replace_state_prob: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if not adaptor_obs_components or not adaptor_target_components:
            raise ValueError(
                "PrivilegeStateAcRecurrent needs adaptor_obs_components and adaptor_target_components"
            )
        segments = self._require_segments(self.obs_segments, "obs")
        self.adaptor_obs_components = list(adaptor_obs_components)
        self.adaptor_target_components = list(adaptor_target_components)
        self.privilege_replace_state_prob = float(privilege_replace_state_prob)
        kw = dict(adaptor_kwargs or {})
        rnn_type = kw.pop("rnn_type", self.rnn_type)
        hidden_size = int(kw.pop("rnn_hidden_size", self.rnn_hidden_size))
        layers = int(kw.pop("rnn_num_layers", self.rnn_num_layers))
        hidden = kw.pop("hidden_sizes", [128, 64])
        kw.setdefault("nonlinearity", self.activation)
        self.memory_p = Memory(
            get_subobs_size(segments, self.adaptor_obs_components), rnn_type, layers, hidden_size
        )
        self.adaptor = MlpModel(
            hidden_size, hidden, get_subobs_size(segments, self.adaptor_target_components), **kw
        )
        self.adapted_state_: torch.Tensor | None = None

    def distribution_from_normalized(
        self,
        observations: torch.Tensor,
        masks: torch.Tensor | None = None,
        hidden_states: Any = None,
        inference: bool = False,
        **kwargs: Any,
    ) -> None:
        adaptor_hidden, inner_hidden = None, hidden_states
        if isinstance(hidden_states, AdaptorActorHiddenState):
            adaptor_hidden, inner_hidden = hidden_states.adaptor, hidden_states.actor
        segments = self._require_segments(self.obs_segments, "obs")
        x = get_subobs_by_components(observations, self.adaptor_obs_components, segments)
        estimate = self.adaptor(self.memory_p(x, None, adaptor_hidden))
        self.adapted_state_ = estimate
        observations = substitute_with_probability(
            observations,
            estimate,
            self.adaptor_target_components,
            segments,
            self.privilege_replace_state_prob,
            inference,
        )
        super().distribution_from_normalized(
            observations, masks=masks, hidden_states=inner_hidden, inference=inference, **kwargs
        )

    def get_adapted_state(self) -> torch.Tensor:
        """The adaptor output of the last ``act`` call."""
        if self.adapted_state_ is None:
            raise RuntimeError("No adaptor estimate yet: call act() or act_inference() first")
        return self.adapted_state_

    def reset(self, dones: torch.Tensor | None = None) -> None:
        super().reset(dones)
        self.memory_p.reset(dones)

    def get_hidden_states(self) -> Any:
        inner = super().get_hidden_states()
        return ActorCriticHiddenState(
            AdaptorActorHiddenState(self.memory_p.hidden_states, inner.actor), inner.critic
        )

    def set_hidden_states(self, hidden_states: Any) -> None:
        actor = hidden_states.actor
        if isinstance(actor, AdaptorActorHiddenState):
            self.memory_p.hidden_states = actor.adaptor
            actor = actor.actor
        super().set_hidden_states(ActorCriticHiddenState(actor, hidden_states.critic))

    def detach_hidden_states(self) -> None:
        super().detach_hidden_states()
        self.memory_p.detach_hidden_states()

    def actor_memories(self) -> list[tuple[str, Any]]:
        return [("adaptor", self.memory_p), *super().actor_memories()]
