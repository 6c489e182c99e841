"""Reference motions for AMP: load st_gym motion files, sample interpolated windows, supply them to environments.

A window is H frames ``time_between_frames`` apart of the F ``style_fields``, flattened frame-major to ``(H * F,)``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from st_rl.tasks.locomotion_style import roll_window
from st_rl.tasks.motion_recorder import load_motion_file

__all__ = ["AMPLoader", "AmpObservationWrapper", "MotionLoader", "gait_distance"]

_MOTION_EXTS = (".pkl", ".pickle", ".motion")


class MotionLoader:
    """Reference-motion windows sampled from motion files, on the training device.

    A trajectory is drawn by ``MotionWeight``, the window start uniformly where the window fits
    (``random_start``) or at 0; frames are linearly interpolated (``root_rot_*`` quaternions re-normalised).

    ``motion_files`` are paths or directories of motion files; ``style_fields`` default to the first file's;
    ``time_between_frames`` is the environment's policy ``dt`` in seconds.
    """

    def __init__(
        self,
        motion_files: str | Sequence[str],
        style_fields: Sequence[str] | None = None,
        amp_obs_frame_num: int = 2,
        time_between_frames: float = 0.02,
        random_start: bool = True,
        frame_begin: int | None = None,
        frame_end: int | None = None,
        device: str | torch.device = "cpu",
        generator: torch.Generator | None = None,
    ) -> None:
        integral = not isinstance(amp_obs_frame_num, bool) and isinstance(amp_obs_frame_num, numbers.Integral)
        if not (integral and amp_obs_frame_num >= 1):
            raise ValueError(f"amp_obs_frame_num must be an integer >= 1, got {amp_obs_frame_num!r}")
        seconds = not isinstance(time_between_frames, bool) and isinstance(time_between_frames, numbers.Real)
        if not (seconds and math.isfinite(time_between_frames) and time_between_frames > 0):
            raise ValueError(
                f"time_between_frames must be a finite number of seconds > 0, got {time_between_frames!r}"
            )
        self.device = torch.device(device)
        self.amp_obs_frame_num = int(amp_obs_frame_num)
        self.time_between_frames = float(time_between_frames)
        self.random_start = random_start
        self.generator = generator
        paths = self._expand_paths(motion_files)
        self.motion_files = paths  # named by errors (e.g. the task's check of the style fields)
        trajectories = []  # (name, frames, duration, weight)
        self.style_fields: list[str] = list(style_fields) if style_fields is not None else []
        self._window_s = window_s = (self.amp_obs_frame_num - 1) * self.time_between_frames
        for path in paths:
            for name, traj in load_motion_file(path).items():
                fields = list(traj["Fields"])
                self.style_fields = self.style_fields or fields
                missing = [f for f in self.style_fields if f not in fields]
                if missing:
                    raise ValueError(
                        f"Trajectory '{name}' in {path} lacks style fields {missing}; it has {fields}. Record the "
                        "motion with these fields or choose style_fields among them."
                    )
                data = np.asarray(traj["Frames"], dtype=np.float32)[frame_begin:frame_end]  # (T, len(fields))
                duration = (data.shape[0] - 1) * float(traj["FrameDuration"])
                data = data[:, [fields.index(f) for f in self.style_fields]]
                if duration + 1e-9 < window_s or data.shape[0] < 2:
                    raise ValueError(
                        f"Trajectory '{name}' in {path} lasts {duration:.3f} s, shorter than one window of "
                        f"{self.amp_obs_frame_num} frames {self.time_between_frames} s apart."
                    )
                trajectories.append((name, data, duration, float(traj.get("MotionWeight", 1.0))))
        if not trajectories:
            raise ValueError(f"No trajectories in {paths}")
        names, datas, durations, weights = (list(x) for x in zip(*trajectories))
        lengths = [d.shape[0] for d in datas]
        self.trajectory_names = names
        self.frames = torch.from_numpy(np.concatenate(datas)).to(self.device)
        self.traj_len = torch.tensor(lengths, dtype=torch.long, device=self.device)
        self.traj_start = self.traj_len.cumsum(0) - self.traj_len
        self.traj_duration = torch.tensor(durations, dtype=torch.float32, device=self.device)
        per_frame = [d / (n - 1) for d, n in zip(durations, lengths)]
        self.frame_duration = torch.tensor(per_frame, device=self.device)
        w = torch.tensor(weights, dtype=torch.float32)
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"MotionWeight values must be >= 0 with a positive sum, got {weights}")
        self.traj_weights = (w / w.sum()).to(self.device)
        self._quat_cols = [i for i, f in enumerate(self.style_fields) if f.startswith("root_rot_")]

    @staticmethod
    def _expand_paths(motion_files: str | Sequence[str]) -> list[str]:
        items = [motion_files] if isinstance(motion_files, str) else list(motion_files)
        paths: list[str] = []
        for item in items:
            if os.path.isdir(item):
                found = sorted(os.path.join(item, f) for f in os.listdir(item) if f.endswith(_MOTION_EXTS))
                if not found:
                    raise FileNotFoundError(
                        f"Motion folder {item} holds no motion files (*.pkl, *.pickle, *.motion); record one with "
                        "st-rl record-motion"
                    )
                paths += found
            elif os.path.isfile(item):
                paths.append(item)
            else:
                raise FileNotFoundError(f"Motion file {item} does not exist")
        return paths

    @property
    def num_style_features(self) -> int:
        return len(self.style_fields)

    @property
    def amp_obs_dim(self) -> int:
        """Width of one flattened window (H * F)."""
        return self.amp_obs_frame_num * self.num_style_features

    def sample_trajectories(self, n: int) -> torch.Tensor:
        """``n`` trajectory indices drawn by ``MotionWeight``."""
        return torch.multinomial(self.traj_weights, n, replacement=True, generator=self.generator)

    def sample_times(self, traj_ids: torch.Tensor) -> torch.Tensor:
        """Window start times: uniform over the times where a whole window fits (or 0)."""
        latest = (self.traj_duration[traj_ids] - self._window_s).clamp(min=0.0)
        if not self.random_start:
            return torch.zeros_like(latest)
        u = torch.rand(traj_ids.shape[0], device=self.device, generator=self.generator)
        return u * latest

    def get_frames(self, traj_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """Frames ``(..., F)`` of the given trajectories at the given times (linear interpolation)."""
        pos = (times / self.frame_duration[traj_ids]).clamp(min=0.0)
        pos = torch.minimum(pos, (self.traj_len[traj_ids] - 1).to(pos.dtype))
        i0 = pos.floor().long()
        i1 = torch.minimum(i0 + 1, self.traj_len[traj_ids] - 1)
        alpha = (pos - i0.to(pos.dtype)).unsqueeze(-1)
        base = self.traj_start[traj_ids]
        frame = (1 - alpha) * self.frames[base + i0] + alpha * self.frames[base + i1]
        if len(self._quat_cols) == 4:
            q = frame[..., self._quat_cols]
            frame[..., self._quat_cols] = q / q.norm(dim=-1, keepdim=True).clamp(min=1e-8)
        return frame

    def sample_windows(self, n: int) -> torch.Tensor:
        """``n`` windows ``(n, H * F)``, frames ``time_between_frames`` apart, frame-major."""
        traj = self.sample_trajectories(n)
        t0 = self.sample_times(traj)
        offsets = torch.arange(self.amp_obs_frame_num, device=self.device) * self.time_between_frames
        times = t0[:, None] + offsets[None, :]
        frames = self.get_frames(traj[:, None].expand_as(times), times)
        return frames.reshape(n, -1)

    def __call__(self, num_envs: int) -> torch.Tensor:
        """:meth:`sample_windows`, so a loader can be an environment's ``ref_motion`` source."""
        return self.sample_windows(num_envs)

    def feed_forward_generator(self, num_mini_batch: int, mini_batch_size: int) -> Iterator[torch.Tensor]:
        for _ in range(num_mini_batch):
            yield self.sample_windows(mini_batch_size)


