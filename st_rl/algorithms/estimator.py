"""EstimatorPPO / EstimatorTPPO: presets of PPO / TPPO with the
:class:`~st_rl.algorithms.extensions.estimator.StateEstimation` extension (a supervised state estimator trained
inside the policy)."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO, merge_nested_ppo, split_kwargs

__all__ = ["EstimatorPPO", "EstimatorTPPO"]


class _EstimatorNames:
    """The reference's estimator attributes on the algorithm (st_rl/compat.py), read from the
    :class:`~st_rl.algorithms.extensions.estimator.StateEstimation` extension ``self.estimator``."""

    estimator: StateEstimation

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


class EstimatorPPO(_EstimatorNames, PPO):
    """PPO plus :class:`~st_rl.algorithms.extensions.estimator.StateEstimation` (arguments
    ``estimator_loss_func``, ``estimator_loss_kwargs``, ``estimator_loss_coef``; the others as :class:`PPO`)."""

    config_sources = (StateEstimation,)

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        est_kwargs, kwargs = split_kwargs(kwargs, StateEstimation)
        self.estimator = StateEstimation(**est_kwargs)
        extensions = [self.estimator, *kwargs.pop("extensions", [])]
        super().__init__(actor_critic, *args, extensions=extensions, **kwargs)


class EstimatorTPPO(_EstimatorNames, TPPO):
    """Teacher-student PPO (:class:`TPPO`) plus the state-estimator loss."""

    config_sources = (StateEstimation,)

    def __init__(
        self, actor_critic: nn.Module, *args: Any, ppo: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        kwargs = merge_nested_ppo(ppo, kwargs)
        est_kwargs, kwargs = split_kwargs(kwargs, StateEstimation)
        self.estimator = StateEstimation(**est_kwargs)
        extensions = [self.estimator, *kwargs.pop("extensions", [])]
        super().__init__(actor_critic, *args, extensions=extensions, **kwargs)
