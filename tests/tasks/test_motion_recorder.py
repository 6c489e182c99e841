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


def test_command_grid_is_every_combination():
    from st_rl.tasks.motion_recorder import command_grid

    grid = command_grid([-0.5, 0.5], [0.0], [-1.0, 0.0, 1.0])
    assert grid.shape == (6, 3)
    assert {tuple(r) for r in grid.tolist()} == {(x, 0.0, w) for x in (-0.5, 0.5) for w in (-1.0, 0.0, 1.0)}


def test_record_motion_holds_one_command_per_robot_and_stores_it():
    from st_rl.tasks.motion_recorder import command_grid, record_motion

    env = make_env("quadruped_flat", num_envs=3, seed=0, max_push_vel_xy=0.0, resampling_time_s=0.1)
    grid = command_grid([-0.5, 0.0, 0.5])
    seen = []

    def policy(obs):
        seen.append(env.commands.clone())
        return torch.zeros(obs.shape[0], env.num_actions)

    motion = record_motion(env, policy, duration_s=0.5, env_ids=range(3), command=grid, warmup_s=0.2)
    assert all(torch.equal(c, grid) for c in seen)  # held although the task resamples every 0.1 s
    assert [t["Command"] for t in motion.values()] == grid.tolist()
    assert all(len(t["Frames"]) == 25 for t in motion.values())
    try:
        record_motion(env, policy, duration_s=0.1, command=torch.zeros(2, 3))
    except ValueError as e:
        assert "one row per robot (3, 3)" in str(e)
    else:
        raise AssertionError("a command table of the wrong height was accepted")
