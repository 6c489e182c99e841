"""Replay demonstration datasets (recorded by ``DemonstrationSaver`` / ``DaggerSaver``) as transitions."""

from __future__ import annotations

import bisect
import difflib
import inspect
import math
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.storage.rollout_files.base import DatasetExhausted, RolloutFileBase, is_integer
from st_rl.storage.rollout_files.trajectory_files import (
    FILE_FIELDS,
    Trajectory,
    TrajectoryFileError,
    file_fields,
    get_frame_range,
    read_trajectory_file,
    scan_trajectories,
)
from st_rl.storage.rollout_files.trajectory_files import load_legacy_pickle as load_legacy_pickle
from st_rl.utils.buffer import buffer_expand, buffer_func
from st_rl.utils.collections import namedarraytuple

DEFAULT_WAIT_FOR_DATA_S = 600.0  # wait_for_data_s=None: seconds to wait for a collector that has started
DEFAULT_POLL_INTERVAL_S = 10.0  # seconds between two scans while waiting

# Transition field -> the per-frame array it is read from (its singular; next_*: the next frame's)
_FIELD_SOURCES = {key[:-1]: key for key in FILE_FIELDS}
_FIELD_SOURCES |= {f"next_{key[:-1]}": key for key in ("observations", "privileged_observations")}


def _frame_range(value: Any) -> list[int]:
    iterable = hasattr(value, "__iter__") and not isinstance(value, str)
    bounds: list[Any] = list(value) if iterable else []
    whole = all((is_integer(v) or (isinstance(v, float) and v.is_integer())) and v >= 0 for v in bounds)
    if len(bounds) != 2 or not whole or bounds[1] < bounds[0]:
        raise ValueError(f"starting_frame_range must be [low, high) with 0 <= low <= high, got {value!r}")
    return [int(bounds[0]), int(bounds[1])]


