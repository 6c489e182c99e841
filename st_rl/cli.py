"""Command line: ``st-rl train`` trains a built-in task; ``st-rl tasks`` lists them; ``st-rl play`` evaluates a
checkpoint (metrics, video, plot; rendering uses ``MUJOCO_GL=egl`` unless set); ``st-rl plot`` draws a run's
training curves."""

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
    train.add_argument(
        "--resume",
        default=None,
        help="checkpoint file or run directory to continue from (with --motion, a PPO checkpoint gets AMP added)",
    )
    train.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: all cores)")
    train.add_argument("--log-interval", type=int, default=None, help="print/log every N iterations")
    train.add_argument(
        "--motion",
        default=None,
        help="reference-motion file (st-rl record-motion): train with AMP (APPO) towards that gait",
    )
    train.add_argument(
        "--style-reward-coef",
        type=float,
        default=0.03,
        help="AMP style reward weight per step (default 0.03)",
    )
    train.add_argument(
        "--style-ramp",
        type=int,
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="AMP: no style reward before iteration START, full weight from END (learn the task first)",
    )
    sub.add_parser("tasks", help="list the built-in tasks")
    from st_rl.tune import add_arguments as add_tune_arguments

    add_tune_arguments(
        sub.add_parser(
            "tune", help="hyperparameter search on a built-in task (Optuna: pip install st-rl[tune])"
        )
    )
    play = sub.add_parser(
        "play",
        help="evaluate a checkpoint: tracking metrics, video and plot",
        description="Run a checkpoint's deterministic policy and report velocity-tracking metrics; write an MP4 "
        "of env 0 and a plot of its commanded vs achieved velocities. Rendering uses MUJOCO_GL=egl unless "
        "MUJOCO_GL is set (MUJOCO_GL=osmesa for software rendering: apt-get install libosmesa6).",
    )
    play_source = play.add_mutually_exclusive_group(required=True)
    play_source.add_argument("--checkpoint", help="model_<it>.pt, or a run directory (latest checkpoint)")
    play_source.add_argument(
        "--policy",
        help="an exported policy.onnx / policy.pt (st-rl export): deployment check without st_rl model classes",
    )
    play.add_argument("--task", default=None, help="task (default: the one the run was trained on)")
    play.add_argument("--num-envs", type=int, default=16, help="parallel environments (default 16)")
    play.add_argument("--duration", type=float, default=20.0, help="simulated seconds (default 20)")
    play.add_argument(
        "--video", default=None, help="MP4 path (default: play_<iter>.mp4 next to the checkpoint)"
    )
    play.add_argument("--no-video", action="store_true", help="do not render a video")
    play.add_argument(
        "--plot", default=None, help="PNG path (default: play_<iter>.png next to the checkpoint)"
    )
    play.add_argument("--no-plot", action="store_true", help="do not draw the tracking plot")
    play.add_argument(
        "--command",
        type=float,
        nargs="+",
        metavar="V",
        dest="fixed_command",
        default=None,
        help="fixed command VX VY YAW for all envs (VX VY for 2-D tasks); default: the task's random commands",
    )
    play.add_argument("--device", default="cpu", help="policy device (default: cpu)")
    play.add_argument("--seed", type=int, default=None, help="environment seed (default: the run's seed)")
    play.add_argument(
        "--video-quality",
        choices=("fast", "medium", "high"),
        default="medium",
        help="fast: no shadows (cheap software GL); high: the model's own settings (default: medium)",
    )
    play.add_argument("--fps", type=float, default=25.0, help="video frame rate (default 25)")
    play.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: all cores)")
    play.add_argument(
        "--upload",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="attach the video and plot to the run's W&B / Neptune run (default: when the run used one)",
    )
    plot = sub.add_parser("plot", help="plot the training curves of a run (TensorBoard event files)")
    plot.add_argument("log_dir", help="run directory")
    plot.add_argument("--out", default=None, help="PNG path (default: <log_dir>/training_curves.png)")
    rec = sub.add_parser("record-motion", help="record reference motion (AMP motion-file format)")
    rec.add_argument("--out", required=True, help="motion file to write (.pkl)")
    source = rec.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a trained quadruped checkpoint to record from")
    source.add_argument("--scripted-trot", action="store_true", help="record an open-loop trot gait")
    source.add_argument(
        "--scripted-walk",
        action="store_true",
        help="record open-loop trots that walk: strides spread over the trajectories from -0.4 to 0.4 rad "
        "(backward to forward, about -0.6 to 0.6 m/s)",
    )
    rec.add_argument("--task", default="quadruped_flat")
    rec.add_argument("--duration", type=float, default=10.0, help="seconds recorded per trajectory")
    rec.add_argument("--num-trajectories", type=int, default=4)
    rec.add_argument(
        "--command", dest="fixed_command", type=float, nargs=3, default=None, metavar=("VX", "VY", "YAW")
    )
    rec.add_argument(
        "--fields",
        default="default",
        help="style fields: 'default' (root height, base velocities, joints), 'joints' (joint positions and "
        "velocities) or a comma-separated list",
    )
    rec.add_argument("--seed", type=int, default=0)
    export = sub.add_parser(
        "export",
        help="export a checkpoint's policy to ONNX / TorchScript with metadata (policy.onnx, policy.pt, policy.json)",
    )
    export.add_argument(
        "--checkpoint", required=True, help="model_<it>.pt, or a run directory (latest checkpoint)"
    )
    export.add_argument("--out", default=None, help="output folder (default: <run dir>/exported)")
    export.add_argument(
        "--format",
        nargs="+",
        choices=("onnx", "torchscript"),
        default=["onnx", "torchscript"],
        dest="formats",
    )
    export.add_argument("--task", default=None, help="task (default: the one the run was trained on)")
    export.add_argument(
        "--no-check", action="store_true", help="skip running the files against the eager policy"
    )
    return parser


