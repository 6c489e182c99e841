"""A native st_rl env presented through the legged_gym, Isaac Lab and rsl_rl >= 3 APIs (for tests and docs)."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.env.adapters.contract import forwarded

__all__ = ["IsaacLabStyle", "LeggedGymStyle", "TensorDictStyle"]

_FORWARDED = "num_envs num_actions max_episode_length device dt cfg tracking_error CoT state_dict"


def _episode_key(log_key: str) -> str:
    prefix, _, name = log_key.partition("/")
    if not name:
        return prefix
    if prefix == "Episode_Reward":
        return f"rew_{name}"
    if prefix == "Episode_Termination":
        return "timeout_ratio" if name == "time_out" else f"termination_{name}"
    return name.replace("/", "_")


class _ShimBase:
    """Forwards the attributes named in ``FORWARDED`` and ``episode_length_buf``."""

    FORWARDED = frozenset([*_FORWARDED.split(), "load_state_dict", "seed", "close"])

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name in type(self).FORWARDED:  # AttributeError where the wrapped env has none (hasattr is False)
            return getattr(self.__dict__["env"], name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)

    episode_length_buf = forwarded("episode_length_buf")


class LeggedGymStyle(_ShimBase):
    """legged_gym / parkour API: ``step(a) -> (obs, privileged_obs | None, rewards, dones (bool), infos)``.

    ``infos["episode"]``: ``extras["log"]`` as ``rew_<term>``, ``timeout_ratio``, ``termination_<failure>``.
    """

    FORWARDED = _ShimBase.FORWARDED | {"num_obs", "obs_segments", "privileged_obs_segments"}

    @property
    def num_privileged_obs(self) -> int | None:
        """Critic observation width, None without a critic group."""
        return self.env.num_privileged_obs or None

    def get_observations(self) -> torch.Tensor:
        return self.env.get_observations()[0]

    def get_privileged_observations(self) -> torch.Tensor | None:
        return self.env.get_observations()[1]["observations"].get("critic")

    def reset(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        obs, extras = self.env.reset()
        return obs, extras["observations"].get("critic")

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, dones, extras = self.env.step(actions)
        infos: dict[str, Any] = {"time_outs": extras["time_outs"]}
        if "log" in extras:
            infos["episode"] = {_episode_key(k): v for k, v in extras["log"].items()}
        return obs, extras["observations"].get("critic"), rewards, dones.bool(), infos


class IsaacLabStyle(_ShimBase):
    """Isaac Lab ``RslRlVecEnvWrapper`` (rsl_rl 2.x) / st_gym API: the native 4-tuple with long 0/1 dones,
    ``num_privileged_obs`` 0 without a critic group and no ``obs_segments``."""

    FORWARDED = _ShimBase.FORWARDED | {"num_obs", "get_observations", "reset"}

    @property
    def num_privileged_obs(self) -> int:
        """Width of the "critic" group, 0 when absent."""
        return self.env.num_privileged_obs or 0

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, dones, extras = self.env.step(actions)
        return obs, rewards, dones.to(torch.long), extras


class TensorDictStyle(_ShimBase):
    """rsl_rl >= 3 API (needs ``tensordict``): observation groups as a TensorDict, long 0/1 dones, ``extras``
    without ``"observations"``, no ``num_obs`` / ``num_privileged_obs``."""

    def __init__(self, env: Any) -> None:
        try:
            from tensordict import TensorDict
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("TensorDictStyle needs tensordict: pip install tensordict") from exc
        super().__init__(env)
        self._td_cls = TensorDict

    def _to_td(self, extras: dict[str, Any]) -> Any:
        return self._td_cls(dict(extras["observations"]), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> Any:
        return self._to_td(self.env.get_observations()[1])

    def reset(self) -> tuple[Any, dict[str, Any]]:
        _, extras = self.env.reset()
        return self._to_td(extras), {}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict[str, Any]]:
        _, rewards, dones, extras = self.env.step(actions)
        out = {k: v for k, v in extras.items() if k != "observations"}
        return self._to_td(extras), rewards, dones.to(torch.long), out