class RolloutDataset(RolloutFileBase):
    """Serve recorded trajectories to ``num_envs`` slots as environment-like transitions.

    Each slot plays one trajectory from a random frame in ``starting_frame_range`` ``[low, high)``, then the
    next, reporting ``done=True`` at the switch (``timeout=True`` unless a recorded termination; also at each
    first frame with ``mark_first_frame_done``). After ``dataset_loops`` passes (``< 1``: endless) batches are
    ``None``. ``data_dir``: directories searched recursively for ``trajectory_*``; ``keep_latest_n_trajs > 0``:
    only the newest n. ``wait_for_data_s``: seconds to wait while fewer than ``max(1, keep_latest_n_trajs)``
    trajectories exist (``None``: :data:`DEFAULT_WAIT_FOR_DATA_S` if a collector has started writing there,
    else raise; ``math.inf``: no limit; ``0``: never), rescanning every ``poll_interval_s`` or on :meth:`wake`.
    ``seed`` (shuffle order, starting frames): ``None`` draws it from NumPy's global generator, which a runner's
    ``seed`` sets.
    """

    Transition = namedarraytuple("Transition", list(_FIELD_SOURCES))
    get_frame_range = staticmethod(get_frame_range)

    def __init__(
        self,
        data_dir: str | Sequence[str],
        num_envs: int,
        dataset_loops: int = 1,
        random_shuffle_traj_order: bool = False,
        keep_latest_n_trajs: int = 0,
        starting_frame_range: Sequence[int] = (0, 1),
        device: str | torch.device = "cuda",
        wait_for_data_s: float | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        mark_first_frame_done: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__(data_dir, num_envs, device=device)
        self.data_dirs = [
            os.fspath(d) for d in ([data_dir] if isinstance(data_dir, (str, os.PathLike)) else data_dir)
        ]
        self.starting_frame_range = _frame_range(starting_frame_range)
        for name, value in (("dataset_loops", dataset_loops), ("keep_latest_n_trajs", keep_latest_n_trajs)):
            if not is_integer(value):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        self.dataset_loops = int(dataset_loops)
        self.random_shuffle_traj_order = bool(random_shuffle_traj_order)
        self.keep_latest_n_trajs = int(keep_latest_n_trajs)
        self.wait_for_data_s = None if wait_for_data_s is None else float(wait_for_data_s)
        if self.wait_for_data_s is not None and not self.wait_for_data_s >= 0:
            raise ValueError(f"wait_for_data_s must be >= 0 seconds or None, got {wait_for_data_s!r}")
        self.poll_interval_s = float(poll_interval_s)
        if not self.poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be > 0, got {poll_interval_s!r}")
        self.waiting_for_data = threading.Event()  # set while reset_all waits for a collector
        self._wake_event = threading.Event()
        self.mark_first_frame_done = bool(mark_first_frame_done)
        self.num_dataset_looped = 0
        self.metadata: dict[str, Any] | None = None
        self.trajectories: list[Trajectory] = []
        self._rng = np.random.default_rng(
            np.random.randint(2**63 - 1, dtype=np.int64) if seed is None else seed
        )
        self._queue: deque[Trajectory] = deque()
        self._slots: dict[str, torch.Tensor] | None = None
        self._traj: list[Trajectory | None] = [None] * self.num_envs
        self._file_idx, self._file_start, self._file_end, self._cursor = np.zeros((4, num_envs), np.int64)
        self._fresh = np.zeros(self.num_envs, dtype=bool)
        self._missing_file_warned = False
        self._missing_dirs: list[str] = []
        self._collector_started = False
        self._waited_s: float | None = None  # a wait that ended without data

    @classmethod
    def from_config(
        cls, cfg: Mapping[str, Any], num_envs: int, device: str | torch.device = "cuda"
    ) -> RolloutDataset:
        return rollout_dataset_from_config(cfg, num_envs, device)

    @property
    def num_trajectories(self) -> int:
        """Trajectories found by the last scan (after ``keep_latest_n_trajs``)."""
        return len(self.trajectories)

    def read_dataset_directory(self) -> bool:
        """Scan the data directories; whether ``max(1, keep_latest_n_trajs)`` trajectories exist."""
        trajectories, self._missing_dirs, self._collector_started = scan_trajectories(self.data_dirs)
        enough = len(trajectories) >= max(1, self.keep_latest_n_trajs)
        if self.keep_latest_n_trajs > 0:
            trajectories = trajectories[-self.keep_latest_n_trajs :]
        self.trajectories = trajectories
        self.metadata = next((t.metadata for t in trajectories if t.metadata is not None), None)
        return enough

    def _new_pass(self) -> None:
        order = list(self.trajectories)
        if self.random_shuffle_traj_order:
            order = [order[i] for i in self._rng.permutation(len(order))]
        if order and len(order) < self.num_envs:
            order = [order[i % len(order)] for i in range(self.num_envs)]
        self._queue = deque(order)

    def wake(self) -> None:
        """Rescan the data directories now instead of at the end of the poll interval (thread-safe)."""
        self._wake_event.set()

    def _wait_for_data(self) -> None:
        self._waited_s = None
        if self.read_dataset_directory():
            return
        wait = self.wait_for_data_s
        if wait is None:
            if not self._collector_started:
                if self.trajectories:
                    return  # fewer than keep_latest_n_trajs and nobody adds more: use them
                raise FileNotFoundError(self._no_data_message(nothing_will_come=True))
            wait = DEFAULT_WAIT_FOR_DATA_S
        if wait == 0:
            return
        deadline = time.monotonic() + wait
        need = max(1, self.keep_latest_n_trajs)
        # Sleeps in short slices and reads flags without locks: a signal handler that raises (training stopped
        # while it waits) must not interrupt a threading primitive holding its lock (a deadlock in `finally`).
        for missing in self._missing_dirs:  # created for the collector before it hears that we wait
            os.makedirs(missing, exist_ok=True)
        self._missing_dirs = []
        self.waiting_for_data.set()
        try:
            left = "with no time limit" if math.isinf(wait) else f"up to {wait:g} s"
            have = f"{len(self.trajectories)} trajectories in {self.data_dirs}"
            print(f"RolloutDataset: {have}, waiting {left} for {need}...", flush=True)
            while (remaining := deadline - time.monotonic()) > 0:
                until = time.monotonic() + min(self.poll_interval_s, remaining)
                while not self._wake_event.is_set() and time.monotonic() < until:
                    time.sleep(min(0.05, max(0.0, until - time.monotonic())))
                self._wake_event.clear()
                if self.read_dataset_directory():
                    return
            self._waited_s = wait
        finally:
            self.waiting_for_data.clear()

    def _no_data_message(self, nothing_will_come: bool = False) -> str:
        where = f"no trajectory in {self.data_dirs}"
        if self._waited_s is not None:
            where += f" after waiting {self._waited_s:g} s"
        elif self._missing_dirs:
            where = f"data directory {self._missing_dirs[0]!r} does not exist"
        where += " (expected trajectory_<k>/traj_<a>_<b>.npz files from DemonstrationSaver / DaggerSaver)"
        key = "wait_for_data_s (TwoStageRunner: pretrain_dataset.wait_for_data_s)"
        if self._waited_s is not None:
            started = "; a collector had started writing there" if self._collector_started else ""
            return f"RolloutDataset: {where}{started}. Check the collector or raise {key}."
        fix = f"Record a dataset (st_rl.runners.demonstration.DemonstrationSaver), fix data_dir, or set {key}"
        if nothing_will_come:
            will = "and no collector has started writing there, so nothing will arrive"
            return f"RolloutDataset: {where}, {will}. {fix} to the seconds to wait for a collector that starts later."
        return f"RolloutDataset: {where}. {fix} > 0 to wait for a collector."

    def reset_all(self) -> None:
        """Scan the data (waiting as ``wait_for_data_s`` says) and start the first pass."""
        self._wait_for_data()
        if not self.trajectories or (self._missing_dirs and self.wait_for_data_s == 0):
            raise FileNotFoundError(self._no_data_message())
        if len(self.trajectories) < self.keep_latest_n_trajs:
            msg = f"keep_latest_n_trajs={self.keep_latest_n_trajs} but only {len(self.trajectories)} trajectories"
            warnings.warn(f"RolloutDataset: {msg} exist in {self.data_dirs}; using them all.", stacklevel=2)
        total = sum(t.length for t in self.trajectories)
        print(f"RolloutDataset: {len(self.trajectories)} trajectories found, {total} timesteps in total.")
        self.num_dataset_looped = 0
        self._new_pass()
        self._traj = [None] * self.num_envs
        self._fresh[:] = False

    def _next_trajectory(self) -> Trajectory:
        if not self._queue:
            if self.dataset_loops >= 1 and self.num_dataset_looped + 1 >= self.dataset_loops:
                raise DatasetExhausted
            previous = self.trajectories
            self.read_dataset_directory()  # pick up trajectories a running collector added
            if not self.trajectories:
                self.trajectories = previous
            self.num_dataset_looped += 1
            self._new_pass()
        return self._queue.popleft()

    def refresh_handlers(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Give the slots of ``env_ids`` (all when ``None``) new trajectories; raises DatasetExhausted."""
        for env in self._env_ids_array(env_ids).tolist():
            self._start_trajectory(env, self._next_trajectory())

    def _env_ids_array(self, env_ids: Sequence[int] | torch.Tensor | None) -> np.ndarray:
        if env_ids is None:
            return np.arange(self.num_envs)
        raw = env_ids.detach().cpu().numpy() if isinstance(env_ids, torch.Tensor) else env_ids
        ids = np.asarray(raw, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_envs):
            raise IndexError(f"env_ids must be in [0, {self.num_envs}), got {ids.tolist()}")
        return ids

    def _start_trajectory(self, env: int, traj: Trajectory) -> None:
        while True:
            low, high = self.starting_frame_range
            start = low if high <= low + 1 else int(self._rng.integers(low, high))
            start = min(start, traj.length - 1)
            self._traj[env] = traj
            self._file_idx[env] = bisect.bisect_right(traj.bounds, start) - 1
            self._cursor[env] = start
            self._fresh[env] = self.mark_first_frame_done
            if self._load_file(env):
                return
            traj = self._next_trajectory()

    def _load_file(self, env: int) -> bool:
        """Load the slot's current file; False (warning once) when it has disappeared."""
        traj = self._traj[env]
        assert traj is not None
        idx = int(self._file_idx[env])
        path = os.path.join(traj.path, traj.files[idx])
        start, stop = traj.bounds[idx], traj.bounds[idx + 1]
        try:
            arrays = file_fields(read_trajectory_file(path), traj.metadata, path, stop - start)
        except FileNotFoundError:
            if not self._missing_file_warned:
                msg = f"RolloutDataset: files of {traj.path} disappeared while reading; trajectory cut there"
                warnings.warn(msg, stacklevel=4)
                self._missing_file_warned = True
            return False
        fields = {k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for k, v in arrays.items()}
        slots = self._ensure_slots(fields, stop - start, path)
        for key, value in fields.items():
            slots[key][env, : stop - start] = value
        self._file_start[env] = start
        self._file_end[env] = stop
        return True

    def _ensure_slots(
        self, fields: dict[str, torch.Tensor], length: int, path: str
    ) -> dict[str, torch.Tensor]:
        if self._slots is None:  # width 0, grown below
            self._slots = {k: v.new_zeros(self.num_envs, 0, *v.shape[1:]) for k, v in fields.items()}
        slots = self._slots
        shapes = {k: tuple(v.shape[1:]) for k, v in fields.items()}
        before = {k: tuple(v.shape[2:]) for k, v in slots.items()}
        if shapes != before:
            raise TrajectoryFileError(
                f"{path}: per-frame shapes {shapes} unlike the files read before ({before}); all trajectories "
                "of a dataset must be recorded from the same environment"
            )
        width = slots["observations"].shape[1]
        if length > width:  # grown in place to the longest file (fill_transition holds this dict)
            slots.update({key: buffer_expand(value, length - width, dim=1) for key, value in slots.items()})
        return slots

    def get_buffer(self, num_transitions_per_env: int | None = None) -> Any:
        """An empty ``Transition``, ``(N, ...)`` or ``(T, N, ...)`` (privileged fields ``None`` if not recorded)."""
        if self._slots is None:
            raise RuntimeError("RolloutDataset.get_buffer: no data loaded yet; call reset() first")
        lead = ([] if num_transitions_per_env is None else [int(num_transitions_per_env)]) + [self.num_envs]
        slots = self.Transition(**{name: self._slots.get(key) for name, key in _FIELD_SOURCES.items()})
        return buffer_func(slots, lambda slot: slot.new_empty(*lead, *slot.shape[2:]))

    def fill_transition(self, buffer: Any, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Write the next transition of the slots ``env_ids`` (all when ``None``) into ``buffer``; advance."""
        assert self._slots is not None, "call reset() first"
        slots = self._slots
        ids = self._env_ids_array(env_ids)
        rows = self.all_env_ids if env_ids is None else torch.from_numpy(ids).to(self.device)

        def frame(*names: str) -> dict[str, torch.Tensor | None]:
            pos = torch.from_numpy(self._cursor[ids] - self._file_start[ids]).to(self.device)
            keys = {name: _FIELD_SOURCES[name] for name in names}
            return {name: slots[key][rows, pos] if key in slots else None for name, key in keys.items()}

        values = frame("observation", "privileged_observation", "action", "reward", "done", "timeout")
        cut = self._fresh[ids].copy()
        # advance; only slots leaving their file need Python-level work
        self._cursor[ids] += 1
        self._fresh[ids] = False
        for k in np.nonzero(self._cursor[ids] >= self._file_end[ids])[0].tolist():
            env = int(ids[k])
            traj = self._traj[env]
            assert traj is not None
            if self._cursor[env] < traj.length:
                self._file_idx[env] += 1
                if self._load_file(env):
                    continue
            self._start_trajectory(env, self._next_trajectory())
            cut[k] = True
        if cut.any():
            cut_t, done = torch.from_numpy(cut).to(self.device), values["done"]
            assert done is not None and values["timeout"] is not None
            values.update(done=done | cut_t, timeout=values["timeout"] | (cut_t & ~done))
        values.update(frame("next_observation", "next_privileged_observation"))
        for name, value in values.items():
            dst = getattr(buffer, name)
            if dst is not None and value is not None:
                dst[rows] = value


_CONFIG_KEYS = tuple(
    p for p in inspect.signature(RolloutDataset).parameters if p not in ("num_envs", "device")
)


def rollout_dataset_from_config(
    cfg: Mapping[str, Any], num_envs: int, device: str | torch.device = "cuda"
) -> RolloutDataset:
    """A :class:`RolloutDataset` from a ``pretrain_dataset`` dict (``scan_dir``: legacy ``data_dir``)."""
    cfg = dict(cfg)
    if "scan_dir" in cfg:
        if "data_dir" in cfg:
            raise ValueError("pretrain_dataset config gives both 'data_dir' and its legacy alias 'scan_dir'")
        cfg["data_dir"] = cfg.pop("scan_dir")
    if cfg.pop("keep_latest_ratio", None) is not None:
        msg = "pretrain_dataset 'keep_latest_ratio' is not supported and is ignored; use keep_latest_n_trajs."
        warnings.warn(msg, stacklevel=2)
    close = {k: difflib.get_close_matches(k, _CONFIG_KEYS, n=1) for k in cfg if k not in _CONFIG_KEYS}
    if close:
        hints = [f"'{k}'" + (f" (did you mean '{c[0]}'?)" if c else "") for k, c in close.items()]
        raise ValueError(
            f"Unknown pretrain_dataset keys: {', '.join(hints)}. Valid keys: {list(_CONFIG_KEYS)} (num_envs and "
            "device come from the runner; legacy: 'scan_dir', 'keep_latest_ratio')."
        )
    if "data_dir" not in cfg:
        raise ValueError("pretrain_dataset needs 'data_dir' (or the legacy 'scan_dir'): the dataset dir")
    return RolloutDataset(num_envs=num_envs, device=device, **cfg)
