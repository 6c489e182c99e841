"""Kernel launches without a GPU: count the aten ops of the learner per rollout step and per minibatch.

On a GPU nearly every aten op is one kernel launch, and at legged_gym sizes (4096 envs, 512-256-128 MLPs) the
iteration is bound by launches, not by arithmetic. Op counts do not depend on the batch size or the network
width, so a small CPU run predicts the GPU's launch count. This script counts, with a ``TorchDispatchMode``:

- **act + process_env_step**: the learner's ops in one rollout step (the environment's own step is not
  counted);
- **update / minibatch**: the ops of one ``update()`` divided by its minibatches (5 epochs x 4 minibatches),
  forward, backward, optimizer step and bookkeeping included;
- **host syncs**: reads of a device tensor's values on the host (``.item()``, ``.tolist()``, ``.cpu()``,
  ``bool(tensor)``, ...), each a wait for the device on CUDA. On the CPU every tensor is a host tensor, so the
  counter tells device tensors from host copies: what a host read returns, and what is computed only from host
  copies, is a host tensor (so is what a factory makes without ``device=``); reading it again is free. Ops whose output size depends on the data
  (``nonzero``, boolean-mask indexing, ``masked_select``) wait for the device too and are counted with them.

st_rl runs with the options its CUDA path turns on (``sync_free`` update checks; ``--precision`` bf16
adds the autocast casts); rsl_rl (rsl-rl-lib 5.x, the ``bench`` extra) runs the same PPO settings.

    python benchmarks/op_count.py                  # st_rl fp32 and bf16, rsl_rl when installed
    python benchmarks/op_count.py --policy ActorCriticRecurrent
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import importlib.util
import sys
import weakref
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_rsl_rl import PPO_CFG, RunSpec, _rsl_rl_env, rsl_rl_train_cfg, st_rl_train_cfg  # noqa: E402

from st_rl.runners import OnPolicyRunner  # noqa: E402
from st_rl.tasks import make_env  # noqa: E402

GPU_KERNELS = "gpu: CUDA kernels (profiler)"
GPU_LAUNCHES = "gpu: launches from the host (profiler)"
DATA_DEPENDENT = {
    "aten::nonzero",
    "aten::masked_select",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::index(bool mask)",
}
HOST_READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__", "__format__"}
MINIBATCHES = PPO_CFG["num_learning_epochs"] * PPO_CFG["num_mini_batches"]


class OpCounter(TorchDispatchMode):
    """Counts aten ops by name while ``counting`` is true; view ops (no kernel on a GPU) under ``view:``."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.counting = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if self.counting:
            name = str(func.overloadpacket._qualified_op_name)
            self.ops[f"view:{name}" if func.is_view else name] += 1
            if name in ("aten::index", "aten::index_put_", "aten::index_put") and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ())
            ):
                self.ops["aten::index(bool mask)"] += 1  # a nonzero inside: waits for the device
        return func(*args, **(kwargs or {}))


