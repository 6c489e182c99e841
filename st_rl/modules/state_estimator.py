"""Reference name (st_rl/compat.py): the estimator policies under the reference's module name."""

from st_rl.modules.actor_critic import StateAc
from st_rl.modules.actor_critic_recurrent import EstimatorActorHiddenState, StateAcRecurrent
from st_rl.modules.mixins import EstimatorMixin

__all__ = ["EstimatorActorHiddenState", "EstimatorMixin", "StateAc", "StateAcRecurrent"]
