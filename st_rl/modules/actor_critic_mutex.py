"""Multi-skill ("Mutex") policies: frozen skill policies from training runs, one selected per env (see
docs/policies.md). A Mutex takes RAW observations: every skill normalises them with its own statistics."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn as nn

from st_rl.env.layout import get_obs_slice, normalize_segments, segments_size
from st_rl.modules.actor_critic import COMMON_POLICY_KEYS, DEFAULT_NONLINEARITY_KEY
from st_rl.modules.factory import build_actor_critic
from st_rl.modules.utils import warn_unknown_kwargs
from st_rl.protocols import DeclaresRecurrence
from st_rl.registry import resolve_class, untrusted_config
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.utils import latest_checkpoint, read_run_config

CmdVel = float | tuple[float, float]

ACTION_SCALE_KEYS = (
    ("control", "action_scale"),
    ("env", "control", "action_scale"),
    ("env", "action_scale"),
    ("env", "actions", "joint_pos", "scale"),
    ("actions", "joint_pos", "scale"),
)
# legged_gym's ``proprioception``: the forward-velocity command at column 9, the last action at the end
PROPRIOCEPTION = "proprioception"
PROPRIOCEPTION_CMD_COLUMN = 9
_AUTO = "auto"
_RESET_MODES: dict[Any, str | None] = {
    True: "all",
    "all": "all",
    "when_skill": "when_skill",
    None: None,
    False: None,
    "none": None,
}
CMD_SCALE_KEYS = (
    ("normalization", "obs_scales", "lin_vel"),
    ("env", "normalization", "obs_scales", "lin_vel"),
    ("env", "obs_scales", "lin_vel"),
)


def _is_recurrent(policy: nn.Module) -> bool:
    return isinstance(policy, DeclaresRecurrence) and bool(policy.is_recurrent)


def _lookup(config: Mapping[str, Any], paths: Sequence[Sequence[str]]) -> Any:
    """The first value found at one of the nested key ``paths`` of ``config`` (None if none is)."""
    for path in paths:
        node: Any = config
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            return node
    return None


def _normalize_cmd_value(value: Any, where: str) -> CmdVel:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"{where}: a command range must be (low, high), got {value!r}")
        lo, hi = float(value[0]), float(value[1])
        if lo > hi:
            raise ValueError(f"{where}: command range ({lo}, {hi}) has low > high")
        return (lo, hi)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: a command must be a number or a (low, high) range, got {value!r}")
    return float(value)


def normalize_cmd_vel_mapping(mapping: Mapping | None, num_policies: int | None = None) -> dict[int, CmdVel]:
    """``{policy index: v | (low, high)}`` with int keys, float values and tuple ranges (JSON forms accepted;
    ``None`` values dropped)."""
    out: dict[int, CmdVel] = {}
    for key, value in dict(mapping or {}).items():
        try:
            idx = int(key)
            if isinstance(key, float) and key != idx:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"cmd_vel_mapping keys must be sub-policy indices, got {key!r}") from None
        if num_policies is not None and not 0 <= idx < num_policies:
            raise ValueError(f"cmd_vel_mapping key {idx} is not a sub-policy index (0..{num_policies - 1})")
        if value is None:
            continue
        out[idx] = _normalize_cmd_value(value, f"cmd_vel_mapping[{idx}]")
    return dict(sorted(out.items()))


class SubPolicySnapshot(SimpleNamespace):
    """``policy`` (loaded, eval mode), ``normalizer`` (its actor normaliser), ``config`` (config.json),
    ``checkpoint`` (path), ``action_scale`` and ``cmd_scale`` (``None`` when the config has none)."""


def load_sub_policy(
    run_dir: str,
    num_actor_obs: int,
    num_critic_obs: int,
    num_actions: int,
    obs_segments: Mapping[str, Any] | None = None,
    privileged_obs_segments: Mapping[str, Any] | None = None,
    class_name: Any = None,
    map_location: Any = "cpu",
) -> SubPolicySnapshot:
    """The policy of a training log directory, built with the given dims and layouts, with its newest checkpoint;
    its class is ``class_name``, else the config's (st_rl's classes only: the config is untrusted)."""
    config = read_run_config(run_dir)
    ckpt_path = latest_checkpoint(run_dir)
    if ckpt_path is None:
        raise FileNotFoundError(f"No checkpoint model_<it>.pt in the sub-policy directory {run_dir}")
    policy_cfg = dict(config.get("policy") or {})
    runner_cfg = config["runner"] if isinstance(config.get("runner"), Mapping) else {}
    name = class_name or policy_cfg.get("class_name") or runner_cfg.get("policy_class_name")
    name = name or config.get("policy_class_name")
    if not name:
        raise ValueError(f"{run_dir}/config.json names no policy class: pass sub_policy_class_name")
    dims = {"num_actor_obs": num_actor_obs, "num_critic_obs": num_critic_obs, "num_actions": num_actions}
    for key, value in dims.items():
        trained = policy_cfg.get(key)
        if trained is not None and int(trained) != int(value):
            raise ValueError(f"{run_dir} was trained with {key}={trained}, but the Mutex has {key}={value}.")
    opt_in = "name the class in the Mutex config (sub_policy_class_name) if you trust that file"
    with untrusted_config(os.path.join(run_dir, "config.json"), opt_in, trusted=class_name is not None):
        policy_cls = resolve_class(name, "st_rl.modules", "policy", nn.Module)
    kwargs = {k: v for k, v in policy_cfg.items() if k not in ("class_name", "critic_obs_segments")}
    kwargs.update(dims, obs_segments=obs_segments, privileged_obs_segments=privileged_obs_segments)
    policy = build_actor_critic(None, policy_cls, kwargs)
    model_sd = load_checkpoint(ckpt_path, map_location=map_location)["model_state_dict"]
    norms = {k.split(".")[0] for k in model_sd}
    policy.enable_obs_normalization(
        actor="actor_obs_normalizer" in norms, critic="critic_obs_normalizer" in norms
    )
    own = policy.state_dict()
    shapes = {k: (tuple(v.shape), tuple(own[k].shape)) for k, v in model_sd.items() if k in own}
    problems = [f"{k}: checkpoint {a} vs built {b}" for k, (a, b) in shapes.items() if a != b]
    # DEFAULT_NONLINEARITY_KEY: older checkpoints lack it (load_state_dict restores their activations)
    problems += [f"missing key {k}" for k in sorted(set(own) - set(model_sd) - {DEFAULT_NONLINEARITY_KEY})]
    problems += [f"unexpected key {k}" for k in sorted(set(model_sd) - set(own))]
    if problems:
        dims_text = ", ".join(f"{k}={v}" for k, v in dims.items())
        raise ValueError(f"{ckpt_path} does not fit {name} with {dims_text}: {'; '.join(problems[:6])}")
    policy.load_state_dict(model_sd)
    policy.eval()
    action_scale, cmd_scale = _lookup(config, ACTION_SCALE_KEYS), _lookup(config, CMD_SCALE_KEYS)
    return SubPolicySnapshot(
        policy=policy,
        normalizer=policy.actor_obs_normalizer,
        config=config,
        checkpoint=ckpt_path,
        action_scale=action_scale,
        cmd_scale=None if cmd_scale is None else float(cmd_scale),
    )


class ActorCriticMutex(nn.Module):
    """Several trained skill policies (``sub_policy_paths``: their run directories), one selected per env by
    ``skill_selection_component``; arguments and scaling rules: docs/policies.md. ``critic_obs_segments`` is an
    alias of ``privileged_obs_segments``."""

    env_action_scale: torch.Tensor
    submodules: Any  # nn.ModuleList of policies (typed loosely: their methods are duck-typed)

    config_tolerated = COMMON_POLICY_KEYS

    def __init__(
        self,
        num_actor_obs: int,
        num_critic_obs: int,
        num_actions: int,
        sub_policy_class_name: Any = None,
        sub_policy_paths: Sequence[str] | str = (),
        obs_segments: Mapping[str, Any] | None = None,
        critic_obs_segments: Mapping[str, Any] | None = None,
        env_action_scale: float | Sequence[float] | None = None,
        privileged_obs_segments: Mapping[str, Any] | None = None,
        skill_selection_component: str | None = None,
        last_action_component: str | None = None,
        last_action_columns: Sequence[int | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        warn_unknown_kwargs(type(self).__name__, kwargs, COMMON_POLICY_KEYS)
        if isinstance(sub_policy_paths, str):
            sub_policy_paths = [sub_policy_paths]
        paths = [os.path.expanduser(str(p)) for p in sub_policy_paths]
        if not paths:
            raise ValueError(f"{type(self).__name__} needs at least one directory in sub_policy_paths")
        self.num_actor_obs = int(num_actor_obs)
        self.num_critic_obs = int(num_critic_obs)
        self.num_actions = int(num_actions)
        self.obs_segments = normalize_segments(obs_segments)
        critic_segments = normalize_segments(privileged_obs_segments or critic_obs_segments)
        self.privileged_obs_segments = critic_segments or self.obs_segments
        for segs, width, which in (
            (self.obs_segments, self.num_actor_obs, "obs_segments"),
            (critic_segments, self.num_critic_obs, "privileged_obs_segments"),
        ):
            if segs is not None and segments_size(segs) != width:
                raise ValueError(f"{which} {dict(segs)} take {segments_size(segs)} columns, expected {width}")
        self._load_sub_policies(paths, sub_policy_class_name, critic_segments, env_action_scale)
        recurrent = [m for m in self.submodules if _is_recurrent(m)]
        self.is_recurrent = bool(recurrent)
        self.rnn_type: str | None = recurrent[0].rnn_type if recurrent else None
        self.skill_selection_component = skill_selection_component
        self._skill_slice: slice | None = None
        if skill_selection_component is not None:
            self._skill_slice = self._component_columns("skill_selection_component")
            width = self._skill_slice.stop - self._skill_slice.start
            if width not in (1, self.num_sub_policies):
                raise ValueError(
                    f"skill_selection_component '{skill_selection_component}' has {width} columns; it must hold "
                    f"the skill index (1 column) or a one-hot over the {self.num_sub_policies} sub-policies."
                )
        self.last_action_component = last_action_component
        self._last_action_slice: slice | None = None
        if last_action_component is not None:
            self._last_action_slice = self._component_columns("last_action_component", last_action_columns)
            width = self._last_action_slice.stop - self._last_action_slice.start
            scales = [self.env_action_scale] + [self.subpolicy_action_scale(i) for i in range(len(paths))]
            if any(s.numel() not in (1, width) for s in scales):
                raise ValueError(f"The {width} last-action columns do not fit the action scales {scales}")
        self._mean: torch.Tensor | None = None

    def _load_sub_policies(
        self, paths: list[str], class_name: Any, critic_segments: Any, env_action_scale: Any
    ) -> None:
        self.sub_policy_paths = paths
        self.sub_policy_configs: list[dict[str, Any]] = []
        self.submodules = nn.ModuleList()
        self._cmd_scales_from_config: list[float | None] = []
        for i, path in enumerate(paths):
            if not os.path.isdir(path):
                raise FileNotFoundError(f"Sub-policy {i}: {path} is not a directory")
            snap = load_sub_policy(
                path,
                self.num_actor_obs,
                self.num_critic_obs,
                self.num_actions,
                self.obs_segments,
                critic_segments,
                class_name=class_name,
            )
            self.submodules.append(snap.policy)
            self.sub_policy_configs.append(snap.config)
            self._cmd_scales_from_config.append(snap.cmd_scale)
            scale = snap.action_scale
            if scale is None and env_action_scale is None:
                raise ValueError(
                    f"Sub-policy {i} ({path}): config.json has no action scale. Set env_action_scale in the "
                    "Mutex's policy config, or add control.action_scale to that config.json."
                )
            scale = env_action_scale if scale is None else scale
            self.register_buffer(f"subpolicy_action_scale_{i}", self._scale_tensor(scale, f"sub-policy {i}"))
        if env_action_scale is None:
            scales = [self.subpolicy_action_scale(i) for i in range(len(paths))]
            if any(s.shape != scales[0].shape or not torch.equal(s, scales[0]) for s in scales[1:]):
                raise ValueError(
                    f"The sub-policies were trained with different action scales {[s.tolist() for s in scales]}: "
                    f"set env_action_scale (the action scale of the env) in the {type(self).__name__}'s config."
                )
            env_action_scale = scales[0].tolist()
        self.register_buffer("env_action_scale", self._scale_tensor(env_action_scale, "env_action_scale"))

    def _scale_tensor(self, scale: Any, where: str) -> torch.Tensor:
        t = torch.as_tensor(scale, dtype=torch.float32).clone()
        if t.dim() > 1 or t.numel() not in (1, self.num_actions) or bool((t == 0).any()):
            raise ValueError(f"{where}: {scale!r} is not a nonzero action scale (or {self.num_actions} ones)")
        return t.reshape(()) if t.numel() == 1 and t.dim() == 1 else t

    def _component_columns(self, what: str, columns: Sequence[int | None] | None = None) -> slice:
        """Columns of the component named by attribute ``what`` (``columns``: ``(start, stop)`` within it)."""
        name, layout = getattr(self, what), self.obs_segments or {}
        if name not in layout:
            raise ValueError(f"{what}: component '{name}' is not in the observation layout {list(layout)}")
        sl, _ = get_obs_slice(layout, name)
        if columns is None:
            return sl
        start, stop = (None if c is None else int(c) for c in columns)
        sub = range(sl.start, sl.stop)[start:stop]
        if len(sub) == 0:
            raise ValueError(f"{what}: columns {tuple(columns)} select nothing of '{name}'")
        return slice(sub.start, sub.stop)

    @property
    def num_sub_policies(self) -> int:
        return len(self.submodules)

    def subpolicy_action_scale(self, index: int) -> torch.Tensor:
        return self.get_buffer(f"subpolicy_action_scale_{index}")

    def action_scale_ratios(self) -> torch.Tensor:
        """``subpolicy_action_scale_i / env_action_scale``, shape (K, num_actions)."""
        n = self.num_actions
        scales = [self.subpolicy_action_scale(i).expand(n) for i in range(self.num_sub_policies)]
        return torch.stack(scales) / self.env_action_scale.expand(n)

    def recover_last_action(self, observations: torch.Tensor, policy_selection: int) -> torch.Tensor:
        """Observations with the last action in sub-policy ``policy_selection``'s units (times ``e / s_i``)."""
        sl = self._last_action_slice
        if sl is None:
            return observations
        ratio = self.env_action_scale / self.subpolicy_action_scale(policy_selection)
        out = observations.clone()
        out[..., sl] = observations[..., sl] * ratio
        return out

    def sub_policy_observations(self, observations: torch.Tensor, policy_index: int) -> torch.Tensor:
        """The raw observations sub-policy ``policy_index`` receives."""
        return self.recover_last_action(observations, policy_index)

    def get_policy_selection(self, observations: torch.Tensor) -> torch.Tensor:
        """One-hot bool (N, K) of the selected sub-policy per env."""
        k = self.num_sub_policies
        if self._skill_slice is None:
            if k == 1:
                return torch.ones(*observations.shape[:-1], 1, dtype=torch.bool, device=observations.device)
            raise ValueError(f"{type(self).__name__} with {k} sub-policies needs skill_selection_component")
        x = observations[..., self._skill_slice]
        if x.shape[-1] == 1:
            idx = torch.round(x[..., 0]).long().clamp(0, k - 1)
        else:
            idx = torch.argmax(x, dim=-1)
        return nn.functional.one_hot(idx, k).bool()

    def _selection_weights(self, selection: torch.Tensor) -> torch.Tensor:
        return selection.to(torch.float32)  # (N, K)

    def _run(self, observations: torch.Tensor, stochastic: bool, kwargs: Mapping[str, Any]) -> torch.Tensor:
        if kwargs.get("hidden_states") is not None or kwargs.get("masks") is not None:
            raise NotImplementedError(f"{type(self).__name__} runs in rollout mode only")
        selection = self.get_policy_selection(observations)
        weights = self._selection_weights(selection)
        actions, means = [], []
        for i, policy in enumerate(self.submodules):
            x = self.sub_policy_observations(observations, i)
            if stochastic:
                actions.append(policy.act(x))
                means.append(policy.action_mean)
            else:
                actions.append(policy.act_inference(x))
        ratios = self.action_scale_ratios().to(observations.dtype)
        out = self._blend(torch.stack(actions), weights, ratios)
        self._mean = self._blend(torch.stack(means), weights, ratios) if stochastic else out
        return out

    @staticmethod
    def _blend(actions: torch.Tensor, weights: torch.Tensor, ratios: torch.Tensor) -> torch.Tensor:
        """``sum_i actions_i * ratio_i * w_i``; sub-policies with weight 0 contribute exactly 0 (even NaN)."""
        w = weights.movedim(-1, 0).unsqueeze(-1).to(actions.dtype)  # (K, N, 1)
        scaled = actions * ratios.reshape(ratios.shape[0], *([1] * (actions.dim() - 2)), ratios.shape[-1])
        return torch.where(w > 0, scaled * w, torch.zeros_like(scaled)).sum(dim=0)

    @torch.no_grad()
    def act(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Sampled action of the selected skill(s) in the env's scale (``action_mean``: their mean)."""
        return self._run(observations, True, kwargs)

    @torch.no_grad()
    def act_inference(self, observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Mean action of the selected skill(s) in the env's scale."""
        return self._run(observations, False, kwargs)

    @property
    def action_mean(self) -> torch.Tensor:
        if self._mean is None:
            raise RuntimeError("No action yet: call act() or act_inference() first.")
        return self._mean

    @torch.no_grad()
    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Reset the sub-policies' memories of finished envs (all when ``dones`` is None)."""
        for module in self.submodules:
            module.reset(dones)

    def get_hidden_states(self) -> Any:
        """Tuple of the sub-policies' rollout hidden states."""
        return tuple(m.get_hidden_states() for m in self.submodules)

    def evaluate(self, critic_observations: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} is inference-only: it has no critic")

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError("Use act() or act_inference() on a Mutex.")


class ActorCriticFieldMutex(ActorCriticMutex):
    """Mutex for obstacle fields: the skill is the obstacle type (a one-hot in ``selection_component``); per-skill
    velocity commands (``cmd_vel_mapping``), selection smoothing and memory resets (docs/policies.md)."""

    _appended_skills = 0  # skills after the one-hot ones (each with a selection column of its own)
    cmd_vel_low: torch.Tensor
    cmd_vel_high: torch.Tensor
    cmd_scales: torch.Tensor

    def __init__(
        self,
        *args: Any,
        cmd_vel_mapping: Mapping[Any, Any] | None = None,
        reset_non_selected: str | bool | None = "all",
        action_smoothing_buffer_len: int = 1,
        selection_component: str = "engaging_block",
        selection_column_offset: int = 1,
        command_component: str | None = None,
        command_column: int | None = None,
        last_action_component: str | None = _AUTO,
        **kwargs: Any,
    ) -> None:
        names = list(normalize_segments(kwargs.get("obs_segments")) or ())
        if last_action_component == _AUTO:
            last_action_component = None
            if "last_actions" in names:
                last_action_component = "last_actions"
            elif PROPRIOCEPTION in names:
                last_action_component = PROPRIOCEPTION
                if kwargs.get("last_action_columns") is None:
                    num_actions = args[2] if len(args) > 2 else kwargs.get("num_actions")
                    kwargs["last_action_columns"] = (-int(num_actions), None)  # type: ignore[arg-type]
        if command_component is None:
            use_proprioception = PROPRIOCEPTION in names and "commands" not in names
            command_component = PROPRIOCEPTION if use_proprioception else "commands"
        if command_column is None:
            command_column = PROPRIOCEPTION_CMD_COLUMN if command_component == PROPRIOCEPTION else 0
        super().__init__(*args, last_action_component=last_action_component, **kwargs)
        self.cmd_vel_mapping = normalize_cmd_vel_mapping(cmd_vel_mapping, self.num_sub_policies)
        mode = reset_non_selected
        if not isinstance(mode, (str, bool, type(None))) or mode not in _RESET_MODES:
            raise ValueError(f"reset_non_selected must be 'all', 'when_skill' or None, got {mode!r}")
        self.reset_non_selected: str | None = _RESET_MODES[mode]
        self.action_smoothing_buffer_len = int(action_smoothing_buffer_len)
        if self.action_smoothing_buffer_len < 1:
            raise ValueError("action_smoothing_buffer_len must be >= 1")
        self.selection_component = selection_component
        self.selection_column_offset = int(selection_column_offset)
        self._selection_slice = self._component_columns("selection_component")
        needed = self.selection_column_offset + self.num_sub_policies  # an appended skill's column included
        width = self._selection_slice.stop - self._selection_slice.start
        if self.selection_column_offset < 0 or width < needed:
            raise ValueError(f"selection_component {selection_component} has {width} columns, needs {needed}")
        k = self.num_sub_policies
        self.command_component, self.command_column = command_component, int(command_column)
        self._cmd_mapped = [i in self.cmd_vel_mapping for i in range(k)]
        self._cmd_index: int | None = None
        if any(self._cmd_mapped):
            cmd = self._component_columns("command_component")
            if not 0 <= self.command_column < cmd.stop - cmd.start:
                raise ValueError(f"command_column {command_column} is outside '{command_component}'")
            self._cmd_index = cmd.start + self.command_column
        lows, highs = [0.0] * k, [0.0] * k
        for i, value in self.cmd_vel_mapping.items():
            lows[i], highs[i] = value if isinstance(value, tuple) else (value, value)
        self.register_buffer("cmd_vel_low", torch.tensor(lows), persistent=False)
        self.register_buffer("cmd_vel_high", torch.tensor(highs), persistent=False)
        scales = [1.0 if s is None else s for s in self._cmd_scales_from_config]
        self.register_buffer("cmd_scales", torch.tensor(scales))
        # per-env state, created at the first call
        self.cmd_vel_current: torch.Tensor | None = None  # (K, N)
        self.action_smoothing_buffer: torch.Tensor | None = None  # (len, N, K)
        self._restart: torch.Tensor | None = None  # (N,) bool: restart the smoothing buffer

    def _prepare(self, observations: torch.Tensor) -> None:
        n = observations.shape[0]
        cur = self.cmd_vel_current
        if cur is None or cur.shape[1] != n or cur.device != observations.device:
            self.cmd_vel_current = torch.zeros(self.num_sub_policies, n, device=observations.device)
            self.resample_cmd_vel_current(None)
            self.action_smoothing_buffer = None
            self._restart = torch.zeros(n, dtype=torch.bool, device=observations.device)

    @torch.no_grad()
    def resample_cmd_vel_current(self, dones: torch.Tensor | None = None) -> None:
        """Draw new commands for the finished envs (all when ``dones`` is None; none before the first call)."""
        cur = self.cmd_vel_current
        if cur is None:
            return
        low, high = self.cmd_vel_low.to(cur.device), self.cmd_vel_high.to(cur.device)
        new = low[:, None] + (high - low)[:, None] * torch.rand_like(cur)
        if dones is None:
            self.cmd_vel_current = new
        else:
            self.cmd_vel_current = torch.where(dones.reshape(1, -1).to(cur.device).bool(), new, cur)

    def override_cmd_vel(self, observations: torch.Tensor, policy_selection: int) -> torch.Tensor:
        """Observations with the command ``cmd_vel_current[i] * cmd_scales[i]`` for skill ``i`` in the mapping."""
        if not self._cmd_mapped[policy_selection]:
            return observations
        self._prepare(observations)
        assert self.cmd_vel_current is not None and self._cmd_index is not None
        value = self.cmd_vel_current[policy_selection] * self.cmd_scales[policy_selection]
        out = observations.clone()
        out[..., self._cmd_index] = value.to(out.dtype)
        return out

    def sub_policy_observations(self, observations: torch.Tensor, policy_index: int) -> torch.Tensor:
        return self.override_cmd_vel(self.recover_last_action(observations, policy_index), policy_index)

    def get_policy_selection(self, observations: torch.Tensor) -> torch.Tensor:
        m = self.num_sub_policies - self._appended_skills
        start = self._selection_slice.start + self.selection_column_offset
        cols = observations[..., start : start + m] > 0.5
        idx = torch.argmax(cols.to(torch.uint8), dim=-1)  # first set column; 0 when none is set
        return nn.functional.one_hot(idx, m).bool()

    def _selection_weights(self, selection: torch.Tensor) -> torch.Tensor:
        self._prepare(selection)  # (N, K) on the observations' device
        sel = selection.to(torch.float32)
        buf, restart = self.action_smoothing_buffer, self._restart
        if buf is None or buf.shape[1:] != sel.shape:
            buf = sel.unsqueeze(0).expand(self.action_smoothing_buffer_len, *sel.shape).clone()
        else:
            rolled = torch.cat([buf[1:], sel.unsqueeze(0)], dim=0)
            if restart is not None:
                rolled = torch.where(restart[None, :, None], sel.unsqueeze(0).expand_as(rolled), rolled)
            buf = rolled
        self.action_smoothing_buffer = buf
        self._restart = torch.zeros(sel.shape[0], dtype=torch.bool, device=sel.device)
        return buf.mean(dim=0)

    def _run(self, observations: torch.Tensor, stochastic: bool, kwargs: Mapping[str, Any]) -> torch.Tensor:
        out = super()._run(observations, stochastic, kwargs)
        if self.reset_non_selected is not None and self.action_smoothing_buffer is not None:
            active = self.action_smoothing_buffer.sum(dim=0) > 0  # (N, K): weight in the buffer
            for i, module in enumerate(self.submodules):
                if _is_recurrent(module) and self.reset_non_selected == "all":
                    module.reset(~active[:, i])
                elif _is_recurrent(module) and i > 0:  # "when_skill"
                    module.reset(~active[:, i] & ~active[:, 0])
        return out

    @torch.no_grad()
    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Resample the commands, restart the smoothing buffer and reset the memories of finished envs."""
        self.resample_cmd_vel_current(dones)
        if self._restart is not None:
            if dones is None:
                self._restart = torch.ones_like(self._restart)
            else:
                self._restart = self._restart | dones.reshape(-1).to(self._restart.device).bool()
        super().reset(dones)


class ActorCriticClimbMutex(ActorCriticFieldMutex):
    """Field Mutex with a jump-down skill (``jump_down_policy_path``; deprecated alias ``climb_down_policy_path``)
    appended last: it replaces the jump skill where the obstacle height is <= 0 (docs/policies.md)."""

    JUMP_OBSTACLE_ID = 3
    _appended_skills = 1
    _jump_down_follows_jump = False  # set after the base class, whose construction resamples the commands

    def __init__(
        self,
        num_actor_obs: int,
        num_critic_obs: int,
        num_actions: int,
        sub_policy_class_name: Any = None,
        sub_policy_paths: Sequence[str] | str = (),
        *,
        jump_down_policy_path: str | None = None,
        jump_down_vel: Any = None,
        climb_down_policy_path: str | None = None,
        cmd_vel_mapping: Mapping[Any, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        old = climb_down_policy_path
        if old is not None:
            if os.path.abspath(jump_down_policy_path or old) != os.path.abspath(old):
                raise ValueError("jump_down_policy_path and climb_down_policy_path are different")
            warnings.warn("climb_down_policy_path is deprecated: use jump_down_policy_path", FutureWarning, 2)
            jump_down_policy_path = old
        if jump_down_policy_path is None:
            raise ValueError(f"{type(self).__name__} needs jump_down_policy_path (the jump-down skill's run)")
        paths = [sub_policy_paths] if isinstance(sub_policy_paths, str) else list(sub_policy_paths)
        paths.append(jump_down_policy_path)
        k = len(paths)
        jump = self.JUMP_OBSTACLE_ID
        if not 0 <= jump < k - 1:
            raise ValueError(f"JUMP_OBSTACLE_ID={jump} needs {jump + 1} skills before the jump-down one")
        mapping = normalize_cmd_vel_mapping(cmd_vel_mapping, k)
        follows_jump = jump_down_vel is None and jump in mapping
        if jump_down_vel is not None:
            mapping[k - 1] = _normalize_cmd_value(jump_down_vel, "jump_down_vel")
        elif follows_jump:
            mapping[k - 1] = mapping[jump]  # values are copied from the jump-up row at every resample
        self.jump_down_vel = None if jump_down_vel is None else mapping[k - 1]
        dims = (num_actor_obs, num_critic_obs, num_actions)
        super().__init__(*dims, sub_policy_class_name, paths, cmd_vel_mapping=mapping, **kwargs)
        self._jump_down_follows_jump = follows_jump

    @torch.no_grad()
    def resample_cmd_vel_current(self, dones: torch.Tensor | None = None) -> None:
        super().resample_cmd_vel_current(dones)
        cur = self.cmd_vel_current
        if cur is not None and self._jump_down_follows_jump:
            jump = self.JUMP_OBSTACLE_ID
            self.cmd_vel_current = torch.cat([cur[:-1], cur[jump : jump + 1]], dim=0)

    def get_policy_selection(self, observations: torch.Tensor) -> torch.Tensor:
        sel = super().get_policy_selection(observations)  # (N, K-1)
        jump = self.JUMP_OBSTACLE_ID
        height = observations[..., self._selection_slice.stop - 1]
        down = sel[..., jump] & (height <= 0)
        up = sel[..., jump] & ~down
        return torch.cat(
            [sel[..., :jump], up.unsqueeze(-1), sel[..., jump + 1 :], down.unsqueeze(-1)], dim=-1
        )
