"""Reference name (st_rl/compat.py): the encoder + estimator policies under the reference's module name."""

from st_rl.modules.actor_critic import EncoderStateAc
from st_rl.modules.actor_critic_recurrent import EncoderStateAcRecurrent

__all__ = ["EncoderStateAc", "EncoderStateAcRecurrent"]
