"""Trajectory padding, git state, checkpoint discovery, run configs; :mod:`st_rl.env.layout` at the reference's path."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable

import torch

from st_rl.env.layout import (
    get_obs_slice,
    get_subobs_by_components,
    get_subobs_size,
    normalize_segments,
    segments_size,
    substitute_estimated_state,
)
from st_rl.utils.files import atomic_write as atomic_write  # motion_recorder imports it from here
from st_rl.utils.files import read_json, write_json_atomic

__all__ = [
    "get_checkpoint_path",
    "get_obs_slice",
    "get_subobs_by_components",
    "get_subobs_size",
    "normalize_segments",
    "segments_size",
    "TrajectoryMasks",
    "pad_trajectories",
    "split_and_pad_trajectories",
    "store_code_state",
    "trajectory_layout",
    "trajectory_masks",
    "substitute_estimated_state",
    "unpad_trajectories",
]


class TrajectoryMasks(torch.Tensor):
    """Bool masks ``(T, n_traj)`` carrying ``unpad_index`` (:func:`trajectory_layout`), so that
    :func:`unpad_trajectories` needs no wait for the device. Operations on it give plain tensors."""

    unpad_index: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]


def trajectory_masks(masks: torch.Tensor, unpad_index: torch.Tensor) -> TrajectoryMasks:
    """``masks`` as :class:`TrajectoryMasks` with ``unpad_index``."""
    out = masks.as_subclass(TrajectoryMasks)
    out.unpad_index = unpad_index
    return out


def trajectory_layout(dones: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """``(index (2, N * T), offsets)`` of ``(T, N)`` data split after every done into trajectories, env by env:
    the (time in trajectory, trajectory) of each step, and the first trajectory of each env (``offsets[N]``: the
    number of trajectories). One read of the device."""
    steps, num_envs = dones.shape[0], dones.shape[1]
    first = torch.ones((steps, num_envs), dtype=torch.bool, device=dones.device)
    first[1:] = dones.reshape(steps, num_envs)[:-1].bool()
    flat_first = first.transpose(0, 1).reshape(-1)
    position = torch.arange(flat_first.numel(), device=dones.device)
    start = torch.cummax(torch.where(flat_first, position, 0), dim=0).values
    traj = flat_first.long().cumsum(0) - 1
    offsets = torch.cat([traj.new_zeros(1), first.sum(0).cumsum(0)]).tolist()
    return torch.stack([position - start, traj]), offsets


def pad_trajectories(tensor: torch.Tensor, index: torch.Tensor, num_trajectories: int) -> torch.Tensor:
    """``(T, N, ...)`` data as ``(T, num_trajectories, ...)`` zero-padded trajectories at ``index``."""
    padded = tensor.new_zeros((tensor.shape[0], num_trajectories, *tensor.shape[2:]))
    padded[index[0], index[1]] = tensor.transpose(1, 0).flatten(0, 1)
    return padded


def split_and_pad_trajectories(
    tensor: torch.Tensor, dones: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(padded (T, n_traj, ...), masks (T, n_traj))``: ``(T, N, ...)`` data split after every done (and the
    last step) into zero-padded trajectories, env by env."""
    index, offsets = trajectory_layout(dones)
    masks = pad_trajectories(
        torch.ones_like(dones.reshape(dones.shape[0], dones.shape[1]), dtype=torch.bool), index, offsets[-1]
    )
    return pad_trajectories(tensor, index, offsets[-1]), trajectory_masks(masks, index)


def unpad_trajectories(trajectories: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_and_pad_trajectories`: back to ``(T, N, ...)``."""
    steps = masks.shape[0]
    if isinstance(masks, TrajectoryMasks):
        moved = trajectories[masks.unpad_index[0], masks.unpad_index[1]]
    else:
        moved = trajectories.transpose(1, 0)[masks.transpose(1, 0)]
    return moved.view(-1, steps, *trajectories.shape[2:]).transpose(1, 0)


def store_code_state(logdir: str, repositories: Iterable[str]) -> list[str]:
    """Write ``<logdir>/git/<repo>.diff`` (commit, status, diff) once per git repository; returns the files."""
    git_dir = os.path.join(logdir, "git")
    os.makedirs(git_dir, exist_ok=True)
    written: list[str] = []
    for path in repositories:
        start = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        try:
            root = _git(start, "rev-parse", "--show-toplevel", check=True).strip()
        except (subprocess.CalledProcessError, FileNotFoundError, NotADirectoryError):
            continue
        target = os.path.join(git_dir, os.path.basename(root) + ".diff")
        if not os.path.exists(target):
            with open(target, "w", encoding="utf-8") as f:
                f.write(
                    f"--- git commit ---\n{_git(root, 'rev-parse', 'HEAD')}\n--- git status ---\n"
                    f"{_git(root, 'status', '--short')}\n--- git diff ---\n{_git(root, 'diff', 'HEAD')}"
                )
        written.append(target)
    return written


def _git(cwd: str, *args: str, check: bool = False) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check).stdout


_MODEL_RE = re.compile(r"model_(\d+)\.pt$")


def get_checkpoint_path(log_root: str, load_run: str = ".*", checkpoint: str | int = "model_.*.pt") -> str:
    """The highest-numbered ``model_<it>.pt`` matching ``checkpoint`` (``model_<checkpoint>.pt`` for an int) of
    the newest run directory matching ``load_run``; FileNotFoundError naming what was searched."""
    if os.path.isfile(log_root):
        return log_root
    if not os.path.isdir(log_root):
        raise FileNotFoundError(f"No log directory at {log_root}")
    # log_root itself is the run directory when it holds checkpoints
    runs = sorted(os.path.join(log_root, d) for d in os.listdir(log_root) if re.fullmatch(load_run, d))
    runs = (
        [log_root] if latest_checkpoint(log_root, ".*") else [r for r in runs if latest_checkpoint(r, ".*")]
    )
    if not runs:
        raise FileNotFoundError(f"No run directory matching '{load_run}' with checkpoints in {log_root}")
    run_dir = runs[-1]
    if isinstance(checkpoint, int) or (isinstance(checkpoint, str) and checkpoint.isdigit()):
        checkpoint = f"model_{int(checkpoint)}\\.pt"
    newest = latest_checkpoint(run_dir, checkpoint)
    if newest is None:
        raise FileNotFoundError(f"No checkpoint matching '{checkpoint}' in {run_dir}")
    return newest


def latest_checkpoint(run_dir: str, pattern: str = r"model_\d+\.pt") -> str | None:
    """The highest-numbered ``model_<it>.pt`` of ``run_dir`` whose name matches ``pattern``, else None."""
    names = os.listdir(run_dir) if os.path.isdir(run_dir) else []
    numbers = {n: int(m.group(1)) for n in names if (m := _MODEL_RE.search(n)) and re.fullmatch(pattern, n)}
    return os.path.join(run_dir, max(numbers, key=numbers.__getitem__)) if numbers else None


def read_run_config(run_dir: str) -> dict:
    """The ``config.json`` a training run wrote into its log directory."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No config.json in {run_dir}: pass the log directory of a training run (OnPolicyRunner writes "
            "config.json there), or write one with st_rl.utils.utils.write_run_config."
        )
    return read_json(path, "run config", "restore it from the run's checkpoint or delete the run directory")


def write_run_config(run_dir: str, config: dict) -> str:
    """Write ``config`` as ``<run_dir>/config.json`` atomically; returns the path."""
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "config.json")
    write_json_atomic(path, config)
    return path
