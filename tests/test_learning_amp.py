"""AMP end to end on the MuJoCo quadruped: a scripted trot is the reference gait; APPO's gait must end up much
closer to it than plain PPO's after the same training budget, and the trained discriminator must score the
final APPO gait well above PPO's. (Velocity tracking with AMP over a longer budget is measured by
benchmarks/bench_amp.py; see benchmarks/RESULTS.md.)"""

from __future__ import annotations

import copy

import pytest
import torch

from st_rl.configs import AMP_UPDATE_SETTINGS, amp_train_config, get_preset
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
    base["algorithm"].update(AMP_UPDATE_SETTINGS)  # PPO with APPO's update settings

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
    # Measured on an Intel Xeon with AMX: 0.943 / 1.425 (fp32, seed 42), 0.946 / 1.650 (bf16, seed 43), 1.054 /
    # 1.727 (fp32, seed 43), 0.943 / 1.313 (bf16, seed 42, this test): ratios 0.57-0.72 after 30 iterations; on
    # the AMD EPYC the earlier sessions used, below 0.6. The bound leaves room for the seed and the CPU's kernels.
    assert d_amp < 0.8 * d_ppo
    assert s_amp > s_ppo + 0.2  # the discriminator that shaped APPO's gait tells it from PPO's
    assert s_ref > 0.8  # the discriminator recognises the reference


# ------------------------------------------------------------------------------------------- AMP from scratch
# Forward walking commands (0 to 0.6 m/s, no sideways or turning command) keep the run CI-sized; the reference is
# the scripted walk recorded in the simulator (so the robot can perform it) with the default style fields: base
# height and velocities, joints and feet, so stepping in place no longer looks like walking to the discriminator.
SCRATCH_ENV = {"lin_vel_x": (0.0, 0.6), "lin_vel_y": (0.0, 0.0), "ang_vel_yaw": (0.0, 0.0)}
SCRATCH_ENVS, SCRATCH_ITERATIONS = 256, 150


@pytest.mark.timeout(3600)
def test_amp_from_scratch_tracks_like_ppo_and_moves_towards_the_reference(tmp_path):
    """APPO with ``amp_train_config``'s defaults, trained from scratch on the preset's (tracking) reward plus
    style, must follow the command about as well as PPO with the same reward and budget, and walk with a gait
    much closer to the reference than PPO's. At this budget both policies still step with their exploration
    noise, so tracking is measured with the actions they train with (sampled); the gait with the mean action."""
    from st_rl.evaluation.metrics import evaluate_policy

    torch.manual_seed(0)
    path = str(tmp_path / "walk.motion")
    probe = make_env(TASK, num_envs=1, seed=0)
    fields = record_scripted_trot(TASK, path, seed=3, fields=probe.default_style_fields(), moving=True)
    loader = MotionLoader(path, fields, amp_obs_frame_num=2, time_between_frames=probe.dt)
    reference = loader.sample_windows(4096)
    preset = get_preset(TASK)
    base = preset.train.to_dict()
    base.update(seed=1, logger="none", log_interval=10**9)
    base["algorithm"].update(AMP_UPDATE_SETTINGS)  # PPO with APPO's update settings
    env_kwargs = {**preset.env_kwargs, **SCRATCH_ENV}

    def env(seed: int, n: int = SCRATCH_ENVS):
        task_env = make_env(
            TASK, num_envs=n, seed=seed, amp_obs_frame_num=2, style_fields=fields, **env_kwargs
        )
        task_env.set_ref_motion_source(loader)
        return task_env

    results = {}
    for name, cfg in (("APPO", amp_train_config(base)), ("PPO", copy.deepcopy(base))):
        runner = build_runner(cfg["runner_class_name"] if name == "APPO" else "OnPolicyRunner", env(1), cfg)
        runner.learn(SCRATCH_ITERATIONS, init_at_random_ep_len=True)
        ac = runner.alg.actor_critic
        sampled = evaluate_policy(env(11, 64), lambda obs, ac=ac: ac.act(obs), 10.0)
        mean = evaluate_policy(env(11, 64), runner.get_inference_policy(), 10.0)
        windows = collect_style_windows(env(7, 64), runner.get_inference_policy(), 5.0)
        results[name] = (
            sampled["velrmsd"],
            mean["velrmsd"],
            sampled["cmd_rms_xy"],
            gait_distance(windows, reference),
        )
    (v_amp, m_amp, standing, d_amp), (v_ppo, m_ppo, _, d_ppo) = results["APPO"], results["PPO"]
    print(
        f"from scratch, {SCRATCH_ITERATIONS} iterations x {SCRATCH_ENVS} robots: velrmsd sampled / mean action "
        f"APPO {v_amp:.3f} / {m_amp:.3f}, PPO {v_ppo:.3f} / {m_ppo:.3f} (standing still {standing:.3f}); gait "
        f"distance APPO {d_amp:.3f} PPO {d_ppo:.3f}"
    )
    assert v_amp < 0.8 * standing  # it walks towards the command instead of stepping in place
    assert v_amp < 1.5 * v_ppo
    assert d_amp < 0.7 * d_ppo
