"""Velocity-tracking evaluation of a policy (the metrics of ``st-rl play``).

Each step gives one sample per env: the command in force against the base velocity reached. A sample counts once
the env has run ``warmup_s`` under its command (after a reset or command change), and not on the step that ends
an episode. **velrmsd** = ``sqrt(mean(|cmd_xy - v_xy|^2))`` over counted samples (m/s), **yaw_rmsd** the same
for the yaw rate (NaN without one), **cmd_rms_xy** = ``sqrt(mean(|cmd_xy|^2))`` (a robot standing still),
**CoT** the mean of the task's ``env.CoT`` at the end, **survival** the fraction of envs that never failed
(``done & ~time_outs``), **falls_per_env_min** = failures / (envs * minutes)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from st_rl.env.adapter import ObservationGroups

__all__ = ["SUMMARY_KEYS", "VelocityCommandTask", "actor_observations", "evaluate_policy", "format_summary"]


@runtime_checkable
class VelocityCommandTask(Protocol):
    """What :func:`evaluate_policy` needs: ``dt`` (s), ``commands`` (N, 2 or 3), ``base_lin_vel``."""

    num_envs: int
    dt: float
    commands: torch.Tensor
    base_lin_vel: torch.Tensor

    def get_observations(self) -> Any: ...

    def step(self, actions: torch.Tensor) -> Any: ...


SUMMARY_KEYS = (
    ("velrmsd", "velocity tracking RMSD xy (m/s)"),
    ("yaw_rmsd", "yaw-rate RMSD (rad/s)"),
    ("cmd_rms_xy", "command RMS xy (m/s, standing-still RMSD)"),
    ("CoT", "cost of transport"),
    ("survival", "survival (envs without a fall)"),
    ("falls_per_env_min", "falls per env-minute"),
    ("mean_reward_per_step", "mean reward per step"),
)


def actor_observations(obs: Any) -> torch.Tensor:
    """The actor's tensor of what ``get_observations()`` / ``step()`` return (a tensor, groups or a pair)."""
    if isinstance(obs, torch.Tensor):
        return obs
    if isinstance(obs, (tuple, list)):  # (obs, extras)
        return actor_observations(obs[0])
    if isinstance(obs, ObservationGroups):
        return obs["policy"]
    raise TypeError(f"cannot read actor observations from a {type(obs).__name__}")


def _yaw_rate_of(env: Any) -> torch.Tensor | None:
    ang_vel = getattr(env, "base_ang_vel", None)  # (N, 3)
    return None if ang_vel is None else ang_vel[:, 2]


def _check_locomotion_env(env: Any) -> None:
    needs = ("commands", "base_lin_vel", "dt", "num_envs", "get_observations", "step")  # VelocityCommandTask
    lacks = " and ".join(repr(name) for name in needs if getattr(env, name, None) is None)
    if lacks:
        tasks = "a velocity-command task (quadruped_*, velocity_tracking)"
        raise ValueError(f"evaluate_policy needs {tasks}; {type(env).__name__} lacks {lacks}")


class _Tracking:
    """The sums and the ``record_env`` trace of :func:`evaluate_policy`."""

    def __init__(self, env: Any, num_steps: int, record_env: int, has_yaw: bool) -> None:
        dev, n = env.commands.device, int(env.num_envs)
        self.env, self.record_env, self.has_yaw = env, record_env, has_yaw
        self.num_cmd = int(env.commands.shape[1])
        self.sums = torch.zeros(5, dtype=torch.float64, device=dev)  # err_xy, err_yaw, cmd_sq, count, reward
        self.fell = torch.zeros(n, dtype=torch.bool, device=dev)
        self.falls = torch.zeros((), dtype=torch.long, device=dev)
        self.cmd = torch.full((num_steps, 3), float("nan"))
        self.vel = self.cmd.clone()
        self.flags = torch.zeros(num_steps, 3, dtype=torch.bool)  # done, fall, counted

    def add(self, t: int, cmd: torch.Tensor, rewards: torch.Tensor, flags: torch.Tensor) -> None:
        """One step; ``flags`` (3, N) bool: done, failed, counted."""
        _, failed, counted = flags
        vel, w, i = self.env.base_lin_vel, counted.double(), self.record_env
        yaw_rate = _yaw_rate_of(self.env) if self.has_yaw else None
        self.sums[0] += ((cmd[:, :2] - vel[:, :2]).double().square().sum(dim=1) * w).sum()
        if yaw_rate is not None:
            self.sums[1] += ((cmd[:, 2] - yaw_rate).double().square() * w).sum()
            self.vel[t, 2] = float(yaw_rate[i])
        self.sums[2] += (cmd[:, :2].double().square().sum(dim=1) * w).sum()
        self.sums[3] += w.sum()
        self.sums[4] += rewards.to(w.device).double().sum()
        self.fell |= failed
        self.falls += failed.long().sum()
        self.cmd[t, : min(self.num_cmd, 3)] = cmd[i, :3].float().cpu()
        self.vel[t, :2] = vel[i, :2].float().cpu()
        self.flags[t] = flags[:, i].cpu()

    def metrics(self, num_steps: int, dt: float, warmup_steps: int) -> dict[str, Any]:
        err_xy, err_yaw, cmd_sq, n, reward = self.sums.tolist()
        nan, num_envs = float("nan"), int(self.fell.shape[0])
        cot = getattr(self.env, "CoT", None)  # per-env cost of transport (N,)
        done, fall, counted = self.flags.numpy().T
        return {
            "velrmsd": math.sqrt(err_xy / n) if n else nan,
            "yaw_rmsd": math.sqrt(err_yaw / n) if n and self.has_yaw else nan,
            "cmd_rms_xy": math.sqrt(cmd_sq / n) if n else nan,
            "CoT": float(torch.as_tensor(cot).float().mean()) if cot is not None else nan,
            "survival": float((~self.fell).float().mean()),
            "falls_per_env_min": float(self.falls) / (num_envs * num_steps * dt / 60.0),
            "falls": int(self.falls),
            "mean_reward_per_step": reward / (num_envs * num_steps),
            "num_envs": num_envs,
            "num_steps": num_steps,
            "num_samples": int(n),
            "duration_s": num_steps * dt,
            "dt": dt,
            "warmup_s": warmup_steps * dt,
            "trace": {
                "env": self.record_env,
                "time": np.arange(1, num_steps + 1) * dt,
                "cmd": self.cmd.numpy(),
                "vel": self.vel.numpy(),
                "done": done,
                "fall": fall,
                "counted": counted,
            },
        }


