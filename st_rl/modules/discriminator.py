"""The Adversarial Motion Priors discriminator."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.config.errors import ConfigError, Problem
from st_rl.modules.mlp import mlp_layers


class AMPDiscriminator(nn.Module):
    """Least-squares AMP discriminator ``d = D(x)`` on windows of ``input_dim`` style features (None: filled from
    the environment); its losses, gradient penalty and style reward: docs/amp.md."""

    # st_gym's AMP config also carries the window width `amp_obs_dim` ({} when unset: Isaac Lab's MISSING).
    config_tolerated = frozenset({"class_name", "amp_obs_dim"})

    def __init__(
        self,
        input_dim: int,
        style_reward_coef: float = 1.0,
        hidden_dims: Sequence[int] = (1024, 512),
        task_reward_lerp: float = 0.0,
        discriminator_grad_pen: float = 5.0,
        activation: str = "relu",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if input_dim is None or int(input_dim) < 1:
            raise ValueError("AMPDiscriminator needs input_dim (frames x features), or an env with ref_obs")
        if not 0.0 <= task_reward_lerp <= 1.0:
            raise ValueError(f"task_reward_lerp must be in [0, 1], got {task_reward_lerp}")
        amp_obs_dim = kwargs.pop("amp_obs_dim", None)
        if type(amp_obs_dim) is int and amp_obs_dim != int(input_dim):
            rule = f"differs from the discriminator's input_dim ({int(input_dim)})"
            key = "policy.amp_discriminator.amp_obs_dim"
            raise ConfigError(Problem(key, amp_obs_dim, rule, "give both the same, or remove it"))
        if kwargs:
            warnings.warn(f"AMPDiscriminator ignores unknown arguments: {sorted(kwargs)}", stacklevel=2)
        self.input_dim = int(input_dim)
        self.style_reward_coef = float(style_reward_coef)
        self.task_reward_lerp = float(task_reward_lerp)
        self.discriminator_grad_pen = float(discriminator_grad_pen)
        self.trunk = nn.Sequential(*mlp_layers(self.input_dim, hidden_dims, None, activation))
        self.amp_linear = nn.Linear(int(hidden_dims[-1]) if hidden_dims else self.input_dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Discriminator output ``(..., 1)`` for windows ``(..., input_dim)``."""
        return self.amp_linear(self.trunk(x))

    def compute_grad_pen(self, expert_x: torch.Tensor) -> torch.Tensor:
        """``discriminator_grad_pen * mean_batch(sum_features (dD/dx)^2)`` on reference windows."""
        x = expert_x.detach().reshape(-1, self.input_dim).clone().requires_grad_(True)
        d = self(x)
        (grad,) = torch.autograd.grad(d.sum(), x, create_graph=True)
        return self.discriminator_grad_pen * grad.pow(2).sum(dim=-1).mean()

    def style_reward(self, d: torch.Tensor) -> torch.Tensor:
        """``style_reward_coef * max(0, 1 - 0.25 (d - 1)^2)``."""
        return self.style_reward_coef * torch.clamp(1 - 0.25 * (d - 1) ** 2, min=0.0)

    def combine(self, style: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """The reward the policy is trained on."""
        lerp = self.task_reward_lerp
        if lerp == 0.0:
            return task + style
        return (1.0 - lerp) * style + lerp * task

    @torch.no_grad()
    def predict_style_reward(
        self, x: torch.Tensor, task_reward: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(style, task, combined)`` rewards, each of shape (N,), for (normalised) windows ``x``."""
        was_training = self.training
        self.eval()
        d = self(x.reshape(x.shape[0], -1)).reshape(-1)
        self.train(was_training)
        style = self.style_reward(d)
        task = task_reward.reshape(-1)
        return style, task, self.combine(style, task)


def policy_discriminator(policy: nn.Module) -> AMPDiscriminator | None:
    """The AMP discriminator of ``policy``: its ``discriminator`` module (detached from it), else one built from its
    ``amp_discriminator`` config, or None. Kept outside the policy's modules, cached as ``policy.discriminator``."""
    disc = policy._modules.pop("discriminator", None) or policy.__dict__.get("discriminator")
    cfg = getattr(policy, "amp_discriminator", None)
    if disc is None and cfg:
        with torch.inference_mode(False):  # first read may come inside a rollout
            disc = AMPDiscriminator(**cfg)
    if disc is not None:
        policy.__dict__["discriminator"] = disc
    return disc  # type: ignore[return-value]
