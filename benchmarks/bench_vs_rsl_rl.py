"""Train st_rl and rsl_rl (rsl-rl-lib 5.x) side by side on the same task with the same PPO settings.

Example (the legged_gym-size setting; several minutes per run on a CPU):
    python benchmarks/bench_vs_rsl_rl.py --rounds 3 --iterations 20 --warmup 2 --st-variants fp32 bf16 \
        --json bench_vs_rsl_rl.json

Reward against wall time on a smaller setting:
    python benchmarks/bench_vs_rsl_rl.py --setting small --rounds 2

Needs the benchmark extra: ``pip install -e '.[bench]'`` (rsl-rl-lib >= 5.5).

Both libraries train st_rl's built-in ``velocity_tracking`` task (pure PyTorch, a few element-wise ops per step,
so the learner dominates the iteration time): actor observations (6,) = base_lin_vel (2, noisy), commands (2),
last_actions (2); critic observations (8,) = the same without noise plus mass (1) and friction (1); 2 actions;
episodes of 160 steps. rsl_rl sees it through a thin ``rsl_rl.env.VecEnv`` wrapper that hands the two groups over
as a TensorDict (``policy``, ``critic``; ``obs_groups = {"actor": ["policy"], "critic": ["critic"]}``); st_rl
trains the task itself through ``st_rl.runners.OnPolicyRunner``.

Settings (PPO on both sides: 24 steps per env and iteration, 5 epochs x 4 minibatches, Adam lr 1e-3 with the
adaptive KL schedule (desired_kl 0.01), gamma 0.99, lambda 0.95, clip 0.2, clipped value loss, value coefficient
1.0, entropy 0.01, max_grad_norm 1.0, initial action std 1.0, separate ELU actor and critic MLPs, empirical
(running) normalisation of actor and critic observations):

- ``legged_gym`` (default): 4096 envs, actor and critic 512-256-128, 20 iterations per run.
- ``small``: 1024 envs, actor and critic 128-128, 100 iterations per run (reward against wall time).

Method: ``--rounds`` rounds; each round trains rsl_rl and every st_rl variant once, each run in a fresh
subprocess (no shared caches, allocator or compiled kernels), the order reversed every other round. All runs use
``--threads`` torch threads and the same seeds. Each run goes through the library's own ``runner.learn()``;
the benchmark only wraps the algorithm's ``compute_returns`` and ``update`` (the same way on both sides) to take
a timestamp when collection ends and when the update ends, and the task's ``step`` to add up the rewards. An
iteration's time is from the end of the previous update to the end of this one (everything the runner does in
between counts); collection is up to ``compute_returns``, learning is ``compute_returns`` plus ``update``. The
first ``--warmup`` iterations of each run are left out of the time statistics, not out of the reward curve.
By default neither library logs (rsl_rl: ``log_dir=None``, which also skips its episode bookkeeping; st_rl: the
``none`` logger and no console summary, its episode bookkeeping still runs); ``--log`` has both write
TensorBoard logs to a temporary directory (kept; its path is in the ``--json`` output) and st_rl print every
iteration. Each library keeps its default non-finite check (rsl_rl: a NaN check of every step; st_rl: one check
per rollout). ``--precision`` sets st_rl's ``algorithm.precision``, ``--compile`` its ``algorithm.compile``
(``--st-variants fp32 bf16 bf16+compile`` compares several); ``--rsl-compile-mode default`` has rsl_rl
``torch.compile`` its actor and critic too (``torch_compile_mode``, off by default).

Table columns: iteration time (mean and std over the timed iterations of all rounds), collection and learning
time, speed-up = rsl_rl's mean iteration time / this one's, final reward = mean reward per env step over the
last 10% of iterations (at least one), and the reward at equal wall time: each run's per-iteration mean reward
per step interpolated at T, the wall time (from the start of ``learn()``) at which the fastest library/variant
finishes its last iteration (median over rounds).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

INSTALL_HINT = "install the benchmark extra: pip install -e '.[bench]'"
TASK = "velocity_tracking"
RSL = "rsl_rl"
ST = "st_rl"


@dataclass
class Setting:
    """Problem size of one benchmark setting."""

    name: str
    num_envs: int
    hidden: list[int]
    iterations: int
    warmup: int = 2
    rounds: int = 3
    num_steps: int = 24


SETTINGS: dict[str, Setting] = {
    "legged_gym": Setting("legged_gym", num_envs=4096, hidden=[512, 256, 128], iterations=20, rounds=3),
    "small": Setting("small", num_envs=1024, hidden=[128, 128], iterations=100, rounds=2),
}

# The PPO settings both libraries train with (the legged_gym / rsl_rl defaults).
PPO_CFG: dict[str, Any] = {
    "num_learning_epochs": 5,
    "num_mini_batches": 4,
    "clip_param": 0.2,
    "gamma": 0.99,
    "lam": 0.95,
    "value_loss_coef": 1.0,
    "entropy_coef": 0.01,
    "learning_rate": 1e-3,
    "max_grad_norm": 1.0,
    "use_clipped_value_loss": True,
    "schedule": "adaptive",
    "desired_kl": 0.01,
}
INIT_NOISE_STD = 1.0
ACTIVATION = "elu"


@dataclass
class RunSpec:
    """One training run (one subprocess)."""

    library: str
    label: str
    num_envs: int
    num_steps: int
    hidden: list[int]
    iterations: int
    seed: int = 0
    threads: int = 1
    device: str = "cpu"
    precision: str | None = None
    compile: bool = False
    rsl_compile_mode: str | None = None
    log: bool = False
    cuda_graph: bool | None = None


@dataclass
class Variant:
    """An st_rl configuration to compare (``--st-variants`` entry plus ``--compile``)."""

    label: str
    precision: str | None = None
    compile: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    cuda_graph: bool | None = None


def rsl_rl_available() -> bool:
    """Whether rsl_rl (rsl-rl-lib) can be imported."""
    return importlib.util.find_spec("rsl_rl") is not None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def st_rl_commit() -> str:
    """The st_rl checkout's short commit (``+dirty`` with uncommitted changes), or ``unknown``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def check_rsl_rl() -> None:
    """Raise ``RuntimeError`` (one line) unless rsl-rl-lib >= 5 is installed."""
    if not rsl_rl_available():
        raise RuntimeError(INSTALL_HINT)
    version = _version("rsl-rl-lib")
    major = version.split(".")[0]
    if major.isdigit() and int(major) < 5:
        raise RuntimeError(f"rsl-rl-lib {version} is installed; this benchmark needs >= 5.5 ({INSTALL_HINT})")


