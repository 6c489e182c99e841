"""Genesis locomotion example envs (e.g. ``go2_env.py``) for st_rl; needs ``pip install "st-rl[genesis]"``."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.env.adapters.contract import require_attributes

__all__ = ["GenesisVecEnv", "wrap_genesis"]

_REQUIRED = "num_envs num_actions get_observations step reset"


class GenesisVecEnv:
    """Forwarding wrapper around a Genesis example env (rsl_rl 2.x or TensorDict API).

    The example keeps ``extras`` between steps; the wrapper passes ``extras["episode"]`` on only at steps where
    an episode ended, so the last reset's episode is not logged again at every step."""

    def __init__(self, env: Any) -> None:
        fix = "Pass an instance of an env class written like Genesis's examples/locomotion/go2_env.py."
        require_attributes(env, _REQUIRED, "a Genesis locomotion env", fix)
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (e.g. during unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> Any:
        return self.env

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        buf = self.env.episode_length_buf
        self.env.episode_length_buf = value.to(buf.device, buf.dtype)

    def get_observations(self) -> Any:
        out = self.env.get_observations()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out[0], dict(out[1])
        return out

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step; ``extras["episode"]`` is kept only when an episode ended in this step."""
        obs, rewards, dones, extras = self.env.step(actions)
        extras = dict(extras or {})
        if "episode" in extras and not bool(torch.as_tensor(dones).any()):
            extras.pop("episode")
        return obs, rewards, dones, extras


def wrap_genesis(env: Any) -> GenesisVecEnv:
    """Wrap a Genesis example env, e.g. ``wrap_genesis(Go2Env(num_envs=64, ...))``, for st_rl's runners."""
    return env if isinstance(env, GenesisVecEnv) else GenesisVecEnv(env)
