"""The actor-critics with an AMP discriminator config (:class:`AMPDiscriminator`, owned by the AMP extension)."""

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
    """:class:`~st_rl.modules.actor_critic.ActorCritic` with an ``amp_discriminator`` config; the AMP extension
    builds, trains and saves the discriminator (``policy.discriminator``), not a policy module."""

    parts = PolicyParts(discriminator=True)


class AmpActorCriticRecurrent(ActorCriticRecurrent):
    """:class:`~st_rl.modules.actor_critic_recurrent.ActorCriticRecurrent` with an AMP discriminator."""

    parts = ActorCriticRecurrent.parts.add(discriminator=True)


class EncoderAmpActorCriticRecurrent(EncoderActorCriticRecurrent):
    """:class:`~st_rl.modules.actor_critic_recurrent.EncoderActorCriticRecurrent` with an AMP discriminator
    (encoder defaults as usual)."""

    parts = EncoderActorCriticRecurrent.parts.add(discriminator=True)