class HostSyncCounter(TorchFunctionMode):
    """Counts host reads of device tensors (see the module docstring) while ``counting`` is true."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: collections.Counter[str] = collections.Counter()
        self.host: set[int] = set()  # ids of host tensors (a tensor leaves the set when it is freed)
        self.counting = True

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        to_host = name in HOST_READS
        # a factory without ``device=`` makes a CPU tensor, also when training on CUDA
        from_host = all(id(t) in self.host for t in inputs) and (bool(inputs) or "device" not in kwargs)
        if to_host and not from_host and self.counting:
            self.syncs[name] += 1
        if to_host or from_host:
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and id(t) not in self.host:
                    self.host.add(id(t))
                    weakref.finalize(t, self.host.discard, id(t))
        return out


def _pausing(counter: Any, fn: Any) -> Any:
    """``fn`` with counting paused while it runs (the environment's step)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        counting, counter.counting = counter.counting, False
        try:
            return fn(*args, **kwargs)
        finally:
            counter.counting = counting

    return wrapped


def _count(
    fn: Any, env: Any, optimizer: torch.optim.Optimizer, device: str = "cpu"
) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """The aten ops and the host syncs of ``fn()``: the environment's step is left out, and the host syncs of
    the optimizer's step (torch's, the same for both libraries; its step counters are host tensors on CUDA).
    On CUDA the kernels the profiler saw, the environment's included, are under ``GPU_KERNELS``."""
    ops, syncs = OpCounter(), HostSyncCounter()
    env_step, opt_step = env.step, optimizer.step
    env.step = _pausing(syncs, _pausing(ops, env_step))
    optimizer.step = _pausing(syncs, opt_step)  # type: ignore[method-assign]
    activities = [torch.profiler.ProfilerActivity.CUDA] if device.startswith("cuda") else []
    try:
        with (
            torch.profiler.profile(activities=activities) if activities else contextlib.nullcontext() as prof
        ):
            with syncs, ops:
                fn()
            if activities:
                torch.cuda.synchronize()
    finally:
        env.step, optimizer.step = env_step, opt_step  # type: ignore[method-assign]
    if prof is not None:
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        ops.ops[GPU_KERNELS] = len(kernels)
        # a replayed CUDA graph runs its kernels from one cudaGraphLaunch
        launches = [
            e for e in prof.events() if e.name.startswith(("cudaLaunch", "cuLaunch", "cudaGraphLaunch"))
        ]
        ops.ops[GPU_LAUNCHES] = len(launches)
    return ops.ops, syncs.syncs


Counts = dict[str, tuple[collections.Counter[str], collections.Counter[str]]]


def count_st_rl(policy: str, precision: str, num_envs: int, device: str = "cpu") -> Counts:
    """Op counts of st_rl's learner with the CUDA path's options (sync-free update checks) on ``device``."""
    spec = RunSpec("st_rl", precision, num_envs, 24, [512, 256, 128], 1, precision=precision)
    cfg = copy.deepcopy(st_rl_train_cfg(spec))
    cfg["policy"]["class_name"] = policy
    task = make_env("velocity_tracking", num_envs=num_envs, device=device, seed=0)
    runner = OnPolicyRunner(task, cfg, log_dir=None, device=device)
    runner.alg.set_sync_free(True)
    # warm-up: lazy state, first-iteration paths; on CUDA also the update's CUDA-graph capture
    runner.learn(2 if device.startswith("cuda") else 1)
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    state = {"obs": obs, "critic_obs": critic_obs}

    def step() -> None:
        with torch.inference_mode():
            state["obs"], state["critic_obs"], *_ = runner.rollout_step(state["obs"], state["critic_obs"])

    adapter = runner.env_adapter
    rollout = _count(step, adapter, runner.alg.optimizer, device)
    with torch.inference_mode():
        for _ in range(runner.num_steps_per_env - 1):
            step()
        runner.alg.compute_returns(state["critic_obs"])
    update = _count(lambda: runner.alg.update(1), adapter, runner.alg.optimizer, device)
    return {"rollout step": rollout, "update": update}


def count_rsl_rl(num_envs: int, device: str = "cpu") -> Counts:
    """Op counts of rsl_rl's learner (same PPO settings, MLP actor and critic with normalisation)."""
    from rsl_rl.runners import OnPolicyRunner as RslRunner

    spec = RunSpec("rsl_rl", "rsl_rl", num_envs, 24, [512, 256, 128], 1)
    task = make_env("velocity_tracking", num_envs=num_envs, device=device, seed=0)
    env = _rsl_rl_env(task)
    runner = RslRunner(env, rsl_rl_train_cfg(spec), log_dir=None, device=device)
    runner.learn(1)
    alg = runner.alg
    for group in alg.optimizer.param_groups:
        group["foreach"] = True  # what torch.optim picks on CUDA (on the CPU it loops over the parameters)
    state = {"obs": env.get_observations()}

    def step() -> None:
        with torch.inference_mode():
            actions = alg.act(state["obs"])
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
            state["obs"] = obs

    rollout = _count(step, env, alg.optimizer, device)
    with torch.inference_mode():
        for _ in range(runner.cfg["num_steps_per_env"] - 1):
            step()
        alg.compute_returns(state["obs"])
    update = _count(alg.update, env, alg.optimizer, device)
    return {"rollout step": rollout, "update": update}


def summarize(counts: Counts) -> dict[str, float]:
    """Ops per rollout step, ops per minibatch, host syncs per step and per update."""
    (step, step_syncs), (update, update_syncs) = counts["rollout step"], counts["update"]
    step_syncs = step_syncs + collections.Counter({k: step[k] for k in DATA_DEPENDENT if step[k]})
    update_syncs = update_syncs + collections.Counter({k: update[k] for k in DATA_DEPENDENT if update[k]})

    def kernels(ops: collections.Counter[str]) -> int:
        return sum(v for k, v in ops.items() if not k.startswith(("view:", "gpu:")))

    return {
        "step_ops": sum(v for k, v in step.items() if not k.startswith("gpu:")),
        "step_kernels": kernels(step),
        "minibatch_ops": sum(v for k, v in update.items() if not k.startswith("gpu:")) / MINIBATCHES,
        "minibatch_kernels": kernels(update) / MINIBATCHES,
        "step_syncs": sum(step_syncs.values()),
        "update_syncs": sum(update_syncs.values()),
        "step_gpu_kernels": step[GPU_KERNELS],
        "update_gpu_kernels": update[GPU_KERNELS],
        "step_gpu_launches": step[GPU_LAUNCHES],
        "update_gpu_launches": update[GPU_LAUNCHES],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policy", default="ActorCritic", help="st_rl policy class (ActorCriticRecurrent too)"
    )
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--num-envs", type=int, default=256, help="op counts do not depend on it")
    parser.add_argument("--top", type=int, default=0, help="also list the most frequent ops of each update")
    parser.add_argument("--device", default="cpu", help="cuda: also the CUDA kernels the profiler sees")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [
        (f"st_rl {args.policy} {p}", count_st_rl(args.policy, p, args.num_envs, args.device))
        for p in args.precision
    ]
    if importlib.util.find_spec("rsl_rl") is not None:
        rows.append(("rsl_rl ActorCritic", count_rsl_rl(args.num_envs, args.device)))
    else:
        print("rsl_rl not installed (pip install -e '.[bench]'): its row is left out")
    print(
        "| learner | ops / rollout step (non-view) | ops / minibatch (non-view) | host syncs / step "
        "| host syncs / update |\n|---|---:|---:|---:|---:|"
    )
    for label, counts in rows:
        s = summarize(counts)
        print(
            f"| {label} | {s['step_ops']} ({s['step_kernels']}) | {s['minibatch_ops']:.1f} "
            f"({s['minibatch_kernels']:.1f}) | {s['step_syncs']} | {s['update_syncs']} |"
        )
    for label, counts in rows if args.device.startswith("cuda") else []:
        s = summarize(counts)
        print(
            f"{label}: CUDA kernels per rollout step {s['step_gpu_kernels']}, per update {s['update_gpu_kernels']}; "
            f"launches from the host per rollout step {s['step_gpu_launches']}, per update {s['update_gpu_launches']}"
        )
    for label, counts in rows if args.top else []:
        top = ", ".join(
            f"{k.replace('aten::', '')} {v}" for k, v in counts["update"][0].most_common(args.top)
        )
        print(f"{label} update: {top}; host syncs: {dict(counts['update'][1])}")


if __name__ == "__main__":
    main()
