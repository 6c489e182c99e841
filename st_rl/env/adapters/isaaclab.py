"""Isaac Lab environments (``isaaclab_rl.rsl_rl.RslRlVecEnvWrapper``) for st_rl.

The wrapper already speaks an API :class:`st_rl.env.EnvAdapter` accepts, in either generation: rsl_rl 2.x
(st_gym, Isaac Lab up to 2.1: ``(obs, extras)`` with groups in ``extras["observations"]``, long 0/1 dones) or
TensorDict (rsl_rl >= 3, Isaac Lab >= 2.2; no ``num_obs`` / ``num_privileged_obs``). :func:`wrap_isaaclab`
translates nothing: it checks the interface and says what is wrong (a raw ``ManagerBasedRLEnv`` /
``DirectRLEnv`` instead of the wrapper, missing attributes) before a runner is built. The tests check it against
fakes of both generations (Isaac Lab cannot be installed on CI).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from st_rl.env.adapters._common import missing_attributes, observation_api, require_attributes

__all__ = ["isaaclab_generation", "wrap_isaaclab"]

_REQUIRED = (
    "num_envs",
    "num_actions",
    "device",
    "max_episode_length",
    "episode_length_buf",
    "get_observations",
    "step",
)
_FIX = (
    "Wrap the Isaac Lab environment with isaaclab_rl.rsl_rl.RslRlVecEnvWrapper(env) (the wrapper Isaac Lab's "
    "rsl_rl scripts use) and pass the wrapper to st_rl."
)


@runtime_checkable
class _GymnasiumWrapper(Protocol):
    """A Gymnasium env or wrapper: ``unwrapped`` is the innermost env."""

    unwrapped: Any


@runtime_checkable
class _ManagerBasedEnv(Protocol):
    """An Isaac Lab ``ManagerBasedRLEnv``."""

    observation_manager: Any


@runtime_checkable
class _DirectEnv(Protocol):
    """An Isaac Lab ``DirectRLEnv``."""

    def _get_observations(self) -> Any: ...


def _is_raw_isaaclab(env: Any) -> bool:
    """Whether ``env`` is an Isaac Lab env (or a Gymnasium wrapper of one) without the rsl_rl wrapper."""
    return isinstance(env, _GymnasiumWrapper) and isinstance(env.unwrapped, (_ManagerBasedEnv, _DirectEnv))


def isaaclab_generation(env: Any) -> str:
    """``"rsl_rl2"`` (``(obs, extras)`` observations) or ``"tensordict"`` (TensorDict of groups)."""
    return observation_api(env)


def wrap_isaaclab(env: Any) -> Any:
    """Check that ``env`` is an Isaac Lab ``RslRlVecEnvWrapper`` (either generation) and return it.

    Example::

        env = gym.make("Isaac-Velocity-Flat-Anymal-D-v0", cfg=env_cfg)   # inside Isaac Lab's app launcher
        env = wrap_isaaclab(RslRlVecEnvWrapper(env))
        runner = OnPolicyRunner(env, train_cfg, log_dir, device=env.device)

    Args:
        env: the wrapped Isaac Lab environment.

    Returns:
        ``env`` itself: :class:`st_rl.env.EnvAdapter` handles both generations natively.

    Raises:
        TypeError: ``env`` is a raw Isaac Lab env (not wrapped), lacks attributes of the interface, or its
            ``get_observations()`` returns a bare tensor (the legged_gym API, not Isaac Lab's).
    """
    if "num_actions" in missing_attributes(env, _REQUIRED) and _is_raw_isaaclab(env):
        raise TypeError(f"{type(env).__name__} is a raw Isaac Lab environment. {_FIX}")
    require_attributes(env, _REQUIRED, "an Isaac Lab RslRlVecEnvWrapper", _FIX)
    api = isaaclab_generation(env)
    if api == "legged_gym":
        raise TypeError(
            f"{type(env).__name__}.get_observations() returns a bare tensor (the legged_gym API). Isaac Lab's "
            "RslRlVecEnvWrapper returns (obs, extras) or a TensorDict; pass a legged_gym env to the runner "
            "directly instead."
        )
    return env
