"""Networks and policies. Every class usable as a config ``class_name`` is exported here."""

from st_rl.modules.actor_critic import ActorCritic
from st_rl.modules.factory import build_actor_critic
from st_rl.modules.mlp import MlpModel
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.modules.utils import conv2d_output_shape, get_activation, get_activation_Cls

__all__ = [
    "ActorCritic",
    "EmpiricalNormalization",
    "MlpModel",
    "build_actor_critic",
    "conv2d_output_shape",
    "get_activation",
    "get_activation_Cls",
]
