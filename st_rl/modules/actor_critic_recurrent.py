"""Recurrent presets: the actor-critic with an LSTM/GRU memory (``memory_a``, ``memory_c``) before each head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from st_rl.modules.actor_critic import ActorCritic, MemorySpec, PolicyParts
from st_rl.modules.memory import ActorCriticHiddenState as ActorCriticHiddenState  # reference names
from st_rl.modules.memory import AdaptorActorHiddenState as AdaptorActorHiddenState
from st_rl.modules.memory import EstimatorActorHiddenState as EstimatorActorHiddenState
from st_rl.modules.memory import LstmHiddenState as LstmHiddenState
from st_rl.modules.memory import Memory as Memory


class ActorCriticRecurrent(ActorCritic, memory=MemorySpec()):
    """Gaussian actor-critic whose actor and critic each read their observations through a ``Memory`` (``rnn_type``
    ``"lstm"`` or ``"gru"``); positional arguments in the reference's order, the others as ``ActorCritic``."""

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
        parts = (parts or type(self).parts).add(memory=memory)
        args = (num_actor_obs, num_critic_obs, num_actions, actor_hidden_dims, critic_hidden_dims, activation)
        super().__init__(*args, init_noise_std, parts=parts, **kwargs)


class EncoderActorCriticRecurrent(ActorCriticRecurrent, encoders=True):
    """:class:`ActorCriticRecurrent` with encoders (arguments as ``EncoderActorCritic``)."""


class StateAcRecurrent(ActorCriticRecurrent, estimator=True):
    """:class:`ActorCriticRecurrent` with a state estimator (arguments as ``StateAc``)."""


class EncoderStateAcRecurrent(StateAcRecurrent, encoders=True):
    """:class:`StateAcRecurrent` with encoders (estimator on the observations, then encoders)."""


class VisualDeterministicRecurrent(ActorCriticRecurrent, visual=True, deterministic=True):
    """Recurrent visual policy whose ``act`` returns the mean (arguments as ``VisualDeterministicAC``)."""


class PrivilegeStateAcRecurrent(StateAcRecurrent, adaptor=True):
    """:class:`StateAcRecurrent` plus a privileged-state adaptor with its own memory ``memory_p`` (``adaptor_kwargs``
    also take ``rnn_type``, ``rnn_hidden_size``, ``rnn_num_layers``); hidden states nest adaptor -> estimator ->
    actor."""
