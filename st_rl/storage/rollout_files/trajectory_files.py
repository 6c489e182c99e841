"""Demonstration datasets on disk (``docs/datasets.md``): ``<data_dir>/trajectory_<k>/traj_<a:06d>_<b:06d>.npz``
(or ``.pickle``) holds frames ``[a, b)`` of trajectory k."""

from __future__ import annotations

import codecs
import importlib
import math
import os
import pickle
import re
import zipfile
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from st_rl.env.layout import normalize_segments, segments_size
from st_rl.utils.data_compresser import get_compresser
from st_rl.utils.files import atomic_write, read_json

DATASET_FORMAT = "st_rl.demonstrations"
DATASET_FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
TRAJ_DIR_RE = re.compile(r"trajectory_(\d+)")
TRAJ_FILE_RE = re.compile(r"traj_(\d+)_(\d+)\.(npz|pickle|pkl)")


class TrajectoryFileError(ValueError):
    """A trajectory file or dataset directory is unreadable, corrupt or inconsistent with its metadata."""


def trajectory_file_name(start: int, stop: int, ext: str = "npz") -> str:
    """``traj_<start:06d>_<stop:06d>.<ext>``: the file holding frames ``[start, stop)``."""
    return f"traj_{int(start):06d}_{int(stop):06d}.{ext}"


def get_frame_range(filename: str) -> tuple[int, int]:
    """The frame range ``(start, stop)`` (stop exclusive) of a trajectory file name."""
    match = TRAJ_FILE_RE.fullmatch(os.path.basename(filename))
    if match is None:
        raise ValueError(f"{filename!r} is not a trajectory file name (expected traj_<start>_<stop>.npz)")
    return int(match.group(1)), int(match.group(2))


FILE_FORMATS = ("npz", "pickle")  # "pickle": the reference's form, a pickled dict of numpy arrays


