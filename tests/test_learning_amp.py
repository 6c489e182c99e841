"""AMP end to end on the MuJoCo quadruped: a scripted trot is the reference gait; APPO's gait must end up much
closer to it than plain PPO's after the same training budget, and the trained discriminator must score the
final APPO gait well above PPO's. (Velocity tracking with AMP over a longer budget is measured by
benchmarks/bench_amp.py; see benchmarks/RESULTS.md.)"""

from __future__ import annotations

import copy

import pytest
import torch

from st_rl.configs import amp_train_config, get_preset
from st_rl.datasets import MotionLoader, gait_distance
from st_rl.runners import build_runner
from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import collect_style_windows, record_scripted_trot

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TASK, ENVS, ITERATIONS = "quadruped_flat", 256, 30


def style_score(alg, windows: torch.Tensor) -> float:
    x = (windows - alg.amp_normalizer._mean) / (alg.amp_normalizer._std + alg.amp_normalizer.eps)
    style, _, _ = alg.actor_critic.discriminator.predict_style_reward(x, torch.zeros(x.shape[0]))
    return float(style.mean()) / alg.actor_critic.discriminator.style_reward_coef


def test_amp_gait_is_closer_to_the_reference_than_ppo(tmp_path):
    torch.manual_seed(0)
    path = str(tmp_path / "trot.motion")
    fields = record_scripted_trot(TASK, path, seed=3)
    preset = get_preset(TASK)
    probe = make_env(TASK, num_envs=1, seed=0)
    loader = MotionLoader(path, fields, amp_obs_frame_num=2, time_between_frames=probe.dt)
    reference = loader.sample_windows(4096)
    base = preset.train.to_dict()
    base.update(seed=42, logger="none", log_interval=10**9)

    def env(seed: int, n: int = ENVS):
        task_env = make_env(
            TASK, num_envs=n, seed=seed, amp_obs_frame_num=2, style_fields=fields, **preset.env_kwargs
        )
        task_env.set_ref_motion_source(loader)
        return task_env

    amp_runner = build_runner("AmpPolicyRunner", env(42), amp_train_config(base, 0.03))
    initial = collect_style_windows(env(7, 64), amp_runner.get_inference_policy(), 5.0)
    amp_runner.train_mode()
    amp_runner.learn(ITERATIONS, init_at_random_ep_len=True)
    amp_windows = collect_style_windows(env(7, 64), amp_runner.get_inference_policy(), 5.0)

    ppo_runner = build_runner("OnPolicyRunner", env(42), copy.deepcopy(base))
    ppo_runner.learn(ITERATIONS, init_at_random_ep_len=True)
    ppo_windows = collect_style_windows(env(7, 64), ppo_runner.get_inference_policy(), 5.0)

    d_amp, d_ppo = gait_distance(amp_windows, reference), gait_distance(ppo_windows, reference)
    s_initial, s_amp = style_score(amp_runner.alg, initial), style_score(amp_runner.alg, amp_windows)
    s_ppo = style_score(amp_runner.alg, ppo_windows)
    s_ref = style_score(amp_runner.alg, reference)
    print(
        f"gait distance APPO {d_amp:.3f} PPO {d_ppo:.3f}; style score (trained discriminator) initial policy {s_initial:.3f}, APPO {s_amp:.3f}, PPO {s_ppo:.3f}, reference {s_ref:.3f}"
    )
    assert d_amp < 0.6 * d_ppo
    assert s_amp > s_ppo + 0.2  # the discriminator that shaped APPO's gait tells it from PPO's
    assert s_ref > 0.8  # the discriminator recognises the reference
