"""AMP on the MuJoCo quadruped: does a motion prior change the gait towards the reference, while tracking?

Example (the numbers in RESULTS.md):
    python benchmarks/bench_amp.py --minutes 20

1. Records a reference gait: the scripted open-loop trot (diagonal leg pairs in antiphase, 2 Hz) on the
   built-in quadruped, 10 s per robot, style fields = the 12 joint positions and 12 joint velocities;
   ``--reference walk`` (default): 27 robots walking with 9 strides x 3 hip swings (forward, backward,
   turning); ``--reference trot``: 8 robots trotting in place.
2. Trains APPO (AmpActorCritic, 2-frame windows, style reward added to the task reward) and, with the same
   wall-clock budget, plain PPO (the ``quadruped_flat`` preset) on the same task.
3. Evaluates both deterministic policies on fresh robots with commands over the whole range: velocity
   tracking RMSD, survival, the gait distance to the reference (``st_rl.datasets.gait_distance``: mean
   distance of the policy's style windows to the nearest reference window, in reference standard
   deviations) and the style reward the trained discriminator gives each gait.
Prints the logged mean style reward over training and a summary table.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import time
from typing import Any

import torch

from st_rl.configs import amp_train_config, get_preset
from st_rl.datasets import MotionLoader, gait_distance
from st_rl.play import evaluate_policy
from st_rl.runners import build_runner
from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import collect_style_windows, record_scripted_trot
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.ckpt_manipulator import add_amp_discriminator
from st_rl.utils.logger import aggregate_episode_infos


def make_task_env(
    task: str, num_envs: int, seed: int, fields: list[str], loader: MotionLoader, env_kwargs: dict
):
    """The task with 2-frame style windows (``ref_obs``) and reference windows from ``loader`` (``ref_motion``)."""
    env = make_env(
        task,
        num_envs=num_envs,
        seed=seed,
        amp_obs_frame_num=loader.amp_obs_frame_num,
        style_fields=fields,
        **env_kwargs,
    )
    env.set_ref_motion_source(loader)
    return env


def train(
    task: str,
    cfg: dict,
    env: Any,
    minutes: float,
    log_dir: str,
    iterations: int | None = None,
    init_from: str | None = None,
) -> tuple[Any, list[tuple[int, float, float]]]:
    runner = build_runner(cfg.get("runner_class_name", "OnPolicyRunner"), env, cfg, log_dir=None)
    if init_from:  # APPO from a PPO checkpoint, counting its iterations from 0
        state = add_amp_discriminator(load_checkpoint(init_from, "cpu"), runner.alg.state_dict())
        runner.alg.load_state_dict(state, load_optimizer=False)
    curve: list[tuple[int, float, float]] = []

    def capture(locs: dict, width: int = 80, pad: int = 35) -> None:
        ep = aggregate_episode_infos(locs["ep_infos"])
        if "Episode_Reward/style_reward" in ep:
            track = float(ep.get("Metrics/tracking_error", float("nan")))
            curve.append((locs["it"], ep["Episode_Reward/style_reward"], track))

    runner.log = capture
    spent, first = 0.0, True
    while (spent < minutes * 60) if iterations is None else (runner.current_learning_iteration < iterations):
        t0 = time.perf_counter()
        runner.learn(1, init_at_random_ep_len=first)
        spent += time.perf_counter() - t0
        first = False
    runner.train_minutes = spent / 60.0
    os.makedirs(log_dir, exist_ok=True)
    runner.save(os.path.join(log_dir, f"model_{runner.current_learning_iteration}.pt"))
    return runner, curve


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="quadruped_flat")
    parser.add_argument("--minutes", type=float, default=20.0, help="training wall-clock budget per method")
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="training budget in iterations per method (overrides --minutes)",
    )
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--style-reward-coef", type=float, default=0.03)
    parser.add_argument(
        "--style-ramp",
        type=int,
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="APPO: no style reward before iteration START, full weight from END",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--log-dir", default="logs/bench_amp")
    parser.add_argument("--methods", nargs="+", default=["APPO", "PPO"])
    parser.add_argument(
        "--reference",
        choices=["trot", "walk"],
        default="walk",
        help="trot: the scripted trot in place; walk: scripted trots with 9 strides x 3 hip swings (moving)",
    )
    parser.add_argument(
        "--appo-init",
        default=None,
        help="start APPO from this PPO checkpoint's policy, critic and observation normaliser (the "
        "discriminator starts fresh): style is added to a policy that already tracks",
    )
    parser.add_argument(
        "--appo-checkpoint",
        default=None,
        help="evaluate this APPO checkpoint (same preset, reference and style coef) instead of training APPO",
    )
    parser.add_argument(
        "--ppo-checkpoint",
        default=None,
        help="evaluate this PPO checkpoint (same preset and seed) instead of training PPO again",
    )
    args = parser.parse_args()
    print(f"# {platform.machine()} with {os.cpu_count()} cores, torch {torch.__version__}")

    os.makedirs(args.log_dir, exist_ok=True)
    motion_path = os.path.join(args.log_dir, "trot.motion")
    fields = record_scripted_trot(args.task, motion_path, seed=args.seed, moving=args.reference == "walk")
    preset = get_preset(args.task)
    num_envs = args.num_envs or preset.num_envs
    probe = make_env(args.task, num_envs=1, seed=0)
    loader = MotionLoader(motion_path, fields, amp_obs_frame_num=2, time_between_frames=probe.dt)
    reference = loader.sample_windows(4096)
    base = preset.train.to_dict()
    base.update(seed=args.seed, task=args.task, log_interval=1, save_interval=10**9, logger="none")

    results: dict[str, dict[str, Any]] = {}
    runners: dict[str, Any] = {}
    for method in args.methods:
        cfg = (
            amp_train_config(base, args.style_reward_coef, style_reward_ramp=args.style_ramp)
            if method == "APPO"
            else copy.deepcopy(base)
        )
        env = make_task_env(args.task, num_envs, args.seed, fields, loader, preset.env_kwargs)
        checkpoint = {"PPO": args.ppo_checkpoint, "APPO": args.appo_checkpoint}.get(method)
        if checkpoint:
            runner, curve = (
                build_runner(cfg.get("runner_class_name", "OnPolicyRunner"), env, cfg, log_dir=None),
                [],
            )
            runner.load(checkpoint)
            runner.train_minutes = float("nan")
        else:
            init = args.appo_init if method == "APPO" else None
            runner, curve = train(
                args.task, cfg, env, args.minutes, os.path.join(args.log_dir, method), args.iterations, init
            )
        runners[method] = runner
        policy = runner.get_inference_policy()
        eval_env = make_task_env(args.task, 128, 1000, fields, loader, preset.env_kwargs)
        metrics = evaluate_policy(eval_env, policy, 20.0, warmup_s=1.0)
        ac = runner.alg.actor_critic
        sampled = evaluate_policy(  # the training-time policy: actions drawn with its learned noise
            make_task_env(args.task, 128, 1000, fields, loader, preset.env_kwargs),
            lambda obs, ac=ac: ac.act(obs),
            20.0,
            warmup_s=1.0,
        )
        windows = collect_style_windows(
            make_task_env(args.task, 128, 2000, fields, loader, preset.env_kwargs), policy, 10.0
        )
        results[method] = {
            "iterations": runner.current_learning_iteration,
            "minutes": runner.train_minutes,
            "velrmsd": metrics["velrmsd"],
            "survival": metrics["survival"],
            "velrmsd_sampled": sampled["velrmsd"],
            "gait_distance": gait_distance(windows, reference),
            "windows": windows,
            "curve": curve,
        }
        print(f"{method}: {results[method]['iterations']} iterations, velrmsd {metrics['velrmsd']:.3f}, "
              f"gait distance {results[method]['gait_distance']:.3f}", flush=True)  # fmt: skip

    if "APPO" in runners:
        alg = runners["APPO"].alg
        curve = results["APPO"]["curve"]
        if curve:
            print(
                "\nAPPO logged mean style reward per step / training tracking error m/s "
                "(first 10 iterations, then every 10%):"
            )
            picks = curve[:10] + curve[10 :: max(1, len(curve) // 10)] + curve[-1:]
            print(", ".join(f"it {it}: {v:.4f} / {t:.3f}" for it, v, t in picks))
        for r in results.values():
            x = alg.amp_normalizer.normalize(r["windows"])
            style, _, _ = alg.actor_critic.discriminator.predict_style_reward(x, torch.zeros(x.shape[0]))
            r["style"] = float(style.mean()) / args.style_reward_coef
        ref_x = alg.amp_normalizer.normalize(reference)
        ref_style, _, _ = alg.actor_critic.discriminator.predict_style_reward(
            ref_x, torch.zeros(ref_x.shape[0])
        )
        print(f"reference windows' style score: {float(ref_style.mean()) / args.style_reward_coef:.3f}")

    print()
    print(
        "| method | train min | iterations | velrmsd m/s | survival | velrmsd, sampled actions | "
        "gait distance to reference | style score (trained D, 0..1) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method, r in results.items():
        style = f"{r['style']:.3f}" if "style" in r else "-"
        print(f"| {method} | {r['minutes']:.1f} | {r['iterations']} | {r['velrmsd']:.3f} | {r['survival']:.3f} | {r['velrmsd_sampled']:.3f} | "
              f"{r['gait_distance']:.3f} | {style} |")  # fmt: skip


if __name__ == "__main__":
    main()
