"""The scripted reference gaits of the built-in quadruped: they really walk, and the recording is complete."""

from __future__ import annotations

import torch

from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import load_motion_file, record_scripted_trot, scripted_trot_policy


def test_stride_makes_the_scripted_trot_walk_forward_and_backward():
    env = make_env("quadruped_flat", num_envs=3, seed=0, max_push_vel_xy=0.0, noise_level=0.0)
    policy = scripted_trot_policy(env, stride=torch.tensor([-0.4, 0.0, 0.4]))
    obs, _ = env.get_observations()
    vx = torch.zeros(3)
    steps = int(3.0 / env.dt)
    for k in range(steps):
        env.commands[:] = 0.0
        obs, _, _, _ = env.step(policy(obs))
        if k >= steps // 3:
            vx += env.base_lin_vel[:, 0]
    vx /= steps - steps // 3
    assert vx[0] < -0.2 and vx[2] > 0.2, vx
    assert abs(float(vx[1])) < 0.15, vx  # trotting in place


def test_moving_reference_records_a_trajectory_per_gait(tmp_path):
    path = tmp_path / "walk.motion"
    fields = record_scripted_trot("quadruped_flat", str(path), seed=0, duration_s=1.0, moving=True)
    motion = load_motion_file(str(path))
    assert 20 <= len(motion) <= 27  # 27 gaits; a robot that falls during the warm-up records nothing
    for traj in motion.values():
        assert traj["Fields"] == fields and len(traj["Frames"][0]) == len(fields)
