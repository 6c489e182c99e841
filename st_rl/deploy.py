"""Run an exported policy (``policy.onnx`` / ``policy.pt``) with its metadata and recurrent state, without any
st_rl model class: ``policy = load_exported_policy(path); actions = policy(obs); policy.reset(dones)``."""

from __future__ import annotations

import abc
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from st_rl.evaluation.metrics import _check_locomotion_env, evaluate_policy, format_summary
from st_rl.evaluation.rendering import VideoRecorder, set_default_gl_backend
from st_rl.evaluation.task_env import make_env_from_cfg, refuse_gymnasium_module
from st_rl.plotting import plot_tracking
from st_rl.registry import untrusted_config
from st_rl.utils.checkpoint import first_line
from st_rl.utils.files import read_json

__all__ = ["EXPORT_FORMAT_VERSION", "METADATA_KEY", "NonFiniteActionsError", "ExportedPolicy", "OnnxPolicy"]
__all__ += ["ExportedPolicyError", "TorchScriptPolicy", "evaluate_and_report", "load_exported_policy"]
__all__ += ["PlayOptions", "play_exported", "read_policy_metadata", "sidecar_path"]

EXPORT_FORMAT_VERSION = 1
METADATA_KEY = "st_rl_metadata"
_AGAIN = "export the policy again (st-rl export)"
DIVERGED = "it is broken: export a checkpoint from before training diverged"


def sidecar_path(policy_path: str) -> str:
    """``policy.onnx`` -> ``policy.json``."""
    return os.path.splitext(policy_path)[0] + ".json"


