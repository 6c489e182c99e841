"""Contracts of the cue_memory and image_goal tasks and of VelocityTracking's ``actor_dynamics_slots``."""

from __future__ import annotations

import math

import pytest
import torch

from st_rl.tasks import TASKS, CueMemory, ImageGoal, VelocityTracking, make_env

N = 16


def _seg_size(segments) -> int:
    return sum(math.prod(s) for s in segments.values())


def _actions(env, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1


@pytest.mark.parametrize("name,cls", [("cue_memory", CueMemory), ("image_goal", ImageGoal)])
def test_registered_and_shapes(name, cls):
    assert TASKS[name] is cls
    env = make_env(name, num_envs=N, seed=0)
    assert isinstance(env, cls)
    assert env.num_obs == _seg_size(env.obs_segments)
    assert env.num_privileged_obs == _seg_size(env.privileged_obs_segments)
    obs, extras = env.get_observations()
    assert obs.shape == (N, env.num_obs) and obs.dtype == torch.float32
    assert extras["observations"]["critic"].shape == (N, env.num_privileged_obs)
    obs, rew, dones, extras = env.step(torch.zeros(N, env.num_actions))
    assert obs.shape == (N, env.num_obs)
    assert extras["observations"]["policy"] is obs
    assert extras["observations"]["critic"].shape == (N, env.num_privileged_obs)
    assert rew.shape == (N,) and rew.dtype == torch.float32
    assert dones.shape == (N,) and dones.dtype == torch.bool and not dones.any()
    assert all(v.dim() == 0 for v in extras["log"].values())
    assert torch.isfinite(obs).all() and torch.isfinite(rew).all()


def test_cue_memory_layout_and_visibility():
    env = CueMemory(num_envs=N, seed=3, target_dim=2, cue_steps=3, episode_length_s=0.5)
    assert env.max_episode_length == 10 and env.num_actions == 2
    assert list(env.obs_segments) == ["cue", "cue_visible"] and env.num_obs == 3
    assert list(env.privileged_obs_segments) == ["cue", "cue_visible", "target", "phase"]
    assert (env.target.abs() <= env.cfg["target_range"]).all()
    gen = torch.Generator().manual_seed(0)
    obs, extras = env.get_observations()
    first_target = env.target.clone()
    for k in range(env.max_episode_length):
        visible = k < 3
        assert torch.equal(obs[:, 2], torch.full((N,), float(visible)))
        expected_cue = env.target if visible else torch.zeros(N, 2)
        assert torch.equal(obs[:, 0:2], expected_cue)
        critic = extras["observations"]["critic"]
        assert torch.equal(critic[:, 3:5], env.target)  # the critic always sees the target
        assert torch.allclose(critic[:, 5], torch.full((N,), k / 10))
        assert torch.equal(env.target, first_target)  # constant within the episode
        obs, rew, dones, extras = env.step(_actions(env, gen))
        assert dones.all() == (k == 9)
    # all timed out together: new targets, cue visible again
    assert extras["time_outs"].all()
    assert not torch.equal(env.target, first_target)
    assert torch.equal(obs[:, 0:2], env.target) and (obs[:, 2] == 1).all()


def test_cue_memory_reward_and_metric():
    env = CueMemory(num_envs=N, seed=4)
    _, rew, _, extras = env.step(env.expert_action())
    assert torch.allclose(rew, torch.full((N,), env.dt))  # exp(0) * dt
    wrong = env.target + 0.5
    _, rew, _, _ = env.step(wrong)
    expected = torch.exp(-(wrong.clamp(-1, 1) - env.target).square().sum(1) / 0.25) * env.dt
    assert torch.allclose(rew, expected)
    # the metric is the error of the last action of an episode
    env.episode_length_buf = torch.full((N,), env.max_episode_length - 1)
    target = env.target.clone()
    _, _, dones, extras = env.step(target - 0.25 * target.sign())  # stays within the action bounds
    assert dones.all()
    assert extras["log"]["Metrics/final_error"] == pytest.approx(0.25, abs=1e-5)


def test_image_goal_blob_matches_goal():
    env = ImageGoal(num_envs=N, seed=5)
    size, r = env.image_size, env.cfg["view_range"]
    assert env.obs_segments["forward_depth"] == (1, size, size)
    assert list(env.privileged_obs_segments) == ["forward_depth", "velocity", "goal_delta"]
    gen = torch.Generator().manual_seed(1)
    cell = 2 * r / size
    for _ in range(3):
        obs, extras = env.get_observations()
        image = obs[:, : size * size].reshape(N, size, size)
        assert image.min() >= 0 and image.max() <= 1
        delta = env.goal - env.position
        flat = image.flatten(1).argmax(dim=1)
        row, col = flat // size, flat % size
        centre_x = -r + (col.float() + 0.5) * cell
        centre_y = -r + (row.float() + 0.5) * cell
        assert (torch.abs(centre_x - delta[:, 0]) <= cell / 2 + 1e-5).all()
        assert (torch.abs(centre_y - delta[:, 1]) <= cell / 2 + 1e-5).all()
        assert torch.equal(obs[:, size * size :], env.velocity)
        assert torch.allclose(extras["observations"]["critic"][:, -2:], delta)
        env.step(_actions(env, gen))
    # a goal beyond the view shows at the border, in its direction
    far = env.render_goal_image(torch.tensor([[10.0, -10.0]]))[0, 0]
    assert divmod(int(far.argmax()), size) == (0, size - 1)  # lowest y row, highest x column


def test_image_goal_reward_matches_point_mass():
    env = ImageGoal(num_envs=N, seed=6)
    a = torch.full((N, 2), 0.3)
    _, rew, _, _ = env.step(a)
    dist_sq = (env.goal - env.position).square().sum(1)
    assert torch.allclose(rew, (torch.exp(-dist_sq) - 0.01 * 0.18) * env.dt)


@pytest.mark.parametrize("name", ["cue_memory", "image_goal"])
def test_auto_reset(name):
    env = make_env(name, num_envs=N, seed=7)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        env.step(_actions(env, gen))
    buf = torch.full((N,), 5, dtype=torch.long)
    buf[3] = env.max_episode_length - 1
    env.episode_length_buf = buf
    obs, _, dones, extras = env.step(_actions(env, gen))
    expected = torch.zeros(N, dtype=torch.bool)
    expected[3] = True
    assert torch.equal(dones, expected) and torch.equal(extras["time_outs"], expected)
    assert env.episode_length_buf[3] == 0 and (env.episode_length_buf[~expected] == 6).all()
    if name == "cue_memory":
        assert obs[3, -1] == 1 and torch.equal(obs[3, :-1], env.target[3])
        assert (obs[~expected] == 0).all()  # cue hidden after cue_steps
    else:
        assert torch.equal(obs[3, -2:], torch.zeros(2))  # starts at rest
        assert (obs[~expected, -2:].abs() > 0).all()


@pytest.mark.parametrize("name", ["cue_memory", "image_goal"])
def test_determinism_and_state_dict(name):
    def rollout(env, steps=12):
        gen = torch.Generator().manual_seed(2)
        out = []
        for _ in range(steps):
            obs, rew, dones, extras = env.step(_actions(env, gen))
            out.append(
                torch.cat([obs, rew[:, None], dones[:, None].float(), extras["observations"]["critic"]], 1)
            )
        return torch.stack(out)

    kw = {"episode_length_s": 0.3}  # 6 steps: the rollouts cross resets
    a, b = make_env(name, num_envs=N, seed=11, **kw), make_env(name, num_envs=N, seed=11, **kw)
    c = make_env(name, num_envs=N, seed=12, **kw)
    ra = rollout(a)
    assert torch.equal(ra, rollout(b))
    assert not torch.equal(ra, rollout(c))

    state = a.state_dict()
    assert "critic_obs_buf" in state and "rng_state" in state
    first = rollout(a)
    fresh = make_env(name, num_envs=N, seed=99, **kw)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.get_observations()[0], state["obs_buf"])
    assert torch.equal(rollout(fresh), first)


