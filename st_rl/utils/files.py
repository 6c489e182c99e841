"""Reading and atomically writing the small data files of a run, with errors that name the file."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from typing import IO, Any

__all__ = ["DataFileError", "atomic_write", "read_json", "refuse_special_file", "write_json_atomic"]


class DataFileError(ValueError):
    """A file st_rl reads (``config.json``, a motion file, ...) cannot be used; the message says why and what to do."""


def refuse_special_file(path: str, what: str = "file") -> None:
    """Raise ``OSError`` (``EEXIST``) when a folder, device, FIFO or socket is at ``path`` (an atomic write
    would replace it: run as root, even ``/dev/null``)."""
    if os.path.lexists(path) and not os.path.isfile(path):
        kind = "a folder" if os.path.isdir(path) else "not a regular file (a device, FIFO or socket)"
        raise OSError(errno.EEXIST, f"cannot write the {what} there: it is {kind}; give a file path", path)


def atomic_write(
    path: str,
    write: Callable[[IO[Any]], None],
    mode: str = "wb",
    prefix: str = ".",
    suffix: str = ".tmp",
    sync: bool = False,
) -> None:
    """Write a file atomically: ``write(f)`` fills a temporary file ``<prefix><name>*<suffix>`` beside it (fsynced
    with ``sync``), which then replaces ``path``; on any error it is removed and ``path`` is untouched."""
    refuse_special_file(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix + os.path.basename(path), suffix=suffix, dir=directory)
    try:
        with open(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            write(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json_atomic(path: str, data: Any) -> None:
    atomic_write(path, lambda f: json.dump(data, f, indent=2), mode="w")


def read_json(path: str, what: str = "JSON file", fix: str = "restore it or delete it", **kwargs: Any) -> Any:
    """``json.load(path, **kwargs)``; FileNotFoundError or DataFileError naming the file, ``what`` it is and the ``fix``."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, **kwargs)
    except json.JSONDecodeError as e:
        raise DataFileError(
            f"{path}:{e.lineno}:{e.colno}: the {what} is not valid JSON ({e.msg}); {fix}"
        ) from e
    except (UnicodeDecodeError, OSError) as e:
        raise DataFileError(f"cannot read the {what} {path}: {e}; {fix}") from e
