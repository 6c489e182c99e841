"""Rollout storage, replay and on-disk datasets."""

from st_rl.storage.rollout_files import RolloutDataset, RolloutFileBase
from st_rl.storage.rollout_storage import (
    ActionLabelRollout,
    MiniBatch,
    QueueRolloutStorage,
    RolloutStorage,
    SarsaRolloutStorage,
)

__all__ = [
    "ActionLabelRollout",
    "MiniBatch",
    "QueueRolloutStorage",
    "RolloutDataset",
    "RolloutFileBase",
    "RolloutStorage",
    "SarsaRolloutStorage",
]
