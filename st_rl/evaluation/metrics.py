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
    """What :func:`evaluate_policy` needs of a task (st_rl's ``velocity_tracking``, ``quadruped_flat`` and
    ``quadruped_rough`` have it): the native API's ``get_observations()`` and ``step(actions)``, ``num_envs``,
    ``dt`` (seconds per policy step), the velocity ``commands`` (N, 2 or 3: vx, vy[, yaw rate]) and the
    velocity reached, ``base_lin_vel`` (N, >= 2, base frame)."""

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
    """A task that can rebuild its observations from its state (st_rl's built-in tasks), so that a command
    written by :func:`evaluate_policy` is seen at once."""

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


def _recompute_observations(env: Any) -> None:
    if isinstance(env, RecomputesObservations):
        env._compute_observations()


def _reset(env: Any) -> None:
    if isinstance(env, ResettableTask):
        env.reset()


def _reset_policy(policy: Any, dones: torch.Tensor) -> None:
    if isinstance(policy, ResettablePolicy):
        policy.reset(dones)


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
        command: fix ``env.commands`` of all environments to these values (vx, vy[, yaw rate]): written before
            every step, and after any step whose reset or resampling changed them (the observations are then
            recomputed so the policy never sees another command).
        warmup_s: seconds under a new command (or after a reset) left out of the tracking metrics.
        reset: reset all environments first, so every episode starts inside the evaluation.

    Returns:
        Floats ``velrmsd``, ``yaw_rmsd``, ``cmd_rms_xy``, ``CoT``, ``survival``, ``falls_per_env_min``,
        ``mean_reward_per_step``, ints ``falls``, ``num_envs``, ``num_steps``, ``num_samples``, floats
        ``duration_s``, ``dt``, ``warmup_s``, and ``trace``: numpy arrays ``time`` (T,), ``cmd`` (T, 3) and
        ``vel`` (T, 3) (vx, vy, yaw rate; NaN where the task has no yaw), ``done``, ``fall`` and ``counted``
        (sample used by the metrics) (T,) bool, of env ``record_env`` (see the module docstring for the rules).

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
    num_steps = max(1, int(round(duration_s / dt)))
    warmup_steps = int(round(warmup_s / dt))
    num_cmd = int(env.commands.shape[1])
    has_yaw = num_cmd >= 3 and _yaw_rate_of(env) is not None
    fixed: torch.Tensor | None = None
    if command is not None:
        values = [float(v) for v in command]
        if not 2 <= len(values) <= num_cmd:
            raise ValueError(
                f"command has {len(values)} values; this task takes {num_cmd} (vx, vy[, yaw rate])"
            )
        values += [0.0] * (num_cmd - len(values))
        fixed = torch.tensor(values, dtype=env.commands.dtype, device=env.commands.device)

    def apply_fixed_command() -> bool:
        """Overwrite the commands; True when they had been changed (observations are stale)."""
        assert fixed is not None
        stale = bool((env.commands != fixed).any())
        if stale:
            env.commands = fixed.expand_as(env.commands).clone()
        return stale

    def refresh_obs() -> Any:
        _recompute_observations(env)
        return env.get_observations()[0]

    with torch.inference_mode():
        if reset:
            _reset(env)
        obs = env.get_observations()[0]
        if fixed is not None and apply_fixed_command():
            obs = refresh_obs()
        dev = env.commands.device
        age = torch.zeros(num_envs, dtype=torch.long, device=dev)  # steps under the current command
        err_xy_sum = torch.zeros((), dtype=torch.float64, device=dev)
        err_yaw_sum = torch.zeros((), dtype=torch.float64, device=dev)
        cmd_sq_sum = torch.zeros((), dtype=torch.float64, device=dev)
        count = torch.zeros((), dtype=torch.float64, device=dev)
        reward_sum = torch.zeros((), dtype=torch.float64, device=dev)
        fell = torch.zeros(num_envs, dtype=torch.bool, device=dev)
        falls = torch.zeros((), dtype=torch.long, device=dev)
        tr_cmd = torch.full((num_steps, 3), float("nan"))
        tr_vel = torch.full((num_steps, 3), float("nan"))
        tr_done = torch.zeros(num_steps, dtype=torch.bool)
        tr_fall = torch.zeros(num_steps, dtype=torch.bool)
        tr_counted = torch.zeros(num_steps, dtype=torch.bool)
        if render is not None:
            render(env)

        for t in range(num_steps):
            cmd = env.commands.clone()
            actions = policy(_actor_obs(obs))
            obs, rewards, dones, extras = env.step(actions)
            dones = dones.to(dev).bool()
            _reset_policy(policy, dones)  # recurrent policies forget finished episodes
            time_outs = extras.get("time_outs") if isinstance(extras, dict) else None
            if time_outs is None:
                time_outs = torch.zeros_like(dones)
            failed = dones & ~time_outs.to(dev).bool()

            vel = env.base_lin_vel
            err_xy = (cmd[:, :2] - vel[:, :2]).double().square().sum(dim=1)
            counted = (age >= warmup_steps) & ~dones
            w = counted.double()
            err_xy_sum += (err_xy * w).sum()
            cmd_sq_sum += (cmd[:, :2].double().square().sum(dim=1) * w).sum()
            count += w.sum()
            yaw_rate = _yaw_rate_of(env) if has_yaw else None
            if yaw_rate is not None:
                err_yaw_sum += ((cmd[:, 2] - yaw_rate).double().square() * w).sum()
            reward_sum += rewards.to(dev).double().sum()
            fell |= failed
            falls += failed.long().sum()

            tr_cmd[t, : min(num_cmd, 3)] = cmd[record_env, :3].float().cpu()
            tr_vel[t, :2] = vel[record_env, :2].float().cpu()
            if yaw_rate is not None:
                tr_vel[t, 2] = float(yaw_rate[record_env])
            tr_done[t] = bool(dones[record_env])
            tr_fall[t] = bool(failed[record_env])
            tr_counted[t] = bool(counted[record_env])

            if fixed is not None and apply_fixed_command():
                obs = refresh_obs()
            changed = dones | (env.commands != cmd).any(dim=1)
            age = torch.where(changed, torch.zeros_like(age), age + 1)
            if render is not None:
                render(env)

        n = float(count)
        nan = float("nan")
        cot = _cost_of_transport(env)
        minutes = num_steps * dt / 60.0
        metrics: dict[str, Any] = {
            "velrmsd": math.sqrt(float(err_xy_sum) / n) if n else nan,
            "yaw_rmsd": math.sqrt(float(err_yaw_sum) / n) if n and has_yaw else nan,
            "cmd_rms_xy": math.sqrt(float(cmd_sq_sum) / n) if n else nan,
            "CoT": float(torch.as_tensor(cot).float().mean()) if cot is not None else nan,
            "survival": float((~fell).float().mean()),
            "falls_per_env_min": float(falls) / (num_envs * minutes),
            "falls": int(falls),
            "mean_reward_per_step": float(reward_sum) / (num_envs * num_steps),
            "num_envs": num_envs,
            "num_steps": num_steps,
            "num_samples": int(n),
            "duration_s": num_steps * dt,
            "dt": dt,
            "warmup_s": warmup_steps * dt,
            "trace": {
                "env": record_env,
                "time": (np.arange(1, num_steps + 1) * dt),
                "cmd": tr_cmd.numpy(),
                "vel": tr_vel.numpy(),
                "done": tr_done.numpy(),
                "fall": tr_fall.numpy(),
                "counted": tr_counted.numpy(),
            },
        }
    if n == 0:
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
