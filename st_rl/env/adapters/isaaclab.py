"""Isaac Lab's ``RslRlVecEnvWrapper`` (either generation) needs no translation: :func:`wrap_isaaclab` checks it."""

from __future__ import annotations

from typing import Any

from st_rl.env.adapters._common import require_attributes
from st_rl.env.adapters.apis import detect_api

__all__ = ["isaaclab_generation", "wrap_isaaclab"]

_REQUIRED = "num_envs num_actions device max_episode_length episode_length_buf get_observations step"
_FIX = (
    "Wrap the Isaac Lab environment with isaaclab_rl.rsl_rl.RslRlVecEnvWrapper(env) (the wrapper Isaac Lab's "
    "rsl_rl scripts use) and pass the wrapper to st_rl."
)


def _is_raw_isaaclab(env: Any) -> bool:
    """Whether ``env`` is a ``ManagerBasedRLEnv`` / ``DirectRLEnv`` (or a Gymnasium wrapper of one)."""
    inner = getattr(env, "unwrapped", None)
    return hasattr(inner, "observation_manager") or hasattr(inner, "_get_observations")


def isaaclab_generation(env: Any) -> str:
    """``"rsl_rl2"`` (``(obs, extras)`` observations) or ``"tensordict"`` (TensorDict of groups)."""
    return detect_api(env.get_observations())


def wrap_isaaclab(env: Any) -> Any:
    """Check that ``env`` is an Isaac Lab ``RslRlVecEnvWrapper`` (either generation) and return it."""
    if not hasattr(env, "num_actions") and _is_raw_isaaclab(env):
        raise TypeError(f"{type(env).__name__} is a raw Isaac Lab environment. {_FIX}")
    require_attributes(env, _REQUIRED, "an Isaac Lab RslRlVecEnvWrapper", _FIX)
    if isaaclab_generation(env) == "legged_gym":
        raise TypeError(
            f"{type(env).__name__}.get_observations() returns a bare tensor (the legged_gym API). Isaac Lab's "
            "RslRlVecEnvWrapper returns (obs, extras) or a TensorDict; pass a legged_gym env to the runner "
            "directly instead."
        )
    return env
