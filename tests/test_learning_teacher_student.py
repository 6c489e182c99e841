"""Teacher-student learning end to end on the built-in velocity_tracking task (privileged mass/friction).

A teacher is trained with PPO on the privileged (critic) observations; recurrent students that only see the
actor observations are distilled from it with TPPO + PPO and with pure DAgger (no PPO loss, no reward).
Each student must reach 90% of the teacher's mean return.
"""

from __future__ import annotations

import glob
import os

import pytest
import torch

from st_rl.configs import get_preset
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def episode_return(env, policy, use_critic_obs: bool = False) -> float:
    """Mean undiscounted return of one full episode per env (recurrent policies are reset at dones)."""
    env.reset()
    obs, extras = env.get_observations()
    reset = getattr(policy, "reset", None)
    if reset is not None:
        reset(torch.ones(env.num_envs, dtype=torch.bool))
    total = torch.zeros(env.num_envs)
    finished = torch.zeros(env.num_envs, dtype=torch.bool)
    with torch.inference_mode():
        for _ in range(int(env.max_episode_length)):
            x = extras["observations"]["critic"] if use_critic_obs else obs
            obs, rew, dones, extras = env.step(policy(x))
            if reset is not None:
                reset(dones)
            total += torch.where(finished, torch.zeros_like(rew), rew)
            finished |= dones
    return float(total.mean())


def base_cfg() -> dict:
    cfg = get_preset("velocity_tracking").train.to_dict()
    cfg["logger"] = "none"
    cfg["log_interval"] = 1000
    return cfg


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A PPO teacher whose actor sees the privileged observations; returns (checkpoint, mean return)."""
    log_dir = str(tmp_path_factory.mktemp("teacher"))
    cfg = base_cfg()
    cfg["obs_groups"] = {"policy": ["critic"], "critic": ["critic"]}
    runner = OnPolicyRunner(make_env("velocity_tracking", num_envs=256, seed=42), cfg, log_dir=log_dir)
    runner.learn(30, init_at_random_ep_len=True)
    ret = episode_return(
        make_env("velocity_tracking", num_envs=256, seed=123), runner.get_inference_policy(), True
    )
    ckpt = sorted(glob.glob(os.path.join(log_dir, "model_*.pt")), key=os.path.getmtime)[-1]
    print(f"teacher return {ret:.3f}")
    assert ret > 6.5
    return ckpt, ret


def student_cfg(teacher_ckpt: str, using_ppo: bool) -> dict:
    cfg = base_cfg()
    ppo = dict(cfg["algorithm"])
    ppo["num_mini_batches"] = 2
    if not using_ppo:
        ppo["schedule"] = "fixed"
    cfg["policy"] = {
        "class_name": "ActorCriticRecurrent",
        "rnn_type": "gru",
        "rnn_hidden_size": 64,
        "actor_hidden_dims": [64, 64],
        "critic_hidden_dims": [64, 64],
        "activation": "elu",
        "init_noise_std": 1.0,
    }
    # st_gym's TPPO form: nested ppo config, teacher policy with its checkpoint.
    cfg["algorithm"] = {
        "class_name": "TPPO",
        "ppo": ppo,
        "teacher_policy": {"teacher_ac_path": teacher_ckpt},
        "teacher_act_prob": "exp",
        "update_times_scale": 10,
        "using_ppo": using_ppo,
        "distill_target": "real",
    }
    return cfg


@pytest.mark.parametrize("using_ppo,iterations", [(True, 30), (False, 20)], ids=["tppo+ppo", "dagger"])
def test_recurrent_student_reaches_90_percent_of_teacher(teacher, using_ppo, iterations):
    ckpt, teacher_return = teacher
    runner = OnPolicyRunner(make_env("velocity_tracking", num_envs=256, seed=7), student_cfg(ckpt, using_ppo))
    assert runner.alg.actor_critic.num_actor_obs == 6  # no mass / friction columns for the student
    untrained = episode_return(
        make_env("velocity_tracking", num_envs=256, seed=123), runner.get_inference_policy()
    )
    runner.train_mode()
    runner.learn(iterations, init_at_random_ep_len=True)
    student = episode_return(
        make_env("velocity_tracking", num_envs=256, seed=123), runner.get_inference_policy()
    )
    print(
        f"student ({'TPPO+PPO' if using_ppo else 'DAgger'}) {student:.3f} vs teacher {teacher_return:.3f}, untrained {untrained:.3f}"
    )
    assert student >= 0.9 * teacher_return
    assert untrained < 0.5 * teacher_return


def test_demonstrations_then_two_stage_runner(teacher, tmp_path):
    """Record the teacher with DemonstrationSaver; TwoStageRunner pretrains a student from the files (it beats
    an untrained student before any environment step of its own), then continues with RL."""
    from st_rl.runners import DemonstrationSaver, build_runner

    ckpt, teacher_return = teacher
    teacher_cfg = base_cfg()
    teacher_cfg["obs_groups"] = {"policy": ["critic"], "critic": ["critic"]}
    env = make_env("velocity_tracking", num_envs=128, seed=11)
    teacher_runner = OnPolicyRunner(env, teacher_cfg)
    teacher_runner.load(ckpt, load_optimizer=False)
    teacher_runner.eval_mode()
    demo_dir = str(tmp_path / "demos")
    saver = DemonstrationSaver(
        make_env("velocity_tracking", num_envs=128, seed=11),
        teacher_runner.alg.actor_critic,
        demo_dir,
        rollout_storage_length=40,
        min_timesteps=128 * 160,
        min_episodes=128,
        use_critic_obs=True,
        critic_obs_normalizer=teacher_runner.alg.obs_normalizer,
    )
    saver.collect_and_save()
    saver.close()
    assert len(glob.glob(os.path.join(demo_dir, "trajectory_*", "traj_*.npz"))) > 0

    cfg = student_cfg(ckpt, using_ppo=True)
    cfg["policy"] = {
        "class_name": "ActorCritic",
        "actor_hidden_dims": [64, 64],
        "critic_hidden_dims": [64, 64],
    }
    cfg["algorithm"]["teacher_act_prob"] = 0.0  # after pretraining the student acts on its own
    cfg["runner_class_name"] = "TwoStageRunner"
    cfg["pretrain_iterations"] = 20
    cfg["pretrain_dataset"] = {"data_dir": demo_dir, "dataset_loops": -1, "random_shuffle_traj_order": True}
    runner = build_runner("TwoStageRunner", make_env("velocity_tracking", num_envs=128, seed=7), cfg)
    eval_env = make_env("velocity_tracking", num_envs=256, seed=123)
    untrained = episode_return(eval_env, runner.get_inference_policy())
    runner.train_mode()
    runner.learn(20)  # dataset only
    assert runner.rollout_dataset is not None and not runner.is_pretraining()
    pretrained = episode_return(eval_env, runner.get_inference_policy())
    runner.train_mode()
    runner.learn(10)  # environment steps (RL)
    after_rl = episode_return(eval_env, runner.get_inference_policy())
    print(
        f"two-stage: untrained {untrained:.3f}, pretrained {pretrained:.3f}, after RL {after_rl:.3f}, teacher {teacher_return:.3f}"
    )
    assert pretrained > untrained + 2.0
    assert after_rl > 0.8 * teacher_return
