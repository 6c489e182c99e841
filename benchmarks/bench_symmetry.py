"""Symmetry on the MuJoCo quadruped: how mirrored does the policy act, and does tracking suffer?

Example (the numbers in RESULTS.md):
    python benchmarks/bench_symmetry.py --num-envs 256 --iterations 50 100

Trains ``quadruped_flat`` with the preset config through the normal runner, once per method and with the
same seed and iteration budget: plain PPO, PPO with the mirror loss (``symmetry_cfg={"mirror_loss_coef":
c}``) and, with ``--methods ... augmentation``, PPO with mirrored-data augmentation and the mirror loss. The
mirror functions come from the task (``LeggedLocomotion.mirror_functions``). At each ``--iterations`` mark
the deterministic policy is evaluated on fresh robots with the preset's noise, randomisation and pushes
(``st_rl.play.evaluate_policy``, commands over the whole range): velocity-tracking RMSD, yaw-rate RMSD and
survival, and ``mirror_error`` (mean ``||pi(M_o o) - M_a pi(o)||``) on the observations the policy visited
there. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

import torch

from st_rl.algorithms.extensions.symmetry import mirror_error
from st_rl.configs import get_preset
from st_rl.play import evaluate_policy
from st_rl.runners import build_runner
from st_rl.tasks import make_env

METHODS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "ppo": ("PPO", None),
    "mirror-loss": ("PPO + mirror loss", {}),
    "augmentation": ("PPO + mirror loss + augmentation", {"use_data_augmentation": True}),
}


def evaluate(policy: Any, task: str, env_kwargs: dict, num_envs: int, seconds: float, seed: int) -> dict:
    """Tracking metrics of ``policy`` on fresh robots, plus its mirror error on the observations it saw."""
    env = make_env(task, num_envs, seed=seed, **env_kwargs)
    maps = env.mirror_functions()
    visited: list[torch.Tensor] = []

    def recording(obs: torch.Tensor) -> torch.Tensor:
        visited.append(obs.clone())
        return policy(obs)

    metrics = evaluate_policy(env, recording, seconds)
    metrics["mirror_error"] = mirror_error(policy, torch.cat(visited), maps["obs"], maps["actions"])
    return metrics


def run_method(method: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Train one method, evaluating at every iteration mark; returns one table row per mark."""
    label, symmetry = METHODS[method]
    preset = get_preset(args.task)
    cfg = preset.train.to_dict()
    cfg["seed"] = args.seed
    if symmetry is not None:
        cfg["algorithm"]["symmetry_cfg"] = {"mirror_loss_coef": args.coef, **symmetry}
        label += f" (coef {args.coef:g})"
    num_envs = args.num_envs or preset.num_envs
    env = make_env(args.task, num_envs, seed=args.seed, **preset.env_kwargs)
    runner: Any = build_runner("OnPolicyRunner", env, cfg, log_dir=None)
    runner.log = lambda *a, **k: None  # keep the output to the table
    rows, train_s, first = [], 0.0, True
    for mark in sorted(args.iterations):
        todo = mark - runner.current_learning_iteration
        if todo > 0:
            start = time.perf_counter()
            runner.learn(todo, init_at_random_ep_len=first)
            train_s += time.perf_counter() - start
            first = False
        policy = runner.get_inference_policy()
        m = evaluate(policy, args.task, preset.env_kwargs, args.eval_envs, args.eval_seconds, args.eval_seed)
        runner.train_mode()
        row = {"method": label, "iterations": runner.current_learning_iteration, "train_s": train_s, **m}
        print(
            f"{label:>40s} it {row['iterations']:4d}: mirror error {m['mirror_error']:.3f}, "
            f"velrmsd {m['velrmsd']:.3f}, yaw {m['yaw_rmsd']:.3f}, survival {m['survival']:.3f} "
            f"({train_s:.0f} s training)",
            flush=True,
        )
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="quadruped_flat", choices=["quadruped_flat", "quadruped_rough"])
    parser.add_argument("--methods", nargs="+", default=["ppo", "mirror-loss"], choices=sorted(METHODS))
    parser.add_argument("--iterations", type=int, nargs="+", default=[50, 100], help="evaluation marks")
    parser.add_argument("--num-envs", type=int, default=None, help="training robots (default: the preset's)")
    parser.add_argument("--coef", type=float, default=1.0, help="mirror_loss_coef")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--eval-envs", type=int, default=64)
    parser.add_argument("--eval-seconds", type=float, default=10.0)
    parser.add_argument("--eval-seed", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None, help="torch (and MuJoCo) threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, task {args.task}")  # fmt: skip

    rows = [row for method in args.methods for row in run_method(method, args)]
    print()
    print("| method | iterations | train s | mirror error | velrmsd m/s | yaw RMSD rad/s | survival |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['iterations']} | {r['train_s']:.0f} | {r['mirror_error']:.3f} | "
            f"{r['velrmsd']:.3f} | {r['yaw_rmsd']:.3f} | {r['survival']:.3f} |"
        )


if __name__ == "__main__":
    main()
