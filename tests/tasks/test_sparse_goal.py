"""Tests of the sparse-goal task: dynamics, arena walls, reward, episode ends and metrics, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from st_rl.configs import get_preset
from st_rl.tasks import SparseGoal, make_env
from st_rl.tasks.sparse_goal import evaluate_success

N = 4


def _place(env: SparseGoal, position: list[list[float]], velocity: list[list[float]]) -> None:
    env.position = torch.tensor(position)
    env.velocity = torch.tensor(velocity)


def test_registered_shapes_and_reset_state():
    env = make_env("sparse_goal", num_envs=N, seed=0)
    assert isinstance(env, SparseGoal)
    assert list(env.obs_segments) == ["position", "velocity"] and env.num_obs == 4
    assert env.num_actions == 2 and env.num_privileged_obs is None
    assert env.max_episode_length == 200  # 10 s of 0.05 s steps
    obs, extras = env.get_observations()
    assert obs.shape == (N, 4) and extras["observations"]["policy"] is obs
    start = torch.tensor(env.cfg["start"])
    assert ((obs[:, :2] - start).abs() <= env.cfg["start_range"]).all()
    assert (obs[:, 2:] == 0).all()
    assert math.isnan(float(env.task_metrics()["success_rate"]))


def test_damped_dynamics_match_hand_computation():
    env = SparseGoal(num_envs=2, seed=0)
    _place(env, [[-1.0, -1.0], [-2.0, -2.0]], [[0.0, 0.0], [0.5, -0.5]])
    obs, rewards, dones, _ = env.step(torch.tensor([[1.0, 0.0], [-0.5, 3.0]]))  # 3.0 is clipped to 1.0
    # v' = (v + dt * F * a / m) / (1 + dt * c / m) with dt 0.05, F 4, m 1, c 2;  p' = p + dt * v'
    v0 = torch.tensor([[0.2 / 1.1, 0.0], [(0.5 - 0.1) / 1.1, (-0.5 + 0.2) / 1.1]])
    p0 = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]]) + 0.05 * v0
    torch.testing.assert_close(env.velocity, v0)
    torch.testing.assert_close(env.position, p0)
    torch.testing.assert_close(obs, torch.cat([p0, v0], dim=1))
    assert (rewards == 0).all() and not dones.any()


def test_top_speed_is_force_over_damping():
    env = SparseGoal(num_envs=1, seed=0, arena_size=100.0)
    for _ in range(100):
        env.step(torch.tensor([[1.0, 0.0]]))
    assert float(env.velocity[0, 0]) == pytest.approx(4.0 / 2.0, rel=1e-3)


def test_arena_walls_stop_the_mass():
    env = SparseGoal(num_envs=2, seed=0)
    edge = env.cfg["arena_size"]
    _place(env, [[edge - 0.01, -3.0], [-2.0, -edge + 0.01]], [[1.0, 0.3], [0.0, -1.0]])
    env.step(torch.zeros(2, 2))
    assert float(env.position[0, 0]) == edge and float(env.velocity[0, 0]) == 0.0
    assert float(env.velocity[0, 1]) == pytest.approx(0.3 / 1.1)  # the motion along the wall goes on
    assert float(env.position[1, 1]) == -edge and float(env.velocity[1, 1]) == 0.0


def test_reward_only_inside_the_goal_and_episode_continues():
    env = SparseGoal(num_envs=3, seed=0)
    goal = env.cfg["goal"]
    _place(
        env,
        [[goal[0] + 0.3, goal[1]], [goal[0] + 0.6, goal[1]], [-1.5, -1.5]],
        [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
    )
    _, rewards, dones, extras = env.step(torch.zeros(3, 2))
    # w_success * dt = 20 * 0.05 = +1 per step inside the 0.4 m goal disk, 0 elsewhere
    torch.testing.assert_close(rewards, torch.tensor([1.0, 0.0, 0.0]))
    assert not dones.any()
    assert env.reached.tolist() == [True, False, False]
    # leaving the goal stops the reward but the episode still counts as a success
    _place(env, [[-4.0, 4.0], [goal[0] + 0.6, goal[1]], [-1.5, -1.5]], [[0.0, 0.0]] * 3)
    env.episode_length_buf = torch.full((3,), env.max_episode_length - 1)
    _, rewards, dones, extras = env.step(torch.zeros(3, 2))
    assert (rewards == 0).all() and dones.all() and extras["time_outs"].all()
    log = extras["log"]
    assert float(log["Metrics/success"]) == pytest.approx(1 / 3)
    assert float(log["Episode_Termination/time_out"]) == 1.0
    assert float(log["Episode_Reward/success"]) == pytest.approx(1.0 / 3 / env.max_episode_length_s)
    assert float(env.task_metrics()["success_rate"]) == pytest.approx(1 / 3)
    assert not env.reached.any()  # reset for the new episodes


def test_terminate_on_success_ends_the_episode():
    env = SparseGoal(num_envs=2, seed=0, terminate_on_success=True)
    goal = env.cfg["goal"]
    _place(env, [[goal[0], goal[1] - 0.35], [-1.5, -1.5]], [[0.0, 0.0], [0.0, 0.0]])
    obs, rewards, dones, extras = env.step(torch.zeros(2, 2))
    torch.testing.assert_close(rewards, torch.tensor([1.0, 0.0]))
    assert dones.tolist() == [True, False] and not extras["time_outs"].any()
    assert float(extras["log"]["Episode_Termination/goal_reached"]) == 1.0
    assert float(env.task_metrics()["success_rate"]) == 1.0
    start = torch.tensor(env.cfg["start"])
    assert ((obs[0, :2] - start).abs() <= env.cfg["start_range"]).all()  # env 0 was reset


def test_exploration_is_the_hard_part():
    expert = SparseGoal(num_envs=1, seed=0).expert_action
    assert evaluate_success(expert, num_envs=64, seed=1) == 1.0
    gen = torch.Generator().manual_seed(0)
    noise = lambda obs: torch.randn(obs.shape[0], 2, generator=gen)  # noqa: E731 - unit Gaussian noise
    assert evaluate_success(noise, num_envs=2048, seed=1) == 0.0
    # a constant push gets there only when aimed within about 10 degrees of the goal (at 21.8 degrees)
    hits = []
    for degrees in range(0, 360, 10):
        push = torch.tensor([[math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]])
        if evaluate_success(lambda obs, p=push: p.expand(obs.shape[0], 2), num_envs=8, seed=2) > 0:
            hits.append(degrees)
    assert hits and all(10 <= d <= 35 for d in hits)


def test_state_dict_round_trip_continues_identically():
    env = SparseGoal(num_envs=N, seed=3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        env.step(torch.rand(N, 2, generator=gen) * 2 - 1)
    state = env.state_dict()
    actions = [torch.rand(N, 2, generator=gen) * 2 - 1 for _ in range(250)]
    first = [env.step(a)[0].clone() for a in actions]
    twin = SparseGoal(num_envs=N, seed=99)
    twin.load_state_dict(state)
    second = [twin.step(a)[0].clone() for a in actions]
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(env.task_metrics()["success_rate"], twin.task_metrics()["success_rate"])


def test_bad_config_is_rejected():
    with pytest.raises(TypeError, match="unknown config"):
        SparseGoal(num_envs=1, goal_size=1.0)
    with pytest.raises(ValueError, match="goal_radius"):
        SparseGoal(num_envs=1, goal_radius=0.0)
    with pytest.raises(ValueError, match="pairs"):
        SparseGoal(num_envs=1, goal=(1.0, 2.0, 3.0))


def test_preset_enables_rnd():
    preset = get_preset("sparse_goal")
    cfg = preset.train.to_dict()
    assert preset.task == "sparse_goal"
    assert cfg["algorithm"]["rnd_cfg"]["weight"] > 0
