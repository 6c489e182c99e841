"""Default training job on the MuJoCo quadruped for a fixed wall-clock budget, evaluated along the way.

Example (the numbers in RESULTS.md):
    python benchmarks/bench_locomotion.py --minutes 30 --eval-at 10 20 30

Prints the simulation throughput (MuJoCo alone, and the task's full step), then trains the
``quadruped_flat`` preset exactly as ``st-rl train`` does and, when the training wall-clock time passes each
``--eval-at`` mark, evaluates the deterministic policy on a separate set of environments with commands
drawn over the whole commanded range: velocity-tracking RMSD, the RMSD a standing robot would get, yaw-rate
RMSD, survival (fraction of envs that never fell) and cost of transport. Evaluation time is not counted in
the training budget. A table is printed at the end; checkpoints go to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from st_rl.configs import get_preset
from st_rl.play import evaluate_policy
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env


def sim_throughput(num_envs: int, steps: int = 200) -> tuple[float, float]:  # noqa: D103
    """(MuJoCo batch steps/s, full task env.step steps/s) with zero actions."""
    env = make_env("quadruped_flat", num_envs=num_envs, seed=0)
    zeros = torch.zeros(num_envs, env.num_actions)
    for _ in range(10):
        env.step(zeros)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.batch.step(nstep=env.decimation)
    raw = num_envs * steps / (time.perf_counter() - t0)
    env.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(zeros)
    full = num_envs * steps / (time.perf_counter() - t0)
    return raw, full


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="quadruped_flat")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--eval-at", type=float, nargs="+", default=[10.0, 20.0, 30.0])
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--eval-envs", type=int, default=128)
    parser.add_argument("--eval-seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--log-dir", default="logs/bench_locomotion")
    parser.add_argument("--skip-sim", action="store_true", help="skip the simulation throughput measurement")
    args = parser.parse_args()

    print(
        f"# {platform.machine()} with {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads)"
    )
    if not args.skip_sim:
        raw, full = sim_throughput(1024)
        print(
            f"simulation, 1024 envs, 5 substeps of 4 ms: MuJoCo batch {raw:,.0f} steps/s, task step {full:,.0f} steps/s"
        )

    preset = get_preset(args.task)
    cfg = preset.train.to_dict()
    cfg.update(seed=args.seed, task=args.task, log_interval=10**9, save_interval=10**9)
    num_envs = args.num_envs or preset.num_envs
    env = make_env(args.task, num_envs=num_envs, seed=args.seed, **preset.env_kwargs)
    os.makedirs(args.log_dir, exist_ok=True)
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")  # checkpoints are saved at the marks
    runner.log = lambda locs, width=80, pad=35: None  # keep the console quiet; the table is the output

    marks = sorted(args.eval_at)
    rows = []
    train_time, first = 0.0, True
    while marks:
        t0 = time.perf_counter()
        runner.learn(1, init_at_random_ep_len=first)
        train_time += time.perf_counter() - t0
        first = False
        if train_time / 60.0 >= marks[0]:
            mark = marks.pop(0)
            runner.save(os.path.join(args.log_dir, f"model_{runner.current_learning_iteration}.pt"))
            policy = runner.get_inference_policy()
            eval_env = make_env(
                args.task, num_envs=args.eval_envs, seed=1000 + int(mark), **preset.env_kwargs
            )
            m = evaluate_policy(eval_env, policy, args.eval_seconds, warmup_s=1.0)
            runner.train_mode()
            rows.append(
                (mark, runner.current_learning_iteration, runner.tot_timesteps, train_time,
                 runner.tot_timesteps / train_time, m["velrmsd"], m["cmd_rms_xy"], m["yaw_rmsd"],
                 m["survival"], m["falls_per_env_min"], m["CoT"])
            )  # fmt: skip
            print(
                f"[{mark:.0f} min] iteration {rows[-1][1]}: velrmsd {m['velrmsd']:.3f} m/s "
                f"(standing {m['cmd_rms_xy']:.3f}), survival {m['survival']:.3f}",
                flush=True,
            )

    print()
    print(
        "| train min | iterations | env steps | steps/s end-to-end | velrmsd m/s | standing-still RMSD | "
        "yaw RMSD rad/s | survival | falls / env-min | CoT |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]:.0f} | {r[1]} | {r[2]:,} | {r[4]:,.0f} | {r[5]:.3f} | {r[6]:.3f} | {r[7]:.3f} | "
            f"{r[8]:.3f} | {r[9]:.3f} | {r[10]:.2f} |"
        )


if __name__ == "__main__":
    main()
