"""Networks and policies. Every class usable as a config ``class_name`` is exported here."""

# ruff: noqa: F401 - the imports are the exports (__all__ below lists them)
from types import ModuleType as _ModuleType

from st_rl.modules.actor_critic import (
    ActorCritic,
    EncoderActorCritic,
    EncoderStateAc,
    MemorySpec,
    PolicyParts,
    PrivilegeStateAc,
    StateAc,
    VisualDeterministicAC,
)
from st_rl.modules.actor_critic_mutex import ActorCriticClimbMutex, ActorCriticFieldMutex, ActorCriticMutex
from st_rl.modules.actor_critic_recurrent import (
    ActorCriticRecurrent,
    AdaptorActorHiddenState,
    EncoderActorCriticRecurrent,
    EncoderStateAcRecurrent,
    EstimatorActorHiddenState,
    PrivilegeStateAcRecurrent,
    StateAcRecurrent,
    VisualDeterministicRecurrent,
)
from st_rl.modules.amp_discriminator import (
    AmpActorCritic,
    AmpActorCriticRecurrent,
    AMPDiscriminator,
    EncoderAmpActorCriticRecurrent,
)
from st_rl.modules.conv2d import Conv2dHeadModel, Conv2dModel
from st_rl.modules.factory import build_actor_critic
from st_rl.modules.memory import ActorCriticHiddenState, LstmHiddenState, Memory, NoMemory
from st_rl.modules.mixins import (
    AmpMixin,
    DeterministicPolicyMixin,
    EncoderActorCriticMixin,
    EstimatorMixin,
    PolicyMixin,
    PrivilegeEstimatorMixin,
    VisualActorCriticMixin,
)
from st_rl.modules.mlp import MlpModel
from st_rl.modules.normalizer import EmpiricalNormalization, Normalize, Normalizer, RunningMeanStd
from st_rl.modules.simple_actor_critic import Actor, Critic, SimpleActorCritic
from st_rl.modules.utils import conv2d_output_shape, get_activation, get_activation_Cls

__all__ = [n for n, v in globals().items() if n[0] != "_" and not isinstance(v, _ModuleType)]  # pyright: ignore[reportUnsupportedDunderAll]
