"""Recurrent presets: the actor-critic with an LSTM/GRU memory in front of each MLP head.

The memory is a part of :class:`~st_rl.modules.actor_critic.ActorCritic` (``memory_a``, ``memory_c``); these
classes only declare it and take the reference's ``rnn_type``, ``rnn_hidden_size`` and ``rnn_num_layers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from st_rl.modules.actor_critic import ActorCritic, MemorySpec, PolicyParts
from st_rl.modules.memory import (  # reference names
    ActorCriticHiddenState,
    AdaptorActorHiddenState,
    EstimatorActorHiddenState,
    LstmHiddenState,
    Memory,
)

__all__ = [
    "ActorCriticHiddenState",
    "ActorCriticRecurrent",
    "AdaptorActorHiddenState",
    "EncoderActorCriticRecurrent",
    "EncoderStateAcRecurrent",
    "EstimatorActorHiddenState",
    "LstmHiddenState",
    "Memory",
    "PrivilegeStateAcRecurrent",
    "StateAcRecurrent",
    "VisualDeterministicRecurrent",
]


class ActorCriticRecurrent(ActorCritic):
    """Gaussian actor-critic whose actor and critic each read their observations through a memory
    (``memory_a``, ``memory_c``: :class:`~st_rl.modules.memory.Memory`); the heads take ``rnn_hidden_size``
    inputs. In rollouts the memories keep their hidden states (reset per finished env by :meth:`reset`); in
    updates ``act`` / ``evaluate`` take padded trajectories, ``masks`` and the initial hidden states.

    The positional order is the reference's: ``(num_actor_obs, num_critic_obs, num_actions, actor_hidden_dims,
    critic_hidden_dims, activation, rnn_type, rnn_hidden_size, rnn_num_layers, init_noise_std)``; every other
    argument is a keyword (as :class:`~st_rl.modules.actor_critic.ActorCritic`).

    Args:
        rnn_type: ``"lstm"`` or ``"gru"``.
        rnn_hidden_size: memory width.
        rnn_num_layers: stacked memory layers.
    """

    parts = PolicyParts(memory=MemorySpec())
    is_recurrent = True

    def __init__(
        self,
        num_actor_obs: int,
        num_critic_obs: int,
        num_actions: int,
        actor_hidden_dims: Sequence[int] = (256, 256, 256),
        critic_hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        rnn_type: str = "lstm",
        rnn_hidden_size: int = 256,
        rnn_num_layers: int = 1,
        init_noise_std: float = 1.0,
        *,
        parts: PolicyParts | None = None,
        **kwargs: Any,
    ) -> None:
        memory = MemorySpec(str(rnn_type).lower(), int(rnn_hidden_size), int(rnn_num_layers))
        super().__init__(
            num_actor_obs,
            num_critic_obs,
            num_actions,
            actor_hidden_dims,
            critic_hidden_dims,
            activation,
            init_noise_std,
            parts=(parts or type(self).parts).add(memory=memory),
            **kwargs,
        )


class EncoderActorCriticRecurrent(ActorCriticRecurrent):
    """:class:`ActorCriticRecurrent` with encoders on named observation components (the latents feed the
    memories); encoder arguments as :class:`~st_rl.modules.actor_critic.EncoderActorCritic`."""

    parts = ActorCriticRecurrent.parts.add(encoders=True)


class StateAcRecurrent(ActorCriticRecurrent):
    """:class:`ActorCriticRecurrent` with a state estimator (own memory, or on the actor memory with
    ``use_actor_rnn``); arguments as :class:`~st_rl.modules.actor_critic.StateAc`."""

    parts = ActorCriticRecurrent.parts.add(estimator=True)


class EncoderStateAcRecurrent(StateAcRecurrent):
    """:class:`StateAcRecurrent` with encoders (estimator on the observations, then encoders)."""

    parts = ActorCriticRecurrent.parts.add(encoders=True, estimator=True)


class VisualDeterministicRecurrent(ActorCriticRecurrent):
    """Recurrent visual policy (image latent into the actor memory) whose ``act`` returns the mean; visual
    arguments as :class:`~st_rl.modules.actor_critic.VisualDeterministicAC`."""

    parts = ActorCriticRecurrent.parts.add(visual=True, deterministic=True)


class PrivilegeStateAcRecurrent(StateAcRecurrent):
    """:class:`StateAcRecurrent` plus a privileged-state adaptor with its own memory ``memory_p``; arguments as
    :class:`~st_rl.modules.actor_critic.PrivilegeStateAc`, and ``adaptor_kwargs`` also take ``rnn_type``,
    ``rnn_hidden_size``, ``rnn_num_layers`` (default: the policy's). Hidden states nest adaptor -> estimator ->
    actor."""

    parts = StateAcRecurrent.parts.add(adaptor=True)
