"""A 2-D point mass reaching a goal that is visible only in a small depth-like image."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.point_mass import PointMass

__all__ = ["ImageGoal"]


class ImageGoal(PointMass):
    """:class:`~st_rl.tasks.point_mass.PointMass` whose goal is observed only through an image.

    Instead of ``goal_delta`` the actor sees ``forward_depth`` (1, H, W), ``H = W = image_size``: the plane
    ``[-view_range, view_range]^2`` around the agent (columns along +x, rows along +y), each pixel
    ``exp(-|centre - d|^2 / (2 blob_sigma^2))`` with ``d`` the goal delta clamped to the view; then ``velocity``.
    The critic also sees ``goal_delta``."""

    DEFAULT_CFG: dict[str, Any] = {
        **PointMass.DEFAULT_CFG,
        "image_size": 12,
        "view_range": 3.0,
        "blob_sigma": 0.4,
    }

    def _setup(self) -> None:
        self.image_size = size = int(self.cfg["image_size"])
        if size < 2:
            raise ValueError(f"image_size must be >= 2, got {size}")
        r = float(self.cfg["view_range"])
        centres = -r + (torch.arange(size, dtype=torch.float32) + 0.5) * (2.0 * r / size)
        # (H, W) pixel-centre coordinates: rows along +y, columns along +x
        self._pix_y = centres.view(size, 1).expand(size, size).to(self.device)
        self._pix_x = centres.view(1, size).expand(size, size).to(self.device)
        super()._setup()
        actor = [("forward_depth", (1, size, size)), ("velocity", (2,))]
        self._set_layout(actor, [*actor, ("goal_delta", (2,))])

    def expert_action(self, obs: torch.Tensor | None = None) -> torch.Tensor:
        """The PD controller of :class:`PointMass` on the true goal delta (privileged)."""
        return super().expert_action(torch.cat([self.goal - self.position, self.velocity], dim=1))

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