# ---------------------------------------------------------------------------------------------- configs
def st_rl_train_cfg(spec: RunSpec) -> dict[str, Any]:
    """st_rl's flat training config for ``spec``."""
    algorithm: dict[str, Any] = {"class_name": "PPO", **PPO_CFG}
    if spec.precision is not None:
        algorithm["precision"] = spec.precision
    if spec.compile:
        algorithm["compile"] = True
    if spec.cuda_graph is not None:
        algorithm["cuda_graph"] = spec.cuda_graph
    return {
        "seed": spec.seed,
        "num_steps_per_env": spec.num_steps,
        "max_iterations": spec.iterations,
        "empirical_normalization": True,
        "save_interval": 10**9,
        "log_interval": 1 if spec.log else 10**9,
        "logger": "tensorboard" if spec.log else "none",
        "policy": {
            "class_name": "ActorCritic",
            "init_noise_std": INIT_NOISE_STD,
            "actor_hidden_dims": list(spec.hidden),
            "critic_hidden_dims": list(spec.hidden),
            "activation": ACTIVATION,
        },
        "algorithm": algorithm,
    }


def rsl_rl_train_cfg(spec: RunSpec) -> dict[str, Any]:
    """rsl_rl 5.x's training config for ``spec`` (same settings as :func:`st_rl_train_cfg`)."""
    model = {"class_name": "MLPModel", "hidden_dims": list(spec.hidden), "activation": ACTIVATION}
    return {
        "seed": spec.seed,
        "num_steps_per_env": spec.num_steps,
        "save_interval": 10**9,
        "logger": "tensorboard",
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {"class_name": "PPO", **PPO_CFG},
        "actor": {
            **model,
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": INIT_NOISE_STD},
        },
        "critic": {**model, "obs_normalization": True},
        "torch_compile_mode": spec.rsl_compile_mode,
    }