def write_trajectory_file(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write numeric ``arrays`` atomically as ``.npz``, or ``.pickle`` / ``.pkl`` (a pickled dict, protocol 4)."""
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


# The globals a pickle of numpy arrays needs (numpy.core.* or numpy._core.*); nothing else is ever resolved.
_NUMPY_BUILDERS = {("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")}
_PLAIN_GLOBALS = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}
_PICKLE_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, LookupError)


class _RefusedGlobal(pickle.UnpicklingError):
    pass


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        package, _, submodule = module.rpartition(".")
        if package in ("numpy.core", "numpy._core") and (submodule, name) in _NUMPY_BUILDERS:
            for candidate in (f"numpy._core.{submodule}", f"numpy.core.{submodule}"):
                try:
                    return getattr(importlib.import_module(candidate), name)
                except (ImportError, AttributeError):
                    continue
        if (module, name) in _PLAIN_GLOBALS:
            return _PLAIN_GLOBALS[(module, name)]
        raise _RefusedGlobal(f"{module}.{name}")


def load_legacy_pickle(path: str) -> dict[str, np.ndarray]:
    """A ``traj_*.pickle`` dict of numpy arrays, unpickled without running code (only numpy's builders)."""
    try:
        with open(path, "rb") as f:
            data = _NumpyOnlyUnpickler(f).load()
    except _RefusedGlobal as e:
        raise TrajectoryFileError(
            f"Refusing to load {path}: it references {e}, but a trajectory pickle may only hold numpy arrays. "
            "Convert a trusted file to .npz outside st_rl; otherwise delete it."
        ) from None
    except _PICKLE_ERRORS as e:  # not FileNotFoundError: the caller handles a vanished file
        raise _corrupt(path, e) from e
    if not isinstance(data, dict):
        raise TrajectoryFileError(f"{path} holds a {type(data).__name__}, expected a dict of numpy arrays")
    out: dict[str, np.ndarray] = {}
    for key, value in data.items():
        if isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        if not isinstance(value, np.ndarray) or value.dtype == object:
            dtype = f" of dtype {value.dtype}" if isinstance(value, np.ndarray) else ""
            msg = f"{path}: entry {key!r} is a {type(value).__name__}{dtype}; trajectory files hold numeric arrays"
            raise TrajectoryFileError(msg)
        out[str(key)] = value
    return out


def _corrupt(path: str, e: Exception, extra: str = "") -> TrajectoryFileError:
    return TrajectoryFileError(
        f"Cannot read trajectory file {path}: {type(e).__name__}: {e}. The file is truncated or corrupt{extra}; "
        "delete it (or its trajectory directory) and re-record."
    )


def read_trajectory_file(path: str) -> dict[str, np.ndarray]:
    """Read one ``.npz`` / ``.pickle`` trajectory file; refuses corrupt files, objects and NaN / Inf."""
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
            raise _corrupt(path, e, ", or holds Python objects (never loaded by st_rl)") from e
    for key, value in arrays.items():
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            first = np.argwhere(~np.isfinite(value))[0]
            frame = f"frame {int(first[0])}" if value.ndim else "its value"
            raise TrajectoryFileError(
                f"{path}: array {key!r} holds NaN/Inf ({int((~np.isfinite(value)).sum())} value(s), the first at "
                f"{frame}); delete the file (or its trajectory directory) and re-record"
            )
    return arrays


def read_metadata(directory: str) -> dict[str, Any] | None:
    """``<directory>/metadata.json`` as a dict, or ``None`` when absent."""
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.isfile(path):
        return None
    metadata = read_json(path, "dataset metadata", "restore or delete it", object_pairs_hook=OrderedDict)
    if not isinstance(metadata, dict):
        raise TrajectoryFileError(f"{path} holds a {type(metadata).__name__}, not a dict; fix or delete it")
    return metadata


def assemble_observations(
    arrays: Mapping[str, np.ndarray], metadata: Mapping[str, Any] | None, path: str, prefix: str = "obs_"
) -> np.ndarray:
    """The ``(L, num_obs)`` float32 ``observations``, or the ``obs_<component>`` arrays in ``obs_segments`` order."""
    segments = normalize_segments((metadata or {}).get("obs_segments"))
    if "observations" in arrays:
        obs = np.asarray(arrays["observations"])
        return obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)
    components = [k for k in arrays if k.startswith(prefix)]
    if not components:
        raise TrajectoryFileError(f"{path} has no 'observations' and no '{prefix}<component>' arrays")
    if segments is None:
        raise TrajectoryFileError(
            f"{path} stores observations per component ({components}) but no metadata.json gives "
            "'obs_segments'; restore metadata.json in the dataset directory."
        )
    mapping = dict((metadata or {}).get("obs_disassemble_mapping") or {})
    parts = []
    for name, shape in segments.items():
        key = prefix + name
        if key not in arrays:
            raise TrajectoryFileError(f"{path} lacks '{key}' (component {name!r} of obs_segments)")
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


@dataclass
class Trajectory:
    """One ``trajectory_<k>`` directory: its files (file ``i``: frames ``[bounds[i], bounds[i + 1])``), metadata."""

    path: str
    files: list[str]
    bounds: list[int]
    metadata: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def length(self) -> int:
        return self.bounds[-1]


def scan_trajectory_dir(path: str, metadata: dict[str, Any] | None) -> Trajectory | None:
    names = [n for n in os.listdir(path) if TRAJ_FILE_RE.fullmatch(n)]
    if not names:
        return None
    ranges = sorted((*get_frame_range(n), n) for n in names)
    bounds = [0]
    for start, stop, name in ranges:
        if start != bounds[-1] or stop <= start:
            raise TrajectoryFileError(
                f"{path}: {name} covers frames [{start}, {stop}) but frame {bounds[-1]} comes next; the "
                "trajectory has a gap, an overlap or an empty file. Delete the directory or the stray file."
            )
        bounds.append(stop)
    return Trajectory(path, [name for *_, name in ranges], bounds, metadata)


def scan_trajectories(data_dirs: Sequence[str]) -> tuple[list[Trajectory], list[str], bool]:
    """Non-empty ``trajectory_*`` directories under ``data_dirs``, oldest first; the missing data dirs; and
    whether a collector has started writing (a ``metadata.json`` or a ``trajectory_*`` directory exists)."""
    found: list[tuple[float, str, Trajectory]] = []
    missing: list[str] = []
    started = False
    for data_dir in data_dirs:
        if not os.path.isdir(data_dir):
            missing.append(data_dir)
            continue
        for root, dirs, _ in os.walk(data_dir):
            metadata = read_metadata(root)
            started = started or metadata is not None
            keep = []
            for d in sorted(dirs):
                if TRAJ_DIR_RE.fullmatch(d):
                    started = True
                    traj = scan_trajectory_dir(os.path.join(root, d), metadata)
                    if traj is not None:
                        found.append((os.path.getmtime(traj.path), traj.path, traj))
                else:
                    keep.append(d)
            dirs[:] = keep  # do not walk into trajectory directories
    found.sort(key=lambda item: (item[0], item[1]))
    return [t for _, _, t in found], missing, started


# per-frame array -> (dtype, one value per frame)
FILE_FIELDS = {
    "observations": (np.float32, False),
    "privileged_observations": (np.float32, False),
    "actions": (np.float32, False),
    "rewards": (np.float32, True),
    "dones": (bool, True),
    "timeouts": (bool, True),
}


def file_fields(
    arrays: dict[str, np.ndarray], metadata: Mapping[str, Any] | None, path: str, length: int
) -> dict[str, np.ndarray]:
    """The per-frame fields of one file as numpy arrays, checked against the file name and the metadata."""
    for key in ("actions", "rewards", "dones"):
        if key not in arrays:
            raise TrajectoryFileError(f"{path} lacks the {key!r} array; the file is incomplete")
    obs = assemble_observations(arrays, metadata, path)
    segments = normalize_segments((metadata or {}).get("obs_segments"))
    widths = {
        "num_obs": (metadata or {}).get("num_obs"),
        "obs_segments": segments_size(segments) if segments else None,
    }
    for key, width in widths.items():
        if width is not None and obs.shape[1] != int(width):
            msg = f"{path}: {obs.shape[1]} observation columns, but metadata.json {key} gives {width}"
            raise TrajectoryFileError(f"{msg}; move the file or fix metadata.json")

    arrays = {"timeouts": np.zeros(length, dtype=bool), **arrays, "observations": obs}
    out: dict[str, np.ndarray] = {}
    for key, (dtype, scalar) in FILE_FIELDS.items():
        if key not in arrays:
            continue  # privileged_observations are optional
        value = np.asarray(arrays[key])
        if value.ndim == 0 or value.shape[0] != length:
            frames = value.shape[0] if value.ndim else 0
            raise TrajectoryFileError(f"{path}: {key!r} has {frames} frames but the file name says {length}")
        value = value.reshape(length, -1)
        if scalar and value.shape[1] != 1:
            raise TrajectoryFileError(f"{path}: {key!r} must hold one value per frame, got {value.shape[1]}")
        out[key] = (value.reshape(length) if scalar else value).astype(dtype, copy=False)
    return out
