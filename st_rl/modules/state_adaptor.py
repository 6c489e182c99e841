"""Reference name (st_rl/compat.py): the privileged-state adaptor policy under the reference's module name."""

from st_rl.modules.actor_critic_recurrent import AdaptorActorHiddenState, PrivilegeStateAcRecurrent
from st_rl.modules.mixins import PrivilegeEstimatorMixin

__all__ = ["AdaptorActorHiddenState", "PrivilegeEstimatorMixin", "PrivilegeStateAcRecurrent"]
