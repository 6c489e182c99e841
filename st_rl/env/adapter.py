"""One adapter for every environment API st_rl accepts (:mod:`st_rl.env.adapters.apis`), checked against the
contract (:mod:`st_rl.env.adapters.contract`) with metadata only."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist

from st_rl.config.defaults import RUNNER_DEFAULTS
from st_rl.env.adapters.apis import API_NAMES as API_NAMES  # re-exported: st_rl.env.adapter's public names
from st_rl.env.adapters.apis import ObservationGroups as ObservationGroups
from st_rl.env.adapters.apis import detect_api, group_mapping, resolve_obs_groups
from st_rl.env.adapters.contract import EnvOutputError, OutputChecker, forwarded, require_attributes
from st_rl.env.adapters.contract import NonFiniteError as NonFiniteError
from st_rl.env.adapters.contract import describe_value as describe_value
from st_rl.env.layout import Shape, normalize_segments
from st_rl.utils.distributed import is_distributed


def _declared(env: Any, name: str) -> Any:
    return getattr(env, name, None)


def _num_actions(env: Any) -> int:
    num_actions = _declared(env, "num_actions")
    if num_actions is None:
        raise TypeError(f"{type(env).__name__} has no 'num_actions' attribute.")
    return int(num_actions)


def _optional(name: str, convert: Callable[[Any], Any] | None = None, doc: str | None = None) -> Any:
    """A read-only property: the env's attribute ``name`` (through ``convert``), None where it has none."""

    def get(self: EnvAdapter) -> Any:
        value = _declared(self.env, name)
        return value if value is None or convert is None else convert(value)

    return property(get, doc=doc)


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """The sizes and observation layouts (name -> shape) a policy is built from (:mod:`st_rl.modules.factory`)."""

    num_obs: int | None
    num_critic_obs: int | None
    num_actions: int
    obs_segments: Any = None
    critic_obs_segments: Any = None
    amp_obs_dim: int | None = None

    @classmethod
    def from_env(cls, env: Any) -> EnvSpec:
        """Read the spec from an environment's attributes (``num_critic_obs`` or ``num_privileged_obs``, 0 or None:
        the actor's; ``critic_obs_segments`` or ``privileged_obs_segments``)."""
        num_obs, amp, layout = (_declared(env, a) for a in ("num_obs", "amp_obs_dim", "obs_segments"))
        num_critic_obs = _declared(env, "num_critic_obs") or _declared(env, "num_privileged_obs") or num_obs
        critic_layout = _declared(env, "critic_obs_segments") or _declared(env, "privileged_obs_segments")
        return cls(
            num_obs, num_critic_obs, _num_actions(env), layout, critic_layout, int(amp) if amp else None
        )


