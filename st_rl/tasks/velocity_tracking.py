"""Planar velocity tracking with hidden dynamics parameters: a tiny stand-in for legged locomotion."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.tasks.base import BuiltinTask

__all__ = ["VelocityTracking"]

GRAVITY = 9.81


class VelocityTracking(BuiltinTask):
    """Track a commanded planar velocity with a body of unknown mass and drag (privileged critic).

    ``v += dt * (max_force * a - friction * v) / mass`` with ``mass`` and ``friction`` drawn per episode. The
    command ``(vx, vy)`` is resampled every ``resampling_time_s``. Actor observations: ``base_lin_vel`` (noisy),
    ``commands``, ``last_actions`` [, zero ``mass`` and ``friction`` slots for an estimator with
    ``actor_dynamics_slots``]; the critic's are noise-free plus ``mass`` and ``friction``. Rewards:
    ``track_lin_vel`` = ``w_track * exp(-|cmd - v|^2 / tracking_sigma)``, ``action_rate``, ``action_l2``,
    ``termination`` (failure ``velocity_error``: ``|cmd - v| > max_velocity_error``)."""

    DEFAULT_CFG: dict[str, Any] = {
        "dt": 0.05,
        "episode_length_s": 8.0,
        "clip_actions": 1.0,
        "max_force": 5.0,
        "mass_range": (0.5, 2.0),
        "friction_range": (0.5, 2.0),
        "command_range": 1.0,
        "resampling_time_s": 4.0,
        "init_vel_range": 0.5,
        "add_noise": True,
        "vel_noise": 0.05,
        "max_velocity_error": 2.5,
        "tracking_sigma": 0.25,
        "w_track": 1.0,
        "w_action_rate": -0.01,
        "w_action_l2": -0.002,
        "w_termination": -20.0,
        "cot_eps": 1e-3,
        "expert_kp": 5.0,
        "actor_dynamics_slots": False,
    }
    reward_terms = ("track_lin_vel", "action_rate", "action_l2", "termination")
    failure_terms = ("velocity_error",)
    metric_terms = ("tracking_error", "CoT")

    def _setup(self) -> None:
        self.actor_dynamics_slots = bool(self.cfg["actor_dynamics_slots"])
        actor = [("base_lin_vel", (2,)), ("commands", (2,)), ("last_actions", (2,))]
        critic = [*actor, ("mass", (1,)), ("friction", (1,))]
        self._set_layout(critic if self.actor_dynamics_slots else actor, critic)
        self.num_actions = 2
        self.resampling_steps = max(1, round(float(self.cfg["resampling_time_s"]) / self.dt))
        n, dev = self.num_envs, self.device
        self.base_lin_vel, self.commands, self.last_actions, self.prev_actions = (
            torch.zeros(n, 2, device=dev) for _ in range(4)
        )
        self.mass, self.friction = torch.ones(n, 1, device=dev), torch.ones(n, 1, device=dev)
        # running sums over the current episode and the values of the last finished one
        self._err_sq_sum, self._cot_sum, self._metric_steps, self._last_tracking_error, self._last_cot = (
            torch.zeros(n, device=dev) for _ in range(5)
        )
        names = "base_lin_vel commands mass friction last_actions prev_actions _err_sq_sum _cot_sum"
        self._state_buffers += [*names.split(), "_metric_steps", "_last_tracking_error", "_last_cot"]

    def task_metrics(self) -> dict[str, torch.Tensor]:
        """Velocity-tracking RMSD (``velrmsd``, :attr:`tracking_error`) and cost of transport (``CoT``)."""
        return {"velrmsd": self.tracking_error, "CoT": self.CoT}

    @property
    def tracking_error(self) -> torch.Tensor:
        """Per-env RMS velocity error (m/s) of the episode (of the last one before the first step), (N,)."""
        current = torch.sqrt(self._err_sq_sum / self._metric_steps.clamp_min(1.0))
        return torch.where(self._metric_steps > 0, current, self._last_tracking_error)

    @property
    def CoT(self) -> torch.Tensor:  # noqa: N802 - name used by the trainers
        """Per-env mean of ``|F . v| / (mass * g * |v| + cot_eps)`` over the current (else last) episode, (N,)."""
        current = self._cot_sum / self._metric_steps.clamp_min(1.0)
        return torch.where(self._metric_steps > 0, current, self._last_cot)

    def expert_action(self, obs: torch.Tensor) -> torch.Tensor:
        """``(f_nom * cmd + kp * (cmd - v)) / max_force`` from actor observations (``f_nom``: mid-range drag)."""
        vel, cmd = obs[..., 0:2], obs[..., 2:4]
        f_nom = 0.5 * sum(self.cfg["friction_range"])
        a = (f_nom * cmd + self.cfg["expert_kp"] * (cmd - vel)) / self.cfg["max_force"]
        return torch.clamp(a, -self.clip_actions, self.clip_actions)

    def _physics_step(self, actions: torch.Tensor) -> None:
        c = self.cfg
        force = c["max_force"] * actions
        vel = (self.base_lin_vel + self.dt * force / self.mass) / (1.0 + self.dt * self.friction / self.mass)
        self.base_lin_vel = vel
        self.prev_actions = self.last_actions
        self.last_actions = actions
        power = (force * vel).sum(dim=1).abs()
        cot = power / (self.mass[:, 0] * GRAVITY * vel.norm(dim=1) + c["cot_eps"])
        self._err_sq_sum = self._err_sq_sum + (self.commands - vel).square().sum(dim=1)
        self._cot_sum = self._cot_sum + cot
        self._metric_steps = self._metric_steps + 1.0

    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        err_sq = (self.commands - self.base_lin_vel).square().sum(dim=1)
        track = c["w_track"] * torch.exp(-err_sq / c["tracking_sigma"])
        action_rate = c["w_action_rate"] * (actions - self.prev_actions).square().sum(dim=1)
        action_l2 = c["w_action_l2"] * actions.square().sum(dim=1)
        termination = c["w_termination"] * self._compute_failures().any(dim=1).float()
        return torch.stack([track, action_rate, action_l2, termination], dim=1)

    def _compute_failures(self) -> torch.Tensor:
        err = (self.commands - self.base_lin_vel).norm(dim=1)
        return (err > self.cfg["max_velocity_error"])[:, None]

    def _episode_metrics(self) -> torch.Tensor:
        return torch.stack([self.tracking_error, self.CoT], dim=1)

    def _sample_commands(self) -> torch.Tensor:
        r = float(self.cfg["command_range"])
        return self._rand(self.num_envs, 2, low=-r, high=r)

    def _reset_state(self, mask: torch.Tensor) -> None:
        n, c = self.num_envs, self.cfg
        self._where(mask, _last_tracking_error=self.tracking_error, _last_cot=self.CoT)
        self._where(mask, _err_sq_sum=0.0, _cot_sum=0.0, _metric_steps=0.0)
        v0 = float(c["init_vel_range"])
        self._where(mask, base_lin_vel=self._rand(n, 2, low=-v0, high=v0), commands=self._sample_commands())
        (m0, m1), (f0, f1) = c["mass_range"], c["friction_range"]
        self._where(mask, mass=self._rand(n, 1, low=m0, high=m1), friction=self._rand(n, 1, low=f0, high=f1))
        self._where(mask, last_actions=0.0, prev_actions=0.0)

    def _post_reset(self, dones: torch.Tensor) -> None:
        resample = (self._episode_length_buf % self.resampling_steps == 0) & ~dones
        self.commands = torch.where(resample[:, None], self._sample_commands(), self.commands)

    def _compute_observations(self) -> None:
        vel_obs = self.base_lin_vel
        if self.cfg["add_noise"]:
            nz = float(self.cfg["vel_noise"])
            vel_obs = vel_obs + self._rand(self.num_envs, 2, low=-nz, high=nz)
        parts = [vel_obs, self.commands, self.last_actions]
        if self.actor_dynamics_slots:
            parts.append(torch.zeros(self.num_envs, 2, device=self.device))  # unobservable mass, friction
        self.obs_buf = torch.cat(parts, dim=1)
        critic = [self.base_lin_vel, self.commands, self.last_actions, self.mass, self.friction]
        self.critic_obs_buf = torch.cat(critic, dim=1)
