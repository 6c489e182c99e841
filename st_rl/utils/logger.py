"""Training logs: the console progress block and episode statistics; the writers of :mod:`st_rl.utils.writers`."""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Iterable
from typing import Any

import torch

from st_rl.utils.writers import LOGGERS, NullWriter, ScalarWriter, Writer, make_writer

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
