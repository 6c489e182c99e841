"""The reference library's names (misspellings and old aliases included), each a thin alias of the current one:
re-export modules, methods marked ``# reference name (st_rl/compat.py)``, and :data:`KEYWORD_ALIASES`."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

__all__ = ["KEYWORD_ALIASES", "REFERENCE_NAMES", "resolve_reference_name"]

# Reference module paths (thin re-export modules) -> where the names they export live now. The seed's (003)
# minimal networks keep their path: its ActorCritic(obs_dim, act_dim) is SimpleActorCritic.
_MOVED = [
    line.replace(" -> ", ":").split(":", 2)
    for line in """
st_rl.utils -> st_rl.utils.utils: unpad_trajectories split_and_pad_trajectories store_code_state
st_rl.utils -> st_rl.env.layout: get_obs_slice get_subobs_size get_subobs_by_components substitute_estimated_state
st_rl.modules.state_estimator -> st_rl.modules: StateAc StateAcRecurrent EstimatorActorHiddenState
st_rl.modules.state_adaptor -> st_rl.modules: PrivilegeStateAc PrivilegeStateAcRecurrent AdaptorActorHiddenState
st_rl.modules.encoder_actor_critic -> st_rl.modules: EncoderActorCritic EncoderActorCriticRecurrent
st_rl.modules.encoder_actor_critic -> st_rl.modules: EncoderAmpActorCriticRecurrent
st_rl.modules.visual_actor_critic -> st_rl.modules: VisualDeterministicAC VisualDeterministicRecurrent
st_rl.modules.all_mixer -> st_rl.modules: EncoderStateAc EncoderStateAcRecurrent
st_rl.modules.actor_critic_field_mutex -> st_rl.modules: ActorCriticFieldMutex ActorCriticClimbMutex
st_rl.modules.actor_critic -> st_rl.modules: Actor Critic SimpleActorCritic
st_rl.modules.actor_critic_recurrent -> st_rl.modules.memory: LstmHiddenState ActorCriticHiddenState Memory
st_rl.modules.state_estimator -> st_rl.modules.mixins: EstimatorMixin
st_rl.modules.state_adaptor -> st_rl.modules.mixins: PrivilegeEstimatorMixin
st_rl.modules.encoder_actor_critic -> st_rl.modules.mixins: EncoderActorCriticMixin
st_rl.modules.visual_actor_critic -> st_rl.modules.mixins: VisualActorCriticMixin
st_rl.modules.deterministic_policy -> st_rl.modules.mixins: DeterministicPolicyMixin
""".strip().splitlines()
]

# "module:qualified.name" of the reference -> "module:qualified.name" of what it is today.
REFERENCE_NAMES: dict[str, str] = {
    # misspellings kept from the reference
    "st_rl.storage.reply_buffer:ReplayBuffer": "st_rl.storage.replay_buffer:ReplayBuffer",
    "st_rl.storage.rollout_storage:RolloutStorage.reccurent_mini_batch_generator": (
        "st_rl.storage.rollout_storage:RolloutStorage.recurrent_mini_batch_generator"
    ),
    "st_rl.runners:OnPolicyRunner.init_writter": "st_rl.runners:OnPolicyRunner.init_writer",
    # old names
    "st_rl.datasets:AMPLoader": "st_rl.datasets:MotionLoader",
    "st_rl.envs:make_env": "st_rl.tasks:make_env",  # the package st_rl.envs is st_rl.tasks
    "st_rl.envs.locomotion:LeggedLocomotion": "st_rl.tasks.locomotion:LeggedLocomotion",
    # the algorithm attributes reference scripts read (the features now live in extensions)
    "st_rl.algorithms:APPO.ref_obs_normalizer": "st_rl.algorithms:APPO.amp_normalizer",
    "st_rl.algorithms:APPO.ref_motion_normalizer": "st_rl.algorithms:APPO.amp_normalizer",
    **{f"{old}:{name}": f"{new}:{name}" for old, new, names in _MOVED for name in names.split()},
    # the reference's algorithm mixins, at their module paths (each adds its extension to the base it precedes)
    "st_rl.algorithms.appo:APPOAlgoMixin": "st_rl.algorithms:APPOAlgoMixin",
    "st_rl.algorithms.estimator:EstimatorAlgoMixin": "st_rl.algorithms:EstimatorAlgoMixin",
    "st_rl.datasets.dagger_saver:DaggerSaver": "st_rl.runners.dagger_saver:DaggerSaver",
    "st_rl.algorithms.appo:GET_PROB_FUNC": "st_rl.algorithms.schedules:GET_PROB_FUNC",
}

# keyword accepted by -> (reference keyword, current keyword)
KEYWORD_ALIASES: dict[str, tuple[str, str]] = {
    "st_rl.modules:ActorCritic": ("critic_obs_segments", "privileged_obs_segments"),
    "st_rl.modules:ActorCriticClimbMutex": ("climb_down_policy_path", "jump_down_policy_path"),
    "st_rl.storage.rollout_files.rollout_dataset:rollout_dataset_from_config": ("scan_dir", "data_dir"),
    # the reference's keyword first; st_rl's former keyword still accepted
    "st_rl.env.layout:get_subobs_by_components": ("obs_segments", "segments"),
    "st_rl.env.layout:substitute_estimated_state": ("obs_segments", "segments"),
}


def resolve_reference_name(name: str) -> Any:
    """The object a ``"module:qualified.name"`` string names."""
    module, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part)
    return obj
