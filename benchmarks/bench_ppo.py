"""Time PPO rollout collection and update for given env counts, rollout lengths and network sizes.

Example:
    python benchmarks/bench_ppo.py --num-envs 256 1024 4096 --steps 24 --hidden 256 256 256 --iterations 5

Prints one table row per configuration: rollout steps/s (policy + env + storage), update time per
iteration, and end-to-end steps/s. The first iteration is a warm-up and is not timed.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env


def bench(task: str, num_envs: int, steps: int, hidden: list[int], iterations: int, device: str) -> dict:
    cfg = {
        "seed": 0,
        "num_steps_per_env": steps,
        "logger": "none",
        "log_interval": 10**9,
        "empirical_normalization": True,
        "policy": {"class_name": "ActorCritic", "actor_hidden_dims": hidden, "critic_hidden_dims": hidden},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "schedule": "adaptive",
            "gamma": 0.99,
        },
    }
    env = make_env(task, num_envs=num_envs, device=device, seed=0)
    runner = OnPolicyRunner(env, cfg, device=device)
    runner.log = lambda locs, width=80, pad=35: None  # time the loop, not the console
    runner.learn(1)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    collect, update = 0.0, 0.0
    obs, critic, _ = runner.env_adapter.get_observations()
    runner.train_mode()
    for _ in range(iterations):
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(steps):
                obs, critic, *_ = runner.rollout_step(obs, critic)
            runner.alg.compute_returns(critic)
        sync()
        t1 = time.perf_counter()
        runner.alg.update(0)
        sync()
        t2 = time.perf_counter()
        collect += t1 - t0
        update += t2 - t1
    samples = num_envs * steps * iterations
    return {
        "envs": num_envs,
        "steps": steps,
        "hidden": "x".join(map(str, hidden)),
        "rollout_sps": samples / collect,
        "update_s": update / iterations,
        "total_sps": samples / (collect + update),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="velocity_tracking")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256, 256])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, device {args.device}, "
        f"threads {torch.get_num_threads()}, task {args.task}"
    )
    header = f"| {'envs':>6} | {'steps':>5} | {'hidden':>11} | {'rollout steps/s':>15} | {'update s/iter':>13} | {'total steps/s':>13} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for n in args.num_envs:
        r = bench(args.task, n, args.steps, args.hidden, args.iterations, args.device)
        print(
            f"| {r['envs']:>6} | {r['steps']:>5} | {r['hidden']:>11} | {r['rollout_sps']:>15,.0f} | "
            f"{r['update_s']:>13.3f} | {r['total_sps']:>13,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
