"""Base class of the batched built-in tasks (pure PyTorch, native st_rl API, no host sync in ``step``).

Each reward term is ``weight * kernel * dt``. ``extras["log"]`` holds, over the envs that finished on the step
(else the last such values; zeros before any): ``Episode_Reward/<term>`` (episode sum / ``max_episode_length_s``),
``Episode_Termination/time_out`` and ``/<failure>`` (fractions) and ``Metrics/<name>`` (means)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any

import torch

from st_rl.env.adapters.contract import episode_length_property

__all__ = ["BuiltinTask"]

Segments = list[tuple[str, tuple[int, ...]]]  # (name, shape) of each observation component


class BuiltinTask(ABC):
    """Base class of the built-in batched tasks.

    Subclasses set ``DEFAULT_CFG`` (with ``dt`` in s, ``episode_length_s``, ``clip_actions``) and the term names,
    build their buffers and layout in :meth:`_setup` (listing them in ``_state_buffers``, for :meth:`state_dict`)
    and implement the ``_`` hooks below. ``seed`` None draws the private generator's seed from torch's global RNG;
    ``cfg`` overrides ``DEFAULT_CFG`` (unknown keys raise ``TypeError``)."""

    DEFAULT_CFG: dict[str, Any] = {}
    reward_terms: tuple[str, ...] = ()
    failure_terms: tuple[str, ...] = ()
    metric_terms: tuple[str, ...] = ()

    num_obs: int
    num_privileged_obs: int | None
    num_actions: int
    obs_segments: OrderedDict[str, tuple[int, ...]]
    privileged_obs_segments: OrderedDict[str, tuple[int, ...]] | None

    def __init__(
        self, num_envs: int = 256, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
    ) -> None:
        unknown = sorted(set(cfg) - set(self.DEFAULT_CFG))
        if unknown:
            what = f"{type(self).__name__}: unknown config option(s) {unknown}"
            raise TypeError(f"{what}; valid options: {sorted(self.DEFAULT_CFG)}")
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.cfg: dict[str, Any] = {**self.DEFAULT_CFG, **cfg}
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.dt = float(self.cfg["dt"])
        self.max_episode_length_s = float(self.cfg["episode_length_s"])
        self.max_episode_length = max(1, int(math.ceil(self.max_episode_length_s / self.dt - 1e-6)))
        self.clip_actions = float(self.cfg["clip_actions"])

        self._generator = torch.Generator(device=self.device)
        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        self._generator.manual_seed(int(seed))

        n, dev = self.num_envs, self.device
        self._episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self._episode_sums = torch.zeros(n, len(self.reward_terms), device=dev)
        self._log_names = [f"Episode_Reward/{t}" for t in self.reward_terms]
        self._log_names += [f"Episode_Termination/{t}" for t in ["time_out", *self.failure_terms]]
        self._log_names += [f"Metrics/{t}" for t in self.metric_terms]
        self._log_values = torch.zeros(len(self._log_names), device=dev)
        self.obs_buf = torch.zeros(n, 0, device=dev)
        self.critic_obs_buf: torch.Tensor | None = None
        self._state_buffers: list[str] = ["_episode_length_buf", "_episode_sums", "_log_values", "obs_buf"]
        self._setup()
        self.reset()

    def task_metrics(self) -> dict[str, torch.Tensor]:
        """Metrics by name (scalars or per-env), logged as ``Eval/<name>``; none by default."""
        return {}

    episode_length_buf = episode_length_property()

    @property
    def unwrapped(self) -> BuiltinTask:
        """The environment itself (for wrapper-agnostic code)."""
        return self

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return the current actor observations and ``{"observations": groups}``."""
        return self.obs_buf, {"observations": self._obs_groups()}

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all environments; return ``(obs, extras)``."""
        self._reset_envs(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        self._compute_observations()
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step with ``actions`` (N, num_actions; NaN zeroed, clipped) and reset finished envs; returns
        ``(obs, rewards (N,), dones (N,) bool, extras)``, extras: ``observations``, ``time_outs``, ``log``."""
        actions = actions.to(device=self.device, dtype=torch.float32).reshape(self.num_envs, self.num_actions)
        actions = torch.nan_to_num(actions, nan=0.0, posinf=0.0, neginf=0.0)
        actions = torch.clamp(actions, -self.clip_actions, self.clip_actions)

        self._physics_step(actions)
        self._episode_length_buf += 1
        terms = self._compute_rewards(actions) * self.dt  # (N, R): weight * kernel * dt
        failures = self._compute_failures()  # (N, F) bool
        failed = failures.any(dim=1)
        timed_out = self._episode_length_buf >= self.max_episode_length
        dones = failed | timed_out
        time_outs = timed_out & ~failed
        rewards = terms.sum(dim=1)
        self._episode_sums += terms

        log = self._update_log(dones, time_outs, failures)
        self._reset_envs(dones)
        self._post_reset(dones)
        self._compute_observations()
        extras = {"observations": self._obs_groups(), "time_outs": time_outs, "log": log}
        return self.obs_buf, rewards, dones, extras

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Complete simulation state (all buffers and the RNG state)."""
        state = {name: getattr(self, name).clone() for name in self._state_buffers}
        state["rng_state"] = self._generator.get_state().clone()
        return state

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Restore a state produced by :meth:`state_dict` (same task, ``num_envs`` and device type)."""
        expected = set(self._state_buffers) | {"rng_state"}
        missing, unexpected = expected - set(state_dict), set(state_dict) - expected
        if missing or unexpected:
            raise KeyError(f"state_dict mismatch: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
        for name in expected - {"rng_state"}:
            current = getattr(self, name)
            value = state_dict[name]
            if tuple(value.shape) != tuple(current.shape):
                shapes = f"has shape {tuple(value.shape)}, expected {tuple(current.shape)}"
                raise ValueError(f"state_dict[{name!r}] {shapes}")
            setattr(self, name, value.to(device=self.device, dtype=current.dtype).clone())
        self._generator.set_state(state_dict["rng_state"].cpu())

    def seed(self, seed: int) -> int:
        """Re-seed the private random generator; returns the seed."""
        self._generator.manual_seed(int(seed))
        return int(seed)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Nothing to release."""

    def _rand(self, *shape: int, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
        """Uniform samples in ``[low, high)`` from the private generator."""
        u = torch.rand(*shape, generator=self._generator, device=self.device)
        return low + (high - low) * u

    def _where(self, mask: torch.Tensor, **values: Any) -> None:
        """Set each named buffer to its value (scalar or tensor) where ``mask`` (N,) is True."""
        for name, value in values.items():
            old = getattr(self, name)
            setattr(self, name, torch.where(mask.view(-1, *[1] * (old.ndim - 1)), value, old))

    def _set_layout(self, actor: Segments, critic: Segments | None = None) -> None:
        """Set the actor and critic segments and widths (``num_obs``, ``num_privileged_obs``)."""
        self.obs_segments = OrderedDict(actor)
        self.num_obs = sum(math.prod(s) for _, s in actor)
        self.privileged_obs_segments = None if critic is None else OrderedDict(critic)
        self.num_privileged_obs = None if critic is None else sum(math.prod(s) for _, s in critic)
        if critic is not None and "critic_obs_buf" not in self._state_buffers:
            self._state_buffers.append("critic_obs_buf")

    def _obs_groups(self) -> dict[str, torch.Tensor]:
        groups = {"policy": self.obs_buf}
        if self.critic_obs_buf is not None:
            groups["critic"] = self.critic_obs_buf
        return groups

    def _update_log(
        self, dones: torch.Tensor, time_outs: torch.Tensor, failures: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        done_f = dones.float()
        count = done_f.sum()
        denom = count.clamp_min(1.0)
        parts = [(self._episode_sums * done_f[:, None]).sum(dim=0) / denom / self.max_episode_length_s]
        parts.append((time_outs.float().sum() / denom).reshape(1))
        parts.append((failures & dones[:, None]).float().sum(dim=0) / denom)
        if self.metric_terms:
            parts.append((self._episode_metrics() * done_f[:, None]).sum(dim=0) / denom)
        values = torch.cat(parts)
        self._log_values = torch.where(count > 0, values, self._log_values)
        return dict(zip(self._log_names, self._log_values.unbind(0)))

    def _reset_envs(self, mask: torch.Tensor) -> None:
        self._where(mask, _episode_length_buf=0, _episode_sums=0.0)
        self._reset_state(mask)

    @abstractmethod
    def _setup(self) -> None:
        """Set the layout (:meth:`_set_layout`), ``num_actions`` and the state buffers; ``reset`` follows."""

    @abstractmethod
    def _physics_step(self, actions: torch.Tensor) -> None:
        """Advance the simulation by one policy step."""

    @abstractmethod
    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        """Reward terms (N, R) times their weights, not yet times ``dt``."""

    def _compute_failures(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, len(self.failure_terms), dtype=torch.bool, device=self.device)

    def _episode_metrics(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, len(self.metric_terms), device=self.device)

    @abstractmethod
    def _reset_state(self, mask: torch.Tensor) -> None:
        """Re-sample the state of the envs where ``mask`` is True (torch.where, no host sync)."""

    def _post_reset(self, dones: torch.Tensor) -> None:  # noqa: B027 - optional hook
        """Called after finished envs were reset and before observations are computed."""

    @abstractmethod
    def _compute_observations(self) -> None:
        """Fill ``obs_buf`` (and ``critic_obs_buf``)."""
