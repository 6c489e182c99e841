"""Learning: on the sparse-reward ``sparse_goal`` task, PPO + RND finds the goal and learns to go there, while
plain PPO with the same settings, seed and budget never finds it."""

from __future__ import annotations

import time

import pytest
import torch

from st_rl.configs import get_preset
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env
from st_rl.tasks.sparse_goal import evaluate_success

TASK = "sparse_goal"
SEED = 1
EVAL_EPISODES = 200


def _train_and_evaluate(rnd: bool) -> tuple[float, float]:
    """Train with the preset (``rnd_cfg`` dropped for plain PPO); return the deterministic policy's success
    rate on fresh environments and the training time."""
    preset = get_preset(TASK)
    cfg = preset.train.to_dict()
    cfg["seed"] = SEED
    cfg["logger"] = "none"
    cfg["log_interval"] = 10**9
    if not rnd:
        cfg["algorithm"]["rnd_cfg"] = None
    env = make_env(TASK, num_envs=preset.num_envs, seed=SEED, **preset.env_kwargs)
    runner = OnPolicyRunner(env, cfg, device="cpu")
    start = time.perf_counter()
    runner.learn(preset.train.max_iterations, init_at_random_ep_len=True)
    elapsed = time.perf_counter() - start
    success = evaluate_success(runner.get_inference_policy(), num_envs=EVAL_EPISODES, seed=10_000 + SEED)
    return success, elapsed


@pytest.mark.slow
def test_rnd_finds_the_sparse_goal_that_ppo_misses():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic on every machine, so the fixed seed fixes the outcome
    try:
        ppo, ppo_time = _train_and_evaluate(rnd=False)
        rnd, rnd_time = _train_and_evaluate(rnd=True)
    finally:
        torch.set_num_threads(threads)
    print(f"sparse_goal success: PPO {ppo:.2f} ({ppo_time:.0f} s), PPO + RND {rnd:.2f} ({rnd_time:.0f} s)")
    assert rnd >= 0.8, f"PPO + RND reached the goal in only {rnd:.0%} of {EVAL_EPISODES} episodes"
    assert ppo <= 0.2, f"plain PPO reached the goal in {ppo:.0%} of {EVAL_EPISODES} episodes"