def _jit_load(path: str, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return torch.jit.load(path, map_location="cpu", **kwargs)
        except Exception as e:  # noqa: BLE001 - torch.jit.load's RuntimeError and friends
            raise _broken_file(path, "TorchScript", e) from e


class ExportedPolicyError(ValueError):
    """An exported policy file (or its metadata) that cannot be loaded or run; the message names the file."""


def _first_sentence(error: BaseException) -> str:
    """The first sentence of a third-party error (onnxruntime, protobuf, torch.jit), without its advice."""
    text = first_line(error).split(". ", 1)[0].rstrip(". ")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _broken_file(path: str, kind: str, error: BaseException) -> ExportedPolicyError:
    why = f"{path} is not a loadable {kind} policy ({_first_sentence(error)}): truncated, corrupt or another kind"
    return ExportedPolicyError(f"{why}; export it again (a training checkpoint: st-rl play --checkpoint)")


def _embedded_metadata(path: str) -> dict[str, Any] | None:
    if path.endswith(".onnx"):
        try:
            import onnx
        except ImportError:
            return None
        try:
            props = onnx.load(path, load_external_data=False).metadata_props
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends: a broken file
            raise _broken_file(path, "ONNX", e) from e
        text = next((prop.value for prop in props if prop.key == METADATA_KEY), "")
    else:
        extra = {METADATA_KEY: ""}
        _jit_load(path, _extra_files=extra)
        text = extra[METADATA_KEY]
    try:
        return json.loads(text) if text else None
    except ValueError as e:
        raise ExportedPolicyError(f"{path}: its embedded metadata is not valid JSON ({e}); {_AGAIN}") from e


def read_policy_metadata(path: str) -> dict[str, Any]:
    """Metadata of an exported policy: the JSON sidecar next to it, else the copy embedded in the file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Exported policy not found: {path}")
    side = sidecar_path(path)
    if os.path.isfile(side):
        return read_json(side, "exported policy's metadata", "re-export the policy (st-rl export)")
    meta = _embedded_metadata(path)
    if meta is None:
        name = os.path.basename(side)
        raise ValueError(f"{path} has no st_rl metadata, nor {name} next to it; export it with st-rl export")
    return meta


class ExportedPolicy(abc.ABC):
    """Raw observations in, actions out; keeps the recurrent state between calls."""

    def __init__(self, metadata: dict[str, Any], path: str) -> None:
        self.metadata, self.path = metadata, path
        try:
            self.num_obs = int(metadata["num_obs"])
            self.num_actions = int(metadata["num_actions"])
            self.obs_name: str = metadata["inputs"][0]["name"]
            self.state_specs: list[dict[str, Any]] = list(metadata.get("states") or [])
            self.output_names: list[str] = [o["name"] for o in metadata["outputs"]]
            for spec in self.state_specs:
                shape, names = spec["shape"], (spec["input"], spec["output"])
                if len(shape) != 3 or not all(isinstance(shape[i], int) for i in (0, 2)):
                    raise ValueError(f"states shape {shape!r} is not (layers, 'batch', hidden)")
                if not all(isinstance(name, str) for name in names):
                    raise ValueError(f"states names {names!r} are not strings")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            bad = f"{type(e).__name__}: {e}"
            raise ExportedPolicyError(f"{path}: its metadata lacks or mangles {bad}; {_AGAIN}") from e
        self.states: dict[str, np.ndarray] = {}

    @property
    def is_recurrent(self) -> bool:
        return bool(self.state_specs)

    def initial_states(self, batch_size: int) -> dict[str, np.ndarray]:
        """Zero hidden states ``{input name: (layers, batch, hidden)}`` for ``batch_size`` environments."""
        shapes = {spec["input"]: spec["shape"] for spec in self.state_specs}
        return {k: np.zeros((int(s[0]), batch_size, int(s[2])), dtype=np.float32) for k, s in shapes.items()}

    def _run_failed(self, error: Exception) -> ExportedPolicyError:
        return ExportedPolicyError(f"{self.path}: running it failed ({_first_sentence(error)}); {_AGAIN}")

    @abc.abstractmethod
    def run(self, obs: np.ndarray, states: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One network call: ``{input name: array}`` -> ``{output name: array}``."""

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions for raw observations ``obs`` (N, num_obs); the hidden state advances by one step."""
        x = obs.detach().to("cpu", torch.float32).numpy()
        if x.ndim != 2 or x.shape[1] != self.num_obs:
            raise ValueError(f"{self.path} takes observations (N, {self.num_obs}); got {tuple(x.shape)}")
        n = x.shape[0]
        if self.state_specs and (not self.states or next(iter(self.states.values())).shape[1] != n):
            self.states = self.initial_states(n)
        result = self.run(x, self.states)
        self.states = {spec["input"]: result[spec["output"]] for spec in self.state_specs}
        return torch.from_numpy(np.ascontiguousarray(result[self.output_names[0]])).to(obs.device)

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the hidden state of finished environments (all when ``dones`` is None)."""
        if dones is None or not self.states:
            self.states = {}
            return
        keep = (~dones.detach().to("cpu").reshape(-1).bool()).numpy().astype(np.float32)
        self.states = {k: v * keep[None, :, None] for k, v in self.states.items()}


class OnnxPolicy(ExportedPolicy):
    """An :class:`ExportedPolicy` run by an ``onnxruntime.InferenceSession`` (``self.session``)."""

    def __init__(self, path: str, metadata: dict[str, Any] | None = None, num_threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ImportError("Running an ONNX policy needs onnxruntime: pip install 'st-rl[export]'") from e
        super().__init__(metadata or read_policy_metadata(path), path)
        options = ort.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = int(num_threads)
            options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - onnxruntime's InvalidProtobuf, Fail, InvalidGraph ...
            raise _broken_file(path, "ONNX", e) from e

    def run(self, obs: np.ndarray, states: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            values = self.session.run(self.output_names, {self.obs_name: obs, **states})
        except Exception as e:  # noqa: BLE001 - a graph that does not take what its metadata says
            raise self._run_failed(e) from e
        return {name: np.asarray(v) for name, v in zip(self.output_names, values)}


class TorchScriptPolicy(ExportedPolicy):
    """An :class:`ExportedPolicy` run by a ``torch.jit.load`` module (``self.module``)."""

    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(metadata or read_policy_metadata(path), path)
        self.module = _jit_load(path).eval()

    def run(self, obs: np.ndarray, states: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = [torch.from_numpy(obs)] + [torch.from_numpy(states[s["input"]]) for s in self.state_specs]
        try:
            with torch.no_grad():
                out = self.module(*args)
            values = out if isinstance(out, (tuple, list)) else (out,)
            return {name: v.numpy() for name, v in zip(self.output_names, values)}
        except Exception as e:  # noqa: BLE001 - a module that does not take what its metadata says
            raise self._run_failed(e) from e


def load_exported_policy(path: str, num_threads: int | None = None) -> ExportedPolicy:
    """Load ``policy.onnx`` (onnxruntime) or ``policy.pt`` / ``.ts`` (TorchScript) with its metadata."""
    meta = read_policy_metadata(path)
    if path.endswith(".onnx"):
        return OnnxPolicy(path, meta, num_threads)
    if path.endswith((".pt", ".ts")):
        return TorchScriptPolicy(path, meta)
    raise ValueError(f"Cannot tell the format of {path}: expected a .onnx (ONNX) or .pt (TorchScript) file")


@dataclass(frozen=True)
class PlayOptions:
    """The options of :func:`st_rl.play.play` and :func:`play_exported` (keywords of both): ``num_envs``
    environments played for ``duration_s`` seconds on fresh episodes with ``seed`` (default: the run's or the
    file's); env ``record_env`` filmed into ``video`` (``video_fps``, ``video_size``, ``video_quality``,
    ``camera``) and its tracking plotted into ``plot``; ``command``: a fixed ``(vx, vy, yaw_rate)`` for all envs;
    ``verbose``: print the summary; ``trust_config``: see docs/security.md."""

    num_envs: int = 16
    duration_s: float = 20.0
    video: str | None = None
    plot: str | None = None
    command: Sequence[float] | None = None
    seed: int | None = None
    record_env: int = 0
    video_fps: float = 25.0
    video_size: tuple[int, int] = (640, 360)
    video_quality: str = "medium"
    camera: str | None = "track"
    verbose: bool = True
    trust_config: bool = False


def evaluate_and_report(
    env: Any, policy: Any, task: str, source: str, label: str, options: PlayOptions
) -> dict[str, Any]:
    """Metrics, video, plot and summary of ``policy`` on ``env`` (``source``: its file, named by ``label``)."""
    _check_locomotion_env(env)
    o = options
    recorder = None
    if o.video:
        width, height = o.video_size
        recorder = VideoRecorder(
            env, o.video, o.record_env, o.video_fps, width, height, o.camera, o.video_quality
        )
    try:
        metrics = evaluate_policy(env, policy, o.duration_s, o.record_env, recorder, command=o.command)
    finally:
        if recorder is not None:
            recorder.close()
    plot = o.plot
    if plot is not None:
        title = f"{task} - {os.path.basename(source)} - env {o.record_env}"
        plot = plot_tracking(metrics["trace"], plot, title=title, metrics=metrics)
    metrics.update(
        task=task,
        video=os.path.abspath(o.video) if o.video else None,
        video_frames=recorder.num_frames if recorder is not None else 0,
        plot=os.path.abspath(plot) if plot else None,
    )
    if o.verbose:
        print(format_summary(metrics, f"[st-rl play] {task}, {label}"))
        for key in ("video", "plot"):
            if metrics[key]:
                print(f"{key}: {metrics[key]}")
    return metrics


class NonFiniteActionsError(ValueError):
    """An exported policy gave NaN or Inf actions."""


class _FiniteActions:
    def __init__(self, policy: Any, path: str) -> None:
        self.policy, self.path, self.steps = policy, path, 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        actions = self.policy(obs)
        self.steps += 1
        if not bool(torch.isfinite(actions).all()):
            where = "on the first step" if self.steps == 1 else f"at step {self.steps}"
            bad = ~torch.isfinite(actions.reshape(actions.shape[0], -1))
            rows = bad.any(dim=1).nonzero().flatten().tolist()
            envs = ", ".join(map(str, rows[:5])) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
            what = f"{self.path} gave NaN/Inf actions {where} (environments {envs})"
            raise NonFiniteActionsError(f"{what}; {DIVERGED}")
        return actions

    def reset(self, dones: torch.Tensor | None = None) -> None:
        self.policy.reset(dones)


def play_exported(policy_path: str, task: str | None = None, **options: Any) -> dict[str, Any]:
    """Deployment check: :func:`st_rl.play.play` with an exported policy file alone, on its metadata's task and
    seed unless given (``options``: :class:`PlayOptions`; ``trust_config``: that task may be a Gymnasium id
    naming a module to import). Returns the metrics of ``evaluate_policy`` plus ``task``, ``policy``,
    ``format``, ``iteration``, ``video`` and ``plot``; raises :class:`NonFiniteActionsError` when the file gives
    NaN/Inf actions."""
    o = PlayOptions(**options)
    if o.video is not None:
        set_default_gl_backend("egl")
    policy = load_exported_policy(policy_path)
    meta = policy.metadata
    stored_task = meta.get("task")
    if task is not None and stored_task is not None and task != stored_task:
        warnings.warn(f"playing task {task!r}; the policy was exported from {stored_task!r}", stacklevel=2)
    name = task or stored_task
    if name is None:
        raise ValueError(f"{policy_path} names no task (metadata key 'task'); give task= (CLI: --task)")
    env_cfg = meta.get("env_cfg") if name == stored_task else None
    seed = meta.get("seed") if o.seed is None else o.seed
    with untrusted_config(f"{policy_path} (its metadata)", trusted=o.trust_config or task is not None):
        refuse_gymnasium_module(name, "task")
    env = make_env_from_cfg(name, o.num_envs, "cpu", seed, env_cfg or {})
    num_obs, num_actions = int(env.num_obs), int(env.num_actions)
    if (num_obs, num_actions) != (policy.num_obs, policy.num_actions):
        sizes = f"takes {policy.num_obs} observations and gives {policy.num_actions} actions"
        have = f"task {name!r} has {num_obs} and {num_actions}"
        raise ValueError(f"{policy_path} {sizes}; {have}: play it on {stored_task!r}")
    fmt = "onnx" if isinstance(policy, OnnxPolicy) else "torchscript"
    iteration = meta.get("iteration")
    label = f"{os.path.basename(policy_path)} ({fmt}, iteration {iteration})"
    metrics = evaluate_and_report(env, _FiniteActions(policy, policy_path), name, policy_path, label, o)
    metrics.update(policy=os.path.abspath(policy_path), format=fmt, iteration=iteration)
    return metrics
