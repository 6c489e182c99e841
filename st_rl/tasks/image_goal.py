"""A 2-D point mass reaching a goal that is visible only in a small depth-like image."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.point_mass import PointMass

__all__ = ["ImageGoal"]


class ImageGoal(PointMass):
    """:class:`~st_rl.tasks.point_mass.PointMass` whose goal is observed only through an image.

    Dynamics, reset distribution, reward terms (``distance``, ``action_l2``) and metric (``final_distance``) are
    those of :class:`PointMass`. The actor does not observe ``goal_delta``; instead it gets ``forward_depth``, a
    (1, H, W) image (``H = W = image_size``) centred on the agent and covering
    ``[-view_range, view_range]^2`` metres of the plane: pixel ``(row i, column j)`` has centre
    ``x_j = -view_range + (j + 0.5) * 2 view_range / W``, ``y_i = -view_range + (i + 0.5) * 2 view_range / H``
    (columns go along +x, rows along +y) and value ``exp(-|c_ij - d|^2 / (2 blob_sigma^2))`` where ``d`` is
    the goal delta (goal - position) clamped to the view. The image is rendered batched in torch.

    Actor observations (``H * W + 2``): ``forward_depth`` (1, H, W), ``velocity`` (2).
    Critic observations (``H * W + 4``): the actor's plus the true ``goal_delta`` (2).

    Args:
        num_envs, device, seed: as for :class:`~st_rl.tasks.base.BuiltinTask`.
        **cfg: overrides of ``DEFAULT_CFG`` (SI units).
    """

    DEFAULT_CFG: dict[str, Any] = {
        **PointMass.DEFAULT_CFG,
        "image_size": 12,
        "view_range": 3.0,
        "blob_sigma": 0.4,
    }

    def __init__(
        self, num_envs: int = 256, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
    ) -> None:
        full = {**self.DEFAULT_CFG, **cfg}
        size = int(full["image_size"])
        if size < 2:
            raise ValueError(f"image_size must be >= 2, got {size}")
        self.image_size = size
        r = float(full["view_range"])
        centres = -r + (torch.arange(size, dtype=torch.float32) + 0.5) * (2.0 * r / size)
        # (H, W) pixel-centre coordinates: rows along +y, columns along +x
        self._pix_y = centres.view(size, 1).expand(size, size).to(device)
        self._pix_x = centres.view(1, size).expand(size, size).to(device)
        super().__init__(num_envs, device, seed, **cfg)  # resets: the image is rendered by our hook
        actor = [("forward_depth", (1, size, size)), ("velocity", (2,))]
        self._set_layout(actor, [*actor, ("goal_delta", (2,))])

    def expert_action(self, obs: torch.Tensor | None = None) -> torch.Tensor:
        """PD controller on the true goal delta (privileged): ``clip(kp * delta - kd * velocity)``."""
        delta = self.goal - self.position
        a = self.cfg["expert_kp"] * delta - self.cfg["expert_kd"] * self.velocity
        return torch.clamp(a, -self.clip_actions, self.clip_actions)

    def render_goal_image(self, delta: torch.Tensor) -> torch.Tensor:
        """Image (N, 1, H, W) of goal deltas ``delta`` (N, 2), clamped to the view."""
        r = float(self.cfg["view_range"])
        d = delta.clamp(-r, r)
        dx = self._pix_x[None] - d[:, 0, None, None]
        dy = self._pix_y[None] - d[:, 1, None, None]
        sigma = float(self.cfg["blob_sigma"])
        return torch.exp(-(dx.square() + dy.square()) / (2.0 * sigma * sigma))[:, None]

    def _compute_observations(self) -> None:
        delta = self.goal - self.position
        image = self.render_goal_image(delta).flatten(1)
        self.obs_buf = torch.cat([image, self.velocity], dim=1)
        self.critic_obs_buf = torch.cat([self.obs_buf, delta], dim=1)
