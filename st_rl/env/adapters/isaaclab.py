"""Isaac Lab's ``RslRlVecEnvWrapper`` (either generation) needs no translation: :func:`wrap_isaaclab` checks it."""

from __future__ import annotations

from typing import Any

from st_rl.env.adapters.apis import detect_api
from st_rl.env.adapters.contract import require_attributes

__all__ = ["isaaclab_generation", "wrap_isaaclab"]

_REQUIRED = "num_envs num_actions device max_episode_length episode_length_buf get_observations step"
_FIX = "Wrap it in isaaclab_rl.rsl_rl.RslRlVecEnvWrapper(env), as Isaac Lab's rsl_rl scripts do."


def isaaclab_generation(env: Any) -> str:
    """``"rsl_rl2"`` (``(obs, extras)`` observations) or ``"tensordict"`` (TensorDict of groups)."""
    return detect_api(env.get_observations())


def wrap_isaaclab(env: Any) -> Any:
    """Check that ``env`` is an Isaac Lab ``RslRlVecEnvWrapper`` (either generation) and return it."""
    inner = getattr(env, "unwrapped", None)  # a raw ManagerBasedRLEnv / DirectRLEnv (or a wrapper of one)?
    raw = hasattr(inner, "observation_manager") or hasattr(inner, "_get_observations")
    if not hasattr(env, "num_actions") and raw:
        raise TypeError(f"{type(env).__name__} is a raw Isaac Lab environment. {_FIX}")
    require_attributes(env, _REQUIRED, "an Isaac Lab RslRlVecEnvWrapper", _FIX)
    if isaaclab_generation(env) == "legged_gym":
        why = f"{type(env).__name__}.get_observations() returns a bare tensor (legged_gym API)"
        raise TypeError(f"{why}, not (obs, extras) or a TensorDict; pass it to the runner directly.")
    return env
