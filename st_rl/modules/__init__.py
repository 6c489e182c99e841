"""Networks and policies. Every class usable as a config ``class_name`` is exported here."""

# ruff: noqa: F401 - the imports are the exports (__all__ below lists them)
import pkgutil as _pkgutil
import sys as _sys
from types import ModuleType as _ModuleType

import st_rl.compat as _compat
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

# The reference's module paths that hold only moved names (st_rl/compat.py lists them) are generated modules.
_files = {_info.name for _info in _pkgutil.iter_modules(__path__)}
for _ref, _new in _compat.REFERENCE_NAMES.items():
    _path, _, _name = _ref.partition(":")
    _parent, _, _leaf = _path.rpartition(".")
    if _parent == __name__ and _leaf not in _files:
        _module = globals()[_leaf] = _sys.modules.setdefault(_path, _ModuleType(_path, "Reference name."))
        setattr(_module, _name, _compat.resolve_reference_name(_new))
        vars(_module)["__all__"] = sorted({*vars(_module).get("__all__", ()), _name})
