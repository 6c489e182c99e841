"""Record demonstrations (docs/datasets.md): ``<save_dir>/metadata.json`` and raw observations in
``<save_dir>/trajectory_<k>/traj_<a:06d>_<b:06d>.npz`` (frames ``[a, b)`` of trajectory ``k``, which ends at a done)."""

from __future__ import annotations

import numbers
import os
import time
import types
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from st_rl.config.resolve import to_jsonable
from st_rl.env.adapter import EnvAdapter
from st_rl.env.layout import get_obs_slice, segments_size
from st_rl.protocols import DeterministicActor, ResettablePolicy, StochasticActor
from st_rl.storage.rollout_files.trajectory_files import (
    DATASET_FORMAT,
    DATASET_FORMAT_VERSION,
    FILE_FORMATS,
    METADATA_FILE,
    TRAJ_DIR_RE,
    TRAJ_FILE_RE,
    get_frame_range,
    read_metadata,
    trajectory_file_name,
    write_trajectory_file,
)
from st_rl.utils.data_compresser import get_compresser
from st_rl.utils.utils import write_json_atomic

__all__ = ["DemonstrationSaver"]

# Constructor settings recorded in the metadata as they are
_SETTINGS: tuple[str, ...] = ("file_format", "rollout_storage_length", "success_traj_only", "min_timesteps")
_SETTINGS += ("min_episodes", "use_critic_obs", "demo_by_sample", "obs_disassemble_mapping")


def _belongs_to(normalizer: Any, policy: Any) -> bool:
    return (
        isinstance(normalizer, nn.Module)
        and isinstance(policy, nn.Module)
        and any(m is normalizer for m in policy.modules())
    )


def _traj_files(traj_dir: str) -> list[str]:
    if not os.path.isdir(traj_dir):
        return []
    return [n for n in os.listdir(traj_dir) if TRAJ_FILE_RE.fullmatch(n)]


def _check_disassemble_mapping(mapping: dict[str, str] | None, env: EnvAdapter) -> None:
    if not mapping:
        return
    segments = env.obs_segments
    if segments is None:
        raise ValueError(
            "obs_disassemble_mapping needs the env's obs_segments; drop it or give the env them."
        )
    if segments_size(segments) != env.num_obs:
        raise ValueError(
            f"env.obs_segments adds up to {segments_size(segments)} columns, observations {env.num_obs}"
        )
    for name, kind in mapping.items():
        if name not in segments:
            raise ValueError(f"obs_disassemble_mapping: {name!r} is not in env.obs_segments {list(segments)}")
        get_compresser(kind)


def _apply_normalizer(normalizer: Any, x: torch.Tensor) -> torch.Tensor:
    if normalizer is None:
        return x
    if isinstance(normalizer, nn.Module) and normalizer.training:
        normalizer.eval()  # never update a trained runner's statistics with demonstration data
        try:
            return normalizer(x)
        finally:
            normalizer.train()
    return normalizer(x)