class EnvAdapter:
    """Presents any supported environment as ``(obs, critic_obs, rewards, dones, infos)`` on ``device``.

    ``device``: the training device (None: the env's, else CPU); ``obs_groups``: ``{"policy": [...],
    "critic": [...]}`` groups, concatenated in order; ``check_finite``: ``"rollout"`` raises NaN/Inf in
    :meth:`raise_if_nonfinite` (one host sync per rollout), ``"step"`` at the offending step, ``"off"``
    never."""

    def __init__(
        self,
        env: Any,
        device: str | torch.device | None = "cpu",
        obs_groups: Mapping[str, Sequence[str]] | None = None,
        check_finite: str = RUNNER_DEFAULTS.check_finite,
    ) -> None:
        if check_finite not in ("rollout", "step", "off"):
            raise ValueError(f"check_finite must be 'rollout', 'step' or 'off', got {check_finite!r}")
        if isinstance(env, type):
            raise TypeError(f"got the class {env.__name__}: pass an instance, {env.__name__}(...)")
        fix = "st_rl needs num_envs, num_actions, get_observations() and step(actions) (see st_rl.env.VecEnv)"
        require_attributes(env, "num_envs step get_observations", "a vectorised environment", fix)
        self.env = env
        env_device = _declared(env, "device")
        self.env_device: torch.device | None = None if env_device is None else torch.device(env_device)
        self.device = torch.device(device if device is not None else (self.env_device or "cpu"))
        self.check_finite = check_finite
        self.num_envs = int(env.num_envs)
        self._out = OutputChecker(type(env).__name__, self.num_envs, self.device, self.env_device)
        first = env.get_observations()
        self.api = detect_api(first)
        self._obs_groups = resolve_obs_groups(self.api, first, obs_groups)
        if self.api == "legged_gym":
            n = _declared(env, "num_privileged_obs")
            self.has_critic_group = bool(n) and env.get_privileged_observations() is not None
        else:
            self.has_critic_group = bool(self._obs_groups and self._obs_groups.get("critic"))
        self._widths: dict[str, int] = {}  # empty while the first observation fixes them
        obs, critic_obs, _ = self._read_observations(first)
        self.num_obs = int(obs.shape[-1])
        self.num_critic_obs = int(critic_obs.shape[-1])
        self._widths = {"obs": self.num_obs, "critic": self.num_critic_obs}
        self.num_actions = _num_actions(env)
        self.obs_segments = self._layout("obs_segments", "policy", first)
        critic_layout = self._layout("privileged_obs_segments", "critic", first)
        if critic_layout is None:
            critic_layout = normalize_segments(_declared(env, "critic_obs_segments"))
        self.critic_obs_segments = critic_layout if self.has_critic_group else self.obs_segments
        self._group_names = ["policy", "critic", "rewards"]
        self._nonfinite = torch.zeros(len(self._group_names), dtype=torch.bool, device=self.device)

    def _layout(self, attr: str, key: str, first: Any) -> OrderedDict[str, Shape] | None:
        layout = normalize_segments(_declared(self.env, attr))
        if layout is not None:
            return layout
        if self.api == "tensordict" and self._obs_groups and self._obs_groups.get(key):
            groups = group_mapping(self.api, first)
            return OrderedDict((g, tuple(groups[g].shape[1:]) or (1,)) for g in self._obs_groups[key])
        return None

    def _concat(self, groups: Mapping[str, Any], names: list[str], method: str) -> torch.Tensor:
        where = "obs" if self.api == "tensordict" else "extras['observations']"
        parts = [self._out.observation(groups[n], method, f"{where}[{n!r}]", group=True) for n in names]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _split_observations(self, raw: Any, privileged: Any, method: str, privileged_method: str = ""):
        """Checked ``(obs, critic_obs, extras)`` of one raw observation payload of ``method``."""
        if self.api == "legged_gym":
            obs = self._out.observation(raw, method, "obs")
            self._out.check_width(obs, self._widths.get("obs"), method, "obs")
            if privileged is None:
                return obs, obs, {}
            method = privileged_method or method
            critic = self._out.observation(privileged, method, "privileged_obs")
            self._out.check_width(critic, self._widths.get("critic"), method, "privileged_obs")
            return obs, critic, {}
        groups = group_mapping(self.api, raw)
        assert self._obs_groups is not None
        if self.api == "rsl_rl2" and not self._obs_groups["policy"]:
            obs = self._out.observation(raw[0], method, "obs")
            actor_label = "obs"
        else:
            obs = self._concat(groups, self._obs_groups["policy"], method)
            actor_label = f"observation groups {self._obs_groups['policy']}"
        self._out.check_width(obs, self._widths.get("obs"), method, actor_label)
        critic_names = self._obs_groups.get("critic")
        critic = self._concat(groups, critic_names, method) if critic_names else obs
        if critic_names:
            label = f"observation groups {critic_names}"
            self._out.check_width(critic, self._widths.get("critic"), method, label)
        extras = dict(raw[1]) if self.api == "rsl_rl2" and raw[1] is not None else {}
        if self.api == "tensordict" and "ref_obs" in groups:  # AMP windows, as the other APIs carry them
            extras["observations"] = {"ref_obs": groups["ref_obs"]}
        return obs, critic, extras

    def _read_observations(self, raw: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        legged_critic = self.api == "legged_gym" and self.has_critic_group
        priv = self.env.get_privileged_observations() if legged_critic else None
        return self._split_observations(raw, priv, "get_observations", "get_privileged_observations")

    def get_observations(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, critic, extras = self._read_observations(self.env.get_observations())
        self._check(obs, critic, None)
        return obs, critic, extras

    def reset(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        self.env.reset()
        return self.get_observations()

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step the environment (actions moved to :attr:`env_device`); ``(obs, critic_obs, rewards, dones, infos)``."""
        if self.env_device is not None and self.env_device != actions.device:
            actions = actions.to(self.env_device)
        out = self.env.step(actions)
        legged = self.api == "legged_gym"
        form = "(obs, privileged_obs, rewards, dones, infos)" if legged else "(obs, rewards, dones, extras)"
        if not isinstance(out, (tuple, list)) or len(out) != (5 if legged else 4):
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else describe_value(out)
            api = f"the {self.api} API (from get_observations()) returns {form}. Fix: return {form}."
            raise EnvOutputError(f"{type(self.env).__name__}.step() returned {got}; {api}")
        infos_name = "infos" if legged else "extras"
        raw_infos = out[-1]
        if raw_infos is not None and not isinstance(raw_infos, Mapping):
            raise self._out.error("step", infos_name, raw_infos, "expected a dict", "return a dict (or None)")
        infos = dict(raw_infos or {})
        if legged:
            raw_obs, priv, rewards, dones, _ = out
            priv = priv if self.has_critic_group else None
            obs, critic, _ = self._split_observations(raw_obs, priv, "step")
        else:
            raw_obs, rewards, dones, _ = out
            payload = (raw_obs, infos) if self.api == "rsl_rl2" else raw_obs
            obs, critic, split_extras = self._split_observations(payload, None, "step")
            if self.api == "tensordict" and "observations" in split_extras:
                infos["observations"] = {**(infos.get("observations") or {}), **split_extras["observations"]}
        rewards = self._out.per_env(rewards, "step", "rewards", rewards=True)
        dones = self._out.per_env(dones, "step", "dones", rewards=False)
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            infos["time_outs"] = self._out.per_env(time_outs, "step", f"{infos_name}['time_outs']", False)
        self._check(obs, critic, rewards)
        return obs, critic, rewards, dones, infos

    def _check(self, obs: torch.Tensor, critic: torch.Tensor, rewards: torch.Tensor | None) -> None:
        if self.check_finite == "off":
            return
        flags = [~torch.isfinite(obs).all(), ~torch.isfinite(critic).all()]
        flags.append(~torch.isfinite(rewards).all() if rewards is not None else flags[0] & False)
        self._nonfinite |= torch.stack(flags)
        if self.check_finite == "step":
            self.raise_if_nonfinite()

    def sync_nonfinite(self) -> None:
        """Multi-rank runs: share the NaN/Inf flags of all ranks, so that all raise (or none does)."""
        if self.check_finite == "off" or not is_distributed():
            return
        flags = self._nonfinite.to(torch.int32)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        self._nonfinite.copy_(flags.bool())

    def raise_if_nonfinite(self) -> None:
        """Raise :class:`NonFiniteError` naming the offending groups, if any NaN/Inf was seen."""
        if self.check_finite == "off":
            return
        bad = self._nonfinite.tolist()
        if any(bad):
            names = [n for n, b in zip(self._group_names, bad) if b]
            where = ", ".join(
                f"observation group '{self._source_name(n)}'" if n != "rewards" else "rewards" for n in names
            )
            self._nonfinite.zero_()
            fix = "Fix the environment or clip the observations; check_finite='step' stops at the exact step."
            raise NonFiniteError(f"The environment returned NaN or Inf in {where}. {fix}")

    def _source_name(self, key: str) -> str:
        if self._obs_groups and self._obs_groups.get(key):
            return "+".join(self._obs_groups[key])
        if key == "critic" and not self.has_critic_group:
            return "policy"
        return "privileged" if (key == "critic" and self.api == "legged_gym") else key

    max_episode_length = forwarded("max_episode_length")
    episode_length_buf = forwarded("episode_length_buf")

    # Optional environment attributes: None (False for load_state_dict) where the environment declares none.
    dt = _optional("dt", float, "Seconds per policy step.")
    cfg = _optional("cfg", lambda cfg: cfg if isinstance(cfg, dict) else None, "The env's ``cfg`` if a dict.")
    joint_names = _optional("joint_names", lambda names: [str(n) for n in names])
    default_joint_pos = _optional("default_joint_pos", doc="Joint targets of zero actions, in action order.")

    def state_dict(self) -> Any:
        state_dict = _declared(self.env, "state_dict")
        return state_dict() if callable(state_dict) else None

    def load_state_dict(self, state: Any) -> bool:
        """Restore a :meth:`state_dict`; whether the environment took it."""
        load_state_dict = _declared(self.env, "load_state_dict")
        if callable(load_state_dict):
            load_state_dict(state)
        return callable(load_state_dict)

    @property
    def amp_obs_dim(self) -> int | None:
        """Width of one flattened AMP window: ``amp_obs_dim``, else that of ``extras["observations"]["ref_obs"]``."""
        declared = _declared(self.env, "amp_obs_dim")
        if declared:
            return int(declared)
        _, _, extras = self.get_observations()
        ref = (extras.get("observations") or {}).get("ref_obs")
        return int(ref[0].numel()) if ref is not None else None

    # st_gym environments expose their metrics as attributes; the first found of each list is used.
    LEGACY_METRIC_ATTRIBUTES = {"velrmsd": ("tracking_error", "lin_vel_rmsd"), "CoT": ("CoT",)}
    # learn() returns these two (st_gym scripts unpack them), 0 when the environment has no such metric.
    RETURNED_METRICS = ("velrmsd", "CoT")

    def task_metrics(self) -> dict[str, torch.Tensor]:
        """The env's ``task_metrics()`` (else its :attr:`LEGACY_METRIC_ATTRIBUTES`) as mean scalar tensors."""
        declared: Any = _declared(self.env, "task_metrics")
        items: list[tuple[str, Any]] = []
        if declared is not None:
            items = list(declared().items())
        else:
            unwrapped = _declared(self.env, "unwrapped")
            base = self.env if unwrapped is None else unwrapped
            for name, attrs in self.LEGACY_METRIC_ATTRIBUTES.items():
                value = next((v for v in (_declared(base, a) for a in attrs) if v is not None), None)
                if value is not None:
                    items.append((name, value))
        return {k: torch.as_tensor(v, dtype=torch.float32).to(self.device).mean() for k, v in items}

    def returned_metrics(self, metrics: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """What ``learn()`` returns: the :attr:`RETURNED_METRICS` of ``metrics`` (zero when absent)."""
        zero = torch.zeros((), device=self.device)
        first, second = (metrics.get(name, zero) for name in self.RETURNED_METRICS)
        return first, second

    def randomize_episode_lengths(self) -> None:
        """Spread episode start times: ``episode_length_buf ~ U[0, max_episode_length)`` (warns if impossible)."""
        missing = [a for a in ("episode_length_buf", "max_episode_length") if _declared(self.env, a) is None]
        if missing:
            msg = f"init_at_random_ep_len: {type(self.env).__name__} has no {' or '.join(missing)}; starts not spread"
            warnings.warn(msg, stacklevel=3)
            return
        buf, max_len = self.env.episode_length_buf, self.env.max_episode_length
        if isinstance(max_len, torch.Tensor):
            high = max_len.to(buf.device).float()
            self.env.episode_length_buf = (torch.rand(buf.shape, device=buf.device) * high).long()
        else:
            self.env.episode_length_buf = torch.randint_like(buf, high=int(math.ceil(max_len)))