def _hold_command(env: Any, fixed: torch.Tensor | None, obs: Any) -> Any:
    """``obs``, or the observations recomputed after writing the fixed command over changed ones."""
    if fixed is None or not bool((env.commands != fixed).any()):
        return obs
    env.commands = fixed.expand_as(env.commands).clone()
    if hasattr(env, "_compute_observations"):  # so that the command written is seen at once
        env._compute_observations()
    return env.get_observations()[0]


def evaluate_policy(
    env: Any,
    policy: Callable[[torch.Tensor], torch.Tensor],
    duration_s: float,
    record_env: int = 0,
    render: Callable[[Any], None] | None = None,
    *,
    command: Sequence[float] | None = None,
    warmup_s: float = 1.0,
    reset: bool = True,
) -> dict[str, Any]:
    """Run ``policy`` (``obs -> actions``) on a :class:`VelocityCommandTask` for ``duration_s`` and measure it.

    ``render(env)`` is called after the reset and every step (e.g. a :class:`VideoRecorder`); ``command`` holds
    ``env.commands`` at (vx, vy[, yaw rate]). Returns the module docstring's metrics, ``falls``,
    ``mean_reward_per_step``, counts, ``dt`` and ``trace``: numpy ``time``, ``cmd`` and ``vel`` (T, 3; NaN
    without yaw), ``done``, ``fall``, ``counted`` of ``record_env``; ``ValueError`` without commands."""
    _check_locomotion_env(env)
    num_envs = int(env.num_envs)
    if not 0 <= record_env < num_envs:
        raise ValueError(f"record_env={record_env} is out of range for {num_envs} environments")
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    dt = float(env.dt)
    num_steps, warmup_steps = max(1, int(round(duration_s / dt))), int(round(warmup_s / dt))
    fixed = None
    if command is not None:
        values, num_cmd = [float(v) for v in command], int(env.commands.shape[1])
        if not 2 <= len(values) <= num_cmd:
            raise ValueError(
                f"command has {len(values)} values; this task takes {num_cmd} (vx, vy[, yaw rate])"
            )
        values += [0.0] * (num_cmd - len(values))
        fixed = torch.tensor(values, dtype=env.commands.dtype, device=env.commands.device)

    with torch.inference_mode():
        if reset and hasattr(env, "reset"):
            env.reset()
        obs = _hold_command(env, fixed, env.get_observations()[0])
        has_yaw = int(env.commands.shape[1]) >= 3 and _yaw_rate_of(env) is not None
        tracking = _Tracking(env, num_steps, record_env, has_yaw)
        dev = env.commands.device
        age = torch.zeros(num_envs, dtype=torch.long, device=dev)  # steps under the current command
        reset_policy = getattr(policy, "reset", None)  # a ResettablePolicy (recurrent)
        if render is not None:
            render(env)
        for t in range(num_steps):
            cmd = env.commands.clone()
            obs, rewards, dones, extras = env.step(policy(actor_observations(obs)))
            dones = dones.to(dev).bool()
            if reset_policy is not None:
                reset_policy(dones)  # forget finished episodes
            time_outs = extras.get("time_outs") if isinstance(extras, dict) else None
            failed = dones if time_outs is None else dones & ~time_outs.to(dev).bool()
            tracking.add(t, cmd, rewards, torch.stack([dones, failed, (age >= warmup_steps) & ~dones]))
            obs = _hold_command(env, fixed, obs)
            changed = dones | (env.commands != cmd).any(dim=1)
            age = torch.where(changed, torch.zeros_like(age), age + 1)
            if render is not None:
                render(env)
        metrics = tracking.metrics(num_steps, dt, warmup_steps)
    if metrics["num_samples"] == 0:
        msg = f"evaluate_policy: no samples after the {warmup_steps * dt:.2f} s warm-up; run longer than that"
        warnings.warn(msg, stacklevel=2)
    return metrics


def format_summary(metrics: dict[str, Any], title: str = "Evaluation") -> str:
    """A two-column text table of the scalar metrics of :func:`evaluate_policy`."""
    rows = [(label, metrics[key]) for key, label in SUMMARY_KEYS if key in metrics]
    rows += [
        ("falls", metrics.get("falls")),
        ("envs x seconds", f"{metrics.get('num_envs')} x {metrics.get('duration_s', float('nan')):.1f}"),
        ("samples (after warm-up)", metrics.get("num_samples")),
    ]
    width = max(len(label) for label, _ in rows) + 2
    lines = [title, "-" * (width + 12)]
    for label, value in rows:
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        lines.append(f"{label:<{width}}{text:>12}")
    return "\n".join(lines)
