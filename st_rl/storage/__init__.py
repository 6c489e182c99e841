"""Rollout storage and minibatch generators."""

from st_rl.storage.rollout_storage import MiniBatch, RolloutStorage

__all__ = ["MiniBatch", "RolloutStorage"]
