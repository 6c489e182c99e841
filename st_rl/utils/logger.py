"""Training logs: scalar writers (TensorBoard by default) and the console progress block."""

from __future__ import annotations

import datetime
import difflib
import math
import time
from collections.abc import Iterable
from typing import Any

import torch

from st_rl.utils.writers import (
    TRACKING_WRITERS,
    NullWriter,
    ScalarWriter,
    TensorBoardWriter,
    Writer,
    build_custom_writer,
)

__all__ = [
    "LOGGERS",
    "NullWriter",
    "ScalarWriter",
    "Stopwatch",
    "Writer",
    "aggregate_episode_infos",
    "format_console_block",
    "format_duration",
    "make_writer",
]


LOGGERS = ("tensorboard", "wandb", "neptune", "none")


def make_writer(kind: Any, log_dir: str | None, cfg: dict[str, Any] | None = None) -> Writer:
    """The writer for ``kind`` (:data:`LOGGERS` or a custom writer), a :class:`NullWriter` without ``log_dir``."""
    cfg = cfg or {}
    if log_dir is None or kind in ("none", None):
        return NullWriter()
    if kind == "tensorboard":
        return TensorBoardWriter(log_dir=log_dir, flush_secs=10)
    if isinstance(kind, (dict, type)) or (isinstance(kind, str) and ":" in kind):
        return build_custom_writer(kind, log_dir, cfg)
    if isinstance(kind, str) and kind in TRACKING_WRITERS:
        return TRACKING_WRITERS[kind](log_dir, cfg)
    close = difflib.get_close_matches(str(kind), LOGGERS, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"Unknown logger {kind!r}.{hint} Use one of {list(LOGGERS)}, or a custom writer: a class, "
        "'package.module:Class' or {'class_name': ..., **kwargs} (see docs/logging.md)."
    )


def aggregate_episode_infos(ep_infos: list[dict[str, Any]]) -> dict[str, float]:
    """One NaN-ignoring value per key (max for ``*_max*``, min for ``*_min*``, else mean) as ``Episode/<key>``
    unless the key has a "/"."""
    values: dict[str, list[torch.Tensor]] = {}
    for info in ep_infos:
        for key, val in info.items():
            if isinstance(val, dict):
                continue
            values.setdefault(key, []).append(torch.as_tensor(val).detach().float().reshape(-1).cpu())
    out: dict[str, float] = {}
    for key, chunks in values.items():
        data = torch.cat(chunks)
        data = data[~torch.isnan(data)]
        if data.numel() == 0:
            continue
        reduce = torch.amax if "_max" in key else torch.amin if "_min" in key else torch.mean
        out[key if "/" in key else f"Episode/{key}"] = float(reduce(data))
    return out


def format_duration(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds))) if math.isfinite(seconds) else "?"


def format_console_block(title: str, rows: Iterable[tuple[str, str]], width: int = 80, pad: int = 35) -> str:
    """A framed block of ``label: value`` rows, as printed each iteration."""
    lines = ["#" * width, f" \033[1m{title}\033[0m ".center(width + 8), ""]
    lines += [f"{label + ':':>{pad}} {value}" for label, value in rows]
    return "\n".join(lines)


class Stopwatch:
    """Wall-clock lap timer."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        dt, self.start = now - self.start, now
        return dt