def st_rl_supports(option: str) -> bool:
    """Whether st_rl's PPO takes the keyword argument ``option`` (``precision``, ``compile``)."""
    from st_rl.algorithms import PPO

    return option in inspect.signature(PPO.__init__).parameters


# ---------------------------------------------------------------------------------------------- worker
class _Recorder:
    """Per-iteration timestamps and rewards, taken through the same hooks for both libraries."""

    def __init__(self, steps_per_iter: int, device: str) -> None:
        self.steps_per_iter = steps_per_iter
        self.cuda = device.startswith("cuda")
        self.step_rewards: list[Any] = []
        self.rows: list[dict[str, float]] = []
        self.t_start = 0.0
        self.t_prev = 0.0
        self.t_collected = 0.0

    def _now(self) -> float:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()

    def start(self) -> None:
        self.t_start = self.t_prev = self._now()

    def collected(self) -> None:
        self.t_collected = self._now()

    def updated(self) -> None:
        import torch

        t = self._now()
        reward = (
            float(torch.stack(self.step_rewards).sum()) / self.steps_per_iter if self.step_rewards else 0.0
        )
        self.step_rewards.clear()
        self.rows.append(
            {
                "time": t - self.t_start,
                "iteration": t - self.t_prev,
                "collection": self.t_collected - self.t_prev,
                "learning": t - self.t_collected,
                "reward": reward,
            }
        )
        self.t_prev = t


def _instrument_task(task: Any, rec: _Recorder) -> None:
    """Add up the task's rewards per step (one reduction, no host sync)."""
    step = task.step

    def recording_step(actions: Any) -> Any:
        out = step(actions)
        rec.step_rewards.append(out[1].sum())
        return out

    task.step = recording_step


def _instrument_alg(alg: Any, rec: _Recorder) -> None:
    """Timestamp the end of collection (``compute_returns``) and the end of ``update``."""
    compute_returns, update = alg.compute_returns, alg.update

    def timed_compute_returns(*args: Any, **kwargs: Any) -> Any:
        rec.collected()
        return compute_returns(*args, **kwargs)

    def timed_update(*args: Any, **kwargs: Any) -> Any:
        out = update(*args, **kwargs)
        rec.updated()
        return out

    alg.compute_returns = timed_compute_returns
    alg.update = timed_update


def _rsl_rl_env(task: Any) -> Any:
    """Wrap a built-in st_rl task as an ``rsl_rl.env.VecEnv`` with ``policy`` and ``critic`` groups."""
    from rsl_rl.env import VecEnv
    from tensordict import TensorDict

    class TaskVecEnv(VecEnv):
        def __init__(self) -> None:
            self.num_envs = int(task.num_envs)
            self.num_actions = int(task.num_actions)
            self.max_episode_length = int(task.max_episode_length)
            self.device = task.device
            self.cfg = dict(task.cfg)

        @property
        def episode_length_buf(self) -> Any:  # type: ignore[override]
            return task.episode_length_buf

        @episode_length_buf.setter
        def episode_length_buf(self, value: Any) -> None:
            task.episode_length_buf = value

        def _groups(self, groups: dict[str, Any]) -> TensorDict:
            return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

        def get_observations(self) -> TensorDict:
            return self._groups(task.get_observations()[1]["observations"])

        def step(self, actions: Any) -> tuple[TensorDict, Any, Any, dict]:
            _, rewards, dones, extras = task.step(actions)
            return self._groups(extras["observations"]), rewards, dones, extras

    return TaskVecEnv()


