"""Learning with the structured policies: memory (recurrent), state estimation (EstimatorPPO) and images.

Each test trains on a small built-in task whose solution needs the policy part under test and compares the
deterministic inference policy, evaluated over full episodes, with thresholds measured on this machine (the
measured numbers are in the comments; the thresholds leave a wide margin).
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread: these small networks gain nothing from more, and on a machine shared with other
    training runs extra threads make torch spin-wait (a run was seen to slow down 20x)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _cfg(policy: dict, algorithm: str = "PPO", seed: int = 0, num_steps_per_env: int = 24, **alg) -> dict:
    return {
        "seed": seed,
        "num_steps_per_env": num_steps_per_env,
        "empirical_normalization": False,
        "logger": "none",
        "log_interval": 10_000,
        "policy": {"activation": "elu", **policy},
        "algorithm": {
            "class_name": algorithm,
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "entropy_coef": 0.0,
            "gamma": 0.99,
            "lam": 0.95,
            **alg,
        },
    }


def _train(task: str, cfg: dict, iterations: int, num_envs: int, random_ep_len: bool = True, **env_cfg):
    env = make_env(task, num_envs=num_envs, seed=cfg["seed"], **env_cfg)
    runner = OnPolicyRunner(env, cfg, device="cpu")
    start = time.perf_counter()
    runner.learn(iterations, init_at_random_ep_len=random_ep_len)
    return runner, time.perf_counter() - start


def _evaluate(env, policy, on_step=None) -> float:
    """Mean return of one full episode per env with the deterministic inference policy.

    All envs start together, so the first ``max_episode_length`` steps are exactly one episode each. The
    policy's memory is cleared first and after every step for the finished envs. ``on_step(env, alive)`` is
    called right after each action (for the estimator's output of that step).
    """
    obs, _ = env.reset()
    policy.reset()
    total = torch.zeros(env.num_envs)
    alive = torch.ones(env.num_envs, dtype=torch.bool)
    with torch.inference_mode():
        for _ in range(int(env.max_episode_length)):
            actions = policy(obs)
            if on_step is not None:
                on_step(env, alive)
            obs, rew, dones, _ = env.step(actions)
            policy.reset(dones)
            total += torch.where(alive, rew, torch.zeros_like(rew))
            alive &= ~dones
    return float(total.mean())


# ---------------------------------------------------------------------------------------------------- memory
def test_recurrent_policy_remembers_the_cue():
    """cue_memory (1-D target shown for the first 4 of 40 steps): a GRU policy learns to hold the target, an MLP
    trained with the same budget cannot (after the cue it sees only zeros).

    Returns (deterministic policy, 128 envs, one episode each): outputting the target 2.00; the best a
    feed-forward policy can do (copy the cue, then the mean target 0) 0.2 + 36 * 0.441 * 0.05 = 0.99
    (measured 1.02); uniform random actions 0.77. Measured after 20 iterations: GRU 1.97-1.98 (seeds 0-2;
    LSTM 1.95), MLP 1.04 (its ceiling plus sampling noise). Thresholds: GRU > 1.6, MLP < 1.3.
    """
    num_envs, iterations = 128, 20
    # One rollout holds whole episodes (num_steps_per_env == episode length, no random start lengths), so the
    # truncated backpropagation through time reaches the cue steps from every later step.
    common = {"actor_hidden_dims": [32], "critic_hidden_dims": [32], "init_noise_std": 0.5}
    rnn = {"class_name": "ActorCriticRecurrent", "rnn_type": "gru", "rnn_hidden_size": 32, **common}
    mlp = {"class_name": "ActorCritic", **common}
    returns, times = {}, {}
    for name, policy_cfg in (("gru", rnn), ("mlp", mlp)):
        cfg = _cfg(policy_cfg, num_steps_per_env=40)
        runner, times[name] = _train("cue_memory", cfg, iterations, num_envs, random_ep_len=False)
        eval_env = make_env("cue_memory", num_envs=num_envs, seed=123)
        assert eval_env.max_episode_length == 40
        returns[name] = _evaluate(eval_env, runner.get_inference_policy())
    print(f"cue_memory returns {returns}, training times {times}")
    assert returns["gru"] > 1.6, f"recurrent policy did not learn to remember the cue: {returns}"
    assert returns["mlp"] < 1.3, f"a feed-forward policy cannot exceed ~1.0 on this task: {returns}"
    assert returns["gru"] - returns["mlp"] > 0.4


# ---------------------------------------------------------------------------------------------------- estimator
def test_estimator_ppo_identifies_hidden_dynamics():
    """velocity_tracking with ``actor_dynamics_slots``: the actor's ``mass`` / ``friction`` slots are zeros; a
    StateAcRecurrent estimator (own GRU on base_lin_vel and last_actions) trained by EstimatorPPO against the
    critic's true values fills them (``replace_state_prob=1``: the actor only ever sees the estimate).

    Commands are resampled every 1 s instead of 4 s: the deterministic closed loop then has frequent transients
    (which reveal the mass; the steady-state action reveals the friction). Predicting the middle of the ranges
    (both uniform(0.5, 2.0), std 1.5 / sqrt(12) = 0.433) gives an RMS error of 0.433.

    Measured after 30 iterations (256 envs, deterministic evaluation over one 160-step episode per env):
    estimator RMS error (mass, friction) (0.19, 0.23), combined 0.21, with the test's seed 0 and (0.20, 0.23)
    with seeds 1 and 2; returns EstimatorPPO vs plain PPO (ActorCriticRecurrent) 6.20 vs 6.35 (seed 0),
    6.44 vs 6.47 and 6.40 vs 6.09 (seeds 1, 2); random actions 1.2, expert 7.6 (default commands). With the
    default desired_kl 0.01 the estimator learned half as fast (RMS 0.26 after 40 iterations instead of 20).
    On an Intel Xeon with AMX (bf16 autocast by default), seed 0: RMS 0.223, returns 6.18 vs 6.52: the gap between
    the two runs moves by about +-0.35 with the seed and the CPU's bfloat16 kernels, so the return check leaves
    that much room; the estimator's RMS is what this test is about.
    Thresholds: combined RMS < 0.30; estimator return >= plain return - 0.5; both > 5.0.
    """
    env_cfg = {"actor_dynamics_slots": True, "resampling_time_s": 1.0}
    num_envs, iterations = 256, 30
    common = {
        "actor_hidden_dims": [64, 64],
        "critic_hidden_dims": [64, 64],
        "init_noise_std": 0.3,
        "rnn_type": "gru",
        "rnn_hidden_size": 32,
    }
    estimator_policy = {
        "class_name": "StateAcRecurrent",
        "estimator_obs_components": ["base_lin_vel", "last_actions"],
        "estimator_target_components": ["mass", "friction"],
        "estimator_kwargs": {"hidden_sizes": [64], "rnn_hidden_size": 32},
        "replace_state_prob": 1.0,
        **common,
    }
    runs = {
        "estimator": _cfg(estimator_policy, "EstimatorPPO", desired_kl=0.02),
        "plain": _cfg({"class_name": "ActorCriticRecurrent", **common}, "PPO", desired_kl=0.02),
    }
    returns, times = {}, {}
    sq_err, count = torch.zeros(2), 0
    for name, cfg in runs.items():
        runner, times[name] = _train("velocity_tracking", cfg, iterations, num_envs, **env_cfg)
        actor_critic = runner.alg.actor_critic
        eval_env = make_env("velocity_tracking", num_envs=num_envs, seed=123, **env_cfg)
        obs = eval_env.get_observations()[0]
        assert torch.equal(obs[:, 6:], torch.zeros(num_envs, 2))  # the slots carry no information

        def record(env, alive, actor_critic=actor_critic):
            nonlocal sq_err, count
            truth = torch.cat([env.mass, env.friction], dim=1)
            err = actor_critic.get_estimated_state() - truth
            sq_err += (err.square() * alive[:, None]).sum(dim=0)
            count += int(alive.sum())

        on_step = record if name == "estimator" else None
        returns[name] = _evaluate(eval_env, runner.get_inference_policy(), on_step)
    rms = (sq_err / count).sqrt()
    combined = float(rms.square().mean().sqrt())
    baseline = 1.5 / math.sqrt(12.0)  # RMS error of always predicting the middle of uniform(0.5, 2.0)
    print(
        f"estimator RMS (mass, friction) {rms.tolist()} combined {combined:.3f} (mean predictor {baseline:.3f}); "
        f"returns {returns}; training times {times}"
    )
    assert combined < 0.30, (
        f"estimation RMS {combined:.3f} not clearly below the mean predictor's {baseline:.3f}"
    )
    assert (rms < 0.35).all(), f"per-component RMS {rms.tolist()}"
    assert returns["plain"] > 5.0 and returns["estimator"] > 5.0, returns
    assert returns["estimator"] >= returns["plain"] - 0.5, returns


# ---------------------------------------------------------------------------------------------------- image
def test_conv_encoder_policy_reaches_image_goal():
    """image_goal: the goal is seen only as a blob in a 12x12 image; an EncoderActorCritic with a
    Conv2dHeadModel encoder on ``forward_depth`` learns to reach it.

    Returns (deterministic policy, 256 envs, one 100-step episode each): privileged PD expert 4.48, zero action
    0.97, uniform random actions 0.64. Measured: 4.05 after 10 iterations, 4.37 after 20. Threshold after
    16 iterations: 3.0 (random policy < 1.5 checked too).
    """
    policy_cfg = {
        "class_name": "EncoderActorCritic",
        "actor_hidden_dims": [64, 64],
        "critic_hidden_dims": [64, 64],  # the critic reads the raw image, velocity and the true goal delta
        "init_noise_std": 1.0,
        "encoder_component_names": ["forward_depth"],
        "encoder_class_name": "Conv2dHeadModel",
        "encoder_kwargs": {
            "channels": [8, 16],
            "kernel_sizes": [3, 3],
            "strides": [2, 2],
            "hidden_sizes": [64],
        },
        "encoder_output_size": 32,
    }
    num_envs = 256
    runner, elapsed = _train("image_goal", _cfg(policy_cfg), 16, num_envs)
    assert runner.alg.actor_critic.encoders[0].__class__.__name__ == "Conv2dHeadModel"
    learned = _evaluate(make_env("image_goal", num_envs=num_envs, seed=123), runner.get_inference_policy())
    gen = torch.Generator().manual_seed(0)

    class RandomPolicy:
        def __call__(self, obs):
            return torch.rand(obs.shape[0], 2, generator=gen) * 2 - 1

        def reset(self, dones=None):
            pass

    random_return = _evaluate(make_env("image_goal", num_envs=num_envs, seed=123), RandomPolicy())
    print(f"image_goal: learned {learned:.3f} random {random_return:.3f} in {elapsed:.1f}s")
    assert random_return < 1.5
    assert learned > 3.0, f"image policy return {learned:.3f} <= 3.0"
