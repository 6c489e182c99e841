"""Gymnasium 1.x vector environments in st_rl's native API; needs ``pip install "st-rl[gymnasium]"``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.env.adapters.contract import episode_length_property

__all__ = ["GymnasiumVecEnv", "make_gymnasium_env"]

_INSTALL_HINT = 'pip install "st-rl[gymnasium]"  (or: pip install "gymnasium[mujoco]>=1.1")'
_CFG_KEYS = "num_envs clip_actions normalize_reward reward_gamma clip_reward max_episode_length"


def _import_gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError as exc:
        raise ImportError(f"The Gymnasium adapter needs the 'gymnasium' package: {_INSTALL_HINT}") from exc
    if not hasattr(gymnasium.vector, "AutoresetMode"):  # gymnasium >= 1.1
        msg = f"gymnasium {gymnasium.__version__} is too old: st_rl needs gymnasium>=1.1. Upgrade: {_INSTALL_HINT}"
        raise ImportError(msg)
    return gymnasium


class GymnasiumVecEnv:
    """A Gymnasium 1.x vector env (``Box`` spaces, any autoreset mode) in st_rl's native API.

    ``dones`` are ``terminated | truncated``, ``extras["time_outs"]`` ``truncated & ~terminated``; a finished
    env's observation is its first after the reset. ``seed``: of the first reset (sub-env ``i``: ``seed + i``)
    and of the action space; ``normalize_reward``: divide rewards by the running std of the discounted return
    (``reward_gamma``), then clip them to ``+-clip_reward`` (``None``: no clip), as CleanRL's PPO (statistics
    in ``state_dict``); ``max_episode_length`` default: the spec's ``max_episode_steps`` (else 1000);
    ``stats_window``: finished episodes kept in :attr:`episode_returns` / :attr:`episode_lengths`."""

    def __init__(
        self,
        env: Any,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        clip_actions: bool = True,
        normalize_reward: bool = False,
        reward_gamma: float = 0.99,
        clip_reward: float | None = 10.0,
        max_episode_length: int | None = None,
        stats_window: int = 100,
    ) -> None:
        gym = _import_gymnasium()
        from gymnasium.vector import AutoresetMode, VectorEnv
        from gymnasium.wrappers.utils import RunningMeanStd

        if not isinstance(env, VectorEnv):
            kind = "a single gymnasium.Env" if isinstance(env, gym.Env) else type(env).__name__
            fix = "Create one with make_gymnasium_env(env_id, n) or gymnasium.make_vec(env_id, n)."
            raise TypeError(f"GymnasiumVecEnv needs a gymnasium vector env, got {kind}. {fix}")
        obs_space: Any = env.single_observation_space
        act_space: Any = env.single_action_space
        if not isinstance(act_space, gym.spaces.Box):
            why = f"st_rl's policies output continuous actions, but this env's action space is {act_space}"
            raise TypeError(f"{why}. Use a task with a Box action space or wrap the env.")
        if not isinstance(obs_space, gym.spaces.Box):
            fix = "flatten it: gymnasium.wrappers.vector.FlattenObservation(env) or make_gymnasium_env(wrappers=...)"
            raise TypeError(f"The observation space {obs_space} is not a Box; {fix}.")
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
        self.env = env
        self.device = torch.device(device)
        self.num_envs = int(env.num_envs)
        self.num_obs = int(np.prod(obs_space.shape))
        self.num_privileged_obs = 0
        self.num_actions = int(np.prod(act_space.shape))
        self._act_shape = (self.num_envs, *act_space.shape)
        self._low = np.broadcast_to(act_space.low, act_space.shape).astype(np.float32)
        self._high = np.broadcast_to(act_space.high, act_space.shape).astype(np.float32)
        self.clip_actions = bool(clip_actions)
        self.normalize_reward = bool(normalize_reward)
        self.reward_gamma = float(reward_gamma)
        self.clip_reward = clip_reward
        spec_limit = env.spec.max_episode_steps if env.spec is not None else None  # VectorEnv declares spec
        self.max_episode_length = int(max_episode_length or spec_limit or 1000)
        self._return_rms = RunningMeanStd()  # of the discounted return
        self.episode_returns: deque[float] = deque(maxlen=stats_window)
        self.episode_lengths: deque[int] = deque(maxlen=stats_window)
        self.num_episodes = self.total_steps = 0
        if seed is not None:
            env.action_space.seed(int(seed))
        self.reset(seed=None if seed is None else int(seed))

    def _to_tensor(self, x: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x), dtype=torch.float32).reshape(self.num_envs, -1).to(self.device)

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        return self._obs, {"observations": {"policy": self._obs}}

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every sub-environment; return ``(obs, extras)``. Running episode statistics restart."""
        obs, _ = self.env.reset(seed=seed)
        self._obs = self._to_tensor(obs)
        n = self.num_envs
        self._ep_return, self._discounted, self._ep_length = np.zeros(n), np.zeros(n), np.zeros(n, dtype=int)
        self._episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step all sub-environments; return ``(obs, rewards, dones, extras)``."""
        a = actions.detach().to("cpu", torch.float32).numpy().reshape(self._act_shape)
        if self.clip_actions:
            a = np.clip(a, self._low, self._high)
        obs, rew, terminated, truncated, _ = self.env.step(a)
        rew = np.asarray(rew, dtype=np.float64).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(truncated, dtype=bool).reshape(self.num_envs)
        dones = terminated | truncated
        self.total_steps += self.num_envs
        self._ep_return += rew
        self._ep_length += 1
        extras: dict[str, Any] = {}
        if dones.any():
            finished_r, finished_l = self._ep_return[dones], self._ep_length[dones]
            self.episode_returns.extend(finished_r.tolist())
            self.episode_lengths.extend(finished_l.tolist())
            self.num_episodes += int(dones.sum())
            extras["log"] = {
                "Episode/return": float(finished_r.mean()),
                "Episode/length": float(finished_l.mean()),
            }
            self._ep_return[dones] = 0.0
            self._ep_length[dones] = 0
            if self.autoreset_mode.name != "SAME_STEP":
                # NEXT_STEP / DISABLED: reset now, so no reset step (with a spurious reward) is ever taken
                obs, _ = self.env.reset(options={"reset_mask": dones.copy()})
        if self.normalize_reward:
            self._discounted = self._discounted * self.reward_gamma + rew
            self._return_rms.update(self._discounted)
            rew = rew / np.sqrt(self._return_rms.var + 1e-8)
            if self.clip_reward is not None:
                rew = np.clip(rew, -self.clip_reward, self.clip_reward)
            self._discounted[dones] = 0.0
        self._obs = self._to_tensor(obs)
        dones_t = torch.as_tensor(dones, device=self.device)
        self._episode_length_buf += 1
        self._episode_length_buf[dones_t] = 0
        extras["observations"] = {"policy": self._obs}
        extras["time_outs"] = torch.as_tensor(truncated & ~terminated, device=self.device)
        rewards = torch.as_tensor(rew, dtype=torch.float32).to(self.device)
        return self._obs, rewards, dones_t, extras

    episode_length_buf = episode_length_property()  # informational: writing it does not shorten episodes

    @property
    def unwrapped(self) -> Any:
        return self.env

    @property
    def cfg(self) -> dict[str, Any]:
        """Settings recorded in the run's ``config.json``."""
        spec = self.env.spec
        settings = {k: getattr(self, k) for k in _CFG_KEYS.split()}
        return {"env_id": spec and spec.id, "autoreset_mode": self.autoreset_mode.name, **settings}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Reward-normalisation statistics."""
        rms = self._return_rms
        return {
            "return_rms": torch.tensor([rms.mean, rms.var, rms.count], dtype=torch.float64),
            "discounted_return": torch.as_tensor(self._discounted.copy()),
        }

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        rms = self._return_rms
        rms.mean, rms.var, rms.count = state_dict["return_rms"].cpu().numpy().astype(np.float64)
        discounted = state_dict["discounted_return"].cpu().numpy().astype(np.float64)
        if discounted.shape != self._discounted.shape:
            raise ValueError(f"discounted_return has shape {discounted.shape}, expected ({self.num_envs},)")
        self._discounted = discounted

    def seed(self, seed: int) -> int:
        """Reset every sub-environment with ``seed`` (sub-env ``i`` gets ``seed + i``)."""
        self.reset(seed=int(seed))
        return int(seed)

    def close(self) -> None:
        self.env.close()


def make_gymnasium_env(
    env_id: str,
    num_envs: int = 1,
    seed: int | None = 0,
    device: str | torch.device = "cpu",
    vectorization_mode: str = "sync",
    normalize_reward: bool = False,
    reward_gamma: float = 0.99,
    clip_reward: float | None = 10.0,
    clip_actions: bool = True,
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    **env_kwargs: Any,
) -> GymnasiumVecEnv:
    """Create ``num_envs`` copies of a registered Gymnasium task (e.g. ``"HalfCheetah-v5"``) as one st_rl env
    with ``SAME_STEP`` autoreset, ``"sync"`` or ``"async"`` (one process per sub-env); ``wrappers`` wrap each
    sub-env, ``env_kwargs`` go to the task; the other arguments are :class:`GymnasiumVecEnv`'s."""
    gym = _import_gymnasium()
    if vectorization_mode not in ("sync", "async"):
        raise ValueError(f"vectorization_mode must be 'sync' or 'async', got {vectorization_mode!r}")
    same_step = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    wrappers = list(wrappers) if wrappers else None
    try:
        vec = gym.make_vec(env_id, int(num_envs), vectorization_mode, same_step, wrappers, **env_kwargs)
    except gym.error.DependencyNotInstalled as exc:
        msg = f"{env_id} needs a simulator that is not installed ({exc}). For the MuJoCo tasks"
        raise ImportError(f"{msg}: {_INSTALL_HINT}") from exc
    return GymnasiumVecEnv(vec, device, seed, clip_actions, normalize_reward, reward_gamma, clip_reward)
