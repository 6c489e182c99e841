"""Adversarial Motion Priors: the actor-critics that carry a discriminator (:class:`AMPDiscriminator`, defined in
:mod:`st_rl.modules.discriminator`)."""

from __future__ import annotations

from st_rl.modules.actor_critic import ActorCritic, PolicyParts
from st_rl.modules.actor_critic_recurrent import ActorCriticRecurrent, EncoderActorCriticRecurrent
from st_rl.modules.discriminator import AMPDiscriminator

__all__ = [
    "AMPDiscriminator",
    "AmpActorCritic",
    "AmpActorCriticRecurrent",
    "EncoderAmpActorCriticRecurrent",
]


class AmpActorCritic(ActorCritic):
    """:class:`~st_rl.modules.actor_critic.ActorCritic` with an AMP discriminator part (``discriminator``, built
    from the ``amp_discriminator`` dict). The discriminator is part of the model: it is saved in
    ``model_state_dict`` and its parameters are optimised by the algorithm's optimizer (only the AMP
    extension's discriminator losses reach it)."""

    parts = PolicyParts(discriminator=True)


class AmpActorCriticRecurrent(ActorCriticRecurrent):
    """:class:`~st_rl.modules.actor_critic_recurrent.ActorCriticRecurrent` with an AMP discriminator."""

    parts = ActorCriticRecurrent.parts.add(discriminator=True)


class EncoderAmpActorCriticRecurrent(EncoderActorCriticRecurrent):
    """:class:`~st_rl.modules.actor_critic_recurrent.EncoderActorCriticRecurrent` with an AMP discriminator
    (encoder defaults as usual)."""

    parts = EncoderActorCriticRecurrent.parts.add(discriminator=True)