def run_worker(spec: RunSpec) -> dict[str, Any]:
    """Train one library for ``spec.iterations`` iterations in this process; return the per-iteration rows."""
    import torch

    from st_rl.tasks import make_env

    torch.set_num_threads(spec.threads)
    torch.manual_seed(spec.seed)
    t_setup = time.perf_counter()
    task = make_env(TASK, num_envs=spec.num_envs, device=spec.device, seed=spec.seed)
    rec = _Recorder(spec.num_steps * spec.num_envs, spec.device)
    _instrument_task(task, rec)
    log_dir = tempfile.mkdtemp(prefix=f"bench_{spec.library}_") if spec.log else None
    if spec.library == RSL:
        from rsl_rl.runners import OnPolicyRunner as RslRunner

        runner: Any = RslRunner(
            _rsl_rl_env(task), rsl_rl_train_cfg(spec), log_dir=log_dir, device=spec.device
        )
        version = _version("rsl-rl-lib")
    elif spec.library == ST:
        from st_rl.runners import OnPolicyRunner

        for option, wanted in (
            ("precision", spec.precision not in (None, "fp32")),
            ("compile", spec.compile),
        ):
            if wanted and not st_rl_supports(option):
                raise RuntimeError(f"this st_rl's PPO takes no '{option}' argument (variant {spec.label!r})")
        cfg = st_rl_train_cfg(spec)
        if spec.precision == "fp32" and not st_rl_supports("precision"):
            del cfg["algorithm"]["precision"]  # fp32 is what a PPO without the option trains in
        runner = OnPolicyRunner(task, cfg, log_dir=log_dir, device=spec.device)
        version = _version("st-rl")
    else:
        raise ValueError(f"unknown library {spec.library!r}")
    _instrument_alg(runner.alg, rec)
    setup_s = time.perf_counter() - t_setup
    rec.start()
    runner.learn(spec.iterations)
    return {
        "library": spec.library,
        "label": spec.label,
        "version": version,
        "spec": dataclasses.asdict(spec),
        "setup_s": setup_s,
        "obs_dims": {"actor": int(task.num_obs), "critic": int(task.num_privileged_obs)},
        "num_actions": int(task.num_actions),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "log_dir": log_dir,
        "rows": rec.rows,
    }