def cmd_tasks() -> int:
    from st_rl.configs import DEFAULT_TASK, PRESETS, get_preset

    for name in sorted(PRESETS):
        preset = get_preset(name)
        mark = " (default)" if name == DEFAULT_TASK else ""
        print(
            f"{name}{mark}: {preset.description}; {preset.num_envs} envs, {preset.train.max_iterations} iterations"
        )
    print("gym:<Gymnasium id> (e.g. gym:HalfCheetah-v5): a Gymnasium task with Box spaces (st-rl[gymnasium])")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from st_rl.configs import get_preset
    from st_rl.runners import build_runner
    from st_rl.tasks import make_env
    from st_rl.utils.utils import get_checkpoint_path

    if args.threads:
        torch.set_num_threads(args.threads)
    preset = get_preset(args.task)
    cfg = preset.train.to_dict()
    cfg["task"] = args.task
    if args.seed is not None:
        cfg["seed"] = args.seed
    if args.log_interval is not None:
        cfg["log_interval"] = args.log_interval
    from st_rl.utils.distributed import init_distributed

    # Under torchrun each rank joins the process group, trains on its own GPU and steps its own robots.
    info, rank_device = init_distributed(
        args.device or _default_device(), float(cfg.get("distributed_timeout_s", 600.0))
    )
    device = str(rank_device)
    num_envs = args.num_envs or preset.num_envs
    iterations = args.iterations if args.iterations is not None else cfg["max_iterations"]
    log_dir = args.log_dir or os.path.join(
        "logs", cfg["experiment_name"], datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    )
    env_kwargs = dict(preset.env_kwargs)
    loader = None
    if args.motion:
        from st_rl.configs import amp_train_config
        from st_rl.datasets import MotionLoader

        dt = make_env(args.task, num_envs=1, seed=0).dt
        loader = MotionLoader(args.motion, amp_obs_frame_num=2, time_between_frames=dt, device=device)
        env_kwargs.update(amp_obs_frame_num=2, style_fields=loader.style_fields)
        cfg = amp_train_config(cfg, args.style_reward_coef, style_reward_ramp=args.style_ramp)
        if info.is_main:
            print(
                f"[st-rl] AMP towards {args.motion}: {len(loader.style_fields)} style fields, 2-frame windows"
            )
    resume_path = get_checkpoint_path(args.resume) if args.resume else None
    add_amp = resume_path is not None and loader is not None and not _has_discriminator(resume_path)
    if add_amp:
        # AMP on top of a policy trained without it (docs/amp.md): policy, critic and normalisers from the
        # checkpoint, a fresh discriminator and optimizer.
        cfg["ckpt_manipulator"] = "add_amp_discriminator"
    env = make_env(args.task, num_envs=num_envs, device=device, seed=cfg["seed"] + info.rank, **env_kwargs)
    if loader is not None:
        env.set_ref_motion_source(loader)
    runner = build_runner(
        cfg.get("runner_class_name", "OnPolicyRunner"), env, cfg, log_dir=log_dir, device=device
    )
    if resume_path is not None:
        if info.is_main:
            if add_amp:
                print(
                    f"[st-rl] adding AMP to the policy in {resume_path}: its policy, critic and normalisers, "
                    "a fresh discriminator and optimizer"
                )
            else:
                print(f"[st-rl] resuming from {resume_path}")
        runner.load(resume_path)
    ranks = f" x {info.world_size} ranks" if info.enabled else ""
    if info.is_main:
        print(
            f"[st-rl] training '{args.task}' with {num_envs} envs{ranks} on {device} for {iterations} iterations; "
            f"logs and checkpoints in {os.path.abspath(log_dir)}",
            flush=True,
        )
    try:
        velrmsd, cot = runner.learn(iterations, init_at_random_ep_len=True)
    finally:
        if info.enabled:
            import torch.distributed as dist

            dist.destroy_process_group()
    if not info.is_main:
        return 0
    summary = {
        "task": args.task,
        "iterations": runner.current_learning_iteration,
        "velrmsd": float(velrmsd),
        "CoT": float(cot),
        "log_dir": os.path.abspath(log_dir),
    }
    print("[st-rl] done: " + json.dumps(summary))
    return 0


