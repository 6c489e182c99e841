"""Replay demonstration datasets (recorded by ``DemonstrationSaver`` / ``DaggerSaver``) as transitions.

The on-disk format and its readers are in :mod:`st_rl.storage.rollout_files.trajectory_files` (re-exported
here). :class:`RolloutDataset` serves ``N`` environment slots. Each slot reads one trajectory at a time from a
random starting frame, switching files and trajectories as an environment would reset. Per-slot bookkeeping
is Python-level (it only runs when a slot reaches the end of a file); the frames of every slot's current
file live in one ``(N, max_file_len, ...)`` tensor per field, so each step gathers the whole batch with one
indexing operation per field.
"""

from __future__ import annotations

import bisect
import difflib
import math
import numbers
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.storage.rollout_files.base import DatasetExhausted, RolloutFileBase
from st_rl.storage.rollout_files.trajectory_files import (
    DATASET_FORMAT,
    DATASET_FORMAT_VERSION,
    FILE_FORMATS,
    METADATA_FILE,
    TRAJ_DIR_RE,
    TRAJ_FILE_RE,
    Trajectory,
    TrajectoryFileError,
    assemble_observations,
    collector_started,
    file_fields,
    get_frame_range,
    load_legacy_pickle,
    read_metadata,
    read_trajectory_file,
    scan_trajectories,
    trajectory_file_name,
    write_trajectory_file,
)
from st_rl.utils.collections import namedarraytuple
from st_rl.utils.utils import write_json_atomic

__all__ = [
    "DATASET_FORMAT",
    "DATASET_FORMAT_VERSION",
    "DEFAULT_POLL_INTERVAL_S",
    "DEFAULT_WAIT_FOR_DATA_S",
    "FILE_FORMATS",
    "METADATA_FILE",
    "TRAJ_DIR_RE",
    "TRAJ_FILE_RE",
    "RolloutDataset",
    "TrajectoryFileError",
    "assemble_observations",
    "get_frame_range",
    "load_legacy_pickle",
    "read_metadata",
    "read_trajectory_file",
    "rollout_dataset_from_config",
    "trajectory_file_name",
    "write_json_atomic",
    "write_trajectory_file",
]

DEFAULT_WAIT_FOR_DATA_S = 600.0
"""Seconds a :class:`RolloutDataset` with ``wait_for_data_s=None`` waits for a collector that has started writing
its data directory (``metadata.json`` or ``trajectory_*`` directories there) before it gives up."""
DEFAULT_POLL_INTERVAL_S = 10.0
"""Seconds between two scans of the data directories while a :class:`RolloutDataset` waits."""


# Transition field -> the per-frame array it is read from
_FIELD_SOURCES = {
    "observation": "observations",
    "privileged_observation": "privileged_observations",
    "action": "actions",
    "reward": "rewards",
    "done": "dones",
    "timeout": "timeouts",
    "next_observation": "observations",
    "next_privileged_observation": "privileged_observations",
}


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _data_dirs(data_dir: Any) -> list[str]:
    if isinstance(data_dir, (str, os.PathLike)):
        return [os.fspath(data_dir)]
    if (
        isinstance(data_dir, (list, tuple))
        and data_dir
        and all(isinstance(d, (str, os.PathLike)) for d in data_dir)
    ):
        return [os.fspath(d) for d in data_dir]
    raise TypeError(f"data_dir must be a directory path or a non-empty list of paths, got {data_dir!r}")


def _frame_range(value: Any) -> list[int]:
    iterable = hasattr(value, "__iter__") and not isinstance(value, str)
    bounds: list[Any] = list(value) if iterable else []
    whole = all((_is_integer(v) or (isinstance(v, float) and v.is_integer())) and v >= 0 for v in bounds)
    if len(bounds) != 2 or not whole or bounds[1] < bounds[0]:
        raise ValueError(f"starting_frame_range must be [low, high) with 0 <= low <= high, got {value!r}")
    return [int(bounds[0]), int(bounds[1])]


