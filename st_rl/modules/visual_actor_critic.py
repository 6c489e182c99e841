"""Reference name (st_rl/compat.py): the visual (depth-camera) policies under the reference's module name."""

from st_rl.modules.actor_critic import VisualDeterministicAC
from st_rl.modules.actor_critic_recurrent import VisualDeterministicRecurrent
from st_rl.modules.mixins import VisualActorCriticMixin

__all__ = ["VisualActorCriticMixin", "VisualDeterministicAC", "VisualDeterministicRecurrent"]
