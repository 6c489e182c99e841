"""Replay demonstration datasets (recorded by ``DemonstrationSaver`` / ``DaggerSaver``) as transitions.

On-disk format (see ``docs/datasets.md``)::

    <data_dir>/metadata.json
    <data_dir>/trajectory_<k>/traj_<a:06d>_<b:06d>.npz     # frames [a, b) of trajectory k
                                       (or .pickle, the reference's form; one dataset may mix both)

Each file holds numpy arrays with ``b - a`` rows: ``observations`` (or ``obs_<component>`` per
component of ``metadata["obs_segments"]``, compressed as ``metadata["obs_disassemble_mapping"]`` says),
optionally ``privileged_observations``, ``actions``, ``rewards``, ``dones``, ``timeouts`` and ``values``.
``.npz`` files are read with ``np.load(allow_pickle=False)``; ``.pickle`` files (a dict of numpy arrays)
are read with an unpickler that only resolves the numpy functions needed to rebuild arrays, so loading
never executes code from the data.

:class:`RolloutDataset` serves ``N`` environment slots. Each slot reads one trajectory at a time from a
random starting frame, switching files and trajectories as an environment would reset. Per-slot bookkeeping
is Python-level (it only runs when a slot reaches the end of a file); the frames of every slot's current
file live in one ``(N, max_file_len, ...)`` tensor per field, so each step gathers the whole batch with one
indexing operation per field.
"""

from __future__ import annotations

import bisect
import codecs
import difflib
import importlib
import json
import math
import numbers
import os
import pickle
import re
import threading
import time
import warnings
import zipfile
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from st_rl.env.layout import normalize_segments
from st_rl.storage.rollout_files.base import DatasetExhausted, RolloutFileBase
from st_rl.utils.collections import namedarraytuple
from st_rl.utils.data_compresser import get_compresser
from st_rl.utils.utils import atomic_write, write_json_atomic

__all__ = [
    "DATASET_FORMAT",
    "DEFAULT_POLL_INTERVAL_S",
    "DEFAULT_WAIT_FOR_DATA_S",
    "DATASET_FORMAT_VERSION",
    "FILE_FORMATS",
    "METADATA_FILE",
    "RolloutDataset",
    "TrajectoryFileError",
    "get_frame_range",
    "load_legacy_pickle",
    "read_metadata",
    "read_trajectory_file",
    "rollout_dataset_from_config",
    "trajectory_file_name",
    "write_json_atomic",
    "write_trajectory_file",
]

DATASET_FORMAT = "st_rl.demonstrations"
DATASET_FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
TRAJ_DIR_RE = re.compile(r"trajectory_(\d+)")
TRAJ_FILE_RE = re.compile(r"traj_(\d+)_(\d+)\.(npz|pickle|pkl)")
DEFAULT_WAIT_FOR_DATA_S = 600.0
"""Seconds a :class:`RolloutDataset` with ``wait_for_data_s=None`` waits for a collector that has started writing
its data directory (``metadata.json`` or ``trajectory_*`` directories there) before it gives up."""
DEFAULT_POLL_INTERVAL_S = 10.0
"""Seconds between two scans of the data directories while a :class:`RolloutDataset` waits."""


class TrajectoryFileError(ValueError):
    """A trajectory file or dataset directory is unreadable, corrupt or inconsistent with its metadata."""


# ---------------------------------------------------------------------------------------------- file names
def trajectory_file_name(start: int, stop: int, ext: str = "npz") -> str:
    """``traj_<start:06d>_<stop:06d>.<ext>``: the file holding frames ``[start, stop)``."""
    return f"traj_{int(start):06d}_{int(stop):06d}.{ext}"


def get_frame_range(filename: str) -> tuple[int, int]:
    """The frame range ``(start, stop)`` (stop exclusive) of a trajectory file name.

    Raises:
        ValueError: the name is not ``traj_<a>_<b>.npz`` / ``.pickle``.
    """
    match = TRAJ_FILE_RE.fullmatch(os.path.basename(filename))
    if match is None:
        raise ValueError(f"{filename!r} is not a trajectory file name (expected traj_<start>_<stop>.npz)")
    return int(match.group(1)), int(match.group(2))


