"""Checkpoint files: atomic writes, weights-only loading, RNG state capture, finiteness and RNG-state checks."""

from __future__ import annotations

import errno
import os
import pickle
import random
import re
import warnings
from typing import Any

import numpy as np
import torch

from st_rl.utils.files import atomic_write

# 2: normaliser statistics in model_state_dict (also copied to the reference's obs_norm_state_dict entries).
# 1: only in obs_norm_state_dict / critic_obs_norm_state_dict (rsl_rl 2.x).
CHECKPOINT_FORMAT_VERSION = 2
_NORMALIZER_ENTRIES = (
    ("obs_norm_state_dict", "actor_obs_normalizer."),
    ("critic_obs_norm_state_dict", "critic_obs_normalizer."),
)


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or lacks required entries."""


class NonFiniteCheckpointError(CheckpointError):
    """A checkpoint (being written or read) holds NaN or Inf."""


class CheckpointWriteError(OSError):
    """Checkpoint ``path`` could not be written (disk full, ...); an earlier file there is untouched."""

    def __init__(self, path: str, cause: BaseException) -> None:
        detail = _torch_error_detail(cause)
        code = cause.errno if isinstance(cause, OSError) else None
        why = "check the folder."
        if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            why = "the disk is full (or your quota is used up)."
        elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
            why = "the folder is not writable."
        elif code is None:  # torch.save's RuntimeError("[enforce fail at inline_container.cc:...]")
            why = "is the disk full?"
        super().__init__(
            f"cannot write checkpoint {path} ({detail}): {why} Free some space or write elsewhere, then resume "
            "from the last checkpoint saved; that file was not changed (an earlier version of it is intact)."
        )
        self.path = path


def _torch_error_detail(error: BaseException) -> str:
    """The first sentence of a torch / OS error message, without torch's advice."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    reason = re.search(r"WeightsUnpickler error:\s*(\S.*)", text)  # torch's weights-only unpickler's reason
    lines = [reason.group(1)] if reason else [ln for ln in text.splitlines() if ln.strip()]
    detail = lines[0].strip() if lines else type(error).__name__
    global_name = re.search(r"Unsupported global: GLOBAL (\S+)", detail)
    if global_name:
        return f"it references {global_name.group(1)}"
    detail = re.split(r"(?<=[^.])\. (?=[A-Z(])", detail, maxsplit=1)[0].rstrip(". ")
    if "weights_only" in detail or "add_safe_globals" in detail:
        detail = type(error).__name__
    return detail or type(error).__name__


def nonfinite_tensors(obj: Any, where: str = "checkpoint") -> list[str]:
    """Names (``where['key'][0]...``) of the float tensors in nested dicts / lists ``obj`` holding NaN or Inf."""
    if isinstance(obj, torch.Tensor):
        if (obj.is_floating_point() or obj.is_complex()) and not bool(torch.isfinite(obj).all()):
            return [where]
        return []
    if not isinstance(obj, (dict, list, tuple)):
        return []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    return [name for key, value in items for name in nonfinite_tensors(value, f"{where}[{key!r}]")]


def describe_names(names: list[str], limit: int = 5) -> str:
    """``"a, b, c"``, or the first ``limit`` names and ``"(and N more)"``."""
    shown = ", ".join(names[:limit])
    return shown + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def check_weights_only_safe(obj: Any, where: str = "infos") -> None:
    """Raise ``TypeError`` if ``obj`` holds something ``torch.load(weights_only=True)`` cannot read back."""
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor, torch.Size)):
        return
    if isinstance(obj, (dict, list, tuple)):
        for k, v in obj.items() if isinstance(obj, dict) else enumerate(obj):
            if not isinstance(k, (str, int)):
                raise TypeError(f"{where} has a key of type {type(k).__name__}; use str or int keys.")
            check_weights_only_safe(v, f"{where}[{k!r}]")
        return
    msg = f"{where} is a {type(obj).__name__}, which a weights-only checkpoint cannot hold"
    raise TypeError(f"{msg}; store tensors, numbers, strings, lists or dicts.")


