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


class _CountingEnv:
    """Three robots whose one style field is ``10 * robot + step``; robot 0 falls at step 3, robot 1 times out
    at step 2 (an episode end, not a failure), robot 2 runs through."""

    num_envs, dt, num_actions = 3, 0.1, 1

    def __init__(self) -> None:
        self.k = 0
        self.commands = torch.zeros(3, 3)

    def default_style_fields(self) -> list[str]:
        return ["count"]

    def get_observations(self):
        return torch.zeros(3, 1), {}

    def step(self, actions):
        dones = torch.tensor([self.k == 3, self.k == 2, False])
        time_outs = torch.tensor([False, self.k == 2, False])
        self.frame = torch.tensor([[0.0], [10.0], [20.0]]) + self.k
        self.k += 1
        return torch.zeros(3, 1), torch.zeros(3), dones, {"time_outs": time_outs}

    def style_features(self, fields):
        return self.frame


def test_record_motion_cuts_a_trajectory_at_its_failure_but_not_at_a_time_out():
    from st_rl.tasks.motion_recorder import record_motion

    motion = record_motion(_CountingEnv(), lambda obs: obs, duration_s=0.5, env_ids=(0, 1, 2), warmup_s=0.1)
    # one warm-up step (k = 0), then five recorded steps (k = 1..5); robot 0 fails at k = 3 (not recorded)
    assert motion["recorded_0"]["Frames"] == [[1.0], [2.0]]
    assert motion["recorded_1"]["Frames"] == [[11.0], [12.0], [13.0], [14.0], [15.0]]
    assert motion["recorded_2"]["Frames"] == [[21.0], [22.0], [23.0], [24.0], [25.0]]
    assert motion["recorded_2"]["Fields"] == ["count"] and motion["recorded_2"]["FrameDuration"] == 0.1
    # a robot that fails during the warm-up leaves no trajectory
    env = _CountingEnv()
    assert "recorded_0" not in record_motion(env, lambda obs: obs, duration_s=0.2, env_ids=(0,), warmup_s=0.4)
