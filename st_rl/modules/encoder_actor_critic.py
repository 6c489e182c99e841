"""Reference name (st_rl/compat.py): the encoder policies under the reference's module name."""

from st_rl.modules.actor_critic import EncoderActorCritic
from st_rl.modules.actor_critic_recurrent import EncoderActorCriticRecurrent
from st_rl.modules.amp_discriminator import EncoderAmpActorCriticRecurrent
from st_rl.modules.mixins import EncoderActorCriticMixin

__all__ = [
    "EncoderActorCritic",
    "EncoderActorCriticMixin",
    "EncoderActorCriticRecurrent",
    "EncoderAmpActorCriticRecurrent",
]