def run_subprocess(spec: RunSpec, timeout_s: float | None = None) -> dict[str, Any]:
    """Run :func:`run_worker` in a fresh Python process with ``spec.threads`` threads."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(spec.threads)
    if spec.library == "rsl_rl":  # PyTorch's default CPU allocator, as rsl_rl's users run it
        env["THP_MEM_ALLOC_ENABLE"] = "0"  # (importing st_rl's task would turn huge pages on)
    with tempfile.TemporaryDirectory(prefix="bench_vs_rsl_rl_") as tmp:
        spec_path, out_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.json")
        with open(spec_path, "w") as f:
            json.dump(dataclasses.asdict(spec), f)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", spec_path, out_path]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
        if proc.returncode != 0 or not os.path.exists(out_path):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
            raise RuntimeError(f"{spec.label} run failed (exit {proc.returncode}):\n{tail}")
        with open(out_path) as f:
            return json.load(f)


# ---------------------------------------------------------------------------------------------- driver
def parse_variants(names: list[str], compile_all: bool) -> list[Variant]:
    """``fp32``/``bf16``/``auto``, optionally ``+compile`` or ``+eager`` (``cuda_graph=False``) -> :class:`Variant`."""
    variants = []
    for name in names:
        precision, _, suffix = name.partition("+")
        if precision not in ("fp32", "bf16", "auto"):
            raise ValueError(
                f"unknown st_rl variant {name!r}: use fp32, bf16 or auto, optionally with +compile or +eager"
            )
        if suffix not in ("", "compile", "eager"):
            raise ValueError(f"unknown st_rl variant suffix in {name!r}: only '+compile' or '+eager'")
        use_compile = compile_all or suffix == "compile"
        label = (
            f"{ST} {precision}"
            + (" +compile" if use_compile else "")
            + (" +eager" if suffix == "eager" else "")
        )
        variants.append(
            Variant(label, precision, use_compile, cuda_graph=False if suffix == "eager" else None)
        )
    return variants


def _interp(x: float, xs: list[float], ys: list[float]) -> float:
    """Linear interpolation of ``ys(xs)`` at ``x`` (clamped to the ends)."""
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            w = (x - xs[i - 1]) / max(xs[i] - xs[i - 1], 1e-12)
            return ys[i - 1] + w * (ys[i] - ys[i - 1])
    return ys[-1]


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(runs: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """Per library/variant statistics over all rounds (see the module docstring)."""
    labels = list(dict.fromkeys(run["label"] for run in runs))
    by_label = {label: [run for run in runs if run["label"] == label] for label in labels}
    end_times = {
        label: statistics.median(r["rows"][-1]["time"] for r in rs) for label, rs in by_label.items()
    }
    fastest = min(end_times, key=lambda label: end_times[label])
    t_equal = end_times[fastest]
    rows = []
    for label, rs in by_label.items():
        timed = [row for r in rs for row in r["rows"][warmup:]]
        it_mean, it_std = _mean_std([row["iteration"] for row in timed])
        tail = max(1, len(rs[0]["rows"]) // 10)
        final = [statistics.fmean(row["reward"] for row in r["rows"][-tail:]) for r in rs]
        at_t = [
            _interp(t_equal, [row["time"] for row in r["rows"]], [row["reward"] for row in r["rows"]])
            for r in rs
        ]
        rows.append(
            {
                "label": label,
                "library": rs[0]["library"],
                "version": rs[0]["version"],
                "runs": len(rs),
                "timed_iterations": len(timed),
                "iteration_mean_s": it_mean,
                "iteration_std_s": it_std,
                "collection_mean_s": _mean_std([row["collection"] for row in timed])[0],
                "learning_mean_s": _mean_std([row["learning"] for row in timed])[0],
                "end_time_median_s": end_times[label],
                "final_reward": statistics.fmean(final),
                "final_reward_std": _mean_std(final)[1],
                "reward_at_equal_time": statistics.fmean(at_t),
            }
        )
    base = next((row for row in rows if row["library"] == RSL), None)
    for row in rows:
        row["speedup_vs_rsl_rl"] = (
            base["iteration_mean_s"] / row["iteration_mean_s"] if base else float("nan")
        )
    return {"fastest": fastest, "equal_time_s": t_equal, "rows": rows}


def run_benchmark(
    setting: Setting,
    variants: list[Variant],
    rounds: int,
    threads: int,
    device: str = "cpu",
    seed: int = 0,
    log: bool = False,
    progress: bool = False,
    rsl_compile_mode: str | None = None,
) -> dict[str, Any]:
    """Alternate rsl_rl and the st_rl ``variants`` for ``rounds`` rounds, each run in its own subprocess.

    Returns:
        ``{"setting", "rounds", "threads", "device", "machine", "runs", "summary"}``; ``runs`` holds every
        run's per-iteration rows (``time`` since ``learn()`` started, ``iteration``, ``collection``,
        ``learning`` in s, and ``reward``, the mean reward per env step of that iteration).

    Raises:
        RuntimeError: rsl_rl is missing, or a run failed (with the tail of its output).
    """
    check_rsl_rl()  # fail before any run starts
    for v in variants:
        for option, wanted in (("precision", v.precision not in (None, "fp32")), ("compile", v.compile)):
            if wanted and not st_rl_supports(option):
                raise RuntimeError(f"this st_rl's PPO takes no '{option}' argument (variant {v.label!r})")
    base = {
        "num_envs": setting.num_envs,
        "num_steps": setting.num_steps,
        "hidden": list(setting.hidden),
        "iterations": setting.iterations,
        "seed": seed,
        "threads": threads,
        "device": device,
        "log": log,
    }
    rsl_label = RSL if rsl_compile_mode is None else f"{RSL} +compile"
    specs = [RunSpec(RSL, rsl_label, rsl_compile_mode=rsl_compile_mode, **base)]
    specs += [
        RunSpec(ST, v.label, precision=v.precision, compile=v.compile, cuda_graph=v.cuda_graph, **base)
        for v in variants
    ]
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        order = specs if r % 2 == 0 else specs[::-1]
        for spec in order:
            if progress:
                print(f"round {r + 1}/{rounds}: {spec.label} ...", end=" ", flush=True)
            result = run_subprocess(spec)
            result["round"] = r
            runs.append(result)
            if progress:
                rows = result["rows"]
                timed = [row["iteration"] for row in rows[setting.warmup :]] or [rows[-1]["iteration"]]
                print(f"{statistics.fmean(timed):.3f} s/it, reward/step {rows[-1]['reward']:.4f}", flush=True)
    return {
        "setting": dataclasses.asdict(setting),
        "ppo": PPO_CFG,
        "rounds": rounds,
        "threads": threads,
        "device": device,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
        },
        "st_rl_commit": st_rl_commit(),
        "obs_dims": runs[0]["obs_dims"] if runs else {},
        "runs": runs,
        "summary": summarize(runs, setting.warmup),
    }


def format_table(result: dict[str, Any]) -> str:
    """The Markdown table (plus a one-line description of the setting) of a :func:`run_benchmark` result."""
    s, summary, ppo = result["setting"], result["summary"], result["ppo"]
    runs = result["runs"]
    versions = {run["library"]: run["version"] for run in runs}
    torch_version = runs[0]["torch"] if runs else "?"
    dims = result.get("obs_dims", {})
    head = (
        f"Setting `{s['name']}`: task `{TASK}` (obs actor {dims.get('actor')}, critic {dims.get('critic')}), "
        f"{s['num_envs']} envs x {s['num_steps']} steps, MLP {'-'.join(map(str, s['hidden']))} ELU, "
        f"PPO {ppo['num_learning_epochs']}x{ppo['num_mini_batches']}, {s['iterations']} iterations ({s['warmup']} warm-up) x {result['rounds']} rounds; "
        f"device {result['device']}, {result['threads']} threads, torch {torch_version}, "
        f"rsl-rl-lib {versions.get(RSL, '?')}, st-rl {versions.get(ST, '?')} ({result.get('st_rl_commit', '?')}). "
        f"Equal wall time T = {summary['equal_time_s']:.1f} s (when {summary['fastest']} ends)."
    )
    lines = [
        head,
        "",
        "| library / variant | iteration (s) | std (s) | collection (s) | learning (s) | speed-up vs rsl_rl "
        f"| final reward/step | reward/step at T={summary['equal_time_s']:.0f} s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summary["rows"]:
        lines.append(
            f"| {row['label']} | {row['iteration_mean_s']:.3f} | {row['iteration_std_s']:.3f} "
            f"| {row['collection_mean_s']:.3f} | {row['learning_mean_s']:.3f} | {row['speedup_vs_rsl_rl']:.2f}x "
            f"| {row['final_reward']:.4f} | {row['reward_at_equal_time']:.4f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        with open(argv[1]) as f:
            spec = RunSpec(**json.load(f))
        result = run_worker(spec)
        with open(argv[2], "w") as f:
            json.dump(result, f)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--setting", choices=sorted(SETTINGS), default="legged_gym")
    p.add_argument("--rounds", type=int, default=None, help="A/B rounds (default: the setting's)")
    p.add_argument("--iterations", type=int, default=None, help="iterations per run (default: the setting's)")
    p.add_argument(
        "--warmup", type=int, default=None, help="untimed first iterations (default: the setting's)"
    )
    p.add_argument("--num-envs", type=int, default=None, help="override the setting's number of envs")
    p.add_argument("--hidden", type=int, nargs="+", default=None, help="override the setting's MLP sizes")
    p.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: all cores)"
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--st-variants",
        nargs="+",
        default=None,
        help="st_rl variants: fp32, bf16, auto, optionally +compile (default: the --precision one)",
    )
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="fp32", help="st_rl precision")
    p.add_argument("--compile", action="store_true", help="st_rl algorithm.compile=True (all variants)")
    p.add_argument(
        "--rsl-compile-mode",
        default=None,
        metavar="MODE",
        help="rsl_rl torch_compile_mode (e.g. default; default: off, rsl_rl's default)",
    )
    p.add_argument("--log", action="store_true", help="both libraries log to TensorBoard (a temporary dir)")
    p.add_argument("--json", default=None, metavar="OUT", help="write the raw numbers to OUT")
    args = p.parse_args(argv)

    setting = copy.deepcopy(SETTINGS[args.setting])
    for name in ("rounds", "iterations", "warmup", "num_envs", "hidden"):
        if getattr(args, name) is not None:
            setattr(setting, name, getattr(args, name))
    if setting.warmup >= setting.iterations:
        p.error("--warmup must be smaller than --iterations")
    try:
        variants = parse_variants(args.st_variants or [args.precision], args.compile)
        result = run_benchmark(
            setting,
            variants,
            setting.rounds,
            args.threads,
            args.device,
            args.seed,
            args.log,
            progress=True,
            rsl_compile_mode=args.rsl_compile_mode,
        )
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print()
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"\nraw numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
