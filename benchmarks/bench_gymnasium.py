"""PPO on Gymnasium MuJoCo tasks with the ``gym:<id>`` preset, compared with CleanRL's published returns.

Trains ``st_rl.configs.gymnasium_mujoco_preset`` (CleanRL ``ppo_continuous_action`` settings with 8 envs x
256 steps per iteration instead of 1 x 2048, 10 epochs x 32 minibatches, lr 3e-4 annealed linearly,
observation and reward normalisation) for ``--steps`` environment steps per seed and reports, like CleanRL,
the training episodic return: the mean undiscounted return of the last ``--last-episodes`` episodes of each
seed (raw rewards, before reward normalisation), then mean and standard deviation over seeds.

    python benchmarks/bench_gymnasium.py --tasks HalfCheetah-v5 Ant-v5 --seeds 1 2 3 --steps 1000000 --workers 2
    python benchmarks/bench_gymnasium.py --tasks HalfCheetah-v5 --seeds 1 --steps 20480   # smoke run

Needs ``pip install "st-rl[gymnasium]"``. The reference column is CleanRL's PPO after 1M steps on the v4 tasks
(v5 differs slightly: e.g. Ant-v5 excludes contact forces from the observation by default).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import statistics
import time
from typing import Any

import torch

from st_rl.configs import gymnasium_mujoco_preset
from st_rl.env.adapters import make_gymnasium_env
from st_rl.runners import OnPolicyRunner

# CleanRL ppo_continuous_action.py, 1M steps, mean +- std over seeds of the training episodic return (v4 tasks).
CLEANRL_PPO_1M = {"HalfCheetah": (1442.64, 46.03)}


def run_one(
    task: str,
    seed: int,
    steps: int,
    last_episodes: int,
    device: str,
    log_interval: int,
    num_envs: int | None = None,
) -> dict[str, Any]:
    """Train one seed; return its final training return and throughput.

    ``num_envs`` overrides the preset's number of environments, keeping the batch per iteration.
    """
    preset = gymnasium_mujoco_preset(task, total_steps=steps, num_envs=num_envs)
    cfg = preset.train.to_dict()
    cfg["seed"] = seed
    cfg["log_interval"] = log_interval
    env = make_gymnasium_env(task, num_envs=preset.num_envs, seed=seed, device=device, **preset.env_kwargs)
    runner = OnPolicyRunner(env, cfg, log_dir=None, device=device)
    iterations = math.ceil(steps / (preset.num_envs * cfg["num_steps_per_env"]))
    start = time.perf_counter()
    runner.learn(iterations)
    elapsed = time.perf_counter() - start
    returns = list(env.episode_returns)[-last_episodes:]
    env.close()
    return {
        "task": task,
        "seed": seed,
        "steps": env.total_steps,
        "episodes": env.num_episodes,
        "return": statistics.mean(returns) if returns else float("nan"),
        "seconds": elapsed,
        "steps_per_s": env.total_steps / elapsed,
    }


def _run_job(job: tuple) -> dict[str, Any]:
    task, seed, steps, last_episodes, device, log_interval, threads, num_envs = job
    torch.set_num_threads(threads)
    return run_one(task, seed, steps, last_episodes, device, log_interval, num_envs)


def _report(r: dict[str, Any], last_episodes: int) -> None:
    print(
        f"[bench_gymnasium] {r['task']} seed {r['seed']}: return {r['return']:.1f} over the last "
        f"{min(last_episodes, r['episodes'])} of {r['episodes']} episodes, {r['steps']} steps in "
        f"{r['seconds']:.0f} s ({r['steps_per_s']:.0f} steps/s)",
        flush=True,
    )


def format_table(results: list[dict[str, Any]]) -> str:
    """One row per task: seeds, mean and std of the per-seed returns, steps/s, CleanRL's reference."""
    lines = [
        f"{'task':<16} {'seeds':>5} {'steps':>9} {'mean':>9} {'std':>8} {'steps/s':>8}   CleanRL PPO 1M (v4)",
        "-" * 80,
    ]
    for task in dict.fromkeys(r["task"] for r in results):
        rows = [r for r in results if r["task"] == task]
        vals = [r["return"] for r in rows]
        finite = [v for v in vals if math.isfinite(v)]
        mean = statistics.mean(finite) if finite else math.nan
        std = statistics.stdev(finite) if len(finite) > 1 else float("nan") if not finite else 0.0
        sps = statistics.mean(r["steps_per_s"] for r in rows)
        ref = CLEANRL_PPO_1M.get(task.split("-")[0])
        ref_s = f"{ref[0]:.0f} +- {ref[1]:.0f}" if ref else "-"
        lines.append(
            f"{task:<16} {len(rows):>5} {rows[0]['steps']:>9} {mean:>9.1f} {std:>8.1f} {sps:>8.0f}   {ref_s}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah-v5", "Ant-v5"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=1_000_000, help="environment steps per seed")
    parser.add_argument("--last-episodes", type=int, default=10, help="episodes averaged per seed")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 is fastest for 64x64 nets)"
    )
    parser.add_argument(
        "--log-interval", type=int, default=50, help="print the runner's block every N iterations"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="seeds trained in parallel processes (one per core)"
    )
    parser.add_argument(
        "--num-envs", type=int, default=None, help="override the preset's number of environments"
    )
    parser.add_argument("--json", default=None, help="also write the per-seed results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    jobs = [
        (
            task,
            seed,
            args.steps,
            args.last_episodes,
            args.device,
            args.log_interval,
            args.threads,
            args.num_envs,
        )
        for task in args.tasks
        for seed in args.seeds
    ]
    results = []
    if args.workers > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.workers) as pool:
            for r in pool.imap(_run_job, jobs):
                _report(r, args.last_episodes)
                results.append(r)
    else:
        for job in jobs:
            r = _run_job(job)
            _report(r, args.last_episodes)
            results.append(r)
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
