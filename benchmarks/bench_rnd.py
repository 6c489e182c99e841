"""PPO vs PPO + random network distillation (RND) on the sparse-reward ``sparse_goal`` task.

Example:
    python benchmarks/bench_rnd.py --seeds 1 2 3 4  # the preset: 250 iterations
    python benchmarks/bench_rnd.py --seeds 1 2 3 --schedule adaptive  # PPO's adaptive-KL learning rate

Trains both methods with the ``sparse_goal`` preset (the same observations, networks, learning rates and
budget; plain PPO only drops the preset's ``rnd_cfg``) for every seed, then runs each deterministic policy for
one episode on ``--eval-envs`` fresh environments and prints a markdown table: method, seed, iterations,
success rate (fraction of evaluation episodes that reach the goal), the iteration at which a training
episode first reached the goal, and the training time.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from st_rl.configs import get_preset
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env
from st_rl.tasks.sparse_goal import evaluate_success

TASK = "sparse_goal"


def train_cfg(seed: int, rnd: bool, schedule: str | None = None) -> dict:
    """The preset's training config for ``seed``, with or without its RND extension (and optionally another
    learning-rate schedule)."""
    cfg = get_preset(TASK).train.to_dict()
    cfg["seed"] = seed
    if schedule is not None:
        cfg["algorithm"]["schedule"] = schedule
    cfg["logger"] = "none"
    if not rnd:
        cfg["algorithm"]["rnd_cfg"] = None
    return cfg


def run(seed: int, rnd: bool, iterations: int, num_envs: int, eval_envs: int, schedule: str | None) -> dict:
    """Train one method for one seed; return its row of the table."""
    cfg = train_cfg(seed, rnd, schedule)
    preset = get_preset(TASK)
    env = make_env(TASK, num_envs=num_envs, seed=seed, **preset.env_kwargs)
    runner = OnPolicyRunner(env, cfg, device="cpu")
    runner.log = lambda locs, width=80, pad=35: None  # keep the console to the table
    rates: list[float] = []  # the training success rate after each iteration (the runner reads it once each)
    read_metrics = env.task_metrics

    def recording_task_metrics() -> dict[str, torch.Tensor]:
        metrics = read_metrics()
        rates.append(float(metrics["success_rate"]))
        return metrics

    env.task_metrics = recording_task_metrics
    start = time.perf_counter()
    runner.learn(iterations, init_at_random_ep_len=True)
    elapsed = time.perf_counter() - start
    first_success = next((i + 1 for i, rate in enumerate(rates) if rate > 0), None)
    policy = runner.get_inference_policy()
    success = evaluate_success(policy, num_envs=eval_envs, seed=10_000 + seed, **preset.env_kwargs)
    return {
        "method": "PPO + RND" if rnd else "PPO",
        "seed": seed,
        "iterations": iterations,
        "success": success,
        "first": first_success,
        "time": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="default: the preset's max_iterations (the RND weight schedule is not rescaled)",
    )
    parser.add_argument("--num-envs", type=int, default=None, help="default: the preset's num_envs")
    parser.add_argument("--eval-envs", type=int, default=200, help="evaluation episodes per policy")
    parser.add_argument("--methods", nargs="+", choices=["ppo", "rnd"], default=["ppo", "rnd"])
    parser.add_argument(
        "--schedule",
        choices=["fixed", "adaptive"],
        default=None,
        help="learning-rate schedule (default: preset's)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (the test uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    preset = get_preset(TASK)
    iterations = args.iterations or preset.train.max_iterations
    num_envs = args.num_envs or preset.num_envs
    print(
        f"# {TASK}: {num_envs} envs, {iterations} iterations, {args.eval_envs} evaluation episodes, "
        f"{args.schedule or preset.train.algorithm.schedule} learning rate; "
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads"
    )
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            row = run(seed, method == "rnd", iterations, num_envs, args.eval_envs, args.schedule)
            rows.append(row)
            print(
                f"# {row['method']} seed {seed}: success {row['success']:.2f} ({row['time']:.0f} s)",
                flush=True,
            )
    print()
    print(
        "| method | seed | iterations | success rate | first training success (iteration) | training time (s) |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        first = "-" if row["first"] is None else str(row["first"])
        print(
            f"| {row['method']} | {row['seed']} | {row['iterations']} | {row['success']:.2f} | {first} "
            f"| {row['time']:.0f} |"
        )


if __name__ == "__main__":
    main()
