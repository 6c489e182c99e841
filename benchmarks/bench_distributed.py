"""Training throughput with 1 and 2 ranks (torch.distributed, launched by torchrun).

Example (the numbers in RESULTS.md):
    python benchmarks/bench_distributed.py --task quadruped_flat --total-envs 512 --iterations 20
    python benchmarks/bench_distributed.py --device cuda --ranks 1 2      # on a machine with 2 GPUs

Each configuration keeps the same total number of environments (split evenly over the ranks), runs the
task's preset for ``--iterations`` after ``--warmup`` iterations, and reports environment steps per second
over all ranks, the time per iteration and the share of it spent collecting. On CPU every rank gets
``cores / ranks`` torch threads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def worker(args: argparse.Namespace) -> None:
    import torch

    from st_rl.configs import get_preset
    from st_rl.runners import OnPolicyRunner
    from st_rl.tasks import make_env

    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // ranks) if args.device == "cpu" else 1)
    preset = get_preset(args.task)
    cfg = preset.train.to_dict()
    cfg.update(logger="none", log_interval=10**9, seed=42)
    n = args.total_envs // ranks
    device = args.device if args.device == "cpu" else f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
    env = make_env(args.task, num_envs=n, device=device, seed=42 + rank, **preset.env_kwargs)
    runner = OnPolicyRunner(env, cfg, device=device)
    timing = {"collect": 0.0, "learn": 0.0}
    real_update = runner.alg.update

    def update(it: int):
        t0 = time.perf_counter()
        out = real_update(it)
        timing["learn"] += time.perf_counter() - t0
        return out

    runner.alg.update = update
    runner.learn(args.warmup)
    timing["learn"] = 0.0
    t0 = time.perf_counter()
    runner.learn(args.iterations)
    elapsed = time.perf_counter() - t0
    if rank == 0:
        steps = args.iterations * runner.num_steps_per_env * n * ranks
        print(
            "RESULT "
            + json.dumps(
                {
                    "ranks": ranks,
                    "envs_per_rank": n,
                    "steps_per_s": steps / elapsed,
                    "s_per_iter": elapsed / args.iterations,
                    "learn_share": timing["learn"] / elapsed,
                }
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="quadruped_flat")
    parser.add_argument("--total-envs", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    import platform

    import torch

    print(
        f"# {platform.machine()} with {os.cpu_count()} cores, torch {torch.__version__}, device {args.device}"
    )
    rows = []
    for ranks in args.ranks:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", __file__,
               "--worker", "--task", args.task, "--total-envs", str(args.total_envs), "--iterations",
               str(args.iterations), "--warmup", str(args.warmup), "--device", args.device]  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, cwd=tmp, env={**os.environ, "OMP_NUM_THREADS": "1"}
            )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            print(proc.stderr[-2000:])
            raise SystemExit(f"{ranks}-rank run failed")
        rows.append(json.loads(lines[-1][len("RESULT ") :]))
        print(f"{ranks} rank(s): {rows[-1]['steps_per_s']:,.0f} steps/s", flush=True)
    print()
    print("| ranks | envs per rank | steps/s (all ranks) | s / iteration | learning share | speed-up |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ranks']} | {r['envs_per_rank']} | {r['steps_per_s']:,.0f} | {r['s_per_iter']:.2f} | "
              f"{r['learn_share']:.0%} | {r['steps_per_s'] / rows[0]['steps_per_s']:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
