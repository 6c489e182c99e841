"""EstimatorPPO / EstimatorTPPO: PPO / TPPO with the ``StateEstimation`` extension."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO, with_extension

__all__ = ["EstimatorAlgoMixin", "EstimatorPPO", "EstimatorTPPO"]


class EstimatorAlgoMixin:
    """Adds the ``StateEstimation`` extension (``self.estimator``, built from the keyword arguments) to the
    algorithm listed after it, with the reference's attribute names."""

    config_sources = (StateEstimation,)
    estimator: StateEstimation

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        self.estimator, kwargs = with_extension(StateEstimation, kwargs.pop("ppo", None), kwargs)
        super().__init__(actor_critic, *args, **kwargs)  # type: ignore[call-arg]

    estimator_obs_components = property(attrgetter("estimator.estimator_obs_components"))
    estimator_target_obs_components = property(attrgetter("estimator.estimator_target_obs_components"))
    estimator_loss_func = property(attrgetter("estimator.estimator_loss_func"))
    estimator_loss_kwargs = property(attrgetter("estimator.estimator_loss_kwargs"))


class EstimatorPPO(EstimatorAlgoMixin, PPO):
    """PPO plus ``StateEstimation`` (``estimator_loss_func``, ``estimator_loss_kwargs``, ``estimator_loss_coef``)."""


class EstimatorTPPO(EstimatorAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) plus the state-estimator loss."""
