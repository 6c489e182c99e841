"""Sparse goal: a damped point mass in a walled arena is rewarded only at a distant goal it cannot see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from st_rl.tasks.base import BuiltinTask

__all__ = ["SparseGoal", "evaluate_success"]


class SparseGoal(BuiltinTask):
    """Reach a fixed, distant goal disk with a damped 2-D point mass; the only reward is for being there.

    An exploration benchmark (docs/environments.md): the goal disk (``goal``, ``goal_radius``) is the same in
    every episode and not observed, and random actions never reach it. ``v = (v + dt * max_force * a / mass) /
    (1 + dt * damping / mass)``; walls at ``+-arena_size`` stop the mass. Observations: ``position`` (m),
    ``velocity`` (m/s). Reward ``success`` = ``w_success`` per step ending inside the disk; with
    ``terminate_on_success`` the first such step ends the episode (failure term ``goal_reached``). Metrics
    ``success`` and ``final_distance``."""

    DEFAULT_CFG: dict[str, Any] = {
        "dt": 0.05,
        "episode_length_s": 10.0,
        "clip_actions": 1.0,
        "mass": 1.0,
        "damping": 2.0,
        "max_force": 4.0,
        "arena_size": 5.0,
        "start": (0.0, 0.0),
        "start_range": 0.25,
        "goal": (4.0, 1.6),
        "goal_radius": 0.4,
        "w_success": 20.0,
        "terminate_on_success": False,
    }
    reward_terms = ("success",)
    failure_terms = ("goal_reached",)  # a terminal (non-time-out) end of the episode, here the good one
    metric_terms = ("success", "final_distance")

    def _setup(self) -> None:
        c = self.cfg
        if float(c["arena_size"]) <= 0 or float(c["goal_radius"]) <= 0 or float(c["damping"]) < 0:
            raise ValueError("arena_size and goal_radius must be > 0 and damping >= 0")
        self.start_point = torch.tensor([float(v) for v in c["start"]], device=self.device)
        self.goal_point = torch.tensor([float(v) for v in c["goal"]], device=self.device)
        if self.start_point.shape != (2,) or self.goal_point.shape != (2,):
            raise ValueError(f"start and goal must be (x, y) pairs, got {c['start']!r} and {c['goal']!r}")
        self._set_layout([("position", (2,)), ("velocity", (2,))])
        self.num_actions = 2
        n, dev = self.num_envs, self.device
        self.position, self.velocity = torch.zeros(n, 2, device=dev), torch.zeros(n, 2, device=dev)
        self.inside = torch.zeros(n, dtype=torch.bool, device=dev)  # inside the goal disk after this step
        self.reached = torch.zeros(n, dtype=torch.bool, device=dev)  # has been inside during this episode
        self.last_success = torch.zeros(n, device=dev)  # outcome of each env's most recent finished episode
        self.finished_episodes = torch.zeros(n, dtype=torch.long, device=dev)
        self._state_buffers += ["position", "velocity", "inside", "reached"]
        self._state_buffers += ["last_success", "finished_episodes"]

    def goal_distance(self) -> torch.Tensor:
        """Distance (N,) from each mass to the centre of the goal disk."""
        return (self.position - self.goal_point).norm(dim=1)

    def task_metrics(self) -> dict[str, torch.Tensor]:
        """``success_rate``: fraction of envs whose last finished episode reached the goal (NaN before any)."""
        done = self.finished_episodes > 0
        rate = (self.last_success * done).sum() / done.sum()  # 0 / 0 = NaN before any episode ended
        return {"success_rate": rate}

    def expert_action(self, obs: torch.Tensor) -> torch.Tensor:
        """A saturated P controller to the goal: ``clip(4 * (goal - position))`` (needs no exploration)."""
        return torch.clamp(4.0 * (self.goal_point - obs[..., 0:2]), -self.clip_actions, self.clip_actions)

    def _physics_step(self, actions: torch.Tensor) -> None:
        c = self.cfg
        force = c["max_force"] * actions
        vel = (self.velocity + self.dt * force / c["mass"]) / (1.0 + self.dt * c["damping"] / c["mass"])
        pos = self.position + self.dt * vel
        limit = float(c["arena_size"])
        clamped = pos.clamp(-limit, limit)
        vel = torch.where(clamped != pos, 0.0, vel)
        self.position, self.velocity = clamped, vel
        self.inside = self.goal_distance() <= c["goal_radius"]
        self.reached = self.reached | self.inside

    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        return (self.cfg["w_success"] * self.inside.float())[:, None]

    def _compute_failures(self) -> torch.Tensor:
        return (self.inside & bool(self.cfg["terminate_on_success"]))[:, None]

    def _episode_metrics(self) -> torch.Tensor:
        return torch.stack([self.reached.float(), self.goal_distance()], dim=1)

    def _update_log(
        self, dones: torch.Tensor, time_outs: torch.Tensor, failures: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        # Called once per step with the envs whose episode ends on it, before they are reset.
        self._where(dones, last_success=self.reached.float())
        self.finished_episodes = self.finished_episodes + dones.long()
        return super()._update_log(dones, time_outs, failures)

    def _reset_state(self, mask: torch.Tensor) -> None:
        r = float(self.cfg["start_range"])
        new_pos = self.start_point + self._rand(self.num_envs, 2, low=-r, high=r)
        self._where(mask, position=new_pos, velocity=0.0, reached=False, inside=False)

    def _compute_observations(self) -> None:
        self.obs_buf = torch.cat([self.position, self.velocity], dim=1)


def evaluate_success(
    policy: Callable[[torch.Tensor], torch.Tensor],
    num_envs: int = 256,
    seed: int = 0,
    device: str | torch.device = "cpu",
    **cfg: Any,
) -> float:
    """Fraction of ``num_envs`` fresh seeded episodes in which ``policy`` (obs -> actions) reaches the goal."""
    env = SparseGoal(num_envs=num_envs, device=device, seed=seed, **cfg)
    obs, _ = env.get_observations()
    success = torch.zeros(num_envs, dtype=torch.bool, device=env.device)
    finished = torch.zeros(num_envs, dtype=torch.bool, device=env.device)
    with torch.inference_mode():
        for _ in range(env.max_episode_length):  # every env finishes its first episode within this many steps
            obs, _, dones, _ = env.step(policy(obs))
            success |= dones & ~finished & (env.last_success > 0)  # the outcome of each env's first episode
            finished |= dones
    return float(success.float().mean())
