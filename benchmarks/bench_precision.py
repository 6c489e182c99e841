"""Where bfloat16 pays: a forward and backward pass of an actor-critic in float32 and under bf16 autocast.

For each MLP size and minibatch the table gives both times (the fastest of ``--repeats`` alternating runs), the
speed-up and the multiply-adds per pass that ``precision="auto"`` decides by on a CPU
(``st_rl.utils.precision.CPU_BF16_MIN_MACS``); on a GPU ``auto`` times the run's own policy the same way.

    python benchmarks/bench_precision.py                 # CPU, the sizes of the built-in presets and legged_gym
    python benchmarks/bench_precision.py --device cuda
"""

from __future__ import annotations

import argparse

import torch

from st_rl.modules import ActorCritic
from st_rl.utils.precision import CPU_BF16_MIN_MACS, linear_macs, measure_precision

# (name, observations, actions, hidden sizes, minibatch)
CASES = [
    ("point_mass preset", 6, 2, [64, 64], 1536),
    ("velocity_tracking preset", 6, 2, [128, 64], 3072),
    ("quadruped_flat preset", 48, 12, [256, 128, 64], 3072),
    ("legged_gym, 1024 envs", 48, 12, [512, 256, 128], 6144),
    ("legged_gym, 4096 envs", 48, 12, [512, 256, 128], 24576),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"device {device}, {args.threads} threads, torch {torch.__version__}")
    print("| case | hidden | minibatch | M multiply-adds | fp32 ms | bf16 ms | bf16 speed-up | auto |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, num_obs, num_actions, hidden, batch in CASES:
        policy = ActorCritic(
            num_obs, num_obs, num_actions, actor_hidden_dims=hidden, critic_hidden_dims=hidden
        )
        policy.to(device)
        obs = torch.randn(batch, num_obs, device=device)

        def step(policy: ActorCritic = policy, obs: torch.Tensor = obs) -> None:
            policy.act(obs)
            (policy.action_mean.float().sum() + policy.evaluate(obs).float().sum()).backward()

        choice, fp32, bf16 = measure_precision(step, device, repeats=args.repeats)
        macs = batch * linear_macs(policy)
        if device.type == "cpu":
            choice = "bf16" if macs >= CPU_BF16_MIN_MACS else "fp32"
        print(
            f"| {name} | {'-'.join(map(str, hidden))} | {batch} | {macs / 1e6:.0f} | {fp32 * 1e3:.1f} "
            f"| {bf16 * 1e3:.1f} | {fp32 / bf16:.2f} | {choice} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
