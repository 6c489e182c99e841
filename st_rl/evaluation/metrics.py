"""Velocity-tracking evaluation of a policy on a velocity-command task: the metrics of ``st-rl play``.

Metric rules (this module's :func:`evaluate_policy`):

* **Samples.** After every policy step, each environment contributes one sample: the command in force during the
  step against the base velocity reached at its end (base frame, as the task defines ``base_lin_vel``).
* **Warm-up exclusion.** A sample counts only once the environment has run ``warmup_s`` (default 1 s) under its
  current command: the first ``round(warmup_s / dt)`` steps after every reset and after every change of
  ``env.commands`` are left out, and so is the step that ends an episode (its end state is already the next
  episode's first state).
* **velrmsd** = ``sqrt(mean(|cmd_xy - v_xy|^2))`` over the counted samples of all environments (m/s);
  **yaw_rmsd** the same for ``cmd_yaw - base_ang_vel_z`` (rad/s; NaN for tasks without a yaw command);
  **cmd_rms_xy** = ``sqrt(mean(|cmd_xy|^2))`` over the same samples, the velrmsd of a robot standing still.
* **CoT**: the mean over environments of the task's ``env.CoT`` at the end (each environment's current episode,
  or its last finished one while the current one is shorter than the task's metric warm-up); NaN if absent.
* **survival**: fraction of environments that never ended an episode by failure; a failure is
  ``done & ~extras["time_outs"]`` (time-outs are not failures). **falls_per_env_min** = failures / (envs * minutes).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from st_rl.env.adapter import ObservationGroups
from st_rl.protocols import ResettablePolicy

__all__ = ["SUMMARY_KEYS", "VelocityCommandTask", "evaluate_policy", "format_summary"]


@runtime_checkable
class VelocityCommandTask(Protocol):
    """What :func:`evaluate_policy` needs of a task (``velocity_tracking``, ``quadruped_*``): the native API,
    ``dt`` (seconds per policy step), ``commands`` (N, 2 or 3: vx, vy[, yaw rate]) and ``base_lin_vel`` (N, >= 2)."""

    num_envs: int
    dt: float
    commands: torch.Tensor
    base_lin_vel: torch.Tensor

    def get_observations(self) -> Any: ...

    def step(self, actions: torch.Tensor) -> Any: ...


@runtime_checkable
class ResettableTask(Protocol):
    """A task that ``reset()`` restarts (every environment); :func:`evaluate_policy` starts from it."""

    def reset(self) -> Any: ...


@runtime_checkable
class MeasuresYawRate(Protocol):
    """A task whose base angular velocity ``base_ang_vel`` (N, 3) gives the yaw rate (``yaw_rmsd``)."""

    base_ang_vel: torch.Tensor


@runtime_checkable
class MeasuresCostOfTransport(Protocol):
    """A task that reports its cost of transport per environment, ``CoT`` (N,)."""

    CoT: torch.Tensor  # noqa: N815 - the task attribute's name


@runtime_checkable
class RecomputesObservations(Protocol):
    """A task that rebuilds its observations from its state, so that a command written is seen at once."""

    def _compute_observations(self) -> None: ...


SUMMARY_KEYS = (
    ("velrmsd", "velocity tracking RMSD xy (m/s)"),
    ("yaw_rmsd", "yaw-rate RMSD (rad/s)"),
    ("cmd_rms_xy", "command RMS xy (m/s, standing-still RMSD)"),
    ("CoT", "cost of transport"),
    ("survival", "survival (envs without a fall)"),
    ("falls_per_env_min", "falls per env-minute"),
    ("mean_reward_per_step", "mean reward per step"),
)


def _actor_obs(obs: Any) -> torch.Tensor:
    if isinstance(obs, torch.Tensor):
        return obs
    if isinstance(obs, (tuple, list)):  # (obs, extras)
        return _actor_obs(obs[0])
    if isinstance(obs, ObservationGroups):
        return obs["policy"]
    raise TypeError(f"cannot read actor observations from a {type(obs).__name__}")


def _yaw_rate_of(env: Any) -> torch.Tensor | None:
    """The yaw rate (N,) of a :class:`MeasuresYawRate` task, else None."""
    if isinstance(env, MeasuresYawRate) and env.base_ang_vel is not None:
        return env.base_ang_vel[:, 2]
    return None


def _cost_of_transport(env: Any) -> torch.Tensor | None:
    """The ``CoT`` (N,) of a :class:`MeasuresCostOfTransport` task, else None."""
    return env.CoT if isinstance(env, MeasuresCostOfTransport) else None


def _check_locomotion_env(env: Any) -> None:
    """Raise ``ValueError`` naming what ``env`` lacks of a :class:`VelocityCommandTask`."""
    if isinstance(env, VelocityCommandTask) and env.commands is not None and env.base_lin_vel is not None:
        return
    missing = [name for name in ("commands", "base_lin_vel") if getattr(env, name, None) is None]
    if missing:
        raise ValueError(
            f"evaluate_policy needs a velocity-command task with 'commands' and 'base_lin_vel'; "
            f"{type(env).__name__} has no {' or '.join(repr(m) for m in missing)} "
            "(tasks that have them: quadruped_flat, quadruped_rough, velocity_tracking)."
        )
    raise ValueError(
        f"{type(env).__name__} is not a velocity-command task: it needs 'dt' (seconds per policy step), "
        "'num_envs', get_observations() and step(actions) (see VelocityCommandTask)."
    )


class _Tracking:
    """The sums and the ``record_env`` trace of :func:`evaluate_policy`, one :meth:`add` per step."""

    def __init__(self, env: Any, num_steps: int, record_env: int, has_yaw: bool) -> None:
        dev, n = env.commands.device, int(env.num_envs)
        self.env, self.record_env, self.has_yaw, self.num_cmd = (
            env,
            record_env,
            has_yaw,
            int(env.commands.shape[1]),
        )
        self.sums = torch.zeros(5, dtype=torch.float64, device=dev)  # err_xy, err_yaw, cmd_sq, count, reward
        self.fell = torch.zeros(n, dtype=torch.bool, device=dev)
        self.falls = torch.zeros((), dtype=torch.long, device=dev)
        self.cmd, self.vel = (
            torch.full((num_steps, 3), float("nan")),
            torch.full((num_steps, 3), float("nan")),
        )
        self.flags = torch.zeros(num_steps, 3, dtype=torch.bool)  # done, fall, counted

    def add(self, t: int, cmd: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor, failed: torch.Tensor,
            counted: torch.Tensor) -> None:  # fmt: skip
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
        self.flags[t] = torch.stack([dones[i], failed[i], counted[i]]).cpu()

    def metrics(self, num_steps: int, dt: float, warmup_steps: int) -> dict[str, Any]:
        err_xy, err_yaw, cmd_sq, n, reward = self.sums.tolist()
        nan, num_envs = float("nan"), int(self.fell.shape[0])
        cot = _cost_of_transport(self.env)
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
            "trace": {"env": self.record_env, "time": np.arange(1, num_steps + 1) * dt, "cmd": self.cmd.numpy(),
                      "vel": self.vel.numpy(), "done": done, "fall": fall, "counted": counted},
        }  # fmt: skip


def _fixed_command(env: Any, command: Sequence[float] | None) -> torch.Tensor | None:
    if command is None:
        return None
    values, num_cmd = [float(v) for v in command], int(env.commands.shape[1])
    if not 2 <= len(values) <= num_cmd:
        raise ValueError(f"command has {len(values)} values; this task takes {num_cmd} (vx, vy[, yaw rate])")
    values += [0.0] * (num_cmd - len(values))
    return torch.tensor(values, dtype=env.commands.dtype, device=env.commands.device)


def _hold_command(env: Any, fixed: torch.Tensor | None, obs: Any) -> Any:
    """``obs``, or the observations recomputed after writing the fixed command over changed ones."""
    if fixed is None or not bool((env.commands != fixed).any()):
        return obs
    env.commands = fixed.expand_as(env.commands).clone()
    _recompute_observations(env)
    return env.get_observations()[0]


def _recompute_observations(env: Any) -> None:
    if isinstance(env, RecomputesObservations):
        env._compute_observations()


def _reset(env: Any) -> None:
    if isinstance(env, ResettableTask):
        env.reset()


def _reset_policy(policy: Any, dones: torch.Tensor) -> None:
    if isinstance(policy, ResettablePolicy):
        policy.reset(dones)  # recurrent policies forget finished episodes


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
    """Run ``policy`` on a velocity-command task for ``duration_s`` seconds and measure the tracking.

    Args:
        env: a task of the native st_rl API with ``commands`` (N, 2 or 3), ``base_lin_vel`` (N, >= 2),
            optionally ``base_ang_vel`` and ``CoT``, and ``dt``.
        policy: deterministic ``obs -> actions``; called under ``torch.inference_mode``.
        duration_s: simulated seconds; ``round(duration_s / env.dt)`` policy steps (at least 1).
        record_env: the environment whose commanded and achieved velocities are returned in ``trace``.
        render: called with ``env`` after the (re)set and after every step (e.g. a :class:`VideoRecorder`).
        command: fix ``env.commands`` of all environments to (vx, vy[, yaw rate]), rewritten (and the
            observations recomputed) whenever a reset or resampling changed them.
        warmup_s: seconds under a new command (or after a reset) left out of the tracking metrics.
        reset: reset all environments first, so every episode starts inside the evaluation.

    Returns:
        The metrics of the module docstring, ``falls``, ``mean_reward_per_step``, ``num_envs``, ``num_steps``,
        ``num_samples``, ``duration_s``, ``dt``, ``warmup_s`` and ``trace``: numpy arrays ``time`` (T,), ``cmd``
        and ``vel`` (T, 3: vx, vy, yaw rate; NaN where the task has no yaw), ``done``, ``fall`` and ``counted``
        (T,) of env ``record_env``.

    Raises:
        ValueError: the task has no velocity commands, or ``record_env`` / ``duration_s`` is out of range.
    """
    _check_locomotion_env(env)
    num_envs = int(env.num_envs)
    if not 0 <= record_env < num_envs:
        raise ValueError(f"record_env={record_env} is out of range for {num_envs} environments")
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    dt = float(env.dt)
    num_steps, warmup_steps = max(1, int(round(duration_s / dt))), int(round(warmup_s / dt))
    fixed = _fixed_command(env, command)

    with torch.inference_mode():
        if reset:
            _reset(env)
        obs = _hold_command(env, fixed, env.get_observations()[0])
        tracking = _Tracking(
            env, num_steps, record_env, int(env.commands.shape[1]) >= 3 and _yaw_rate_of(env) is not None
        )
        dev = env.commands.device
        age = torch.zeros(num_envs, dtype=torch.long, device=dev)  # steps under the current command
        if render is not None:
            render(env)
        for t in range(num_steps):
            cmd = env.commands.clone()
            obs, rewards, dones, extras = env.step(policy(_actor_obs(obs)))
            dones = dones.to(dev).bool()
            _reset_policy(policy, dones)
            time_outs = extras.get("time_outs") if isinstance(extras, dict) else None
            failed = dones if time_outs is None else dones & ~time_outs.to(dev).bool()
            tracking.add(t, cmd, rewards, dones, failed, (age >= warmup_steps) & ~dones)
            obs = _hold_command(env, fixed, obs)
            changed = dones | (env.commands != cmd).any(dim=1)
            age = torch.where(changed, torch.zeros_like(age), age + 1)
            if render is not None:
                render(env)
        metrics = tracking.metrics(num_steps, dt, warmup_steps)
    if metrics["num_samples"] == 0:
        warnings.warn(
            f"evaluate_policy: no samples after the {warmup_steps * dt:.2f} s warm-up; run longer than that",
            stacklevel=2,
        )
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
