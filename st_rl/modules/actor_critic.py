"""Feed-forward Gaussian actor-critic.

The class is built from parts (an actor MLP, a critic MLP, a state-independent ``std``) and exposes two
hooks, :meth:`actor_features` and :meth:`critic_features`, through which encoders and memories are added by
composition in later presets, without twin classes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import normalize_segments
from st_rl.modules.distribution import gaussian_entropy, gaussian_log_prob, gaussian_sample
from st_rl.modules.mlp import mlp_layers
from st_rl.modules.utils import warn_unknown_kwargs

# Keys that st_rl / st_gym / legged_gym configs pass to every policy class; they are accepted silently.
COMMON_POLICY_KEYS = frozenset(
    {
        "class_name",
        "teacher_ac_path",
        "rnn_type",
        "rnn_hidden_size",
        "rnn_num_layers",
        "amp_discriminator",
        "encoder_component_names",
        "critic_encoder_component_names",
    }
)


class ActorCritic(nn.Module):
    """Gaussian actor-critic with MLP actor and critic.

    Args:
        num_actor_obs: actor observation width.
        num_critic_obs: critic observation width.
        num_actions: action width.
        actor_hidden_dims: hidden sizes of the actor MLP.
        critic_hidden_dims: hidden sizes of the critic MLP.
        activation: activation name (``"elu"``, ``"relu"``, ``"tanh"``, any ``torch.nn`` name).
        init_noise_std: initial action standard deviation.
        mu_activation: optional activation applied to the action mean (e.g. ``"tanh"``).
        obs_segments: actor observation layout (name -> shape).
        privileged_obs_segments: critic observation layout; ``critic_obs_segments`` is an alias. Defaults to
            ``obs_segments``.
        **kwargs: ignored with a warning, except keys every st_rl config passes (``class_name``, ...).
    """

    is_recurrent = False
    rnn_type: str | None = None

    def __init__(
        self,
        num_actor_obs: int,
        num_critic_obs: int,
        num_actions: int,
        actor_hidden_dims: Sequence[int] = (256, 256, 256),
        critic_hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        init_noise_std: float = 1.0,
        mu_activation: str | None = None,
        obs_segments: Mapping[str, Any] | None = None,
        privileged_obs_segments: Mapping[str, Any] | None = None,
        critic_obs_segments: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        warn_unknown_kwargs(type(self).__name__, kwargs, COMMON_POLICY_KEYS)
        if privileged_obs_segments is None:
            privileged_obs_segments = critic_obs_segments
        self.num_actor_obs = int(num_actor_obs)
        self.num_critic_obs = int(num_critic_obs)
        self.num_actions = int(num_actions)
        self.actor_hidden_dims = list(actor_hidden_dims)
        self.critic_hidden_dims = list(critic_hidden_dims)
        self.activation = activation
        self.init_noise_std = float(init_noise_std)
        self.mu_activation = mu_activation
        self.obs_segments = normalize_segments(obs_segments)
        self.privileged_obs_segments = normalize_segments(privileged_obs_segments) or self.obs_segments

        actor_in, critic_in = self.actor_input_size(), self.critic_input_size()
        self.actor = nn.Sequential(
            *mlp_layers(actor_in, self.actor_hidden_dims, self.num_actions, activation, mu_activation)
        )
        self.critic = nn.Sequential(*mlp_layers(critic_in, self.critic_hidden_dims, 1, activation))
        self.std = nn.Parameter(self.init_noise_std * torch.ones(self.num_actions))
        self._mean: torch.Tensor | None = None

    # ------------------------------------------------------------------ composition hooks
    def actor_input_size(self) -> int:
        """Width of the actor MLP input (presets with encoders or memory override this)."""
        return self.num_actor_obs

    def critic_input_size(self) -> int:
        """Width of the critic MLP input."""
        return self.num_critic_obs

    def actor_features(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Map actor observations to the actor MLP input."""
        return observations

    def critic_features(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Map critic observations to the critic MLP input."""
        return critic_observations

    # ------------------------------------------------------------------ policy API
    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Reset per-env state of finished envs (no-op for feed-forward policies)."""

    def get_hidden_states(self) -> Any:
        """Hidden states to store with a transition (``None`` for feed-forward policies)."""
        return None

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError("Use act(), act_inference() or evaluate() on an actor-critic.")

    def update_distribution(self, observations: torch.Tensor, **kwargs: Any) -> None:
        """Compute the action mean for ``observations``."""
        self._mean = self.actor(self.actor_features(observations, **kwargs))

    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Sample actions; afterwards ``action_mean``, ``action_std`` and ``entropy`` refer to this batch."""
        self.update_distribution(observations, **kwargs)
        return gaussian_sample(self.action_mean, self.action_std)

    def act_inference(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Deterministic action (the mean)."""
        self.update_distribution(observations, **kwargs)
        return self.action_mean

    def evaluate(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """State value, shape ``(..., 1)``."""
        return self.critic(self.critic_features(critic_observations, **kwargs))

    def get_actions_log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of ``actions`` under the last distribution, summed over actions."""
        return gaussian_log_prob(actions, self.action_mean, self.action_std)

    @property
    def action_mean(self) -> torch.Tensor:
        if self._mean is None:
            raise RuntimeError("No action distribution yet: call act() or act_inference() first.")
        return self._mean

    @property
    def action_std(self) -> torch.Tensor:
        return self.std.expand_as(self.action_mean)

    @property
    def entropy(self) -> torch.Tensor:
        return gaussian_entropy(self.action_std)

    @torch.no_grad()
    def clip_std(
        self,
        min: float | Sequence[float] | torch.Tensor | None = None,  # noqa: A002
        max: float | Sequence[float] | torch.Tensor | None = None,
    ) -> None:  # noqa: A002
        """Clip ``std`` in place; bounds may be scalars or per-action values."""
        lo = None if min is None else torch.as_tensor(min, dtype=self.std.dtype, device=self.std.device)
        hi = None if max is None else torch.as_tensor(max, dtype=self.std.dtype, device=self.std.device)
        self.std.copy_(torch.clamp(self.std, lo, hi))
