"""On-disk trajectory datasets (written by DemonstrationSaver / DaggerSaver)."""

from st_rl.storage.rollout_files.base import DatasetExhausted, RolloutFileBase
from st_rl.storage.rollout_files.rollout_dataset import RolloutDataset, rollout_dataset_from_config

__all__ = ["DatasetExhausted", "RolloutDataset", "RolloutFileBase", "rollout_dataset_from_config"]
