"""Training on a GPU end to end: the runner learns on CUDA, its rollout step never waits on the host, and
checkpoints move between CUDA and CPU. Skipped on machines without CUDA (CI); run where a GPU is lent."""

from __future__ import annotations

import os

import pytest
import torch

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.parametrize("policy", ["ActorCritic", "ActorCriticRecurrent"])
def test_runner_trains_on_cuda_and_loads_on_cpu(policy, small_cfg, tmp_path):
    small_cfg["policy"]["class_name"] = policy
    env = VelocityTracking(num_envs=64, device="cuda", seed=0)
    runner = OnPolicyRunner(env, small_cfg, str(tmp_path / "gpu"), device="cuda")
    before = {k: v.clone() for k, v in runner.alg.actor_critic.state_dict().items()}
    runner.learn(2)
    state = runner.alg.actor_critic.state_dict()
    assert all(v.device.type == "cuda" for v in state.values())
    assert any(not torch.equal(before[k], state[k]) for k in before)
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())

    cpu = OnPolicyRunner(VelocityTracking(num_envs=64, seed=0), small_cfg, None, device="cpu")
    cpu.load(os.path.join(tmp_path, "gpu", "model_2.pt"), map_location="cpu")
    obs = torch.randn(64, env.num_obs)
    runner.eval_mode()
    cpu.eval_mode()
    runner.alg.actor_critic.reset()
    cpu.alg.actor_critic.reset()
    with torch.no_grad():
        gpu_act = runner.alg.actor_critic.act_inference(obs.cuda()).cpu()
        cpu_act = cpu.alg.actor_critic.act_inference(obs)
    torch.testing.assert_close(cpu_act, gpu_act, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["ActorCritic", "ActorCriticRecurrent"])
def test_rollout_step_has_no_host_sync(policy, small_cfg):
    small_cfg["policy"]["class_name"] = policy
    env = VelocityTracking(num_envs=64, device="cuda", seed=0)
    runner = OnPolicyRunner(env, small_cfg, None, device="cuda")
    runner.learn(2)  # allocates storage, warms the kernels up and captures the CUDA graphs (a one-time sync)
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    runner.alg.storage.clear()
    torch.cuda.synchronize()
    with torch.inference_mode():
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(runner.num_steps_per_env):
                obs, critic_obs, rewards, dones, _ = runner.rollout_step(obs, critic_obs)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert obs.device.type == "cuda" and torch.isfinite(rewards).all()
