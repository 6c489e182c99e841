"""Plots of training curves (TensorBoard scalars) and of command tracking, on matplotlib's Agg canvas."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from st_rl.utils.files import refuse_special_file

__all__ = ["TRAINING_TAGS", "find_event_dirs", "plot_tracking", "plot_training", "read_scalars"]

TRAINING_TAGS = (
    "Train/mean_reward",
    "Train/mean_episode_length",
    "Eval/velrmsd",
    "Eval/CoT",
    "Loss/value_loss",
    "Loss/surrogate_loss",
    "Policy/mean_noise_std",
    "Perf/total_fps",
)
"""The curves :func:`plot_training` draws, in this order, when the run logged them."""


def _figure(nrows: int, ncols: int, size: tuple[float, float]) -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("Plotting needs matplotlib: pip install matplotlib") from e
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def find_event_dirs(log_dir: str) -> list[str]:
    """Directories under ``log_dir`` (itself included) that hold TensorBoard event files."""
    walk = os.walk(log_dir)
    return sorted(root for root, _, files in walk if any(f.startswith("events.out.tfevents") for f in files))


def read_scalars(log_dir: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{tag: (steps, values)}`` of the event files under ``log_dir``, merged (the later value of a step wins)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not os.path.isdir(log_dir):
        raise FileNotFoundError(f"No log directory at {log_dir}")
    dirs = find_event_dirs(log_dir)
    if not dirs:
        fix = "give a run directory trained with logger='tensorboard'"
        raise FileNotFoundError(f"No TensorBoard event files (events.out.tfevents.*) under {log_dir}: {fix}")
    events: dict[str, list[Any]] = {}
    for d in dirs:
        acc = EventAccumulator(d, size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            events.setdefault(tag, []).extend(acc.Scalars(tag))
    out = {}
    for tag, evs in events.items():  # the later value of a step wins
        by_step = {ev.step: ev.value for ev in sorted(evs, key=lambda ev: ev.wall_time)}
        steps = np.asarray(sorted(by_step), dtype=np.int64)
        out[tag] = (steps, np.asarray([by_step[s] for s in steps], dtype=np.float64))
    return out


def plot_training(log_dir: str, out_png: str | None = None, tags: Sequence[str] | None = None) -> str:
    """Draw a run's training curves (``tags``, default those of :data:`TRAINING_TAGS` it has, else its first 12)
    into ``out_png`` (default ``<log_dir>/training_curves.png``); returns the PNG path."""
    scalars = read_scalars(log_dir)
    if not scalars:
        raise ValueError(f"The event files under {log_dir} hold no scalars")
    wanted = [t for t in (tags or TRAINING_TAGS) if t in scalars]
    if not wanted:
        wanted = sorted(t for t in scalars if not t.endswith("/time"))[:12]
    ncols = min(4, len(wanted))
    nrows = math.ceil(len(wanted) / ncols)
    fig, axes = _figure(nrows, ncols, (4.0 * ncols, 2.8 * nrows))
    for ax in axes.flat[len(wanted) :]:
        ax.set_visible(False)
    for tag, ax in zip(wanted, axes.flat):
        steps, values = scalars[tag]
        few = len(values) <= 20
        ax.plot(steps, values, color="tab:blue", lw=1, alpha=1 if few else 0.45, marker="o" if few else None)
        if not few:  # a smoothed curve (EMA) over the noisy raw one
            ax.plot(steps, _ema(values, 0.9), color="tab:blue", lw=1.6)
        ax.set_title(tag, fontsize=10)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(os.path.basename(os.path.normpath(log_dir)), fontsize=11)
    out = png_path(out_png or log_dir, "training_curves.png")
    fig.savefig(out, dpi=100)
    return out


def png_path(path: str, default_name: str) -> str:
    """Where a plot for ``path`` goes: ``path/<default_name>`` for a folder, else ``path`` (``.png`` added)."""
    if os.path.isdir(path):
        path = os.path.join(path, default_name)
    else:
        refuse_special_file(path, "plot")  # /dev/null: matplotlib would write /dev/null.png
        if not os.path.splitext(path)[1]:
            path += ".png"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


def _ema(values: np.ndarray, alpha: float) -> np.ndarray:
    out = np.empty_like(values)
    acc = values[0]
    for i, v in enumerate(values):
        acc = alpha * acc + (1 - alpha) * v if np.isfinite(v) else acc
        out[i] = acc
    return out


def plot_tracking(trace: dict, out_png: str, title: str = "", metrics: dict[str, Any] | None = None) -> str:
    """Commanded vs achieved vx, vy and yaw rate of an ``evaluate_policy`` trace: falls red, time-outs grey dotted,
    unscored warm-up steps grey; returns the PNG path."""
    t = np.asarray(trace["time"])
    cmd, vel = np.asarray(trace["cmd"]), np.asarray(trace["vel"])
    done = np.asarray(trace.get("done", np.zeros(len(t), bool)))
    fall = np.asarray(trace.get("fall", np.zeros(len(t), bool)))
    counted = np.asarray(trace.get("counted", np.ones(len(t), bool)))
    rows = [i for i in range(3) if np.isfinite(cmd[:, i]).any() or np.isfinite(vel[:, i]).any()]
    fig, axes = _figure(len(rows), 1, (9.0, 2.2 * len(rows) + 0.6))
    for ax, i in zip(axes[:, 0], rows):
        if not counted.all():
            ax.fill_between(
                t,
                0,
                1,
                where=~counted,
                transform=ax.get_xaxis_transform(),
                color="0.92",
                step="mid",
                label="warm-up (not scored)",
            )
        ax.plot(t, cmd[:, i], color="black", lw=1.5, ls="--", label="commanded")
        ax.plot(t, vel[:, i], color="tab:blue", lw=1.0, label="achieved")
        ax.vlines(t[done & ~fall], 0, 1, transform=ax.get_xaxis_transform(), color="grey", ls=":", lw=1.0)
        ax.vlines(t[fall], 0, 1, transform=ax.get_xaxis_transform(), color="tab:red", lw=1.0)
        ax.set_ylabel(("vx (m/s)", "vy (m/s)", "yaw rate (rad/s)")[i], fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time (s)", fontsize=9)
    text = title
    if metrics:
        nan = float("nan")
        parts = [
            f"velrmsd {metrics.get('velrmsd', nan):.3f} m/s",
            f"yaw {metrics.get('yaw_rmsd', nan):.3f} rad/s",
            f"CoT {metrics.get('CoT', nan):.2f}",
            f"survival {metrics.get('survival', nan):.2f}",
        ]
        text = (text + "\n" if text else "") + "all envs: " + ", ".join(parts)
    if text:
        fig.suptitle(text, fontsize=10)
    out_png = png_path(out_png, "tracking.png")
    fig.savefig(out_png, dpi=100)
    return out_png
