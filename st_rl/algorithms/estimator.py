"""EstimatorPPO / EstimatorTPPO: presets of PPO / TPPO with the
:class:`~st_rl.algorithms.extensions.estimator.StateEstimation` extension (a supervised state estimator trained
inside the policy)."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO, with_extension

__all__ = ["EstimatorAlgoMixin", "EstimatorPPO", "EstimatorTPPO"]


class EstimatorAlgoMixin:
    """Adds the state-estimator loss to the algorithm it is listed before, under the reference's name
    (``class EstimatorTPPO(EstimatorAlgoMixin, TPPO)``): it builds the
    :class:`~st_rl.algorithms.extensions.estimator.StateEstimation` extension from its keyword arguments as
    ``self.estimator`` and exposes the reference's attribute names."""

    config_sources = (StateEstimation,)
    estimator: StateEstimation

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        self.estimator, kwargs = with_extension(StateEstimation, kwargs.pop("ppo", None), kwargs)
        super().__init__(actor_critic, *args, **kwargs)  # type: ignore[call-arg]

    @property
    def estimator_obs_components(self) -> list[str]:
        """The policy's estimator input components."""
        return self.estimator.estimator_obs_components

    @property
    def estimator_target_obs_components(self) -> list[str]:
        """The policy's estimator target components (read from the critic observations)."""
        return self.estimator.estimator_target_obs_components

    @property
    def estimator_loss_func(self) -> str:
        """The ``torch.nn.functional`` loss name."""
        return self.estimator.estimator_loss_func

    @property
    def estimator_loss_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments of the loss function."""
        return self.estimator.estimator_loss_kwargs


class EstimatorPPO(EstimatorAlgoMixin, PPO):
    """PPO plus :class:`~st_rl.algorithms.extensions.estimator.StateEstimation` (arguments
    ``estimator_loss_func``, ``estimator_loss_kwargs``, ``estimator_loss_coef``; the others as :class:`PPO`)."""


class EstimatorTPPO(EstimatorAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) plus the state-estimator loss."""
