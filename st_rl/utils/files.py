"""Reading the small data files of a run (JSON configs and metadata) with errors that name the file."""

from __future__ import annotations

import errno
import json
import os
from typing import Any

__all__ = ["DataFileError", "read_json", "refuse_special_file"]


class DataFileError(ValueError):
    """A file st_rl reads (``config.json``, ``policy.json``, a motion file, ...) cannot be used; the message
    names the file, what is wrong and what to do."""


def refuse_special_file(path: str, what: str = "file") -> None:
    """Refuse to write ``path`` when a folder, a device, FIFO or socket is there (an atomic write replaces
    ``path``: run as root, it would replace ``/dev/null`` itself).

    Raises:
        OSError: (``EEXIST``) naming ``path`` and what is there.
    """
    if os.path.lexists(path) and not os.path.isfile(path):
        kind = "a folder" if os.path.isdir(path) else "not a regular file (a device, FIFO or socket)"
        raise OSError(errno.EEXIST, f"cannot write the {what} there: it is {kind}; give a file path", path)


def read_json(path: str, what: str = "JSON file", fix: str = "restore it or delete it", **kwargs: Any) -> Any:
    """``json.load(path, **kwargs)`` with errors that name the file, ``what`` it is and the ``fix``.

    Raises:
        FileNotFoundError: ``path`` does not exist (the message names it).
        DataFileError: it cannot be read or is not valid JSON (with the line and column).
    """
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
