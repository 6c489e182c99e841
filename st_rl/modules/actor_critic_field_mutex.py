"""Reference name (st_rl/compat.py): the field and climb Mutex policies under the reference's module name."""

from st_rl.modules.actor_critic_mutex import ActorCriticClimbMutex, ActorCriticFieldMutex

__all__ = ["ActorCriticClimbMutex", "ActorCriticFieldMutex"]
