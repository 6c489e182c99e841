"""Genesis environments (the env classes of Genesis's legged-locomotion examples) for st_rl.

Genesis's example envs (``examples/locomotion/go2_env.py`` and the like) already follow the rsl_rl 2.x (or,
newer, the TensorDict) API. :class:`GenesisVecEnv` forwards everything and fixes the one thing that would
mislead st_rl's logs: the example keeps ``extras`` between steps, so ``extras["episode"]`` of the last reset
would be logged at every later step; the wrapper passes it on only at steps where an episode ended.

Needs ``pip install "st-rl[genesis]"`` and ``genesis.init(...)`` before the env is built.
"""

from __future__ import annotations

from typing import Any

import torch

from st_rl.env.adapters._common import require_attributes

__all__ = ["GenesisVecEnv", "wrap_genesis"]

_REQUIRED = ("num_envs", "num_actions", "get_observations", "step", "reset")


class GenesisVecEnv:
    """Forwarding wrapper around a Genesis example env (see the module docstring).

    Attributes not defined here (``num_obs``, ``num_privileged_obs``, ``max_episode_length``, ``device``,
    ``dt``, ``scene``, ``robot``, ...) are read from the wrapped env; ``episode_length_buf`` is read and
    written through.

    Args:
        env: the Genesis env instance.

    Raises:
        TypeError: ``env`` lacks a method or attribute of the interface (the message names it).
    """

    def __init__(self, env: Any) -> None:
        require_attributes(
            env,
            _REQUIRED,
            "a Genesis locomotion env",
            "Pass an instance of an env class written like Genesis's examples/locomotion/go2_env.py.",
        )
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (e.g. during unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> Any:
        """The Genesis env."""
        return self.env

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Per-env step counter of the Genesis env (writable, for ``init_at_random_ep_len``)."""
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        buf = self.env.episode_length_buf
        self.env.episode_length_buf = value.to(buf.device, buf.dtype)

    def get_observations(self) -> Any:
        """Whatever the Genesis env returns: ``(obs, extras)`` or a TensorDict of groups."""
        out = self.env.get_observations()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out[0], dict(out[1])
        return out

    def reset(self) -> Any:
        """Reset every env (forwarded)."""
        return self.env.reset()

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step; ``extras["episode"]`` is kept only when an episode ended in this step."""
        obs, rewards, dones, extras = self.env.step(actions)
        extras = dict(extras or {})
        if "episode" in extras and not bool(torch.as_tensor(dones).any()):
            extras.pop("episode")
        return obs, rewards, dones, extras


def wrap_genesis(env: Any) -> GenesisVecEnv:
    """Wrap a Genesis example env for st_rl's runners (see :class:`GenesisVecEnv`).

    Example::

        import genesis as gs
        gs.init(backend=gs.cpu)
        env = wrap_genesis(Go2Env(num_envs=64, env_cfg=..., obs_cfg=..., reward_cfg=..., command_cfg=...))
        runner = OnPolicyRunner(env, train_cfg, log_dir, device="cpu")
    """
    return env if isinstance(env, GenesisVecEnv) else GenesisVecEnv(env)
