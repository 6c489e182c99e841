"""EstimatorPPO / EstimatorTPPO: presets of PPO / TPPO with the
:class:`~st_rl.algorithms.extensions.estimator.StateEstimation` extension (a supervised state estimator trained
inside the policy)."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.estimator import StateEstimation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO, merge_nested_ppo, split_kwargs

__all__ = ["EstimatorAlgoMixin", "EstimatorPPO", "EstimatorTPPO"]


class EstimatorAlgoMixin:
    """Adds the state-estimator loss to the algorithm it is listed before, under the reference's name:
    ``class EstimatorPPO(EstimatorAlgoMixin, PPO)`` and ``class EstimatorTPPO(EstimatorAlgoMixin, TPPO)`` are
    this library's presets, and a user's ``class X(EstimatorAlgoMixin, PPO)`` is the same algorithm as
    :class:`EstimatorPPO`.

    The mixin holds no algorithm code: its constructor takes the
    :class:`~st_rl.algorithms.extensions.estimator.StateEstimation` keyword arguments (``estimator_loss_func``,
    ``estimator_loss_kwargs``, ``estimator_loss_coef``; st_gym's nested ``ppo`` dict is merged first), builds
    that extension as ``self.estimator`` and hands it to the base with the other arguments; the rest are the
    reference's attribute names, read from the extension.
    """

    config_sources = (StateEstimation,)
    estimator: StateEstimation

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        kwargs = merge_nested_ppo(kwargs.pop("ppo", None), kwargs)
        est_kwargs, kwargs = split_kwargs(kwargs, StateEstimation)
        self.estimator = StateEstimation(**est_kwargs)
        extensions = [self.estimator, *kwargs.pop("extensions", [])]
        super().__init__(actor_critic, *args, extensions=extensions, **kwargs)  # type: ignore[call-arg]

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
