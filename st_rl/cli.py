"""Command line: ``st-rl train`` trains a built-in task; ``st-rl tasks`` lists them."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch


def _default_device() -> str:
    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _build_parser() -> argparse.ArgumentParser:
    from st_rl.configs import DEFAULT_TASK

    parser = argparse.ArgumentParser(prog="st-rl", description="st_rl: RL for legged robots.")
    sub = parser.add_subparsers(dest="command")
    train = sub.add_parser("train", help="train PPO on a built-in task")
    train.add_argument("--task", default=DEFAULT_TASK, help=f"built-in task (default: {DEFAULT_TASK})")
    train.add_argument("--num-envs", type=int, default=None, help="parallel environments (preset default)")
    train.add_argument("--iterations", type=int, default=None, help="learning iterations (preset default)")
    train.add_argument(
        "--device", default=None, help="training device (default: cuda:0 if present, else cpu)"
    )
    train.add_argument("--seed", type=int, default=None, help="random seed (preset default 42)")
    train.add_argument("--log-dir", default=None, help="run directory (default: logs/<task>/<date_time>)")
    train.add_argument("--resume", default=None, help="checkpoint file or run directory to continue from")
    train.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: all cores)")
    train.add_argument("--log-interval", type=int, default=None, help="print/log every N iterations")
    sub.add_parser("tasks", help="list the built-in tasks")
    return parser


def cmd_tasks() -> int:
    from st_rl.configs import DEFAULT_TASK, PRESETS, get_preset

    for name in sorted(PRESETS):
        preset = get_preset(name)
        mark = " (default)" if name == DEFAULT_TASK else ""
        print(
            f"{name}{mark}: {preset.description}; {preset.num_envs} envs, {preset.train.max_iterations} iterations"
        )
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from st_rl.configs import get_preset
    from st_rl.envs import make_env
    from st_rl.runners import build_runner
    from st_rl.utils.utils import get_checkpoint_path

    if args.threads:
        torch.set_num_threads(args.threads)
    preset = get_preset(args.task)
    cfg = preset.train.to_dict()
    if args.seed is not None:
        cfg["seed"] = args.seed
    if args.log_interval is not None:
        cfg["log_interval"] = args.log_interval
    device = args.device or _default_device()
    num_envs = args.num_envs or preset.num_envs
    iterations = args.iterations if args.iterations is not None else cfg["max_iterations"]
    log_dir = args.log_dir or os.path.join(
        "logs", cfg["experiment_name"], datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    )
    env = make_env(args.task, num_envs=num_envs, device=device, seed=cfg["seed"], **preset.env_kwargs)
    runner = build_runner(
        cfg.get("runner_class_name", "OnPolicyRunner"), env, cfg, log_dir=log_dir, device=device
    )
    if args.resume:
        path = get_checkpoint_path(args.resume)
        print(f"[st-rl] resuming from {path}")
        runner.load(path)
    print(
        f"[st-rl] training '{args.task}' with {num_envs} envs on {device} for {iterations} iterations; "
        f"logs and checkpoints in {os.path.abspath(log_dir)}",
        flush=True,
    )
    velrmsd, cot = runner.learn(iterations, init_at_random_ep_len=True)
    summary = {
        "task": args.task,
        "iterations": runner.current_learning_iteration,
        "velrmsd": float(velrmsd),
        "CoT": float(cot),
        "log_dir": os.path.abspath(log_dir),
    }
    print("[st-rl] done: " + json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "train":
        return cmd_train(args)
    if args.command == "tasks":
        return cmd_tasks()
    parser.print_help()
    return 1


if __name__ == "__main__":
    sys.exit(main())
