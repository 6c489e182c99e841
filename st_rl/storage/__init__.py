"""Rollout storage, replay and on-disk datasets."""

from st_rl.storage.replay_buffer import ReplayBuffer
from st_rl.storage.rollout_files import RolloutDataset, RolloutFileBase
from st_rl.storage.rollout_storage import (
    ActionLabelRollout,
    AmpRolloutStorage,
    MiniBatch,
    QueueRolloutStorage,
    RolloutStorage,
    SarsaRolloutStorage,
)

__all__ = [
    "ActionLabelRollout",
    "AmpRolloutStorage",
    "ReplayBuffer",
    "MiniBatch",
    "QueueRolloutStorage",
    "RolloutDataset",
    "RolloutFileBase",
    "RolloutStorage",
    "SarsaRolloutStorage",
]