def no_data_message(
    data_dirs: list[str], missing_dirs: list[str], waited_s: float | None, nothing_will_come: bool = False
) -> str:
    """Why the first batch has no trajectory, and what to do."""
    expected = (
        "expected trajectory_<k>/traj_<a>_<b>.npz files, as DemonstrationSaver and DaggerSaver write them"
    )
    where = (
        f"data directory {missing_dirs[0]!r} does not exist"
        if missing_dirs
        else f"no trajectory in {data_dirs}"
    )
    key = "wait_for_data_s (TwoStageRunner: pretrain_dataset.wait_for_data_s)"
    if waited_s is not None:
        started = (
            "; a collector had started writing there (metadata.json or trajectory_* directories exist) but "
            "wrote no trajectory file"
            if collector_started(data_dirs)
            else ""
        )
        return (
            f"RolloutDataset: no trajectory in {data_dirs} after waiting {waited_s:g} s ({expected})"
            f"{started}. Check that the collector runs and writes into this directory, or wait longer with "
            f"a larger {key}."
        )
    if nothing_will_come:
        return (
            f"RolloutDataset: {where} ({expected}), and no collector has started writing there (no "
            "metadata.json, no trajectory_* directory), so nothing will arrive. Record a dataset with "
            "st_rl.runners.demonstration.DemonstrationSaver, fix data_dir, or, when a collector (e.g. a "
            f"DaggerSaver) will write there after this run starts, set {key} to the seconds to wait for it, "
            "e.g. 600."
        )
    return (
        f"RolloutDataset: {where} ({expected}). Record a dataset there with "
        f"st_rl.runners.demonstration.DemonstrationSaver, fix data_dir, or set {key} > 0 to wait for a "
        "collector that is starting."
    )


