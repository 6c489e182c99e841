"""Present a native st_rl env through the two other environment APIs st_rl accepts (for tests and docs).

:class:`LeggedGymStyle` (5-tuple ``step``, bool dones, ``infos["episode"]``), :class:`IsaacLabStyle` (rsl_rl
2.x / st_gym: long 0/1 dones, ``num_privileged_obs == 0`` without a critic, no ``obs_segments``) and
:class:`TensorDictStyle` (rsl_rl >= 3). All forward the state, metrics and ``episode_length_buf``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["IsaacLabStyle", "LeggedGymStyle", "TensorDictStyle"]


def _episode_key(log_key: str) -> str:
    """Map an Isaac Lab style log key to a legged_gym ``infos["episode"]`` key (no "/")."""
    prefix, _, name = log_key.partition("/")
    if not name:
        return prefix
    if prefix == "Episode_Reward":
        return f"rew_{name}"
    if prefix == "Episode_Termination":
        return "timeout_ratio" if name == "time_out" else f"termination_{name}"
    return name.replace("/", "_")


class _ShimBase:
    """Forwarding common to all shims: the attributes of :attr:`FORWARDED` and ``episode_length_buf``."""

    FORWARDED = frozenset(
        ("num_envs", "num_actions", "max_episode_length", "device", "dt", "cfg", "tracking_error", "CoT",
         "state_dict", "load_state_dict", "seed", "close")
    )  # fmt: skip

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name in _ShimBase.FORWARDED:  # AttributeError where the wrapped env has none (hasattr is False)
            return getattr(self.__dict__["env"], name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def unwrapped(self) -> Any:
        """The wrapped native env."""
        return getattr(self.env, "unwrapped", self.env)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Per-env step counter of the wrapped env (writable)."""
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def _critic(self, extras: dict[str, Any]) -> torch.Tensor | None:
        return extras["observations"].get("critic")


class LeggedGymStyle(_ShimBase):
    """legged_gym / parkour API over a native env.

    ``step(a) -> (obs, privileged_obs | None, rewards, dones (bool), infos)`` with ``infos["time_outs"]`` and
    ``infos["episode"]`` (the native ``extras["log"]`` with keys renamed: ``rew_<term>``, ``timeout_ratio``,
    ``termination_<failure>``, ``<metric>``). ``reset() -> (obs, privileged_obs)``.
    """

    @property
    def num_obs(self) -> int:
        """Actor observation width."""
        return self.env.num_obs

    @property
    def num_privileged_obs(self) -> int | None:
        """Critic observation width, None without a critic group."""
        return self.env.num_privileged_obs or None

    @property
    def obs_segments(self) -> Any:
        """Ordered name -> shape map of the actor observation."""
        return self.env.obs_segments

    @property
    def privileged_obs_segments(self) -> Any:
        """Ordered name -> shape map of the critic observation, or None."""
        return self.env.privileged_obs_segments

    def get_observations(self) -> torch.Tensor:
        """Current actor observations."""
        return self.env.get_observations()[0]

    def get_privileged_observations(self) -> torch.Tensor | None:
        """Current critic observations, or None without a critic group."""
        return self._critic(self.env.get_observations()[1])

    def reset(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Reset all envs; return ``(obs, privileged_obs | None)``."""
        obs, extras = self.env.reset()
        return obs, self._critic(extras)

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step; return the legged_gym 5-tuple."""
        obs, rewards, dones, extras = self.env.step(actions)
        infos: dict[str, Any] = {"time_outs": extras["time_outs"]}
        if "log" in extras:
            infos["episode"] = {_episode_key(k): v for k, v in extras["log"].items()}
        return obs, self._critic(extras), rewards, dones.bool(), infos


class IsaacLabStyle(_ShimBase):
    """Isaac Lab ``RslRlVecEnvWrapper`` (rsl_rl 2.x) / st_gym API over a native env.

    Same 4-tuple as the native API but ``dones`` is a LONG 0/1 tensor, ``num_privileged_obs`` is 0 without a
    critic group and there is no ``obs_segments`` attribute.
    """

    @property
    def num_obs(self) -> int:
        """Width of the "policy" group."""
        return self.env.num_obs

    @property
    def num_privileged_obs(self) -> int:
        """Width of the "critic" group, 0 when absent."""
        return self.env.num_privileged_obs or 0

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Return ``(obs, {"observations": groups})``."""
        return self.env.get_observations()

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all envs; return ``(obs, extras)``."""
        return self.env.reset()

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step; return ``(obs, rewards, dones (long 0/1), extras)``."""
        obs, rewards, dones, extras = self.env.step(actions)
        return obs, rewards, dones.to(torch.long), extras


class TensorDictStyle(_ShimBase):
    """rsl_rl >= 3 API over a native env (needs the optional ``tensordict`` package).

    ``get_observations() -> TensorDict({"policy", ["critic"]}, batch_size=[N])``;
    ``step(a) -> (TensorDict, rewards, dones (long 0/1, as Isaac Lab returns), extras)`` where ``extras`` holds
    ``"time_outs"`` and ``"log"`` (no ``"observations"``). No ``num_obs`` / ``num_privileged_obs`` attributes.
    """

    def __init__(self, env: Any) -> None:
        try:
            from tensordict import TensorDict
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "TensorDictStyle needs the 'tensordict' package (pip install tensordict)"
            ) from exc
        super().__init__(env)
        self._td_cls = TensorDict

    def _to_td(self, extras: dict[str, Any]) -> Any:
        return self._td_cls(dict(extras["observations"]), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> Any:
        """Current observation groups as a TensorDict."""
        return self._to_td(self.env.get_observations()[1])

    def reset(self) -> tuple[Any, dict[str, Any]]:
        """Reset all envs; return ``(TensorDict, extras)``."""
        _, extras = self.env.reset()
        return self._to_td(extras), {}

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step; return ``(TensorDict, rewards, dones (long), extras)``."""
        _, rewards, dones, extras = self.env.step(actions)
        out = {k: v for k, v in extras.items() if k != "observations"}
        return self._to_td(extras), rewards, dones.to(torch.long), out