class DemonstrationSaver:
    """Save trajectories of ``policy`` acting in ``env`` (any supported API) as a demonstration dataset, in rounds
    of ``rollout_storage_length`` steps until ``min_timesteps`` frames and ``min_episodes`` trajectories are on
    disk; an existing ``save_dir`` is continued.

    Args:
        policy: ``act_inference(obs)`` (``act(obs)`` when ``demo_by_sample``), optionally ``reset(dones)``, or
            a callable ``obs -> actions``; ``use_critic_obs`` feeds it the critic observations.
        success_traj_only: delete trajectories ended by a termination (not ``infos["time_outs"]``).
        obs_disassemble_mapping: ``{component: compression type}``: store observations per component of
            ``env.obs_segments`` as ``obs_<component>``, the mapped ones compressed.
        obs_normalizer, critic_obs_normalizer: applied (eval mode) before a policy that does not hold them.
        file_format: ``"npz"`` (default) or ``"pickle"`` (the reference's files).
    """

    def __init__(
        self,
        env: Any,
        policy: Any,
        save_dir: str,
        rollout_storage_length: int = 64,
        min_timesteps: int | float = 1e6,
        min_episodes: int = 10000,
        success_traj_only: bool = False,
        use_critic_obs: bool = False,
        obs_disassemble_mapping: Mapping[str, str] | None = None,
        demo_by_sample: bool = False,
        obs_normalizer: Callable[[torch.Tensor], torch.Tensor] | None = None,
        critic_obs_normalizer: Callable[[torch.Tensor], torch.Tensor] | None = None,
        device: str | torch.device | None = None,
        file_format: str = "npz",
    ) -> None:
        if file_format not in FILE_FORMATS:
            raise ValueError(f"file_format must be one of {list(FILE_FORMATS)}, got {file_format!r}")
        self.file_format = file_format
        self._started = False
        self._closed = False
        if int(rollout_storage_length) < 1:
            raise ValueError(f"rollout_storage_length must be >= 1, got {rollout_storage_length}")
        for name, value in (("min_timesteps", min_timesteps), ("min_episodes", min_episodes)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0 (math.inf: never stop), got {value!r}")
        self.env = env if isinstance(env, EnvAdapter) else EnvAdapter(env, device=device)
        self.device = self.env.device
        self.policy = policy
        if demo_by_sample and not isinstance(policy, StochasticActor):
            raise TypeError(f"demo_by_sample=True needs policy.act(obs); {type(policy).__name__} has none")
        if not isinstance(policy, DeterministicActor) and not callable(policy):
            raise TypeError(
                f"policy must have act_inference(obs) or be callable obs -> actions; got {type(policy).__name__}"
            )
        self.save_dir = os.fspath(save_dir)
        self.rollout_storage_length = int(rollout_storage_length)
        self.min_timesteps = min_timesteps
        self.min_episodes = min_episodes
        self.success_traj_only = bool(success_traj_only)
        self.use_critic_obs = bool(use_critic_obs)
        self.demo_by_sample = bool(demo_by_sample)
        self.obs_normalizer = None if _belongs_to(obs_normalizer, policy) else obs_normalizer
        self.critic_obs_normalizer = (
            None if _belongs_to(critic_obs_normalizer, policy) else critic_obs_normalizer
        )
        self.obs_disassemble_mapping = dict(obs_disassemble_mapping) if obs_disassemble_mapping else None
        _check_disassemble_mapping(self.obs_disassemble_mapping, self.env)

        self.total_timesteps = 0
        self.total_traj_completed = 0
        self.total_traj_discarded = 0
        self.total_traj_truncated = 0
        self.traj_idxs = np.zeros(0, dtype=np.int64)
        self.dumped_traj_lengths = np.zeros(0, dtype=np.int64)
        self._free_traj_idxs: list[int] = []
        self._next_traj_idx = 0
        self._warned_no_timeouts = False
        self._round_start = self._collect_start = time.monotonic()
        self._cpu: dict[str, np.ndarray] = {}
        self.metadata: dict[str, Any] = self._build_metadata()
        self._update_metadata_totals()

    def _build_metadata(self) -> dict[str, Any]:
        env, critic = self.env, self.env.has_critic_group
        named = isinstance(
            self.policy, (type, types.FunctionType, types.MethodType, types.BuiltinFunctionType)
        )
        return {
            "format": DATASET_FORMAT,
            "format_version": DATASET_FORMAT_VERSION,
            "config": None,
            "env": type(self.env.env).__name__,
            "policy": self.policy.__qualname__ if named else type(self.policy).__name__,
            **{key: getattr(self, key) for key in _SETTINGS},
            **{key: getattr(env, key) for key in ("num_envs", "num_obs", "num_actions")},
            "num_critic_obs": env.num_critic_obs if critic else None,
            "obs_segments": to_jsonable(env.obs_segments),
            "critic_obs_segments": to_jsonable(env.critic_obs_segments) if critic else None,
        }

    def _traj_dir(self, traj_idx: int) -> str:
        return os.path.join(self.save_dir, f"trajectory_{int(traj_idx)}")

    def init_traj_handlers(self) -> None:
        """Assign a trajectory directory to every env, continuing a dataset in ``save_dir``."""
        os.makedirs(self.save_dir, exist_ok=True)
        existing = {  # index -> its trajectory files
            int(match.group(1)): _traj_files(os.path.join(self.save_dir, name))
            for name in os.listdir(self.save_dir)
            if (match := TRAJ_DIR_RE.fullmatch(name)) and os.path.isdir(os.path.join(self.save_dir, name))
        }
        previous = read_metadata(self.save_dir)
        prev = previous or {}
        for key in ("num_obs", "num_critic_obs", "num_actions", "obs_segments", "obs_disassemble_mapping"):
            if key in prev and prev[key] != self.metadata[key]:
                raise ValueError(
                    f"{self.save_dir} holds a dataset recorded with {key}={prev[key]!r}, this recording has "
                    f"{self.metadata[key]!r}: use another save_dir, or the environment and settings of that one."
                )
        non_empty = [k for k, files in existing.items() if files]
        self.total_timesteps = sum(
            b - a for files in existing.values() for a, b in map(get_frame_range, files)
        )
        self.total_traj_completed = int(prev.get("total_trajectories", len(non_empty)))
        self.total_traj_discarded = int(prev.get("discarded_trajectories", 0))
        self.total_traj_truncated = int(prev.get("truncated_trajectories", 0))
        if non_empty or previous is not None:
            self._say(
                f"continuing the dataset in {self.save_dir} ({len(non_empty)} trajectories, "
                f"{self.total_timesteps} timesteps on disk); the environment configuration must match."
            )
        self._free_traj_idxs = sorted(k for k, files in existing.items() if not files)
        self._next_traj_idx = max(existing) + 1 if existing else 0
        n = self.env.num_envs
        self.traj_idxs = np.array([self._allocate_traj_idx() for _ in range(n)], dtype=np.int64)
        self.dumped_traj_lengths = np.zeros(n, dtype=np.int64)
        self._update_metadata_totals()
        self._started = True
        self._closed = False

    def _allocate_traj_idx(self) -> int:
        while True:  # the first free (then the next new) index whose directory holds no trajectory
            if self._free_traj_idxs:
                idx = self._free_traj_idxs.pop(0)
            else:
                idx, self._next_traj_idx = self._next_traj_idx, self._next_traj_idx + 1
            if not _traj_files(self._traj_dir(idx)):
                os.makedirs(self._traj_dir(idx), exist_ok=True)
                return idx

    def init_storage_buffer(self) -> None:
        """Preallocate the ``(T, N, ...)`` rollout buffers of one collection round."""
        t, n, dev = self.rollout_storage_length, self.env.num_envs, self.device
        self.buffers: dict[str, torch.Tensor] = {
            "observations": torch.zeros(t, n, self.env.num_obs, device=dev),
            "actions": torch.zeros(t, n, self.env.num_actions, device=dev),
            "rewards": torch.zeros(t, n, device=dev),
            "dones": torch.zeros(t, n, dtype=torch.bool, device=dev),
            "timeouts": torch.zeros(t, n, dtype=torch.bool, device=dev),
        }
        if self.env.has_critic_group:
            self.buffers["privileged_observations"] = torch.zeros(t, n, self.env.num_critic_obs, device=dev)

    def check_stop(self) -> bool:
        """Whether both ``min_timesteps`` and ``min_episodes`` are reached."""
        return self.total_traj_completed >= self.min_episodes and self.total_timesteps >= self.min_timesteps

    def get_policy_actions(self) -> torch.Tensor:
        """The demonstrator's actions for the current observations."""
        if self.use_critic_obs:
            x = _apply_normalizer(self.critic_obs_normalizer, self.critic_obs)
        else:
            x = _apply_normalizer(self.obs_normalizer, self.obs)
        if self.demo_by_sample:
            actions = self.policy.act(x)
        else:
            policy = self.policy
            actions = policy.act_inference(x) if isinstance(policy, DeterministicActor) else policy(x)
        return self._check_actions(actions, "policy")

    def _check_actions(self, actions: Any, who: str) -> torch.Tensor:
        actions = torch.as_tensor(actions)
        n, a = self.env.num_envs, self.env.num_actions
        if actions.numel() != n * a:
            raise ValueError(
                f"the {who} returned actions of shape {tuple(actions.shape)}, expected ({n}, {a})"
            )
        return actions.reshape(n, a).to(self.device, torch.float32)

    def get_transition(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any], Any, Any]:
        """Act and step: ``(actions to store, rewards, dones, infos, next obs, next critic obs)``."""
        actions = self.get_policy_actions()
        n_obs, n_critic_obs, rewards, dones, infos = self.env.step(actions)
        return actions, rewards, dones, infos, n_obs, n_critic_obs

    def build_transition(
        self, step_i: int, actions: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor, infos: dict
    ) -> None:
        b = self.buffers
        b["observations"][step_i] = self.obs
        if "privileged_observations" in b:
            b["privileged_observations"][step_i] = self.critic_obs
        b["actions"][step_i] = actions
        b["rewards"][step_i] = rewards
        b["dones"][step_i] = dones

    def add_transition(self, step_i: int, infos: dict[str, Any]) -> None:
        """Record the step's time-outs (False when the env reports none)."""
        time_outs = infos.get("time_outs")
        if time_outs is None:
            self.buffers["timeouts"][step_i] = False
            if self.success_traj_only and not self._warned_no_timeouts:
                warnings.warn(
                    "success_traj_only: the environment reports no infos['time_outs'], so every done counts as "
                    "a termination and its trajectory is deleted.",
                    stacklevel=2,
                )
                self._warned_no_timeouts = True
        else:
            self.buffers["timeouts"][step_i] = time_outs.reshape(-1).to(self.device).bool()

    def policy_reset(self, dones: torch.Tensor) -> None:
        """Reset the memory of finished envs (no host sync)."""
        if isinstance(self.policy, ResettablePolicy):
            self.policy.reset(dones)

    @torch.inference_mode()
    def collect_step(self, step_i: int) -> None:
        """One env step, recorded at row ``step_i``."""
        actions, rewards, dones, infos, n_obs, n_critic_obs = self.get_transition()
        self.build_transition(step_i, actions, rewards, dones, infos)
        self.add_transition(step_i, infos)
        self.policy_reset(dones)
        self.obs, self.critic_obs = n_obs, n_critic_obs

    def wrap_up_trajectory(self, env_i: int, step_slice: slice) -> dict[str, np.ndarray]:
        """The arrays of one file: rows ``step_slice`` of env ``env_i`` of the current round."""
        data = self._cpu
        obs = data["observations"][step_slice, env_i]
        length = obs.shape[0]
        out: dict[str, np.ndarray] = {}
        if self.obs_disassemble_mapping:
            segments = self.env.obs_segments
            assert segments is not None
            for name, shape in segments.items():
                component = obs[:, get_obs_slice(segments, name)[0]].reshape(length, *shape)
                if name in self.obs_disassemble_mapping:
                    component = get_compresser(self.obs_disassemble_mapping[name])[0](component)
                out["obs_" + name] = np.ascontiguousarray(component)
        else:
            out["observations"] = np.ascontiguousarray(obs)
        for key in ("privileged_observations", "actions", "rewards", "dones", "timeouts"):
            if key in data:
                out[key] = np.ascontiguousarray(data[key][step_slice, env_i])
        out["values"] = np.zeros(length, dtype=np.float32)
        return out

    def dump_to_file(self, env_i: int, step_slice: slice) -> str:
        """Append rows ``step_slice`` of env ``env_i`` to its current trajectory; returns the file path."""
        start = int(self.dumped_traj_lengths[env_i])
        stop = start + (step_slice.stop - step_slice.start)
        name = trajectory_file_name(start, stop, self.file_format)
        path = os.path.join(self._traj_dir(self.traj_idxs[env_i]), name)
        write_trajectory_file(path, self.wrap_up_trajectory(env_i, step_slice))
        self.dumped_traj_lengths[env_i] = stop
        self.total_timesteps += stop - start
        return path

    def update_traj_handler(self, env_i: int, step_slice: slice) -> None:
        """Env ``env_i``'s trajectory ended at ``step_slice``'s last row: keep or discard it, start a new one."""
        last = step_slice.stop - 1
        terminated = bool(self._cpu["dones"][last, env_i]) and not bool(self._cpu["timeouts"][last, env_i])
        traj_dir = self._traj_dir(self.traj_idxs[env_i])
        self.dumped_traj_lengths[env_i] = 0
        if self.success_traj_only and terminated:
            # last file first: what remains is always a valid prefix for a reader scanning meanwhile
            for name in sorted(_traj_files(traj_dir), key=get_frame_range, reverse=True):
                start, stop = get_frame_range(name)
                os.remove(os.path.join(traj_dir, name))
                self.total_timesteps -= stop - start
            self.total_traj_discarded += 1
            return  # the emptied directory receives the env's next trajectory
        self.total_traj_completed += 1
        self.traj_idxs[env_i] = self._allocate_traj_idx()

    def save_steps(self) -> None:
        """Write the round's data, split after every done."""
        self._cpu = {k: v.cpu().numpy() for k, v in self.buffers.items()}
        bad = np.argwhere(~np.isfinite(self._cpu["actions"]))
        if bad.size:
            step, env_i = (int(v) for v in bad[0][:2])
            self._cpu = {}
            raise ValueError(
                f"the demonstrator returned NaN/Inf actions (env {env_i}, step {step} of this round); nothing "
                f"of this round was written to {self.save_dir}. Fix the policy or its normaliser."
            )
        dones = self._cpu["dones"]
        steps = self.rollout_storage_length
        for env_i in range(self.env.num_envs):
            start = 0
            for done_idx in np.nonzero(dones[:, env_i])[0].tolist():
                self.dump_to_file(env_i, slice(start, done_idx + 1))
                self.update_traj_handler(env_i, slice(start, done_idx + 1))
                start = done_idx + 1
            if start < steps:
                self.dump_to_file(env_i, slice(start, steps))
        self._cpu = {}
        self.dump_metadata()

    def _update_metadata_totals(self) -> None:
        self.metadata["total_timesteps"] = int(self.total_timesteps)
        self.metadata["total_trajectories"] = int(self.total_traj_completed)
        self.metadata["discarded_trajectories"] = int(self.total_traj_discarded)
        self.metadata["truncated_trajectories"] = int(self.total_traj_truncated)

    def dump_metadata(self) -> None:
        """Write ``metadata.json`` atomically."""
        os.makedirs(self.save_dir, exist_ok=True)
        self._update_metadata_totals()
        write_json_atomic(os.path.join(self.save_dir, METADATA_FILE), to_jsonable(self.metadata))

    def collect_and_save(self, config: Any = None) -> None:
        """Collect rounds until :meth:`check_stop`, then :meth:`close`; ``config`` goes into the metadata."""
        self.metadata["config"] = to_jsonable(config)
        if not self._started or self._closed:
            self.init_traj_handlers()
        self.init_storage_buffer()
        self.dump_metadata()
        self.obs, self.critic_obs, _ = self.env.reset()
        self.policy_reset(torch.ones(self.env.num_envs, dtype=torch.bool, device=self.device))
        self._round_start = self._collect_start = time.monotonic()
        while not self.check_stop():
            for step_i in range(self.rollout_storage_length):
                self.collect_step(step_i)
            self.env.raise_if_nonfinite()
            self.save_steps()
            self.print_log()
        self.close()

    def print_log(self) -> None:
        now = time.monotonic()
        round_time = now - self._round_start
        self._round_start = now
        fps = self.rollout_storage_length * self.env.num_envs / max(round_time, 1e-9)
        elapsed = now - self._collect_start
        self._say(
            f"{self.total_timesteps}/{int(self.min_timesteps)} timesteps, "
            f"{self.total_traj_completed}/{int(self.min_episodes)} trajectories "
            f"({self.total_traj_discarded} discarded), {fps:.0f} steps/s, {elapsed:.1f} s elapsed"
        )

    def _say(self, message: str) -> None:
        print(f"{type(self).__name__}: {message}", flush=True)

    def close(self) -> None:
        """Remove empty trajectory directories and write the final metadata (idempotent)."""
        if not self._started or self._closed:
            return
        self._closed = True
        self.total_traj_truncated += int((self.dumped_traj_lengths > 0).sum())
        for idx in {*self.traj_idxs.tolist(), *self._free_traj_idxs}:
            traj_dir = self._traj_dir(idx)
            if os.path.isdir(traj_dir) and not os.listdir(traj_dir):
                os.rmdir(traj_dir)
        self.dump_metadata()
        self._say(
            f"saved {self.total_timesteps} timesteps, {self.total_traj_completed} trajectories in {self.save_dir}"
        )

    def __del__(self) -> None:
        try:
            if self._started and not self._closed:
                self.close()
        except Exception:  # never raise from a finaliser
            pass
