"""Cue memory: a target shown only at the start of an episode must be reproduced until its end."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.base import BuiltinTask

__all__ = ["CueMemory"]


class CueMemory(BuiltinTask):
    """Output a target that is observed only during the first ``cue_steps`` steps of each episode.

    The action is a guess of the target (uniform in ``[-target_range, target_range]^target_dim``), shown in
    ``cue`` (``cue_visible`` = 1) for the first ``cue_steps`` observations, zeros afterwards: only a recurrent
    policy can remember it. The critic also sees ``target`` and ``phase`` (elapsed fraction of the episode).
    Reward ``match`` = ``w_match * exp(-|a - target|^2 / match_sigma)``; time-outs only; metric ``final_error``.
    Returns (defaults, 1-D): 2.0 for the target throughout, about 1.0 for the best feed-forward policy, 0.77
    for uniform random actions."""

    DEFAULT_CFG: dict[str, Any] = {
        "dt": 0.05,
        "episode_length_s": 2.0,
        "clip_actions": 1.0,
        "target_dim": 1,
        "target_range": 1.0,
        "cue_steps": 4,
        "match_sigma": 0.25,
        "w_match": 1.0,
    }
    reward_terms = ("match",)
    metric_terms = ("final_error",)

    def _setup(self) -> None:
        self.target_dim = d = int(self.cfg["target_dim"])
        self.cue_steps = int(self.cfg["cue_steps"])
        if d < 1 or self.cue_steps < 1:
            raise ValueError(f"target_dim and cue_steps must be >= 1, got {d} and {self.cue_steps}")
        actor = [("cue", (d,)), ("cue_visible", (1,))]
        self._set_layout(actor, [*actor, ("target", (d,)), ("phase", (1,))])
        self.num_actions = d
        n, dev = self.num_envs, self.device
        self.target = torch.zeros(n, d, device=dev)
        self.last_error = torch.zeros(n, device=dev)
        self._state_buffers += ["target", "last_error"]

    @property
    def cue_visible(self) -> torch.Tensor:
        """Bool (N,): whether the current observation shows the cue."""
        return self._episode_length_buf < self.cue_steps

    def expert_action(self, obs: torch.Tensor | None = None) -> torch.Tensor:
        """The optimal action (the true target; needs privileged access to the task's state)."""
        return torch.clamp(self.target, -self.clip_actions, self.clip_actions)

    def _physics_step(self, actions: torch.Tensor) -> None:
        self.last_error = (actions - self.target).norm(dim=1)

    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        err_sq = (actions - self.target).square().sum(dim=1)
        return (c["w_match"] * torch.exp(-err_sq / c["match_sigma"]))[:, None]

    def _episode_metrics(self) -> torch.Tensor:
        return self.last_error[:, None]

    def _reset_state(self, mask: torch.Tensor) -> None:
        r = float(self.cfg["target_range"])
        self._where(mask, target=self._rand(self.num_envs, self.target_dim, low=-r, high=r))

    def _compute_observations(self) -> None:
        visible = self.cue_visible[:, None].float()
        self.obs_buf = torch.cat([self.target * visible, visible], dim=1)
        phase = (self._episode_length_buf.float() / self.max_episode_length)[:, None]
        self.critic_obs_buf = torch.cat([self.obs_buf, self.target, phase], dim=1)