AMPLoader = MotionLoader  # reference name (st_rl/compat.py)


class AmpObservationWrapper:
    """Give AMP data to an environment (legged_gym or rsl_rl 2.x API) that has none.

    Its extras get ``["observations"]["ref_obs"]`` ``(N, H, F)``, the last H frames of ``style_features(env)
    -> (N, F)`` (in the loader's ``style_fields`` order; reset for envs that just finished), and
    ``["ref_motion"]`` ``(N, H * F)`` sampled from ``motion_loader``.
    """

    def __init__(
        self, env: Any, motion_loader: MotionLoader, style_features: Callable[[Any], torch.Tensor]
    ) -> None:
        self.env = env
        self.motion_loader = motion_loader
        self.style_features_fn = style_features
        feats = self._features()
        if feats.shape[-1] != motion_loader.num_style_features:
            raise ValueError(
                f"style_features(env) returns {feats.shape[-1]} features but the motion loader's frames have "
                f"{motion_loader.num_style_features} ({motion_loader.style_fields})"
            )
        self.ref_obs_buf = feats[:, None].repeat(1, motion_loader.amp_obs_frame_num, 1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["env"], name)

    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)

    @property
    def amp_obs_dim(self) -> int:
        """Width of one flattened window (the discriminator's ``input_dim``)."""
        return self.motion_loader.amp_obs_dim

    def _features(self) -> torch.Tensor:
        return self.style_features_fn(self.env).float()

    def _add(self, extras: dict[str, Any] | None) -> dict[str, Any]:
        extras = dict(extras or {})
        extras["observations"] = {**(extras.get("observations") or {}), "ref_obs": self.ref_obs_buf}
        windows = self.motion_loader.sample_windows(self.ref_obs_buf.shape[0])
        extras["ref_motion"] = windows.to(self.ref_obs_buf.device)
        return extras

    def step(self, actions: torch.Tensor) -> Any:
        out = self.env.step(actions)  # legged_gym: 5 values, rsl_rl 2.x: 4; both end with dones, infos
        self.ref_obs_buf = roll_window(
            self.ref_obs_buf, self._features().to(self.ref_obs_buf.device), out[-2]
        )
        return (*out[:-1], self._add(out[-1]))

    def get_observations(self) -> Any:
        out = self.env.get_observations()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out[0], self._add(out[1])
        return out


def gait_distance(policy_windows: torch.Tensor, reference_windows: torch.Tensor) -> float:
    """How far a policy's gait is from a reference gait, in reference standard deviations.

    Features of the windows ``(M, D)`` / ``(K, D)`` are standardised by the reference's mean and std (>= 1e-3);
    the result is the mean distance of a policy window to its nearest reference window over ``sqrt(D)``.
    """
    ref = reference_windows.reshape(reference_windows.shape[0], -1).double()
    pol = policy_windows.reshape(policy_windows.shape[0], -1).double()
    if ref.shape[1] != pol.shape[1]:
        raise ValueError(f"window widths differ: policy {pol.shape[1]}, reference {ref.shape[1]}")
    mean, std = ref.mean(0), ref.std(0).clamp(min=1e-3)
    zr, zp = (ref - mean) / std, (pol - mean) / std
    nearest = torch.cat([torch.cdist(chunk, zr).min(dim=1).values for chunk in zp.split(1024)])
    return float(nearest.mean() / ref.shape[1] ** 0.5)
