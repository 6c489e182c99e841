"""The actor-critics with an AMP discriminator config (:class:`AMPDiscriminator`, owned by the AMP extension)."""

from __future__ import annotations

from st_rl.modules.actor_critic import ActorCritic
from st_rl.modules.actor_critic_recurrent import ActorCriticRecurrent, EncoderActorCriticRecurrent
from st_rl.modules.discriminator import AMPDiscriminator

__all__ = ["AMPDiscriminator", "AmpActorCritic", "AmpActorCriticRecurrent", "EncoderAmpActorCriticRecurrent"]


class AmpActorCritic(ActorCritic, discriminator=True):
    """:class:`~st_rl.modules.actor_critic.ActorCritic` with an ``amp_discriminator`` config; the AMP extension
    builds, trains and saves the discriminator (``policy.discriminator``), not a policy module."""


class AmpActorCriticRecurrent(ActorCriticRecurrent, discriminator=True):
    """:class:`~st_rl.modules.actor_critic_recurrent.ActorCriticRecurrent` with an AMP discriminator."""


class EncoderAmpActorCriticRecurrent(EncoderActorCriticRecurrent, discriminator=True):
    """:class:`~st_rl.modules.actor_critic_recurrent.EncoderActorCriticRecurrent` with an AMP discriminator
    (encoder defaults as usual)."""
