"""A 2-D point mass reaching a goal (time-outs only, no critic group)."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.base import BuiltinTask

__all__ = ["BuiltinTask", "PointMass"]


class PointMass(BuiltinTask):
    """Drive a 2-D point mass to a goal sampled per episode (SI units; time-outs only, no critic group).

    Semi-implicit Euler: ``v += dt * (max_force * a - damping * v) / mass``, ``|v| <= max_speed``. Observations:
    ``goal_delta`` (goal - position), ``velocity``. Rewards: ``distance`` = ``w_distance * exp(-|delta|^2 /
    distance_sigma)``, ``action_l2`` = ``w_action_l2 * |a|^2``. Metric ``final_distance``."""

    DEFAULT_CFG: dict[str, Any] = {
        "dt": 0.05,
        "episode_length_s": 5.0,
        "clip_actions": 1.0,
        "mass": 1.0,
        "damping": 0.1,
        "max_force": 4.0,
        "max_speed": 3.0,
        "goal_range": 2.0,
        "start_range": 0.5,
        "distance_sigma": 1.0,
        "w_distance": 1.0,
        "w_action_l2": -0.01,
        "expert_kp": 2.0,
        "expert_kd": 1.0,
    }
    reward_terms = ("distance", "action_l2")
    metric_terms = ("final_distance",)

    def _setup(self) -> None:
        self._set_layout([("goal_delta", (2,)), ("velocity", (2,))])
        self.num_actions = 2
        n, dev = self.num_envs, self.device
        self.position, self.velocity, self.goal = (torch.zeros(n, 2, device=dev) for _ in range(3))
        self._state_buffers += ["position", "velocity", "goal"]

    def expert_action(self, obs: torch.Tensor) -> torch.Tensor:
        """PD controller on the actor observation: ``clip(kp * goal_delta - kd * velocity)``."""
        delta, vel = obs[..., 0:2], obs[..., 2:4]
        a = self.cfg["expert_kp"] * delta - self.cfg["expert_kd"] * vel
        return torch.clamp(a, -self.clip_actions, self.clip_actions)

    def _physics_step(self, actions: torch.Tensor) -> None:
        c = self.cfg
        force = c["max_force"] * actions
        vel = (self.velocity + self.dt * force / c["mass"]) / (1.0 + self.dt * c["damping"] / c["mass"])
        speed = vel.norm(dim=1, keepdim=True)
        vel = vel * torch.clamp(c["max_speed"] / speed.clamp_min(1e-6), max=1.0)
        self.velocity = vel
        self.position = self.position + self.dt * vel

    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        dist_sq = (self.goal - self.position).square().sum(dim=1)
        distance = c["w_distance"] * torch.exp(-dist_sq / c["distance_sigma"])
        action_l2 = c["w_action_l2"] * actions.square().sum(dim=1)
        return torch.stack([distance, action_l2], dim=1)

    def _episode_metrics(self) -> torch.Tensor:
        return (self.goal - self.position).norm(dim=1, keepdim=True)

    def _reset_state(self, mask: torch.Tensor) -> None:
        n, start, goal = self.num_envs, self.cfg["start_range"], self.cfg["goal_range"]
        new_pos = self._rand(n, 2, low=-start, high=start)
        self._where(mask, position=new_pos, goal=self._rand(n, 2, low=-goal, high=goal), velocity=0.0)

    def _compute_observations(self) -> None:
        self.obs_buf = torch.cat([self.goal - self.position, self.velocity], dim=1)
