"""AMP on the MuJoCo quadruped: does a motion prior change the gait towards the reference, while tracking?

Example (the from-scratch numbers in RESULTS.md; one process per seed and method also works):
    python benchmarks/bench_amp.py --reference gait_grid.motion --iterations 600 --num-envs 256 --seeds 1 2 3

1. The reference gait: a motion file (``--reference FILE``, e.g. recorded from a ``quadruped_gait`` policy with
   ``st-rl record-motion --grid-vx ...``; its style fields are used), or a scripted open-loop gait recorded on
   the spot with joint-only style fields: ``walk`` (27 robots, 9 strides x 3 hip swings) or ``trot`` (in place).
2. For each seed, trains APPO (``amp_train_config``: AmpActorCritic, 2-frame windows, style reward added to the
   preset's task reward) and plain PPO (the preset) for the same iterations or wall-clock budget.
3. Evaluates both deterministic policies on fresh robots with commands over the whole range: velocity
   tracking RMSD (mean action, and sampled actions), survival, the gait distance to the reference
   (``st_rl.datasets.gait_distance``: mean distance of the policy's style windows to the nearest reference
   window, in reference standard deviations) and the style reward the trained discriminator gives each gait.
Prints the logged mean style reward over training, a table per seed, the means and the APPO / PPO ratios.
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
) -> tuple[Any, list[tuple[int, float, float]], float]:
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
    os.makedirs(log_dir, exist_ok=True)
    runner.save(os.path.join(log_dir, f"model_{runner.current_learning_iteration}.pt"))
    return runner, curve, spent / 60.0


def evaluate(method: str, runner: Any, minutes: float, make: Any, reference: torch.Tensor) -> dict[str, Any]:
    """Tracking (mean and sampled actions), survival and gait distance of a trained runner's policy."""
    policy = runner.get_inference_policy()
    metrics = evaluate_policy(make(128, 1000), policy, 20.0, warmup_s=1.0)
    ac = runner.alg.actor_critic
    sampled = evaluate_policy(  # the training-time policy: actions drawn with its learned noise
        make(128, 1000), lambda obs, ac=ac: ac.act(obs), 20.0, warmup_s=1.0
    )
    windows = collect_style_windows(make(128, 2000), policy, 10.0)
    result = {
        "iterations": runner.current_learning_iteration,
        "minutes": minutes,
        "velrmsd": metrics["velrmsd"],
        "survival": metrics["survival"],
        "velrmsd_sampled": sampled["velrmsd"],
        "gait_distance": gait_distance(windows, reference),
        "windows": windows,
    }
    print(f"{method}: {result['iterations']} iterations, velrmsd {metrics['velrmsd']:.3f}, "
          f"gait distance {result['gait_distance']:.3f}", flush=True)  # fmt: skip
    return result


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
    parser.add_argument("--style-reward-coef", type=float, default=None, help="default: amp_train_config's")
    parser.add_argument("--task-reward-lerp", type=float, default=None, help="default: amp_train_config's")
    parser.add_argument("--grad-pen", type=float, default=None, help="default: amp_train_config's")
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        help="APPO's initial learning rate (default: amp_train_config's)",
    )
    parser.add_argument(
        "--ppo-learning-rate",
        type=float,
        default=None,
        help="PPO's initial learning rate (default: the preset's)",
    )
    parser.add_argument(
        "--replay-size",
        type=int,
        default=None,
        help="APPO's amp_replay_buffer_size (default: amp_train_config's)",
    )
    parser.add_argument(
        "--style-ramp",
        type=int,
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="APPO: no style reward before iteration START, full weight from END",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[42], help="one APPO and one PPO run per seed"
    )
    parser.add_argument("--log-dir", default="logs/bench_amp")
    parser.add_argument("--methods", nargs="+", default=["APPO", "PPO"])
    parser.add_argument(
        "--reference",
        default="walk",
        help="trot: the scripted trot in place; walk: scripted trots with 9 strides x 3 hip swings (moving); "
        "or a motion file (st-rl record-motion), whose style fields are used",
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
    probe = make_env(args.task, num_envs=1, seed=0)
    if args.reference in ("trot", "walk"):
        motion_path = os.path.join(args.log_dir, "trot.motion")
        fields = record_scripted_trot(args.task, motion_path, seed=0, moving=args.reference == "walk")
        loader = MotionLoader(motion_path, fields, amp_obs_frame_num=2, time_between_frames=probe.dt)
    else:
        loader = MotionLoader(args.reference, amp_obs_frame_num=2, time_between_frames=probe.dt)
        fields = list(loader.style_fields)
    torch.manual_seed(0)
    reference = loader.sample_windows(4096)
    preset = get_preset(args.task)
    num_envs = args.num_envs or preset.num_envs
    amp_kwargs: dict[str, Any] = {"style_reward_ramp": args.style_ramp}
    for key, value in (
        ("style_reward_coef", args.style_reward_coef),
        ("task_reward_lerp", args.task_reward_lerp),
        ("discriminator_grad_pen", args.grad_pen),
        ("learning_rate", args.learning_rate),
        ("amp_replay_buffer_size", args.replay_size),
    ):
        if value is not None:
            amp_kwargs[key] = value

    def make(n: int, seed: int) -> Any:
        return make_task_env(args.task, n, seed, fields, loader, preset.env_kwargs)

    rows: list[tuple[int, str, dict[str, Any]]] = []
    for seed in args.seeds:
        base = preset.train.to_dict()
        base.update(seed=seed, task=args.task, log_interval=1, save_interval=10**9, logger="none")
        results: dict[str, dict[str, Any]] = {}
        runners: dict[str, Any] = {}
        for method in args.methods:
            cfg = amp_train_config(base, **amp_kwargs) if method == "APPO" else copy.deepcopy(base)
            if method == "PPO" and args.ppo_learning_rate is not None:
                cfg["algorithm"]["learning_rate"] = args.ppo_learning_rate
            env = make(num_envs, seed)
            checkpoint = {"PPO": args.ppo_checkpoint, "APPO": args.appo_checkpoint}.get(method)
            curve: list[tuple[int, float, float]] = []
            if checkpoint:
                runner = build_runner(cfg.get("runner_class_name", "OnPolicyRunner"), env, cfg, log_dir=None)
                runner.load(checkpoint)
                minutes = float("nan")
            else:
                init = args.appo_init if method == "APPO" else None
                log_dir = os.path.join(args.log_dir, f"seed{seed}", method)
                runner, curve, minutes = train(
                    args.task, cfg, env, args.minutes, log_dir, args.iterations, init
                )
            runners[method] = runner
            results[method] = evaluate(method, runner, minutes, make, reference)
            results[method]["curve"] = curve

        if "APPO" in runners:
            alg = runners["APPO"].alg
            coef = float(alg.actor_critic.discriminator.style_reward_coef)
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
                r["style"] = float(style.mean()) / coef
            ref_x = alg.amp_normalizer.normalize(reference)
            ref_style, _, _ = alg.actor_critic.discriminator.predict_style_reward(
                ref_x, torch.zeros(ref_x.shape[0])
            )
            print(f"reference windows' style score: {float(ref_style.mean()) / coef:.3f}")
        rows += [(seed, method, r) for method, r in results.items()]

    print()
    print(
        "| seed | method | train min | iterations | velrmsd m/s | survival | velrmsd, sampled actions | "
        "gait distance to reference | style score (trained D, 0..1) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seed, method, r in rows:
        style = f"{r['style']:.3f}" if "style" in r else "-"
        print(f"| {seed} | {method} | {r['minutes']:.1f} | {r['iterations']} | {r['velrmsd']:.3f} | {r['survival']:.3f} | "
              f"{r['velrmsd_sampled']:.3f} | {r['gait_distance']:.3f} | {style} |")  # fmt: skip
    if len(args.seeds) > 1:
        for method in args.methods:
            rs = [r for _, m, r in rows if m == method]
            mean = {
                k: sum(r[k] for r in rs) / len(rs)
                for k in ("velrmsd", "survival", "velrmsd_sampled", "gait_distance")
            }
            print(f"| mean | {method} | | | {mean['velrmsd']:.3f} | {mean['survival']:.3f} | "
                  f"{mean['velrmsd_sampled']:.3f} | {mean['gait_distance']:.3f} | |")  # fmt: skip
    if {"APPO", "PPO"} <= set(args.methods):
        mean = lambda m, k: sum(r[k] for _, mm, r in rows if mm == m) / len(args.seeds)  # noqa: E731
        print(
            f"\nAPPO / PPO over {len(args.seeds)} seed(s): velrmsd {mean('APPO', 'velrmsd') / mean('PPO', 'velrmsd'):.2f}x "
            f"(target <= 1.10), gait distance {mean('APPO', 'gait_distance') / mean('PPO', 'gait_distance'):.2f}x "
            "(target <= 0.50)"
        )


if __name__ == "__main__":
    main()