def _has_discriminator(path: str) -> bool:
    from st_rl.utils.checkpoint import load_checkpoint

    return any(
        k.startswith("discriminator.") for k in load_checkpoint(path, map_location="cpu")["model_state_dict"]
    )


def cmd_play(args: argparse.Namespace) -> int:
    from st_rl.play import set_default_gl_backend

    if not args.no_video:
        set_default_gl_backend("egl")  # MuJoCo reads MUJOCO_GL when it is imported
    from st_rl.play import play
    from st_rl.utils.checkpoint import load_checkpoint
    from st_rl.utils.utils import get_checkpoint_path

    if args.fixed_command is not None and len(args.fixed_command) not in (2, 3):
        print("[st-rl] --command takes VX VY YAW (or VX VY)", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.policy:
        return _cmd_play_exported(args)
    path = get_checkpoint_path(args.checkpoint)
    stem = os.path.splitext(path)[0]
    it = load_checkpoint(path, map_location="cpu").get("iter")
    tag = str(it) if it is not None else os.path.basename(stem).replace("model_", "")
    folder = os.path.dirname(os.path.abspath(path))
    video = None if args.no_video else (args.video or os.path.join(folder, f"play_{tag}.mp4"))
    plot = None if args.no_plot else (args.plot or os.path.join(folder, f"play_{tag}.png"))
    metrics = play(
        path,
        task=args.task,
        num_envs=args.num_envs,
        duration_s=args.duration,
        video=video,
        plot=plot,
        device=args.device,
        command=args.fixed_command,
        seed=args.seed,
        video_fps=args.fps,
        video_quality=args.video_quality,
    )
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    if args.upload is not False:
        from st_rl.utils.writers import attach_files_to_run

        backend = attach_files_to_run(os.path.dirname(path), [video, plot], required=bool(args.upload))
        if backend:
            print(f"[st-rl] attached the video and plot to the run's {backend} run")
    print("[st-rl] done: " + json.dumps(scalars))
    return 0


def _cmd_play_exported(args: argparse.Namespace) -> int:
    from st_rl.play import play_exported

    stem = os.path.splitext(os.path.abspath(args.policy))[0]
    video = None if args.no_video else (args.video or f"{stem}_play.mp4")
    plot = None if args.no_plot else (args.plot or f"{stem}_play.png")
    metrics = play_exported(
        args.policy,
        task=args.task,
        num_envs=args.num_envs,
        duration_s=args.duration,
        video=video,
        plot=plot,
        command=args.fixed_command,
        seed=args.seed,
        video_fps=args.fps,
        video_quality=args.video_quality,
    )
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    print("[st-rl] done: " + json.dumps(scalars))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from st_rl.export import ExportError, export_policy
    from st_rl.utils.utils import get_checkpoint_path

    path = get_checkpoint_path(args.checkpoint)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(path)), "exported")
    try:
        result = export_policy(path, out, args.formats, task=args.task, check=not args.no_check)
    except ExportError as e:
        print(f"[st-rl] export failed: {e}", file=sys.stderr)
        return 1
    meta = result.metadata
    names = (
        " ".join(s["name"] for s in meta["inputs"]) + " -> " + " ".join(s["name"] for s in meta["outputs"])
    )
    for fmt, file in result.files.items():
        err = result.max_abs_error.get(fmt, float("nan"))
        print(f"[st-rl] wrote {fmt}: {os.path.abspath(file)} (max |action - eager| {err:.2g})")
    print(f"[st-rl] wrote metadata: {os.path.abspath(result.metadata_path)}")
    print(
        f"[st-rl] {meta['policy_class']} from {path} (iteration {meta['iteration']}): {names}; "
        f"{meta['num_obs']} observations, {meta['num_actions']} actions"
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from st_rl.plotting import plot_training

    out = plot_training(args.log_dir, args.out)
    print(f"[st-rl] training curves: {os.path.abspath(out)}")
    return 0


def cmd_record_motion(args: argparse.Namespace) -> int:
    from st_rl.tasks import make_env
    from st_rl.tasks.motion_recorder import record_motion, save_motion_file, scripted_trot_policy

    n = max(1, args.num_trajectories)
    if args.scripted_trot or args.scripted_walk:
        env = make_env(args.task, num_envs=n, seed=args.seed, max_push_vel_xy=0.0, noise_level=0.0)
        stride = torch.linspace(-0.4, 0.4, n) if args.scripted_walk and n > 1 else 0.0
        policy = scripted_trot_policy(env, stride=stride)
    else:
        from st_rl.runners import OnPolicyRunner
        from st_rl.utils.checkpoint import load_checkpoint

        state = load_checkpoint(args.checkpoint)
        cfg = state.get("config")
        if not isinstance(cfg, dict):
            raise SystemExit(
                f"{args.checkpoint} holds no training config; record with --scripted-trot instead"
            )
        env = make_env(args.task, num_envs=n, seed=args.seed, max_push_vel_xy=0.0)
        runner = OnPolicyRunner(env, {**cfg, "logger": "none"})
        runner.load(args.checkpoint, load_optimizer=False)
        policy = runner.get_inference_policy()
    if args.fields == "joints":
        from st_rl.tasks.motion_recorder import joint_style_fields

        fields = joint_style_fields(env)
    elif args.fields == "default":
        fields = None
    else:
        fields = [f.strip() for f in args.fields.split(",") if f.strip()]
    motion = record_motion(
        env, policy, args.duration, fields=fields, env_ids=range(n), command=args.fixed_command
    )
    if not motion:
        raise SystemExit("every recorded trajectory fell before recording started; nothing written")
    save_motion_file(motion, args.out)
    frames = sum(len(t["Frames"]) for t in motion.values())
    n_fields = len(next(iter(motion.values()))["Fields"])
    print(f"[st-rl] wrote {len(motion)} trajectories ({frames} frames of {n_fields} fields) to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command == "train":
        return cmd_train(args)
    if args.command == "tasks":
        return cmd_tasks()
    if args.command == "play":
        return cmd_play(args)
    if args.command == "plot":
        return cmd_plot(args)
    if args.command == "record-motion":
        return cmd_record_motion(args)
    if args.command == "export":
        return cmd_export(args)
    if args.command == "tune":
        from st_rl.tune import main as tune_main

        return tune_main(args)
    parser.print_help()
    return 1


if __name__ == "__main__":
    sys.exit(main())