# ---------------------------------------------------------------------------------------------- writing
FILE_FORMATS = ("npz", "pickle")  # "pickle": the reference's form, a pickled dict of numpy arrays


def write_trajectory_file(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` atomically (temporary file in the same directory, then rename) in the form the
    extension of ``path`` names: ``.npz`` (``np.savez``), or ``.pickle`` / ``.pkl`` (the reference's form: a
    pickled dict of numpy arrays, protocol 4, readable by ``pickle.load`` and by :func:`load_legacy_pickle`).

    Raises:
        TypeError: an array has dtype ``object`` (it could not be read back without running code).
        ValueError: another extension.
    """
    for key, value in arrays.items():
        if np.asarray(value).dtype == object:
            raise TypeError(f"array {key!r} has dtype object; trajectory files hold numeric arrays only")
    data = {str(k): np.asarray(v) for k, v in arrays.items()}
    ext = os.path.splitext(path)[1]
    if ext in (".pickle", ".pkl"):
        atomic_write(path, lambda f: pickle.dump(data, f, protocol=4))
    elif ext == ".npz":
        savez: Any = np.savez  # keyword names are array names
        atomic_write(path, lambda f: savez(f, **data))
    else:
        raise ValueError(f"{path}: unknown trajectory file type {ext!r} (expected .npz or .pickle)")


# ---------------------------------------------------------------------------------------------- reading
def _numpy_attr(submodule: str, name: str) -> Any:
    for module in (f"numpy._core.{submodule}", f"numpy.core.{submodule}"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise pickle.UnpicklingError(f"this numpy version has no {submodule}.{name}")


# (module, name) pairs a pickle of numpy arrays needs; nothing else is ever resolved.
_ALLOWED_PICKLE_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): lambda: _numpy_attr("multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): lambda: _numpy_attr("multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"): lambda: _numpy_attr("multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"): lambda: _numpy_attr("multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"): lambda: _numpy_attr("numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"): lambda: _numpy_attr("numeric", "_frombuffer"),
    ("numpy", "ndarray"): lambda: np.ndarray,
    ("numpy", "dtype"): lambda: np.dtype,
    ("_codecs", "encode"): lambda: codecs.encode,  # bytes in protocol-2 pickles
}


class _RefusedGlobal(pickle.UnpicklingError):
    pass


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Resolves only the numpy reconstruction functions in :data:`_ALLOWED_PICKLE_GLOBALS`."""

    def find_class(self, module: str, name: str) -> Any:
        factory = _ALLOWED_PICKLE_GLOBALS.get((module, name))
        if factory is None:
            raise _RefusedGlobal(f"{module}.{name}")
        return factory()


def load_legacy_pickle(path: str) -> dict[str, np.ndarray]:
    """Read a ``traj_*.pickle`` in the reference's form (a dict of numpy arrays) without executing code from it.

    The unpickler resolves only the numpy functions that rebuild arrays and dtypes; any other global (e.g. a
    payload calling ``os.system``) is refused before it is called.

    A value that is a 1-tuple holding an array (the ancestor's ``observations`` trailing-comma bug) is
    unwrapped.

    Raises:
        TrajectoryFileError: the file references anything but numpy arrays, is corrupt, or is not a dict of
            numeric arrays.
    """
    try:
        with open(path, "rb") as f:
            data = _NumpyOnlyUnpickler(f).load()
    except _RefusedGlobal as e:
        raise TrajectoryFileError(
            f"Refusing to load {path}: it references {e}, but a trajectory pickle may only hold numpy "
            "arrays (loading it could execute code). If the file comes from a source you trust, convert it to "
            ".npz with numpy outside st_rl; otherwise delete it."
        ) from None
    except FileNotFoundError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
    ) as e:
        raise TrajectoryFileError(
            f"Cannot read trajectory file {path}: {type(e).__name__}: {e}. The file is truncated or "
            "corrupt; delete it (or its trajectory directory) and re-record."
        ) from e
    if not isinstance(data, dict):
        raise TrajectoryFileError(f"{path} holds a {type(data).__name__}, expected a dict of numpy arrays")
    out: dict[str, np.ndarray] = {}
    for key, value in data.items():
        if isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        if not isinstance(value, np.ndarray) or value.dtype == object:
            raise TrajectoryFileError(
                f"{path}: entry {key!r} is a {type(value).__name__}"
                + (f" of dtype {value.dtype}" if isinstance(value, np.ndarray) else "")
                + "; trajectory files hold numeric numpy arrays only"
            )
        out[str(key)] = value
    return out


def read_trajectory_file(path: str) -> dict[str, np.ndarray]:
    """Read one trajectory file (``.npz``, or ``.pickle`` in the reference's form) into a dict of numpy arrays.

    Raises:
        FileNotFoundError: the file does not exist.
        TrajectoryFileError: the file is corrupt, holds anything but numeric arrays, or NaN / Inf (the message
            names the file, the array and the first frame).
    """
    ext = os.path.splitext(path)[1]
    if ext in (".pickle", ".pkl"):
        arrays = load_legacy_pickle(path)
    elif ext != ".npz":
        raise TrajectoryFileError(f"{path}: unknown trajectory file type {ext!r} (expected .npz or .pickle)")
    else:
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except FileNotFoundError:
            raise
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
            raise TrajectoryFileError(
                f"Cannot read trajectory file {path}: {type(e).__name__}: {e}. The file is truncated or corrupt, "
                "or holds Python objects (never loaded by st_rl); delete it (or its trajectory directory) and "
                "re-record."
            ) from e
    for key, value in arrays.items():  # a diverged recording: refused here, not by the normaliser or the loss
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            first = np.argwhere(~np.isfinite(value))[0]
            frame = f"frame {int(first[0])}" if value.ndim else "its value"
            raise TrajectoryFileError(
                f"{path}: array {key!r} holds NaN/Inf ({int((~np.isfinite(value)).sum())} value(s), the first at "
                f"{frame}); the recording diverged or the file is corrupt: delete the file (or its trajectory "
                "directory) and re-record"
            )
    return arrays


def read_metadata(directory: str) -> dict[str, Any] | None:
    """``<directory>/metadata.json`` as a dict, or ``None`` when absent.

    Raises:
        TrajectoryFileError: the file is not valid JSON.
    """
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            metadata = json.load(f, object_pairs_hook=OrderedDict)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TrajectoryFileError(f"{path} is not valid JSON ({e}); restore or delete it") from e
    if not isinstance(metadata, dict):
        raise TrajectoryFileError(
            f"{path} holds a {type(metadata).__name__}, not the dataset's metadata (a mapping); restore or delete it"
        )
    return metadata


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def assemble_observations(
    arrays: Mapping[str, np.ndarray], metadata: Mapping[str, Any] | None, path: str, prefix: str = "obs_"
) -> np.ndarray:
    """The flat ``(L, num_obs)`` float32 observations of one file: ``observations`` as stored, or the
    ``obs_<component>`` entries decompressed and concatenated in ``metadata["obs_segments"]`` order.

    Raises:
        TrajectoryFileError: components or metadata are missing, or widths disagree with the metadata.
    """
    segments = normalize_segments((metadata or {}).get("obs_segments"))
    if "observations" in arrays:
        obs = np.asarray(arrays["observations"])
        obs = obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)
        if segments is not None:
            width = sum(math.prod(s) for s in segments.values())
            if obs.shape[1] != width:
                raise TrajectoryFileError(
                    f"{path}: observations have {obs.shape[1]} columns but metadata.json obs_segments add up "
                    f"to {width}; the file does not belong to this dataset (move it, or fix metadata.json)."
                )
        return obs
    components = [k for k in arrays if k.startswith(prefix)]
    if not components:
        raise TrajectoryFileError(f"{path} has no 'observations' and no '{prefix}<component>' arrays")
    if segments is None:
        raise TrajectoryFileError(
            f"{path} stores observations per component ({components}) but the dataset has no metadata.json "
            "with 'obs_segments' to reassemble them; restore metadata.json in the dataset directory."
        )
    mapping = dict((metadata or {}).get("obs_disassemble_mapping") or {})
    parts = []
    for name, shape in segments.items():
        key = prefix + name
        if key not in arrays:
            raise TrajectoryFileError(
                f"{path} lacks '{key}' (metadata obs_segments lists component {name!r}); the file is "
                "incomplete or belongs to another dataset."
            )
        value = arrays[key]
        if name in mapping:
            value = get_compresser(mapping[name])[1](value)
        value = np.asarray(value, dtype=np.float32)
        value = value.reshape(value.shape[0], -1)
        if value.shape[1] != math.prod(shape):
            raise TrajectoryFileError(
                f"{path}: component {name!r} has {value.shape[1]} values per frame but metadata obs_segments "
                f"says shape {tuple(shape)}"
            )
        parts.append(value)
    return np.concatenate(parts, axis=-1)


# ---------------------------------------------------------------------------------------------- scanning
@dataclass
class _Trajectory:
    """One ``trajectory_<k>`` directory: its files (sorted, contiguous from frame 0) and metadata."""

    path: str
    files: list[str]
    starts: list[int]
    stops: list[int]
    metadata: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def length(self) -> int:
        return self.stops[-1]


def _scan_trajectory_dir(path: str, metadata: dict[str, Any] | None) -> _Trajectory | None:
    names = [n for n in os.listdir(path) if TRAJ_FILE_RE.fullmatch(n)]
    if not names:
        return None
    ranges = sorted((*get_frame_range(n), n) for n in names)
    expected = 0
    for start, stop, name in ranges:
        if start != expected or stop <= start:
            raise TrajectoryFileError(
                f"{path}: {name} covers frames [{start}, {stop}) but frame {expected} comes next; the "
                "trajectory has a gap, an overlap or an empty file. Delete the directory or the stray file."
            )
        expected = stop
    return _Trajectory(
        path=path,
        files=[r[2] for r in ranges],
        starts=[r[0] for r in ranges],
        stops=[r[1] for r in ranges],
        metadata=metadata,
    )


def scan_trajectories(data_dirs: Sequence[str]) -> tuple[list[_Trajectory], list[str]]:
    """Non-empty ``trajectory_*`` directories under ``data_dirs`` sorted by modification time (oldest
    first), and the data directories that do not exist."""
    found: list[tuple[float, str, _Trajectory]] = []
    missing: list[str] = []
    for data_dir in data_dirs:
        if not os.path.isdir(data_dir):
            missing.append(data_dir)
            continue
        for root, dirs, _ in os.walk(data_dir):
            metadata = read_metadata(root)
            keep = []
            for d in sorted(dirs):
                if TRAJ_DIR_RE.fullmatch(d):
                    traj = _scan_trajectory_dir(os.path.join(root, d), metadata)
                    if traj is not None:
                        found.append((os.path.getmtime(traj.path), traj.path, traj))
                else:
                    keep.append(d)
            dirs[:] = keep  # do not walk into trajectory directories
    found.sort(key=lambda item: (item[0], item[1]))
    return [t for _, _, t in found], missing


def _collector_started(data_dirs: Sequence[str]) -> bool:
    """Whether a collector has started writing one of ``data_dirs``: a ``metadata.json`` or a ``trajectory_*``
    directory exists below it (DemonstrationSaver creates both before its first round ends)."""
    for data_dir in data_dirs:
        if not os.path.isdir(data_dir):
            continue
        for _, dirs, files in os.walk(data_dir):
            if METADATA_FILE in files or any(TRAJ_DIR_RE.fullmatch(d) for d in dirs):
                return True
    return False


# ---------------------------------------------------------------------------------------------- dataset
class RolloutDataset(RolloutFileBase):
    """Serve recorded trajectories to ``num_envs`` slots as environment-like transitions.

    Each slot reads one trajectory from a starting frame drawn uniformly from ``starting_frame_range``
    (clipped to the trajectory), one frame per call. Transition ``t`` of a slot is
    ``(observation_t, privileged_observation_t, action_t, reward_t, done_t, timeout_t, observation_{t+1},
    privileged_observation_{t+1})``. When a slot's trajectory ends, it takes the next trajectory and, as an
    environment that resets, reports ``done=True`` with the next observation being the new trajectory's first
    frame; a trajectory that ends without a recorded done (cut by the end of the recording) also reports
    ``timeout=True``. The first frame served from every newly started trajectory is reported with
    ``done=True`` (``timeout=True`` unless it is a recorded termination) so that a consumer drops whatever
    state it carried from the previous source; disable with ``mark_first_frame_done=False``.

    Trajectories are handed out in modification-time order (or shuffled) from a queue. When the queue is
    empty, the data directories are scanned again and a new loop starts, ``dataset_loops`` loops in all
    (``< 1``: forever); after that the dataset is exhausted: :meth:`get_batch` returns ``None`` and
    iteration stops. With fewer trajectories than slots, a loop hands every trajectory out several times
    (cycling through them until each slot got one), so slots share trajectories.

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

    Transition = namedarraytuple(
        "Transition",
        [
            "observation",
            "privileged_observation",
            "action",
            "reward",
            "done",
            "timeout",
            "next_observation",
            "next_privileged_observation",
        ],
    )
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
        if isinstance(data_dir, (str, os.PathLike)):
            self.data_dirs = [os.fspath(data_dir)]
        elif (
            isinstance(data_dir, (list, tuple))
            and data_dir
            and all(isinstance(d, (str, os.PathLike)) for d in data_dir)
        ):
            self.data_dirs = [os.fspath(d) for d in data_dir]
        else:
            raise TypeError(
                f"data_dir must be a directory path or a non-empty list of paths, got {data_dir!r}"
            )
        iterable = hasattr(starting_frame_range, "__iter__") and not isinstance(starting_frame_range, str)
        rng_range = list(starting_frame_range) if iterable else []
        if (
            len(rng_range) != 2
            or not all(
                (_is_integer(v) or (isinstance(v, float) and v.is_integer())) and v >= 0 for v in rng_range
            )
            or rng_range[1] < rng_range[0]
        ):
            raise ValueError(
                f"starting_frame_range must be [low, high) with 0 <= low <= high, got {starting_frame_range!r}"
            )
        for name, value in (("dataset_loops", dataset_loops), ("keep_latest_n_trajs", keep_latest_n_trajs)):
            if not _is_integer(value):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        self.dataset_loops = int(dataset_loops)
        self.random_shuffle_traj_order = bool(random_shuffle_traj_order)
        self.keep_latest_n_trajs = int(keep_latest_n_trajs)
        self.starting_frame_range = [int(rng_range[0]), int(rng_range[1])]
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
        self.trajectories: list[_Trajectory] = []
        self._rng = np.random.default_rng(seed)
        self._queue: deque[_Trajectory] = deque()
        self._max_file_len = 1
        self._slots: dict[str, torch.Tensor] | None = None
        self._traj: list[_Trajectory | None] = [None] * self.num_envs
        n = self.num_envs
        self._file_idx = np.zeros(n, dtype=np.int64)
        self._file_start = np.zeros(n, dtype=np.int64)
        self._file_end = np.zeros(n, dtype=np.int64)
        self._cursor = np.zeros(n, dtype=np.int64)
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
            if not _collector_started(self.data_dirs):
                if self.trajectories:
                    return  # fewer than keep_latest_n_trajs, and nobody adds more: use them (reset_all warns)
                raise FileNotFoundError(self._no_data_message(nothing_will_come=True))
            wait = DEFAULT_WAIT_FOR_DATA_S
        if wait == 0:
            return
        deadline = time.monotonic() + wait
        need = max(1, self.keep_latest_n_trajs)
        announced = False
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
                self.waiting_for_data.set()
                if self._wake_event.wait(min(self.poll_interval_s, remaining)):
                    self._wake_event.clear()
                if self.read_dataset_directory():
                    return
        finally:
            self.waiting_for_data.clear()

    def _no_data_message(self, nothing_will_come: bool = False) -> str:
        """Why the first batch has no trajectory, and what to do."""
        expected = (
            "expected trajectory_<k>/traj_<a>_<b>.npz files, as DemonstrationSaver and DaggerSaver write them"
        )
        where = (
            f"data directory {self._missing_dirs[0]!r} does not exist"
            if self._missing_dirs
            else f"no trajectory in {self.data_dirs}"
        )
        key = "wait_for_data_s (TwoStageRunner: pretrain_dataset.wait_for_data_s)"
        if self._waited_s is not None:
            started = (
                "; a collector had started writing there (metadata.json or trajectory_* directories exist) but "
                "wrote no trajectory file"
                if _collector_started(self.data_dirs)
                else ""
            )
            return (
                f"RolloutDataset: no trajectory in {self.data_dirs} after waiting {self._waited_s:g} s ({expected})"
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

    def _next_trajectory(self) -> _Trajectory:
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

    def _start_trajectory(self, env: int, traj: _Trajectory) -> None:
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

    def _warn_missing(self, traj: _Trajectory) -> None:
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
        fields = self._file_fields(read_trajectory_file(path), traj.metadata, path, stop - start)
        slots = self._ensure_slots(fields, stop - start, path)
        for key, value in fields.items():
            slots[key][env, : stop - start] = value
        self._file_start[env] = start
        self._file_end[env] = stop

    def _file_fields(
        self, arrays: dict[str, np.ndarray], metadata: Mapping[str, Any] | None, path: str, length: int
    ) -> dict[str, torch.Tensor]:
        """The per-frame fields of one file as tensors on the device, checked against the file name."""
        for key in ("actions", "rewards", "dones"):
            if key not in arrays:
                raise TrajectoryFileError(f"{path} lacks the {key!r} array; the file is incomplete")
        obs = assemble_observations(arrays, metadata, path)
        num_obs = (metadata or {}).get("num_obs")
        if num_obs is not None and obs.shape[1] != int(num_obs):
            raise TrajectoryFileError(
                f"{path}: observations have {obs.shape[1]} columns but metadata.json says num_obs={num_obs}"
            )

        def rows(key: str, value: np.ndarray) -> np.ndarray:
            value = np.asarray(value)
            if value.ndim == 0 or value.shape[0] != length:
                frames = value.shape[0] if value.ndim else 0
                raise TrajectoryFileError(
                    f"{path}: {key!r} has {frames} frames but the file name says {length}; the file is "
                    "truncated or misnamed."
                )
            return value.reshape(length, -1)

        def scalars(key: str, dtype: Any) -> np.ndarray:
            value = rows(key, arrays[key])
            if value.shape[1] != 1:
                raise TrajectoryFileError(
                    f"{path}: {key!r} must hold one value per frame, got {value.shape[1]}"
                )
            return value.reshape(length).astype(dtype)

        out: dict[str, np.ndarray] = {
            "observations": rows("observations", obs),
            "actions": rows("actions", arrays["actions"]).astype(np.float32),
            "rewards": scalars("rewards", np.float32),
            "dones": scalars("dones", bool),
            "timeouts": (scalars("timeouts", bool) if "timeouts" in arrays else np.zeros(length, dtype=bool)),
        }
        if "privileged_observations" in arrays:
            priv = rows("privileged_observations", arrays["privileged_observations"])
            out["privileged_observations"] = priv.astype(np.float32)
        return {k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for k, v in out.items()}

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

        return self.Transition(
            observation=empty("observations"),
            privileged_observation=empty("privileged_observations"),
            action=empty("actions"),
            reward=empty("rewards"),
            done=empty("dones"),
            timeout=empty("timeouts"),
            next_observation=empty("observations"),
            next_privileged_observation=empty("privileged_observations"),
        )

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

        def gather(key: str) -> torch.Tensor:
            return slots[key][gather_rows, pos]

        def put(dst: torch.Tensor | None, value: torch.Tensor) -> None:
            if dst is None:
                return
            if rows is None:
                dst.copy_(value)
            else:
                dst[rows] = value

        has_priv = "privileged_observations" in slots
        put(buffer.observation, gather("observations"))
        if has_priv:
            put(buffer.privileged_observation, gather("privileged_observations"))
        put(buffer.action, gather("actions"))
        put(buffer.reward, gather("rewards"))
        done = gather("dones")
        timeout = gather("timeouts")
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
        if has_priv:
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