class RolloutDataset(RolloutFileBase):
    """Serve recorded trajectories to ``num_envs`` slots as environment-like transitions.

    Each slot reads one trajectory, one frame per call, from a starting frame drawn uniformly from
    ``starting_frame_range`` (clipped to the trajectory). Transition ``t`` of a slot holds the fields of
    :attr:`Transition` at frame ``t`` (``next_*`` at ``t + 1``). When a slot's trajectory ends it takes the next
    one and, like an environment that resets, reports ``done=True`` with the new trajectory's first frame as
    next observation (``timeout=True`` too where no done was recorded). The first frame of every new trajectory
    is reported as done (timeout unless a recorded termination) so that a consumer drops carried state; disable
    with ``mark_first_frame_done=False``.

    Trajectories are handed out in modification-time order (or shuffled). An empty queue rescans the data
    directories and starts a new loop, ``dataset_loops`` in all (``< 1``: forever); then the dataset is
    exhausted (:meth:`get_batch` returns ``None``, iteration stops). With fewer trajectories than slots, a loop
    hands each one out several times.

    Args:
        data_dir: dataset directory or list of directories (searched recursively for ``trajectory_*``).
        num_envs: number of slots ``N``.
        dataset_loops: how many times the trajectories are handed out; ``< 1`` loops forever.
        random_shuffle_traj_order: shuffle the trajectory order at every loop.
        keep_latest_n_trajs: if ``> 0``, only the ``n`` most recently modified trajectories are used.
        starting_frame_range: ``[low, high)`` of the starting frame of each trajectory (``low == high``:
            always ``low``); clipped to the trajectory length.
        device: device of the returned tensors (used as given; tests pass ``"cpu"``).
        wait_for_data_s: how long to wait when fewer than ``max(1, keep_latest_n_trajs)`` trajectories exist
            because a collector (a :class:`~st_rl.runners.demonstration.DemonstrationSaver` or
            :class:`~st_rl.runners.dagger_saver.DaggerSaver` running beside the trainer) has not written them
            yet. ``None`` (default): wait up to :data:`DEFAULT_WAIT_FOR_DATA_S` (600 s) when a collector has
            started writing the data directory (it holds ``metadata.json`` or ``trajectory_*`` directories), and
            raise at once when none has (the directory is missing or empty: nothing will arrive). A number
            ``> 0``: wait up to that many seconds in any case, creating missing data directories for the
            collector (a collector that starts after the trainer, as a DaggerSaver does; ``math.inf``: no time
            limit). ``0``: never wait. A wait that ends without data raises, naming the directories.
        poll_interval_s: seconds between scans while waiting (default :data:`DEFAULT_POLL_INTERVAL_S`, 10);
            :meth:`wake` rescans at once.
        mark_first_frame_done: report the first frame of each new trajectory as done (see above).
        seed: seed of the generator drawing starting frames and shuffles (``None``: nondeterministic).

    Raises:
        FileNotFoundError: on the first batch: a data directory does not exist or holds no trajectory, and no
            collector will write one (see ``wait_for_data_s``), or the wait ended without data.
        TrajectoryFileError: a file is corrupt or disagrees with the dataset's metadata.
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
        self.data_dirs = _data_dirs(data_dir)
        self.starting_frame_range = _frame_range(starting_frame_range)
        for name, value in (("dataset_loops", dataset_loops), ("keep_latest_n_trajs", keep_latest_n_trajs)):
            if not _is_integer(value):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        self.dataset_loops = int(dataset_loops)
        self.random_shuffle_traj_order = bool(random_shuffle_traj_order)
        self.keep_latest_n_trajs = int(keep_latest_n_trajs)
        self.wait_for_data_s = None if wait_for_data_s is None else float(wait_for_data_s)
        if self.wait_for_data_s is not None and not self.wait_for_data_s >= 0:
            raise ValueError(
                f"wait_for_data_s must be >= 0 (seconds; math.inf: no limit) or None (wait "
                f"{DEFAULT_WAIT_FOR_DATA_S:g} s for a collector that has started), got {wait_for_data_s!r}"
            )
        self.poll_interval_s = float(poll_interval_s)
        if not self.poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be > 0, got {poll_interval_s!r}")
        self.waiting_for_data = threading.Event()  # set while reset_all waits for a collector
        self._wake_event = threading.Event()
        self.mark_first_frame_done = bool(mark_first_frame_done)
        self.num_dataset_looped = 0
        self.metadata: dict[str, Any] | None = None
        self.trajectories: list[Trajectory] = []
        self._rng = np.random.default_rng(seed)
        self._queue: deque[Trajectory] = deque()
        self._max_file_len = 1
        self._slots: dict[str, torch.Tensor] | None = None
        self._traj: list[Trajectory | None] = [None] * self.num_envs
        n = self.num_envs
        self._file_idx, self._file_start, self._file_end, self._cursor = (
            np.zeros(n, dtype=np.int64) for _ in range(4)
        )
        self._fresh = np.zeros(n, dtype=bool)
        self._missing_file_warned = False
        self._missing_dirs: list[str] = []
        self._waited_s: float | None = None  # the wait that ended without data (for the message)

    @classmethod
    def from_config(
        cls, cfg: Mapping[str, Any], num_envs: int, device: str | torch.device = "cuda"
    ) -> RolloutDataset:
        """Build from a ``pretrain_dataset`` config dict (see :func:`rollout_dataset_from_config`)."""
        return rollout_dataset_from_config(cfg, num_envs, device)

    # ------------------------------------------------------------------ directory scanning
    @property
    def num_trajectories(self) -> int:
        """Trajectories found by the last scan (after ``keep_latest_n_trajs``)."""
        return len(self.trajectories)

    def read_dataset_directory(self) -> bool:
        """Scan the data directories; returns whether at least ``max(1, keep_latest_n_trajs)`` trajectories
        exist. Missing directories are reported by :meth:`reset_all`."""
        trajectories, self._missing_dirs = scan_trajectories(self.data_dirs)
        enough = len(trajectories) >= max(1, self.keep_latest_n_trajs)
        if self.keep_latest_n_trajs > 0:
            trajectories = trajectories[-self.keep_latest_n_trajs :]
        self.trajectories = trajectories
        self.metadata = next((t.metadata for t in trajectories if t.metadata is not None), None)
        if trajectories:
            self._max_file_len = max(
                self._max_file_len, max(b - a for t in trajectories for a, b in zip(t.starts, t.stops))
            )
        return enough

    def _new_pass(self) -> None:
        order = list(self.trajectories)
        if self.random_shuffle_traj_order:
            order = [order[i] for i in self._rng.permutation(len(order))]
        if order and len(order) < self.num_envs:
            # fewer trajectories than slots: a loop hands each one out several times, so every slot gets one
            order = [order[i % len(order)] for i in range(self.num_envs)]
        self._queue = deque(order)

    def wake(self) -> None:
        """Rescan the data directories now instead of at the end of the current poll interval (thread-safe;
        a collector or a test calls it after writing trajectories)."""
        self._wake_event.set()

    def _wait_for_data(self) -> None:
        """Scan the data; when too few trajectories exist, wait for a collector as ``wait_for_data_s`` says,
        polling every ``poll_interval_s`` (missing directories are created so that the collector can write
        into them). Returns when the data is there or the wait is over (``_waited_s`` set).

        Raises:
            FileNotFoundError: ``wait_for_data_s=None`` and no trajectory exists and no collector has started
                writing the data directories: nothing will arrive.
        """
        self._waited_s = None
        if self.read_dataset_directory():
            return
        wait = self.wait_for_data_s
        if wait is None:
            if not collector_started(self.data_dirs):
                if self.trajectories:
                    return  # fewer than keep_latest_n_trajs, and nobody adds more: use them (reset_all warns)
                raise FileNotFoundError(self._no_data_message(nothing_will_come=True))
            wait = DEFAULT_WAIT_FOR_DATA_S
        if wait == 0:
            return
        deadline = time.monotonic() + wait
        need = max(1, self.keep_latest_n_trajs)
        announced = False
        # Sleeps in short slices and reads flags without locks: a signal handler that raises (training stopped
        # while it waits) must not interrupt a threading primitive holding its lock (a deadlock in `finally`).
        for missing in self._missing_dirs:  # created for the collector before it hears that we wait
            os.makedirs(missing, exist_ok=True)
        self.waiting_for_data.set()
        try:
            while True:
                for missing in self._missing_dirs:
                    os.makedirs(missing, exist_ok=True)
                self._missing_dirs = []
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._waited_s = wait
                    return
                if not announced:
                    left = "with no time limit" if math.isinf(wait) else f"up to {wait:g} s"
                    print(
                        f"RolloutDataset: {len(self.trajectories)} trajectories in {self.data_dirs}, waiting "
                        f"{left} for {need} (a collector writes them; rescanning every "
                        f"{self.poll_interval_s:g} s)...",
                        flush=True,
                    )
                    announced = True
                until = time.monotonic() + min(self.poll_interval_s, remaining)
                while not self._wake_event.is_set() and time.monotonic() < until:
                    time.sleep(min(0.05, max(0.0, until - time.monotonic())))
                self._wake_event.clear()
                if self.read_dataset_directory():
                    return
        finally:
            self.waiting_for_data.clear()

    def _no_data_message(self, nothing_will_come: bool = False) -> str:
        return no_data_message(self.data_dirs, self._missing_dirs, self._waited_s, nothing_will_come)

    def reset_all(self) -> None:
        """Scan the data (waiting for it as ``wait_for_data_s`` says, see the class docstring) and start the
        first loop."""
        self._wait_for_data()
        if not self.trajectories:
            raise FileNotFoundError(self._no_data_message())
        if self._missing_dirs and self.wait_for_data_s == 0:
            raise FileNotFoundError(self._no_data_message())
        if len(self.trajectories) < self.keep_latest_n_trajs:
            warnings.warn(
                f"RolloutDataset: keep_latest_n_trajs={self.keep_latest_n_trajs} but only "
                f"{len(self.trajectories)} trajectories exist in {self.data_dirs}; using them all.",
                stacklevel=2,
            )
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

    # ------------------------------------------------------------------ handlers
    def refresh_handlers(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Give the slots of ``env_ids`` (all when ``None``) new trajectories from the queue.

        Raises:
            DatasetExhausted: no trajectory is left (caught by :meth:`reset`).
        """
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
            self._file_idx[env] = bisect.bisect_right(traj.starts, start) - 1
            self._cursor[env] = start
            self._fresh[env] = self.mark_first_frame_done
            try:
                self._load_file(env)
                return
            except FileNotFoundError:
                self._warn_missing(traj)
                traj = self._next_trajectory()

    def _warn_missing(self, traj: Trajectory) -> None:
        if not self._missing_file_warned:
            warnings.warn(
                f"RolloutDataset: files of {traj.path} disappeared while reading (a collector deleted the "
                "trajectory?); the trajectory is cut there. Further occurrences are not reported.",
                stacklevel=3,
            )
            self._missing_file_warned = True

    def _load_file(self, env: int) -> None:
        traj = self._traj[env]
        assert traj is not None
        idx = int(self._file_idx[env])
        path = os.path.join(traj.path, traj.files[idx])
        start, stop = traj.starts[idx], traj.stops[idx]
        arrays = file_fields(read_trajectory_file(path), traj.metadata, path, stop - start)
        fields = {k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for k, v in arrays.items()}
        slots = self._ensure_slots(fields, stop - start, path)
        for key, value in fields.items():
            slots[key][env, : stop - start] = value
        self._file_start[env] = start
        self._file_end[env] = stop

    def _ensure_slots(
        self, fields: dict[str, torch.Tensor], length: int, path: str
    ) -> dict[str, torch.Tensor]:
        if self._slots is None:
            width = max(self._max_file_len, length)
            self._slots = {
                k: torch.zeros(self.num_envs, width, *v.shape[1:], dtype=v.dtype, device=self.device)
                for k, v in fields.items()
            }
            return self._slots
        slots = self._slots
        if set(fields) != set(slots):
            have = "has" if "privileged_observations" in fields else "lacks"
            raise TrajectoryFileError(
                f"{path} {have} privileged_observations unlike the files read before; all trajectories of a "
                "dataset must be recorded from the same environment."
            )
        for key, value in fields.items():
            if value.shape[1:] != slots[key].shape[2:]:
                raise TrajectoryFileError(
                    f"{path}: {key} has per-frame shape {tuple(value.shape[1:])} but earlier files have "
                    f"{tuple(slots[key].shape[2:])}; all trajectories of a dataset must come from the same "
                    "environment."
                )
        width = slots["observations"].shape[1]
        if length > width:
            for key, value in slots.items():
                grown = torch.zeros(
                    self.num_envs, length, *value.shape[2:], dtype=value.dtype, device=self.device
                )
                grown[:, :width] = value
                slots[key] = grown
        return slots

    # ------------------------------------------------------------------ batches
    def get_buffer(self, num_transitions_per_env: int | None = None) -> Any:
        """A new ``Transition`` of empty tensors with leading dims ``(N,)`` or ``(T, N)``.

        ``privileged_observation`` / ``next_privileged_observation`` are ``None`` when the files have no
        privileged observations.
        """
        if self._slots is None:
            raise RuntimeError("RolloutDataset.get_buffer: no data loaded yet; call reset() first")
        lead = ([] if num_transitions_per_env is None else [int(num_transitions_per_env)]) + [self.num_envs]
        slots = self._slots

        def empty(key: str) -> torch.Tensor | None:
            if key not in slots:
                return None
            return torch.empty(*lead, *slots[key].shape[2:], dtype=slots[key].dtype, device=self.device)

        return self.Transition(**{name: empty(key) for name, key in _FIELD_SOURCES.items()})

    def fill_transition(self, buffer: Any, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Write the next transition of each slot of ``env_ids`` (all when ``None``) into ``buffer`` (leading
        dim N) and advance the slots.

        Raises:
            DatasetExhausted: a slot needs a new trajectory and none is left.
        """
        assert self._slots is not None, "call reset() first"
        slots = self._slots
        ids = self._env_ids_array(env_ids)
        rows = None if env_ids is None else torch.from_numpy(ids).to(self.device)
        gather_rows = self.all_env_ids if rows is None else rows

        def positions() -> torch.Tensor:
            return torch.from_numpy(self._cursor[ids] - self._file_start[ids]).to(self.device)

        pos = positions()

        def gather(key: str) -> torch.Tensor | None:
            return slots[key][gather_rows, pos] if key in slots else None

        def put(dst: torch.Tensor | None, value: torch.Tensor | None) -> None:
            if dst is None or value is None:
                return
            if rows is None:
                dst.copy_(value)
            else:
                dst[rows] = value

        put(buffer.observation, gather("observations"))
        put(buffer.privileged_observation, gather("privileged_observations"))
        put(buffer.action, gather("actions"))
        put(buffer.reward, gather("rewards"))
        done, timeout = slots["dones"][gather_rows, pos], slots["timeouts"][gather_rows, pos]
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
                try:
                    self._load_file(env)
                    continue
                except FileNotFoundError:
                    self._warn_missing(traj)
            self._start_trajectory(env, self._next_trajectory())
            cut[k] = True
        if cut.any():
            cut_t = torch.from_numpy(cut).to(self.device)
            timeout = timeout | (cut_t & ~done)
            done = done | cut_t
        put(buffer.done, done)
        put(buffer.timeout, timeout)
        pos = positions()
        put(buffer.next_observation, gather("observations"))
        put(buffer.next_privileged_observation, gather("privileged_observations"))


# ---------------------------------------------------------------------------------------------- config
_CONFIG_KEYS = (
    "data_dir",
    "dataset_loops",
    "random_shuffle_traj_order",
    "keep_latest_n_trajs",
    "starting_frame_range",
    "wait_for_data_s",
    "poll_interval_s",
    "mark_first_frame_done",
    "seed",
)


def rollout_dataset_from_config(
    cfg: Mapping[str, Any], num_envs: int, device: str | torch.device = "cuda"
) -> RolloutDataset:
    """Build a :class:`RolloutDataset` from a ``pretrain_dataset`` config dict (never mutated).

    Accepts the legacy legged_gym keys: ``scan_dir`` (an alias of ``data_dir``) and ``keep_latest_ratio``
    (ignored with a warning).

    Raises:
        ValueError: ``data_dir`` is missing, given twice, or the config has unknown keys.
    """
    cfg = dict(cfg)
    if "scan_dir" in cfg:
        if "data_dir" in cfg:
            raise ValueError("pretrain_dataset config gives both 'data_dir' and its legacy alias 'scan_dir'")
        cfg["data_dir"] = cfg.pop("scan_dir")
    if "keep_latest_ratio" in cfg:
        cfg.pop("keep_latest_ratio")
        warnings.warn(
            "pretrain_dataset 'keep_latest_ratio' is not supported and is ignored; use keep_latest_n_trajs.",
            stacklevel=2,
        )
    unknown = [k for k in cfg if k not in _CONFIG_KEYS]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, _CONFIG_KEYS, n=1)
            hint = " (num_envs and device come from the runner)" if key in ("num_envs", "device") else ""
            hints.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else hint))
        raise ValueError(
            f"Unknown pretrain_dataset keys: {', '.join(hints)}. Valid keys: {list(_CONFIG_KEYS)} "
            "(plus the legacy 'scan_dir' and 'keep_latest_ratio')."
        )
    if "data_dir" not in cfg:
        raise ValueError(
            "pretrain_dataset needs 'data_dir' (or the legacy 'scan_dir'): the dataset directory"
        )
    return RolloutDataset(num_envs=num_envs, device=device, **cfg)
