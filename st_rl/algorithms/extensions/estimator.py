"""Supervised state estimation: the policy's estimator (and adaptor) learn privileged components."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.extensions.base import Extension
from st_rl.env.layout import get_subobs_by_components
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.storage.rollout_storage import MiniBatch
from st_rl.utils.utils import unpad_trajectories

__all__ = ["StateEstimation"]


class StateEstimation(Extension):
    """Trains the policy's state estimator: ``estimator_loss = mean(sum_dim loss_func(estimate, target))``
    against the target components of the normalised critic observations; with an adaptor also ``adaptor_loss``.
    ``estimator_loss_func`` is a ``torch.nn.functional`` loss name, ``estimator_loss_coef`` weighs both."""

    name = "estimator"

    def __init__(
        self,
        estimator_loss_func: str = "mse_loss",
        estimator_loss_kwargs: dict[str, Any] | None = None,
        estimator_loss_coef: float = 1.0,
    ) -> None:
        super().__init__()
        func = F.__dict__.get(estimator_loss_func)
        if func is None or not callable(func):
            raise ValueError(f"estimator_loss_func {estimator_loss_func!r} is not a torch.nn.functional loss")
        self.loss_fn: Any = func
        self.estimator_loss_func = estimator_loss_func
        self.estimator_loss_kwargs = dict(estimator_loss_kwargs or {})
        self.estimator_obs_components: list[str] = []
        self.estimator_target_obs_components: list[str] = []
        self.estimator_loss_coef = float(estimator_loss_coef)

    def setup(self, policy: Any, device: torch.device) -> None:
        super().setup(policy, device)
        self.policy: Any = policy
        if policy.estimator is None:
            raise ValueError(f"StateEstimation needs a policy with an estimator (StateAc...): {type(policy)}")
        self.estimator_obs_components = list(policy.estimator_obs_components)
        self.estimator_target_obs_components = list(policy.estimator_target_components)
        critic_segments = policy.privileged_obs_segments
        missing = [c for c in policy.estimator_target_components if c not in (critic_segments or {})]
        if missing:
            raise ValueError(f"Estimator targets {missing} are not in the critic layout {critic_segments}")

    def loss_weights(self) -> dict[str, float]:
        return {"estimator_loss": self.estimator_loss_coef, "adaptor_loss": self.estimator_loss_coef}

    def _loss(
        self, estimate: torch.Tensor, components: list[str], minibatch: MiniBatch, record: bool = False
    ) -> torch.Tensor:
        policy = self.policy
        critic = policy.normalize_critic_obs(minibatch.critic_obs)
        target = get_subobs_by_components(critic, components, policy.privileged_obs_segments)
        masks = minibatch.masks
        if masks is not None:
            if estimate.shape[:2] == masks.shape:
                estimate = unpad_trajectories(estimate, masks)
            target = unpad_trajectories(target, masks)
        per_dim = self.loss_fn(estimate, target.detach(), reduction="none", **self.estimator_loss_kwargs)
        if record:
            self.record(estimator_abs_error=(estimate - target).abs().mean())
        return per_dim.sum(dim=-1).mean()

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        policy = self.policy
        assert output.estimated_state is not None
        targets = policy.estimator_target_components
        losses = {"estimator_loss": self._loss(output.estimated_state, targets, minibatch, record=True)}
        if output.adapted_state is not None:
            losses["adaptor_loss"] = self._loss(
                output.adapted_state, policy.adaptor_target_components, minibatch
            )
        return losses