def test_velocity_tracking_actor_dynamics_slots():
    plain = VelocityTracking(num_envs=N, seed=8)
    slots = VelocityTracking(num_envs=N, seed=8, actor_dynamics_slots=True)
    assert plain.num_obs == 6 and list(plain.obs_segments) == ["base_lin_vel", "commands", "last_actions"]
    assert slots.num_obs == 8 and slots.num_obs == _seg_size(slots.obs_segments)
    assert list(slots.obs_segments) == ["base_lin_vel", "commands", "last_actions", "mass", "friction"]
    assert slots.privileged_obs_segments == plain.privileged_obs_segments
    assert slots.num_privileged_obs == plain.num_privileged_obs == 8
    gen = torch.Generator().manual_seed(3)
    for _ in range(2 * plain.max_episode_length // 3):
        a = _actions(plain, gen)
        o1, r1, d1, e1 = plain.step(a)
        o2, r2, d2, e2 = slots.step(a)
        # identical dynamics and critic; the actor's extra slots are always zero
        assert torch.equal(o2[:, :6], o1) and torch.equal(r1, r2) and torch.equal(d1, d2)
        assert torch.equal(o2[:, 6:], torch.zeros(N, 2))
        assert torch.equal(e1["observations"]["critic"], e2["observations"]["critic"])
    state = slots.state_dict()
    assert state["obs_buf"].shape == (N, 8)
    other = VelocityTracking(num_envs=N, seed=0, actor_dynamics_slots=True)
    other.load_state_dict(state)
    a = _actions(slots, gen)
    assert torch.equal(other.step(a)[0], slots.step(a)[0])
