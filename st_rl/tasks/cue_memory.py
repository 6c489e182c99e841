"""Cue memory: a target shown only at the start of an episode must be reproduced until its end."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.base import BuiltinTask

__all__ = ["CueMemory"]


class CueMemory(BuiltinTask):
    """Output a target that is observed only during the first ``cue_steps`` steps of each episode.

    Each episode draws a target uniform in ``[-target_range, target_range]^target_dim``. The actor observes it in
    ``cue`` while ``episode_length_buf < cue_steps`` (the observations that feed the first ``cue_steps`` actions
    of the episode) and zeros afterwards; ``cue_visible`` is 1 while the cue is shown, else 0. The action is the
    agent's guess of the target; there is no other state, so nothing in the later observations carries the
    target: a feed-forward policy can at best output one constant (about the mean target) once the cue is gone,
    while a recurrent policy can remember it.

    Actor observations (``target_dim + 1``): ``cue`` (target_dim), ``cue_visible`` (1).
    Critic observations (``2 * target_dim + 2``): the actor's plus ``target`` (the true target, always visible)
    and ``phase`` (``episode_length_buf / max_episode_length``, in [0, 1)). The critic may see the target: it is
    only used for the value estimate.

    Reward (multiplied by ``dt``): ``match`` = ``w_match * exp(-|a - target|^2 / match_sigma)``. Episodes end by
    time-out only. Metric ``final_error``: ``|a - target|`` of the last action of the episode.

    Reference values (defaults, 1-D): outputting the target at every step returns ``w_match * episode_length_s``
    = 2.0; copying the cue while it is visible and 0 afterwards returns about 1.0 (the best a feed-forward
    policy can do); uniform random actions in [-1, 1] about 0.77.

    Args:
        num_envs, device, seed: as for :class:`~st_rl.tasks.base.BuiltinTask`.
        **cfg: overrides of ``DEFAULT_CFG`` (SI units).
    """

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

    def __init__(
        self, num_envs: int = 256, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
    ) -> None:
        super().__init__(num_envs, device, seed, cfg)
        d = int(self.cfg["target_dim"])
        if d < 1:
            raise ValueError(f"target_dim must be >= 1, got {d}")
        if int(self.cfg["cue_steps"]) < 1:
            raise ValueError(f"cue_steps must be >= 1, got {self.cfg['cue_steps']}")
        self.target_dim = d
        self.cue_steps = int(self.cfg["cue_steps"])
        actor = [("cue", (d,)), ("cue_visible", (1,))]
        self._set_layout(actor, [*actor, ("target", (d,)), ("phase", (1,))])
        self.num_actions = d
        n, dev = self.num_envs, self.device
        self.target = torch.zeros(n, d, device=dev)
        self.last_error = torch.zeros(n, device=dev)
        self.critic_obs_buf = torch.zeros(n, self.num_privileged_obs, device=dev)
        self._state_buffers += ["target", "last_error"]
        self.reset()

    @property
    def cue_visible(self) -> torch.Tensor:
        """Bool (N,): whether the current observation shows the cue."""
        return self._episode_length_buf < self.cue_steps

    def expert_action(self, obs: torch.Tensor | None = None) -> torch.Tensor:
        """The optimal action (the true target; needs privileged access to the task's state)."""
        return torch.clamp(self.target, -self.clip_actions, self.clip_actions)

    # ------------------------------------------------------------------ hooks
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
        new_target = self._rand(self.num_envs, self.target_dim, low=-r, high=r)
        self.target = torch.where(mask[:, None], new_target, self.target)

    def _compute_observations(self) -> None:
        visible = self.cue_visible[:, None].float()
        self.obs_buf = torch.cat([self.target * visible, visible], dim=1)
        phase = (self._episode_length_buf.float() / self.max_episode_length)[:, None]
        self.critic_obs_buf = torch.cat([self.obs_buf, self.target, phase], dim=1)
