"""Reference name (st_rl/compat.py): the privileged-state adaptor policies under the reference's module name."""

from st_rl.modules.actor_critic import PrivilegeStateAc
from st_rl.modules.actor_critic_recurrent import AdaptorActorHiddenState, PrivilegeStateAcRecurrent
from st_rl.modules.mixins import PrivilegeEstimatorMixin

__all__ = [
    "AdaptorActorHiddenState",
    "PrivilegeEstimatorMixin",
    "PrivilegeStateAc",
    "PrivilegeStateAcRecurrent",
]
