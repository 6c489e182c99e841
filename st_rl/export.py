"""Export a policy's deterministic actor to ONNX (``policy.onnx``) and TorchScript (``policy.pt``) with its
metadata (``policy.json``, also embedded; inputs, outputs and recurrent states: docs/export.md)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn

import st_rl
from st_rl.config.resolve import resolve_train_cfg, to_jsonable
from st_rl.deploy import DIVERGED, EXPORT_FORMAT_VERSION, METADATA_KEY, load_exported_policy
from st_rl.env.adapter import EnvAdapter, EnvSpec
from st_rl.env.layout import normalize_segments
from st_rl.evaluation.runs import load_run
from st_rl.modules.actor_critic import ActorCritic
from st_rl.modules.actor_critic_mutex import ActorCriticMutex
from st_rl.modules.factory import build_actor_critic
from st_rl.modules.memory import LstmHiddenState
from st_rl.registry import untrusted_config
from st_rl.runners.on_policy_runner import OnPolicyRunner
from st_rl.utils.checkpoint import (
    NonFiniteCheckpointError,
    describe_names,
    load_checkpoint,
    nonfinite_tensors,
)
from st_rl.utils.utils import get_checkpoint_path

__all__ = ["ExportError", "ExportResult", "FORMATS", "export_policy"]

FORMATS = ("onnx", "torchscript")
FILE_NAMES = {"onnx": "{name}.onnx", "torchscript": "{name}.pt"}
DEFAULT_OPSET = 17
ROLE_PREFIXES = {"adaptor": "adaptor_", "estimator": "estimator_", "actor": ""}  # of the state names


class ExportError(ValueError):
    """A policy or checkpoint cannot be exported (the message names the problem and the fix)."""


@dataclasses.dataclass
class ExportResult:
    """What :func:`export_policy` wrote (``max_abs_error``: format -> the self-check's largest action error)."""

    files: dict[str, str]
    metadata_path: str
    metadata: dict[str, Any]
    max_abs_error: dict[str, float]


class _ActorExport(nn.Module):
    """The deterministic actor with its memories' hidden states as explicit inputs and outputs."""

    def __init__(self, actor_critic: nn.Module, memories: list[Any]) -> None:
        super().__init__()
        self.actor_critic: Any = actor_critic
        self.memories = memories  # plain list: the modules stay registered in actor_critic only

    def forward(self, obs: torch.Tensor, *states: torch.Tensor) -> Any:
        given = iter(states)
        for memory in self.memories:
            lstm = memory.memory_type == "lstm"
            memory.hidden_states = LstmHiddenState(next(given), next(given)) if lstm else next(given)
        actions = self.actor_critic.act_inference(obs)
        if not self.memories:
            return actions
        outputs = [actions]
        for memory in self.memories:
            hidden = memory.hidden_states
            outputs += [hidden.hidden, hidden.cell] if memory.memory_type == "lstm" else [hidden]
        return tuple(outputs)


def _detached_copy(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` without its per-call caches (action means, rollout hidden states)."""
    saved: list[tuple[nn.Module, str, Any]] = []
    for sub in module.modules():
        for key, value in list(vars(sub).items()):
            if key.startswith("_") and key != "_mean":
                continue
            if isinstance(value, torch.Tensor) or (key == "hidden_states" and value is not None):
                saved.append((sub, key, value))
    for sub, key, _ in saved:
        object.__setattr__(sub, key, None)
    try:
        return copy.deepcopy(module)
    finally:
        for sub, key, value in saved:
            object.__setattr__(sub, key, value)


def _env_metadata(env: EnvAdapter | None, env_cfg: dict[str, Any] | None) -> dict[str, Any]:
    cfg = (env_cfg if isinstance(env_cfg, dict) else env.cfg if env is not None else None) or {}
    action_scale = cfg.get("action_scale")
    if action_scale is None and isinstance(cfg.get("control"), dict):
        action_scale = cfg["control"].get("action_scale")
    return {
        "action_scale": to_jsonable(action_scale),
        "clip_actions": to_jsonable(cfg.get("clip_actions")),
        "joint_names": env.joint_names if env is not None else None,
        "default_joint_pos": to_jsonable(env.default_joint_pos) if env is not None else None,
        "dt": env.dt if env is not None else None,
    }


def _io_spec(num_obs: int, num_actions: int, memories: list[tuple[str, str, Any]]) -> tuple[list, list, list]:
    states = [
        {
            "input": f"{prefix}{part}_in",
            "output": f"{prefix}{part}_out",
            "shape": [int(memory.num_layers), "batch", int(memory.hidden_size)],
            "memory": role,
            "rnn_type": memory.memory_type,
        }
        for prefix, role, memory in memories
        for part in (["h", "c"] if memory.memory_type == "lstm" else ["h"])
    ]

    def tensor(name: str, shape: list) -> dict[str, Any]:
        return {"name": name, "shape": shape, "dtype": "float32"}

    inputs = [tensor("obs", ["batch", num_obs]), *(tensor(s["input"], s["shape"]) for s in states)]
    outputs = [tensor("actions", ["batch", num_actions]), *(tensor(s["output"], s["shape"]) for s in states)]
    return inputs, outputs, states


def _example_inputs(num_obs: int, states: list[dict], batch: int, generator: torch.Generator) -> tuple:
    obs = torch.randn(batch, num_obs, generator=generator)
    hidden = [torch.randn(s["shape"][0], batch, s["shape"][2], generator=generator) * 0.5 for s in states]
    return (obs, *hidden)


def _write_onnx(module: nn.Module, example: tuple, path: str, metadata: dict[str, Any]) -> None:
    try:
        import onnx
    except ImportError as e:
        raise ExportError("ONNX export needs onnx (and onnxruntime): pip install 'st-rl[export]'") from e
    inputs, outputs = metadata["inputs"], metadata["outputs"]
    dynamic_axes = {spec["name"]: {spec["shape"].index("batch"): "batch"} for spec in inputs + outputs}
    # dynamo=False: the TorchScript-based exporter, robust for LSTM/GRU with explicit states
    torch.onnx.export(
        module,
        example,
        path,
        input_names=[s["name"] for s in inputs],
        output_names=[s["name"] for s in outputs],
        dynamic_axes=dynamic_axes,
        opset_version=metadata["onnx_opset"],
        dynamo=False,
    )
    model = onnx.load(path)
    props = {key: value if isinstance(value, str) else json.dumps(value) for key, value in metadata.items()}
    onnx.helper.set_model_props(model, {**props, METADATA_KEY: json.dumps(metadata)})
    model.producer_name, model.producer_version = "st_rl", st_rl.__version__
    onnx.checker.check_model(model)
    onnx.save(model, path)


def _write_torchscript(module: nn.Module, example: tuple, path: str, metadata: dict[str, Any]) -> None:
    traced = torch.jit.trace(module, example, check_trace=False)
    torch.jit.save(traced, path, _extra_files={METADATA_KEY: json.dumps(metadata)})


def _self_check(module: nn.Module, path: str, metadata: dict[str, Any], tolerance: float) -> float:
    """Largest action error of the exported file against the eager module (3 steps, batch 1 and 7)."""
    num_obs, states = metadata["num_obs"], metadata["states"]
    try:
        policy = load_exported_policy(path)
    except ImportError as e:
        warnings.warn(f"{path} not checked: {e}", stacklevel=3)
        return float("nan")
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for batch in (1, 7):
        example = _example_inputs(num_obs, states, batch, gen)
        hidden = {s["input"]: example[1 + i].numpy() for i, s in enumerate(states)}
        for step in range(3):
            obs = torch.randn(batch, num_obs, generator=gen)
            with torch.no_grad():
                ref = module(obs, *[torch.from_numpy(hidden[s["input"]]) for s in states])
            ref_out = ref if isinstance(ref, tuple) else (ref,)
            got = policy.run(obs.numpy(), hidden)
            nonfinite = [name for name, value in got.items() if not np.isfinite(value).all()]
            nonfinite += [
                f"{name} (eager policy)"
                for name, value in zip(policy.output_names, ref_out)
                if not bool(torch.isfinite(value).all())
            ]
            if nonfinite:
                at = f"on random observations (batch {batch}, step {step + 1})"
                raise ExportError(f"{path} gives NaN/Inf in {', '.join(nonfinite)} {at}; {DIVERGED}")
            # max() would keep the old value against a NaN; the check above rules NaN out
            worst = max(worst, float((torch.from_numpy(got["actions"]) - ref_out[0]).abs().max()))
            hidden = {s["input"]: got[s["output"]] for s in states}
    if not worst <= tolerance:
        why = "data-dependent Python control flow the tracer cannot capture? Please report it with the config"
        raise ExportError(f"{path} disagrees with the eager policy by {worst:.3g} (> {tolerance:g}): {why}")
    return worst


def _adapter_of(env: Any, runner: Any) -> EnvAdapter | None:
    """The metadata view of ``env``: the runner's own adapter when ``env`` is the runner's environment."""
    if env is None or isinstance(env, EnvAdapter):
        return env
    if isinstance(runner, OnPolicyRunner) and env is runner.env:
        return runner.env_adapter
    return EnvAdapter(env, check_finite="off")


def _info(*values: Any) -> dict[str, Any]:
    return dict(zip(("source_checkpoint", "iteration", "task", "env_cfg", "seed", "train_cfg"), values))


def _source_objects(source: Any, env: Any, task: Any, device: str, trust_config: bool = False) -> tuple:
    if isinstance(source, (str, os.PathLike)):
        path = str(source)
        try:
            run = load_run(path, task=task, num_envs=1, device=device, env=env, trust_config=trust_config)
        except NonFiniteCheckpointError as e:
            raise ExportError(f"Refusing to export a broken policy: {e}") from e
        except (ValueError, TypeError) as e:
            with untrusted_config(f"{source} (the checkpoint's stored 'config')", trusted=trust_config):
                standalone = _policy_without_env(path)
            if standalone is None:
                raise ExportError(f"Cannot rebuild the policy of {source}: {e}") from e
            return standalone
        info = _info(os.path.abspath(run.path), run.iteration, run.task, run.env_cfg, run.seed, run.train_cfg)
        return run.runner.alg.actor_critic, _adapter_of(run.env, run.runner), info
    try:
        actor_critic, source_env = source.alg.actor_critic, source.env
    except AttributeError as e:
        kind = type(source).__name__
        raise ExportError(f"export_policy takes a checkpoint, a run directory or a runner; got {kind}") from e
    adapter = _adapter_of(env if env is not None else source_env, source)
    env_cfg = adapter.cfg if adapter is not None else None
    ours = isinstance(source, OnPolicyRunner)  # else a runner-like object: iteration, seed and config unknown
    cfg, it = (source.cfg, source.current_learning_iteration) if ours else ({}, 0)
    train_cfg = source.train_cfg.to_dict() if ours else {}
    info = _info(None, it, task or cfg.get("task"), env_cfg, cfg.get("seed"), train_cfg)
    return actor_critic, adapter, info


def _policy_without_env(checkpoint: str) -> tuple[nn.Module, Any, dict[str, Any]] | None:
    """Build a checkpoint's policy from its stored config alone when that holds every dimension, else None."""
    path = get_checkpoint_path(checkpoint)
    state = load_checkpoint(path, map_location="cpu")
    cfg = state.get("config")
    if not isinstance(cfg, dict):
        return None
    train_cfg = resolve_train_cfg(cfg)
    dims: list[Any] = [train_cfg.policy.get(k) for k in ("num_actor_obs", "num_critic_obs", "num_actions")]
    if any(d is None for d in dims):
        return None
    spec = EnvSpec(num_obs=dims[0], num_critic_obs=dims[1], num_actions=int(dims[2]))
    actor_critic = build_actor_critic(spec, train_cfg.policy_class_name, train_cfg.policy)
    model = state["model_state_dict"]  # NaN/Inf: refused by export_policy
    actor, critic = (any(k.startswith(f"{p}_obs_normalizer.") for k in model) for p in ("actor", "critic"))
    actor_critic.enable_obs_normalization(actor=actor, critic=critic)
    actor_critic.load_state_dict(model)
    runner = train_cfg.runner
    info = _info(
        os.path.abspath(path),
        state.get("iter"),
        runner.get("task"),
        None,
        runner.get("seed"),
        train_cfg.to_dict(),
    )
    return actor_critic, None, info


def _metadata(
    actor_critic: Any,
    env: EnvAdapter | None,
    info: dict[str, Any],
    memories: list[tuple[str, str, Any]],
    files: dict[str, str],
    opset: int,
) -> dict[str, Any]:
    num_obs, num_actions = int(actor_critic.num_actor_obs), int(actor_critic.num_actions)
    inputs, outputs, states = _io_spec(num_obs, num_actions, memories)
    memory = next((m for _, role, m in memories if role == "actor"), None)
    segments = normalize_segments(actor_critic.obs_segments or (env.obs_segments if env is not None else {}))
    train_cfg = info["train_cfg"] or {}
    return {
        "format_version": EXPORT_FORMAT_VERSION,
        "st_rl_version": st_rl.__version__,
        "policy_class": type(actor_critic).__name__,
        "source_checkpoint": info["source_checkpoint"],
        "iteration": to_jsonable(info["iteration"]),
        "task": info["task"],
        "seed": to_jsonable(info["seed"]),
        "num_obs": num_obs,
        "num_actions": num_actions,
        "obs_segments": {k: [int(d) for d in v] for k, v in (segments or {}).items()} or None,
        "obs_normalization": "empirical" if actor_critic.actor_obs_normalization else "none",
        **_env_metadata(env, info["env_cfg"]),
        "recurrent": bool(memories),
        "rnn_type": memory.memory_type if memory is not None else None,
        "rnn_hidden_size": int(memory.hidden_size) if memory is not None else None,
        "rnn_num_layers": int(memory.num_layers) if memory is not None else None,
        "inputs": inputs,
        "outputs": outputs,
        "states": states,
        "files": {fmt: os.path.basename(p) for fmt, p in files.items()},
        "onnx_opset": opset if "onnx" in files else None,
        "policy_cfg": to_jsonable(train_cfg.get("policy", {}) if isinstance(train_cfg, dict) else {}),
        "env_cfg": to_jsonable(info["env_cfg"]),
    }


def export_policy(
    checkpoint_or_runner: Any,
    out_dir: str,
    formats: Sequence[str] = FORMATS,
    *,
    env: Any = None,
    task: str | None = None,
    name: str = "policy",
    opset: int = DEFAULT_OPSET,
    check: bool = True,
    tolerance: float = 1e-4,
    device: str = "cpu",
    trust_config: bool = False,
) -> ExportResult:
    """Export the deterministic actor (normaliser included) to ``out_dir/<name>.onnx`` / ``.pt`` / ``.json``.

    ``checkpoint_or_runner``: a checkpoint or run directory (rebuilt on one env of its task on ``device``), or a
    runner; ``env``: for the observation layout and robot metadata (default: the runner's, or the task's);
    ``task``: of a checkpoint that stores none; ``check``: compare each file with the eager policy on random
    inputs (up to ``tolerance``); ``trust_config``: see docs/security.md. Raises :class:`ExportError`."""
    if not isinstance(name, str) or not name or name in (".", "..") or os.path.basename(name) != name:
        raise ExportError(f"name must be a file stem without folders (e.g. 'policy'), got {name!r}")
    formats = [str(f).lower() for f in ([formats] if isinstance(formats, str) else formats)]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ExportError(f"unknown export format(s) {unknown or formats}; choose from {list(FORMATS)}")
    actor_critic, env, info = _source_objects(checkpoint_or_runner, env, task, device, trust_config)
    kind = type(actor_critic).__name__
    if isinstance(actor_critic, ActorCriticMutex):
        why = f"{kind} (a multi-skill Mutex) cannot be exported: it keeps per-env Python state"
        raise ExportError(f"{why}. Export each skill's run and switch between them in the deployment code")
    if not isinstance(actor_critic, ActorCritic):
        raise ExportError(f"{kind} is not an st_rl policy (ActorCritic family)")
    bad = nonfinite_tensors(actor_critic.state_dict(), "model_state_dict")
    if bad:
        source, it = info["source_checkpoint"] or "the runner's policy", info["iteration"]
        at = f"{describe_names(bad)}{'' if it is None else f' (iteration {it})'}"
        raise ExportError(f"Refusing to export a broken policy: {source} has NaN/Inf in {at}; {DIVERGED}")
    actor_critic: Any = _detached_copy(actor_critic).to("cpu").eval().requires_grad_(False)
    memories = [(ROLE_PREFIXES[role], role, m) for role, m in actor_critic.actor_memories()]
    module = _ActorExport(actor_critic, [m for _, _, m in memories]).eval()
    os.makedirs(out_dir, exist_ok=True)
    files = {fmt: os.path.join(out_dir, FILE_NAMES[fmt].format(name=name)) for fmt in formats}
    metadata = _metadata(actor_critic, env, info, memories, files, opset)
    example = _example_inputs(metadata["num_obs"], metadata["states"], 3, torch.Generator().manual_seed(1))
    metadata_path = os.path.join(out_dir, f"{name}.json")
    with open(metadata_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(metadata, indent=2) + "\n")
    errors: dict[str, float] = {}
    with torch.no_grad():
        module(*example)  # fills per-call caches (action mean, estimates) that the tracer inspects
        for fmt, path in files.items():
            try:
                with warnings.catch_warnings():  # tracer warnings (Python-side shape checks), deprecations
                    warnings.simplefilter("ignore")
                    (_write_onnx if fmt == "onnx" else _write_torchscript)(module, example, path, metadata)
            except ExportError:
                raise
            except Exception as e:
                raise ExportError(f"{kind} {fmt} export failed: {type(e).__name__}: {e}") from e
            errors[fmt] = _self_check(module, path, metadata, tolerance) if check else float("nan")
    return ExportResult(files=files, metadata_path=metadata_path, metadata=metadata, max_abs_error=errors)
