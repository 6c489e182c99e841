"""Where a locomotion policy's falls come from: pushes, command changes or steady walking.

Runs the deterministic policy of a checkpoint on the task it was trained on (as ``st-rl play`` does) for one
episode length and classifies every fall (a termination that is not a time-out) by what happened in the
second before it: a push, a command change, the start of the episode, or nothing. For the pushes it prints
how often each direction of the kick (in the robot's frame) ended in a fall within that second.

    python benchmarks/fall_causes.py --checkpoint logs/quadruped_flat/<run>/model_1000.pt --num-envs 400 --seed 1
"""

from __future__ import annotations

import argparse

import torch

from st_rl.evaluation.metrics import actor_observations
from st_rl.evaluation.runs import load_run

WINDOW_S = 1.0  # a fall this soon after an event is put down to it


def main() -> None:
    parser = argparse.ArgumentParser(description="Where a locomotion policy's falls come from.")
    parser.add_argument("--checkpoint", required=True, help="model_<it>.pt or a run directory")
    parser.add_argument("--num-envs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1, help="environment seed")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    run = load_run(args.checkpoint, None, args.num_envs, "cpu", args.seed)
    env, policy = run.env, run.runner.get_inference_policy("cpu")
    cfg, dt = env.cfg, float(env.dt)
    push_every = round(cfg["push_interval_s"] / dt) if cfg["max_push_vel_xy"] > 0 else 0
    resample_every = round(cfg["resampling_time_s"] / dt)
    window = round(WINDOW_S / dt)
    steps = round(cfg["episode_length_s"] / dt)

    causes = {"push": 0, "command change": 0, "first second": 0, "other": 0}
    last_push = torch.full((env.num_envs,), -(10**9))
    pushes: list[tuple[float, float, bool]] = []  # kick x, kick y (body frame), fell within the window
    open_push: dict[int, int] = {}  # env -> index into pushes
    with torch.inference_mode():
        env.reset()
        obs = env.get_observations()
        for t in range(steps):
            episode_step = env.episode_length_buf.clone()
            pushed = (
                (episode_step + 1) % push_every == 0
                if push_every
                else torch.zeros_like(episode_step, dtype=torch.bool)
            )
            v_before = env.base_lin_vel[:, :2].clone()
            obs, _, dones, extras = env.step(policy(actor_observations(obs)))
            policy.reset(dones.bool())  # a recurrent policy forgets finished episodes
            kick = env.base_lin_vel[:, :2] - v_before
            fell = dones.bool() & ~extras["time_outs"].bool()
            for i in pushed.nonzero().flatten().tolist():
                if not fell[i]:
                    last_push[i] = t
                    open_push[i] = len(pushes)
                    pushes.append((float(kick[i, 0]), float(kick[i, 1]), False))
            for i in fell.nonzero().flatten().tolist():
                step = int(episode_step[i]) + 1
                if t - int(last_push[i]) <= window:
                    causes["push"] += 1
                    x, y, _ = pushes[open_push[i]]
                    pushes[open_push[i]] = (x, y, True)
                elif step > resample_every and step % resample_every <= window:
                    causes["command change"] += 1
                elif step <= window:
                    causes["first second"] += 1
                else:
                    causes["other"] += 1
                last_push[i] = -(10**9)

    falls = sum(causes.values())
    print(
        f"{args.checkpoint}: {args.num_envs} robots, {steps * dt:.0f} s, env seed {args.seed}: {falls} falls\n"
    )
    print("| fall within 1 s after | falls |\n|---|---|")
    for name, count in causes.items():
        print(f"| {name} | {count} |")
    if pushes:
        print("\n| kick direction (robot frame) | pushes | falls within 1 s | fall rate |\n|---|---|---|---|")
        for name, test in (
            ("left (+y)", lambda x, y: abs(y) >= abs(x) and y > 0),
            ("right (-y)", lambda x, y: abs(y) >= abs(x) and y <= 0),
            ("forward (+x)", lambda x, y: abs(x) > abs(y) and x > 0),
            ("backward (-x)", lambda x, y: abs(x) > abs(y) and x <= 0),
        ):
            chosen = [f for x, y, f in pushes if test(x, y)]
            rate = sum(chosen) / max(len(chosen), 1)
            print(f"| {name} | {len(chosen)} | {sum(chosen)} | {rate:.3f} |")


if __name__ == "__main__":
    main()