def save_checkpoint(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (TypeError for non-weights-only data, else CheckpointWriteError)."""
    check_weights_only_safe(state, "checkpoint")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # torch.save reports a full disk as RuntimeError("[enforce fail at inline_container.cc:...]")
        atomic_write(path, lambda f: torch.save(state, f), prefix=".tmp_", suffix="", sync=True)
    except (OSError, RuntimeError) as e:
        raise CheckpointWriteError(path, e) from e


def load_checkpoint(
    path: str, map_location: Any = None, required: tuple[str, ...] = ("model_state_dict",)
) -> dict:
    """Load a weights-only checkpoint, check its ``required`` keys (else CheckpointError) and migrate it."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Checkpoint not found: {path or repr(path) + ' (an empty path)'}")
    try:
        with warnings.catch_warnings():  # a plain pickle: refused below, without torch's protocol warning
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as e:
        detail = _torch_error_detail(e)
        if isinstance(e, pickle.UnpicklingError) and "WeightsUnpickler" in str(e):
            if detail.startswith("it references "):
                what = f"{detail}, a Python object that is not a tensor, number, string, list or dict"
            else:
                what = f"it is not a PyTorch checkpoint of plain data ({detail})"
            raise CheckpointError(
                f"Cannot read checkpoint {path}: {what}. st_rl never unpickles arbitrary Python objects (they could "
                "run code): re-save it as a dict of tensors, numbers, strings, lists and dicts where it was made "
                "(docs/security.md)."
            ) from e
        if os.path.getsize(path) == 0:
            detail = "the file is empty"
        msg = f"Cannot read checkpoint {path}: {detail}. The file is truncated or corrupt, or not a PyTorch checkpoint"
        raise CheckpointError(f"{msg}: copy it again, or use another checkpoint of the run.") from e
    if not isinstance(state, dict):
        raise CheckpointError(f"Checkpoint {path} holds a {type(state).__name__}, expected a dict.")
    missing = [k for k in required if k not in state]
    if missing:
        msg = f"Checkpoint {path} lacks {missing}; it has {sorted(state)}"
        raise CheckpointError(f"{msg}: is it an st_rl / rsl_rl checkpoint?")
    return migrate_checkpoint(state)


def migrate_checkpoint(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` in the current format: format 1's normaliser entries moved into ``model_state_dict`` (an unused
    critic normaliser takes the actor's statistics)."""
    if not any(entry in state for entry, _ in _NORMALIZER_ENTRIES):
        return state
    state = dict(state)
    model = dict(state.get("model_state_dict") or {})
    actor, critic = (state.pop(entry, None) for entry, _ in _NORMALIZER_ENTRIES)
    shape = _mean_shape(actor)
    if _unused(critic) and not _unused(actor) and shape is not None and shape == _mean_shape(critic):
        critic = actor
    for stats, (_, prefix) in zip((actor, critic), _NORMALIZER_ENTRIES):
        if isinstance(stats, dict) and not any(k.startswith(prefix) for k in model):
            model.update({prefix + k: v for k, v in stats.items()})
    state["model_state_dict"] = model
    return state


def _unused(stats: Any) -> bool:
    count = stats.get("count") if isinstance(stats, dict) else None
    return isinstance(count, torch.Tensor) and int(count) == 0


def _mean_shape(stats: Any) -> torch.Size | None:
    mean = stats.get("_mean") if isinstance(stats, dict) else None
    return mean.shape if isinstance(mean, torch.Tensor) else None


def capture_rng_state() -> dict[str, Any]:
    """The torch (CPU, CUDA), numpy and Python RNG states, weights-only-safe."""
    np_state: Any = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": list(random.getstate()[1]),
        "python_gauss_next": random.getstate()[2],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _numpy_state(entry: dict[str, Any]) -> tuple[Any, ...]:
    keys = entry["keys"].cpu().numpy().astype(np.uint32)
    return ("MT19937", keys, int(entry["pos"]), int(entry["has_gauss"]), float(entry["cached_gaussian"]))


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` captured."""
    torch.set_rng_state(state["torch"].cpu())
    np.random.set_state(_numpy_state(state["numpy"]))
    random.setstate((3, tuple(state["python"]), state.get("python_gauss_next")))
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([s.cpu() for s in cuda_states])


def check_rng_state(state: Any, where: str = "rng_state") -> None:
    """Raise ``ValueError`` naming the entry if :func:`restore_rng_state` could not restore ``state``."""
    if not isinstance(state, dict):
        raise ValueError(f"{where} is a {type(state).__name__}, expected a dict")
    missing = [key for key in ("torch", "numpy", "python") if key not in state]
    if missing:
        raise ValueError(f"{where} lacks {missing}")
    restorers = {  # each tried on a private generator
        "torch": lambda s: torch.Generator().set_state(s.cpu()),
        "numpy": lambda s: np.random.RandomState().set_state(_numpy_state(s)),
        "python": lambda s: random.Random().setstate((3, tuple(s), state.get("python_gauss_next"))),
    }
    for key, restore in restorers.items():
        try:
            restore(state[key])
        except Exception as e:  # each library raises its own kinds for a bad state
            raise ValueError(f"{where}[{key!r}] is not a {key} RNG state: {first_line(e)}") from e
    cuda = state.get("cuda")
    if cuda is not None and not (
        isinstance(cuda, (list, tuple))
        and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda)
    ):
        raise ValueError(f"{where}['cuda'] is not a list of CUDA RNG states (uint8 tensors)")


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (else its class name)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
