"""Where training waits on the host, on CUDA: counts the synchronising CUDA calls in one rollout step and in
one update (PPO, feed-forward and recurrent), with the source line of each.

Runs ``velocity_tracking`` on the GPU under ``torch.cuda.set_sync_debug_mode("warn")`` and prints a table.

    python benchmarks/cuda_sync_audit.py --num-envs 4096
"""

from __future__ import annotations

import argparse
import collections
import copy
import warnings

import torch

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking

CFG = {
    "seed": 1,
    "num_steps_per_env": 24,
    "save_interval": 1000,
    "empirical_normalization": True,
    "policy": {
        "class_name": "ActorCritic",
        "actor_hidden_dims": [512, 256, 128],
        "critic_hidden_dims": [512, 256, 128],
        "activation": "elu",
    },  # fmt: skip
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "learning_rate": 1e-3,
        "schedule": "adaptive",
    },  # fmt: skip
}


def _count(fn) -> collections.Counter:
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    return collections.Counter(
        f"{w.filename.split('st_rl/')[-1]}:{w.lineno}"
        for w in caught
        if "called a synchronizing" in str(w.message)
    )


def audit(policy: str, num_envs: int) -> dict[str, collections.Counter]:
    cfg = copy.deepcopy(CFG)
    cfg["policy"]["class_name"] = policy
    runner = OnPolicyRunner(VelocityTracking(num_envs=num_envs, device="cuda", seed=0), cfg, None, "cuda")
    runner.learn(2)  # the update's warm-up and CUDA-graph capture (a feed-forward policy)
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    runner.alg.storage.clear()
    state = {"obs": obs, "critic_obs": critic_obs}

    def step():
        with torch.inference_mode():
            state["obs"], state["critic_obs"], *_ = runner.rollout_step(state["obs"], state["critic_obs"])

    rollout = _count(step)
    with torch.inference_mode():
        for _ in range(runner.num_steps_per_env - 1):
            step()
        runner.alg.compute_returns(state["critic_obs"])
    update = _count(lambda: runner.alg.update(1))
    return {"rollout step": rollout, "update": update}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    args = parser.parse_args()
    print("| policy | phase | host syncs | where (file:line x count) |\n|---|---|---|---|")
    for policy in ("ActorCritic", "ActorCriticRecurrent"):
        for phase, counter in audit(policy, args.num_envs).items():
            where = ", ".join(f"{k} x{v}" for k, v in counter.most_common(8))
            print(f"| {policy} | {phase} | {sum(counter.values())} | {where} |", flush=True)


if __name__ == "__main__":
    main()
