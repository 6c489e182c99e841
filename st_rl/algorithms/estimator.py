"""Algorithms that also train a supervised state estimator inside the policy."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO
from st_rl.env.layout import get_subobs_by_components
from st_rl.storage.rollout_storage import MiniBatch
from st_rl.utils.utils import unpad_trajectories


class EstimatorAlgoMixin:
    """Adds the supervised state-estimator loss to an algorithm (:class:`PPO` or :class:`TPPO`).

    The loss ``estimator_loss = mean(sum_dim loss_func(estimate, target))`` compares the estimate of the
    target components with the same components of the critic observations (located with the critic layout),
    weighted by ``estimator_loss_coef``. For recurrent policies the padded trajectories are unpadded first.

    Args:
        estimator_loss_func: a ``torch.nn.functional`` loss name (``"mse_loss"``, ``"l1_loss"``,
            ``"smooth_l1_loss"``, ...).
        estimator_loss_kwargs: extra keyword arguments of that function.
        estimator_loss_coef: weight of the estimator loss.
        (other arguments as the algorithm it is mixed into)
    """

    actor_critic: Any

    def __init__(
        self,
        actor_critic: torch.nn.Module,
        *args: Any,
        estimator_loss_func: str = "mse_loss",
        estimator_loss_kwargs: dict[str, Any] | None = None,
        estimator_loss_coef: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_critic, *args, **kwargs)  # type: ignore[call-arg]
        if getattr(self.actor_critic, "estimator", None) is None:
            raise ValueError(
                f"{type(self).__name__} needs a policy with a state estimator (StateAc, StateAcRecurrent, "
                f"EncoderStateAc, EncoderStateAcRecurrent); got {type(self.actor_critic).__name__}"
            )
        func = getattr(F, estimator_loss_func, None)
        if func is None or not callable(func):
            raise ValueError(f"estimator_loss_func {estimator_loss_func!r} is not a torch.nn.functional loss")
        self.estimator_loss_fn: Any = func
        self.estimator_loss_kwargs = dict(estimator_loss_kwargs or {})
        self.estimator_loss_coef = estimator_loss_coef
        critic_segments = self.actor_critic.privileged_obs_segments
        missing = [
            c for c in self.actor_critic.estimator_target_components if c not in (critic_segments or {})
        ]
        if missing:
            raise ValueError(
                f"Estimator targets {missing} are not in the critic observation layout {critic_segments}"
            )

    def compute_losses(self, minibatch: MiniBatch):
        losses, inter_vars, stats = super().compute_losses(minibatch)  # type: ignore[misc]
        ac = self.actor_critic
        estimate = ac.get_estimated_state()
        target = get_subobs_by_components(
            minibatch.critic_obs, ac.estimator_target_components, ac.privileged_obs_segments
        )
        if ac.is_recurrent and minibatch.masks is not None:
            masks = minibatch.masks
            if estimate.shape[:2] == masks.shape:
                estimate = unpad_trajectories(estimate, masks)
            target = unpad_trajectories(target, masks)
        per_dim = self.estimator_loss_fn(
            estimate, target.detach(), reduction="none", **self.estimator_loss_kwargs
        )
        losses["estimator_loss"] = per_dim.sum(dim=-1).mean()
        with torch.no_grad():
            stats["estimator_abs_error"] = (estimate - target).abs().mean()
        if getattr(ac, "adaptor", None) is not None:
            adapted = ac.get_adapted_state()
            adapt_target = get_subobs_by_components(
                minibatch.critic_obs, ac.adaptor_target_components, ac.privileged_obs_segments
            )
            if minibatch.masks is not None:
                adapted = unpad_trajectories(adapted, minibatch.masks)
                adapt_target = unpad_trajectories(adapt_target, minibatch.masks)
            per_dim = self.estimator_loss_fn(
                adapted, adapt_target.detach(), reduction="none", **self.estimator_loss_kwargs
            )
            losses["adaptor_loss"] = per_dim.sum(dim=-1).mean()
        return losses, inter_vars, stats


class EstimatorPPO(EstimatorAlgoMixin, PPO):
    """PPO plus the state-estimator loss (see :class:`EstimatorAlgoMixin`)."""


class EstimatorTPPO(EstimatorAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) plus the state-estimator loss (see :class:`EstimatorAlgoMixin`)."""
