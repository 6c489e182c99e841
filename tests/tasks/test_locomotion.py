"""Tests of the MuJoCo legged-locomotion task (``quadruped_flat`` / ``quadruped_rough``)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("mujoco")
pytest.importorskip("mujoco.batch")

from st_rl.tasks import make_env  # noqa: E402
from st_rl.tasks.locomotion import DEFAULT_MODEL_PATH, LeggedLocomotion, quat_rotate_inverse  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")

OBS_NAMES = ["base_ang_vel", "projected_gravity", "commands", "dof_pos", "dof_vel", "last_actions"]
STANDING_Z = 0.278  # trunk height of the "home" keyframe
# Deterministic start in the standing pose, no observation noise, no pushes.
CALM = {
    "nthread": 1,
    "noise_level": 0.0,
    "max_push_vel_xy": 0.0,
    "init_base_vel": 0.0,
    "init_joint_scale_range": (1.0, 1.0),
}
ZERO_CMD = {"lin_vel_x": (0.0, 0.0), "lin_vel_y": (0.0, 0.0), "ang_vel_yaw": (0.0, 0.0)}
ALL_TERMS = tuple(LeggedLocomotion.DEFAULT_CFG["reward_scales"])


def _flat(num_envs: int = 4, seed: int = 0, **cfg) -> LeggedLocomotion:
    cfg.setdefault("nthread", 1)
    return make_env("quadruped_flat", num_envs, seed=seed, **cfg)


def _only(term: str, scale: float) -> dict[str, float]:
    return {t: (scale if t == term else 0.0) for t in ALL_TERMS}


def _segment(env, name: str, obs: torch.Tensor, critic: bool = False) -> torch.Tensor:
    segs = env.privileged_obs_segments if critic else env.obs_segments
    start = 0
    for key, shape in segs.items():
        size = math.prod(shape)
        if key == name:
            return obs[:, start : start + size]
        start += size
    raise KeyError(name)


def _zeros(env) -> torch.Tensor:
    return torch.zeros(env.num_envs, env.num_actions)


def _yaw(env) -> torch.Tensor:
    q = env._qpos[:, 3:7]
    return torch.atan2(2 * (q[:, 0] * q[:, 3] + q[:, 1] * q[:, 2]), 1 - 2 * (q[:, 2] ** 2 + q[:, 3] ** 2))


# ---------------------------------------------------------------------------------------------- 1. contract
def test_contract_flat():
    n = 6
    env = make_env("quadruped_flat", n, device="cpu", seed=0, nthread=1)
    assert isinstance(env, LeggedLocomotion)
    assert env.device == torch.device("cpu")
    assert env.num_actions == 12 and env.num_feet == 4 and env.decimation == 5
    assert env.num_obs == 45 and env.num_privileged_obs == 54
    assert list(env.obs_segments) == OBS_NAMES
    assert list(env.privileged_obs_segments) == [
        "base_lin_vel",
        *OBS_NAMES,
        "friction",
        "added_mass",
        "foot_contact",
    ]
    assert sum(math.prod(s) for s in env.obs_segments.values()) == env.num_obs
    assert sum(math.prod(s) for s in env.privileged_obs_segments.values()) == env.num_privileged_obs
    assert env.privileged_obs_segments["foot_contact"] == (4,)

    def check(obs, extras):
        assert obs.shape == (n, 45) and obs.dtype == torch.float32 and obs.device.type == "cpu"
        critic = extras["observations"]["critic"]
        assert critic.shape == (n, 54) and critic.dtype == torch.float32
        assert extras["observations"]["policy"] is obs
        assert torch.isfinite(obs).all() and torch.isfinite(critic).all()

    check(*env.get_observations())
    check(*env.reset())
    gen = torch.Generator().manual_seed(0)
    obs, rew, dones, extras = env.step(torch.rand(n, 12, generator=gen) - 0.5)
    check(obs, extras)
    assert rew.shape == (n,) and rew.dtype == torch.float32 and torch.isfinite(rew).all()
    assert dones.shape == (n,) and dones.dtype == torch.bool
    assert extras["time_outs"].shape == (n,) and extras["time_outs"].dtype == torch.bool
    expected = (
        {f"Episode_Reward/{t}" for t in ALL_TERMS if t != "trot"}  # trot: scale 0 by default, skipped
        | {f"Episode_Termination/{t}" for t in ("time_out", "trunk_contact", "tilt", "base_height")}
        | {"Metrics/tracking_error", "Metrics/CoT"}
    )
    assert set(extras["log"]) == expected
    assert all(v.dim() == 0 and torch.isfinite(v) for v in extras["log"].values())


def test_device_argument_is_forced_to_cpu():
    env = make_env("quadruped_flat", 2, device="cuda:0", seed=0, nthread=1)
    assert env.device == torch.device("cpu")
    obs, *_ = env.step(_zeros(env))
    assert obs.device.type == "cpu"


def test_contract_rough_height_scan():
    env = make_env("quadruped_rough", 4, seed=0, nthread=1)
    assert env.obs_segments["height_measurements"] == (1, 7, 5)
    assert env.privileged_obs_segments["height_measurements"] == (1, 7, 5)
    assert list(env.obs_segments)[-1] == "height_measurements"
    assert list(env.privileged_obs_segments)[-4:] == [
        "height_measurements",
        "friction",
        "added_mass",
        "foot_contact",
    ]
    assert env.num_obs == 45 + 35 and env.num_privileged_obs == 54 + 35
    for _ in range(3):
        obs, rew, _, extras = env.step(_zeros(env))
    critic = extras["observations"]["critic"]
    assert obs.shape == (4, 80) and critic.shape == (4, 89)
    for o, crit in ((obs, False), (critic, True)):
        scan = _segment(env, "height_measurements", o, critic=crit)
        assert torch.isfinite(scan).all() and (scan.abs() <= 1.0).all()
    assert torch.isfinite(rew).all()


def test_rough_ground_height_matches_mujoco_heightfield():
    """The task's terrain height (used for the base-height failure and the scan) is MuJoCo's height field."""
    import mujoco
    import numpy as np

    env = make_env("quadruped_rough", 1, seed=3, nthread=1)
    assert env.height_map.max() > 0.03  # really rough away from the spawn patch
    data = mujoco.MjData(env.model)
    mujoco.mj_forward(env.model, data)
    geomid = np.zeros(1, dtype=np.int32)
    # grid vertices (exact) and points between them (MuJoCo triangles vs bilinear: small difference)
    points = [
        (-8 + c * 0.1, -8 + r * 0.1, 1e-5) for r, c in ((10, 20), (100, 37), (50, 140), (150, 150), (30, 90))
    ]
    points += [(3.03, -2.47, 3e-3), (-5.55, 4.12, 3e-3)]
    for x, y, tol in points:
        dist = mujoco.mj_ray(
            env.model, data, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid
        )
        assert dist > 0
        ours = float(env._ground_height(torch.tensor([[x, y]], dtype=torch.float32))[0])
        assert ours == pytest.approx(1.0 - dist, abs=tol), (x, y)


def test_state_views_match_mujoco():
    """Base velocities and projected gravity agree with MuJoCo's own body velocity and orientation."""
    import mujoco
    import numpy as np

    env = _flat(3, seed=2, nthread=1, init_base_vel=1.0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        env.step(_actions(gen, 3))
    lin, ang, grav = env.base_lin_vel, env.base_ang_vel, env.projected_gravity
    for i in range(3):
        model = env.batch.get_model(i)
        data = env.batch.get_data(i)
        mujoco.mj_forward(model, data)
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, env.base_body, vel, 1)
        rot = data.xmat[env.base_body].reshape(3, 3)
        assert torch.allclose(ang[i], torch.as_tensor(vel[:3], dtype=torch.float32), atol=1e-5)
        assert torch.allclose(lin[i], torch.as_tensor(vel[3:], dtype=torch.float32), atol=1e-5)
        assert torch.allclose(
            grav[i], torch.as_tensor(rot.T @ np.array([0.0, 0.0, -1.0]), dtype=torch.float32), atol=1e-5
        )
    assert lin.abs().max() > 0.05 and ang.abs().max() > 0.05  # not a trivial comparison


def test_obs_segments_are_scaled_state():
    env = _flat(3, seed=1, nthread=1, noise_level=0.0, init_base_vel=1.0)
    gen = torch.Generator().manual_seed(0)
    a = _actions(gen, 3)
    obs, _, dones, extras = env.step(a)
    assert not dones.any()
    critic = extras["observations"]["critic"]
    expected = {
        "base_ang_vel": env.base_ang_vel * 0.25,
        "projected_gravity": env.projected_gravity,
        "commands": env.commands * torch.tensor([2.0, 2.0, 0.25]),
        "dof_pos": env.dof_pos - env.default_joint_pos,
        "dof_vel": env.dof_vel * 0.05,
        "last_actions": a,
    }
    for name, value in expected.items():
        assert torch.allclose(_segment(env, name, obs), value, atol=1e-6), name
        assert torch.allclose(_segment(env, name, critic, critic=True), value, atol=1e-6), name
    assert torch.allclose(
        _segment(env, "base_lin_vel", critic, critic=True), env.base_lin_vel * 2.0, atol=1e-6
    )
    assert torch.equal(env.default_joint_pos, torch.tensor([0.1, 0.9, -1.8, -0.1, 0.9, -1.8] * 2))


@pytest.mark.parametrize("level", [1.0, 0.5])
def test_observation_noise_bounds(level):
    env = _flat(32, seed=0, nthread=1, noise_level=level)
    obs, *_ = env.step(_zeros(env))
    clean = env.critic_obs_buf[:, 3:48]  # the critic holds the noise-free actor observation
    bounds = {
        "base_ang_vel": 0.2 * 0.25,
        "projected_gravity": 0.05,
        "commands": 0.0,
        "dof_pos": 0.01,
        "dof_vel": 1.5 * 0.05,
        "last_actions": 0.0,
    }
    start = 0
    for name, bound in bounds.items():
        size = math.prod(env.obs_segments[name])
        noise = (obs - clean)[:, start : start + size].abs()
        assert noise.max() <= bound * level + 1e-6, name
        if bound > 0:
            assert noise.max() > 0.7 * bound * level, name  # uniform noise reaches near its bound
        start += size


def test_rough_height_scan_matches_mujoco_rays():
    """``height_measurements`` (1, 7, 5) = base z - 0.3 - ground under scan points in the base's yaw frame."""
    import mujoco
    import numpy as np

    env = make_env("quadruped_rough", 2, seed=5, nthread=1, noise_level=0.0)
    # move the robots onto rough ground through the state API (which refreshes the derived state)
    state = env.state_dict()
    qpos = state["mj_qpos"]
    qpos[:, 0:2] = torch.tensor([[3.0, -2.0], [-4.2, 1.7]], dtype=torch.float64)
    qpos[:, 2] = 0.3
    yaw = torch.tensor([0.6, -2.0], dtype=torch.float64)
    qpos[:, 3:7] = torch.stack([torch.cos(yaw / 2), 0 * yaw, 0 * yaw, torch.sin(yaw / 2)], dim=1)
    env.load_state_dict(state)
    env._compute_observations()
    scan = _segment(env, "height_measurements", env.obs_buf).reshape(2, 7, 5)
    data = mujoco.MjData(env.model)
    mujoco.mj_forward(env.model, data)
    geomid = np.zeros(1, dtype=np.int32)
    xs, ys = np.linspace(-0.6, 0.6, 7), np.linspace(-0.4, 0.4, 5)
    for i in range(2):
        bx, by, c, s = float(env._qpos[i, 0]), float(env._qpos[i, 1]), math.cos(yaw[i]), math.sin(yaw[i])
        for ix, px in enumerate(xs):
            for iy, py in enumerate(ys):
                wx, wy = bx + c * px - s * py, by + s * px + c * py
                dist = mujoco.mj_ray(
                    env.model, data, np.array([wx, wy, 1.0]), np.array([0, 0, -1.0]), None, 1, -1, geomid
                )
                assert float(scan[i, ix, iy]) == pytest.approx(0.3 - 0.3 - (1.0 - dist), abs=3e-3), (
                    i,
                    ix,
                    iy,
                )
    assert scan.std() > 0.005  # the terrain under the scan is really uneven


def test_initial_state_randomisation():
    env = _flat(32, seed=0, nthread=1)  # default init_joint_scale_range (0.8, 1.2), init_base_vel 0.3
    ratio = env.dof_pos / env.default_joint_pos
    assert ((ratio >= 0.8 - 1e-6) & (ratio <= 1.2 + 1e-6)).all() and ratio.std() > 0.05
    v = env._qvel[:, 0:6].abs()
    bounds = torch.tensor([0.3, 0.3, 0.06, 0.15, 0.15, 0.15], dtype=torch.float64)
    assert (v <= bounds + 1e-9).all() and (v.amax(0) > 0.5 * bounds).all()
    yaw = _yaw(env)
    assert yaw.min() < -1.5 and yaw.max() > 1.5  # random headings
    assert torch.allclose(env._qpos[:, 2], torch.full((32,), STANDING_Z, dtype=torch.float64))
    assert (env.projected_gravity[:, 2] < -0.999).all()  # upright


def test_nan_and_out_of_range_actions():
    envs = [_flat(2, seed=4, nthread=1) for _ in range(4)]
    a = torch.full((2, 12), 10.0)
    outs = [
        envs[0].step(torch.full((2, 12), float("nan")))[0],
        envs[1].step(_zeros(envs[1]))[0],
        envs[2].step(torch.full((2, 12), 1e3))[0],
        envs[3].step(a)[0],
    ]
    assert torch.equal(outs[0], outs[1])  # NaN -> 0
    assert torch.equal(outs[2], outs[3])  # clipped to clip_actions = 10
    assert (envs[2].actions == 10.0).all()


# --------------------------------------------------------------------------------------- 2. physics sanity
def test_zero_actions_stand_for_five_seconds():
    env = _flat(4, **CALM, **ZERO_CMD)
    steps = int(round(5.0 / env.dt))
    for _ in range(steps):
        obs, _, dones, _ = env.step(_zeros(env))
        assert not dones.any()
        z = env._qpos[:, 2]
        assert ((z > 0.22) & (z < 0.30)).all(), z
        assert (env.projected_gravity[:, 2] < -0.95).all()
        assert (_segment(env, "projected_gravity", obs)[:, 2] < -0.95).all()
    assert env.foot_contact.all()
    assert not env.trunk_contact.any()
    critic = env.get_observations()[1]["observations"]["critic"]
    assert (_segment(env, "foot_contact", critic, critic=True) == 1.0).all()
    assert int(env.episode_length_buf[0]) == steps


def test_feet_in_the_air_have_no_contact():
    env = _flat(2, **CALM)
    env._qpos[:, 2] = 1.0
    env.step(_zeros(env))
    assert not env.foot_contact.any()
    assert not env.trunk_contact.any()


def test_large_sideways_push_makes_it_fall():
    env = _flat(4, **CALM, **ZERO_CMD)
    for _ in range(25):
        env.step(_zeros(env))
    yaw = _yaw(env)
    env._qvel[:, 0] = -torch.sin(yaw) * 4.5  # 4.5 m/s along the base's y axis
    env._qvel[:, 1] = torch.cos(yaw) * 4.5
    in_base = quat_rotate_inverse(env._qpos[:, 3:7].float(), env._qvel[:, 0:3].float())
    assert torch.allclose(in_base[:, :2], torch.tensor([0.0, 4.5]).expand(4, 2), atol=0.1)
    failed = torch.zeros(4, dtype=torch.bool)
    for _ in range(int(2.0 / env.dt)):
        _, _, dones, extras = env.step(_zeros(env))
        assert not (dones & extras["time_outs"]).any()
        failed |= dones & ~extras["time_outs"]
        if failed.all():
            break
    assert failed.all()


def _step_from(env, quat, z):
    env._qpos[:, 3:7] = torch.tensor(quat, dtype=torch.float64)
    env._qpos[:, 2] = z
    return env.step(_zeros(env))


def test_upside_down_terminates_on_next_step_with_termination_penalty():
    env = _flat(3, **CALM, reward_scales=_only("termination", -10.0))
    _, rew, dones, extras = _step_from(env, (0.0, 1.0, 0.0, 0.0), 0.4)
    assert dones.all() and not extras["time_outs"].any()
    log = extras["log"]
    assert float(log["Episode_Termination/tilt"]) == 1.0
    assert float(log["Episode_Termination/time_out"]) == 0.0
    assert torch.allclose(rew, torch.full((3,), -10.0), atol=1e-4)
    assert (env.episode_length_buf == 0).all()
    assert (env.projected_gravity[:, 2] < -0.99).all()  # auto-reset upright


def test_trunk_on_ground_terminates():
    env = _flat(3, **CALM)
    _, _, dones, extras = _step_from(env, (0.0, 1.0, 0.0, 0.0), 0.055)  # upside down, lying on its back
    assert dones.all() and not extras["time_outs"].any()
    log = extras["log"]
    for cause in ("trunk_contact", "tilt", "base_height"):
        assert float(log[f"Episode_Termination/{cause}"]) == 1.0, cause


def test_trunk_contact_termination_can_be_disabled():
    env = _flat(2, **CALM, terminate_on_trunk_contact=False, max_tilt_rad=math.pi, min_base_height=0.0)
    _, _, dones, _ = _step_from(env, (0.0, 1.0, 0.0, 0.0), 0.055)
    assert env.trunk_contact.all()  # touching, but not a failure
    assert not dones.any()


def test_low_base_height_terminates():
    env = _flat(2, **CALM, min_base_height=0.35)  # standing (0.278 m) counts as fallen
    _, _, dones, extras = env.step(_zeros(env))
    assert dones.all() and not extras["time_outs"].any()
    log = extras["log"]
    assert float(log["Episode_Termination/base_height"]) == 1.0
    assert float(log["Episode_Termination/tilt"]) == 0.0
    assert float(log["Episode_Termination/trunk_contact"]) == 0.0


# -------------------------------------------------------------------------------- 3. auto-reset, time-outs
def test_time_out_auto_reset():
    env = _flat(4, **CALM)
    for _ in range(5):
        env.step(torch.full((4, 12), 0.3))
    env.episode_length_buf = torch.full((4,), env.max_episode_length - 1)
    obs, _, dones, extras = env.step(torch.full((4, 12), 0.5))
    assert dones.all() and extras["time_outs"].all()
    assert float(extras["log"]["Episode_Termination/time_out"]) == 1.0
    assert (env.episode_length_buf == 0).all()
    assert torch.allclose(env._qpos[:, 2], torch.full((4,), STANDING_Z, dtype=torch.float64), atol=0.01)
    assert (_segment(env, "last_actions", obs) == 0).all()
    assert (env.actions == 0).all() and (env.last_actions == 0).all()
    # obs describe the new episode's first state: the standing pose at rest
    assert torch.allclose(_segment(env, "dof_pos", obs), torch.zeros(4, 12), atol=1e-6)
    assert torch.allclose(_segment(env, "dof_vel", obs), torch.zeros(4, 12), atol=1e-6)
    assert torch.allclose(_segment(env, "projected_gravity", obs), torch.tensor([0.0, 0.0, -1.0]), atol=1e-6)


def test_failure_on_the_time_out_step_is_not_a_time_out():
    env = _flat(2, **CALM)
    env.episode_length_buf = torch.full((2,), env.max_episode_length - 1)
    _, _, dones, extras = _step_from(env, (0.0, 1.0, 0.0, 0.0), 0.4)
    assert dones.all() and not extras["time_outs"].any()
    assert float(extras["log"]["Episode_Termination/time_out"]) == 0.0
    assert float(extras["log"]["Episode_Termination/tilt"]) == 1.0


def test_time_out_resets_only_that_env():
    env = _flat(4, **CALM)
    for _ in range(3):
        env.step(_zeros(env))
    buf = env.episode_length_buf.clone()
    buf[1] = env.max_episode_length - 1
    env.episode_length_buf = buf
    _, _, dones, extras = env.step(_zeros(env))
    assert dones.tolist() == [False, True, False, False]
    assert extras["time_outs"].tolist() == [False, True, False, False]
    assert env.episode_length_buf.tolist() == [4, 0, 4, 4]


# ------------------------------------------------------------------------------------------- 4. commands
def test_commands_in_range_and_resampled_periodically():
    ranges = {"lin_vel_x": (0.2, 0.7), "lin_vel_y": (-0.3, -0.1), "ang_vel_yaw": (0.4, 0.9)}
    env = _flat(8, **CALM, **ranges, zero_command_prob=0.0, resampling_time_s=0.1)  # every 5 steps
    lo = torch.tensor([r[0] for r in ranges.values()])
    hi = torch.tensor([r[1] for r in ranges.values()])

    def in_range(cmd):
        return ((cmd >= lo) & (cmd <= hi)).all()

    assert in_range(env.commands)
    assert env.commands.unique(dim=0).shape[0] == 8  # sampled per env
    prev = env.commands.clone()
    for step in range(1, 13):
        obs, _, dones, _ = env.step(_zeros(env))
        assert not dones.any()
        changed = (env.commands != prev).any(dim=1)
        if step % 5 == 0:
            assert changed.all(), step
        else:
            assert not changed.any(), step
        assert in_range(env.commands)
        assert torch.allclose(_segment(env, "commands", obs), env.commands * torch.tensor([2.0, 2.0, 0.25]))
        prev = env.commands.clone()


def test_zero_command_probability():
    env = _flat(16, **CALM, zero_command_prob=1.0)
    assert (env.commands == 0).all()


def test_command_obs_is_noise_free_even_with_noise():
    env = _flat(4, nthread=1, noise_level=1.0)
    obs, *_ = env.step(_zeros(env))
    assert torch.allclose(_segment(env, "commands", obs), env.commands * torch.tensor([2.0, 2.0, 0.25]))
    clean = _segment(env, "dof_pos", env.critic_obs_buf, critic=True)
    assert not torch.allclose(_segment(env, "dof_pos", obs), clean)  # the other parts are noisy


# ------------------------------------------------------------------------------------------ 5. rewards
def test_tracking_lin_vel_reward_at_rest_is_scale_times_dt():
    env = _flat(4, **CALM, **ZERO_CMD, reward_scales=_only("tracking_lin_vel", 1.5))
    assert env.reward_terms == ("tracking_lin_vel",)
    for _ in range(25):
        _, rew, _, _ = env.step(_zeros(env))
    assert torch.allclose(rew, torch.full((4,), 1.5 * env.dt), rtol=0.02)
    # exact kernel from the state
    expected = (
        1.5 * torch.exp(-(env.commands[:, :2] - env.base_lin_vel[:, :2]).square().sum(1) / 0.25) * env.dt
    )
    assert torch.allclose(rew, expected, rtol=1e-5, atol=1e-7)


def test_tracking_lin_vel_reward_with_nonzero_command():
    env = _flat(
        4, **CALM, lin_vel_x=(0.5, 1.0), zero_command_prob=0.0, reward_scales=_only("tracking_lin_vel", 2.0)
    )
    _, rew, _, _ = env.step(_zeros(env))
    expected = (
        2.0 * torch.exp(-(env.commands[:, :2] - env.base_lin_vel[:, :2]).square().sum(1) / 0.25) * env.dt
    )
    assert torch.allclose(rew, expected, rtol=1e-5, atol=1e-7)
    assert (rew < 2.0 * env.dt * 0.6).all()  # standing still while asked to walk >= 0.5 m/s


KERNELS = {
    "tracking_ang_vel": lambda env, prev: torch.exp(
        -(env.commands[:, 2] - env.base_ang_vel[:, 2]).square() / 0.25
    ),
    "lin_vel_z": lambda env, prev: env.base_lin_vel[:, 2].square(),
    "ang_vel_xy": lambda env, prev: env.base_ang_vel[:, :2].square().sum(1),
    "orientation": lambda env, prev: env.projected_gravity[:, :2].square().sum(1),
    "torques": lambda env, prev: env._act_force.float().square().sum(1),
    "dof_acc": lambda env, prev: ((env.dof_vel - prev) / env.dt).square().sum(1),
}


@pytest.mark.parametrize("term", sorted(KERNELS))
def test_reward_term_kernels(term):
    scale = 0.7
    env = _flat(3, seed=1, nthread=1, noise_level=0.0, init_base_vel=1.0, reward_scales=_only(term, scale))
    assert env.reward_terms == (term,)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        prev = env.dof_vel.clone()
        _, rew, dones, _ = env.step(_actions(gen, 3))
        assert not dones.any()
        kernel = KERNELS[term](env, prev)
        assert torch.allclose(rew, scale * kernel * env.dt, rtol=1e-4, atol=1e-8)
    assert (kernel.abs() > 1e-6).all()


def test_action_rate_reward():
    scale = -0.01
    env = _flat(4, **CALM, reward_scales=_only("action_rate", scale))
    gen = torch.Generator().manual_seed(1)
    a = (torch.rand(4, 12, generator=gen) - 0.5) * 0.4
    b = (torch.rand(4, 12, generator=gen) - 0.5) * 0.4
    _, rew_a, _, _ = env.step(a)
    assert torch.allclose(
        rew_a, scale * a.square().sum(1) * env.dt, rtol=1e-5
    )  # last actions are 0 after reset
    _, rew_b, _, _ = env.step(b)
    assert torch.allclose(rew_b, scale * (b - a).square().sum(1) * env.dt, rtol=1e-5)


def test_feet_air_time_reward_on_landing():
    """Dropped from 0.2 m above standing while commanded to walk: each foot's first touchdown pays
    (flight time before the landing step - target); nothing while a foot stays down or in the air."""
    target = 0.3
    env = _flat(
        2, **CALM, lin_vel_x=(0.5, 0.5), zero_command_prob=0.0, reward_scales=_only("feet_air_time", 1.0)
    )
    env._qpos[:, 2] += 0.2
    air = torch.zeros(2, 4)
    last = torch.zeros(2, 4, dtype=torch.bool)
    paid = False
    for _ in range(30):
        _, rew, dones, _ = env.step(_zeros(env))
        assert not dones.any()
        contact = env.foot_contact.clone()
        first = (air > 0) & (contact | last)
        expected = ((air - target) * first).sum(1) * env.dt
        assert torch.allclose(rew, expected, atol=1e-7)
        paid |= bool(first.any())
        air = torch.where(contact | last, 0.0, air + env.dt)
        last = contact
    assert paid
    # without a walking command the bonus is off
    env = _flat(2, **CALM, **ZERO_CMD, reward_scales=_only("feet_air_time", 1.0))
    env._qpos[:, 2] += 0.2
    rewards = torch.stack([env.step(_zeros(env))[1] for _ in range(20)])
    assert (rewards == 0).all()


def test_episode_reward_log_is_episode_sum_per_second():
    env = _flat(4, **CALM, episode_length_s=0.2, reward_scales=_only("tracking_lin_vel", 1.5))
    assert env.max_episode_length == 10
    total = torch.zeros(4)
    for step in range(10):
        _, rew, dones, extras = env.step(_zeros(env))
        total += rew
        assert bool(dones.all()) == (step == 9)
    log = extras["log"]
    assert float(log["Episode_Reward/tracking_lin_vel"]) == pytest.approx(float(total.mean()) / 0.2, rel=1e-5)
    assert float(log["Episode_Termination/time_out"]) == 1.0
    # the log repeats the last finished episodes' values on steps where none finished
    _, _, dones, extras = env.step(_zeros(env))
    assert not dones.any()
    assert float(extras["log"]["Episode_Reward/tracking_lin_vel"]) == float(
        log["Episode_Reward/tracking_lin_vel"]
    )


def test_zero_scale_terms_are_removed():
    scales = {"torques": 0.0, "dof_acc": 0, "feet_air_time": 0.0}
    env = _flat(2, reward_scales=scales)
    off_by_default = {t for t, v in LeggedLocomotion.DEFAULT_CFG["reward_scales"].items() if v == 0}  # trot
    assert env.reward_terms == tuple(t for t in ALL_TERMS if t not in scales and t not in off_by_default)
    _, _, _, extras = env.step(_zeros(env))
    logged = {k.split("/", 1)[1] for k in extras["log"] if k.startswith("Episode_Reward/")}
    assert logged == set(env.reward_terms)
    assert env.reward_scales["tracking_lin_vel"] == 1.5  # unspecified terms keep their defaults


def test_unknown_reward_term_and_cfg_key_raise():
    with pytest.raises(TypeError, match="unknown reward terms"):
        _flat(1, reward_scales={"tracking_lin_vell": 1.0})
    with pytest.raises(TypeError, match="unknown config option"):
        _flat(1, episode_length=5.0)


def test_invalid_terrain_and_dt_raise():
    with pytest.raises(ValueError, match="terrain"):
        LeggedLocomotion(1, seed=0, nthread=1, terrain="stairs")
    with pytest.raises(ValueError, match="multiple of the model timestep"):
        _flat(1, dt=0.03)


# ------------------------------------------------------------------------------- 6. domain randomisation
def test_friction_and_added_mass_randomisation():
    fr, am = (0.5, 1.0), (-0.5, 1.5)
    env = _flat(16, nthread=1, friction_range=fr, added_mass_range=am)
    f, m = env.friction_coef, env.added_mass
    assert ((f >= fr[0]) & (f <= fr[1])).all() and ((m >= am[0]) & (m <= am[1])).all()
    assert f.unique().numel() == 16 and m.unique().numel() == 16
    critic = env.get_observations()[1]["observations"]["critic"]
    assert torch.equal(_segment(env, "friction", critic, critic=True)[:, 0], f)
    assert torch.equal(_segment(env, "added_mass", critic, critic=True)[:, 0], m)
    for g in env.foot_geoms:
        assert torch.allclose(env._friction[:, g, 0], f.double())
    assert torch.allclose(env._body_mass[:, env.base_body], env.nominal_trunk_mass + m.double())
    assert env.nominal_trunk_mass == pytest.approx(5.204)
    # a reset re-randomises only the env that finished
    buf = env.episode_length_buf.clone()
    buf[2] = env.max_episode_length - 1
    env.episode_length_buf = buf
    env.step(_zeros(env))
    changed = env.friction_coef != f
    assert changed.tolist() == [i == 2 for i in range(16)]
    assert env._friction[2, env.foot_geoms[0], 0] == pytest.approx(float(env.friction_coef[2]))
    assert env._body_mass[2, env.base_body] == pytest.approx(
        env.nominal_trunk_mass + float(env.added_mass[2])
    )


def _stand_height(added_mass: float) -> torch.Tensor:
    env = _flat(2, **CALM, **ZERO_CMD, added_mass_range=(added_mass, added_mass))
    for _ in range(40):
        env.step(_zeros(env))
    return env._qpos[:, 2]


def _slide_speed(friction: float) -> torch.Tensor:
    env = _flat(4, **CALM, **ZERO_CMD, friction_range=(friction, friction))
    for _ in range(25):
        env.step(_zeros(env))
    env._qvel[:, 0] += 1.0
    for _ in range(15):
        env.step(_zeros(env))
    return env._qvel[:, 0:2].norm(dim=1)


def test_randomised_dynamics_reach_the_simulation():
    assert (_stand_height(3.0) < _stand_height(-1.0) - 0.01).all()  # a heavier trunk sags on its servos
    assert _slide_speed(0.1).mean() > _slide_speed(1.2).mean() + 0.2  # slippery feet keep sliding


def test_pushes_kick_the_base_velocity():
    common = {k: v for k, v in CALM.items() if k != "max_push_vel_xy"}
    quiet = _flat(4, **common, **ZERO_CMD)
    pushed = _flat(4, **common, **ZERO_CMD, max_push_vel_xy=1.0, push_interval_s=0.1)  # every 5 steps
    for step in range(1, 6):
        quiet.step(_zeros(quiet))
        pushed.step(_zeros(pushed))
        kick = pushed._qvel[:, 0:2] - quiet._qvel[:, 0:2]
        if step < 5:
            assert torch.equal(pushed._qvel, quiet._qvel), step
    assert (kick.abs() <= 1.0 + 1e-6).all()
    assert (kick.norm(dim=1) > 1e-3).all()
    assert torch.equal(pushed._qvel[:, 2:], quiet._qvel[:, 2:])  # only the horizontal base velocity


# ------------------------------------------------------------------------------------------- 7. metrics
def test_metrics_shapes_and_zero_command_tracking():
    env = _flat(4, **CALM, **ZERO_CMD)
    for _ in range(int(2.0 / env.dt)):
        env.step(_zeros(env))
    err, cot = env.tracking_error, env.CoT
    for t in (err, cot):
        assert t.shape == (4,) and torch.isfinite(t).all() and (t >= 0).all()
    assert (err < 0.1).all(), err


def test_metrics_match_hand_computation():
    env = _flat(
        4, **CALM, lin_vel_x=(1.0, 1.0), lin_vel_y=(0.0, 0.0), zero_command_prob=0.0, metric_warmup_s=0.1
    )
    assert env._warmup_steps == 5
    err_sq, power, speed = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    for step in range(1, 11):
        env.step(_zeros(env))
        v = env.base_lin_vel[:, :2]
        err_sq += (env.commands[:, :2] - v).square().sum(1)
        power += (env._act_force.float() * env.dof_vel).abs().sum(1)
        speed += v.norm(dim=1)
        if step < 5:  # within the warm-up: the last finished episode's value (none yet)
            assert (env.tracking_error == 0).all() and (env.CoT == 0).all()
    rmsd = torch.sqrt(err_sq / 10)
    assert torch.allclose(env.tracking_error, rmsd, rtol=1e-5)
    assert (rmsd > 0.9).all()  # standing still while asked for 1 m/s
    assert torch.allclose(env.CoT, power / ((env.total_mass + env.added_mass) * 9.81 * speed), rtol=1e-4)
    assert env.total_mass == pytest.approx(12.744, abs=0.01)
    # at a reset the finished episode's values are kept and logged
    env.episode_length_buf = torch.full((4,), env.max_episode_length - 1)
    _, _, dones, extras = env.step(_zeros(env))
    assert dones.all()
    assert (env.tracking_error > 0.9).all()
    assert float(extras["log"]["Metrics/tracking_error"]) == pytest.approx(float(env.tracking_error.mean()))
    assert float(extras["log"]["Metrics/CoT"]) == pytest.approx(float(env.CoT.mean()))


# ---------------------------------------------------------------------------------- 8. determinism, state
def _actions(gen: torch.Generator, n: int) -> torch.Tensor:
    return (torch.rand(n, 12, generator=gen) * 2 - 1) * 0.5


def test_same_seed_same_trajectory():
    envs = [_flat(4, seed=7, push_interval_s=0.2) for _ in range(2)]
    other = _flat(4, seed=8, push_interval_s=0.2)
    gen = torch.Generator().manual_seed(0)
    assert not torch.equal(envs[0].obs_buf, other.obs_buf)
    for _ in range(20):
        a = _actions(gen, 4)
        (o1, r1, d1, _), (o2, r2, d2, _) = (e.step(a) for e in envs)
        assert torch.equal(o1, o2) and torch.equal(r1, r2) and torch.equal(d1, d2)


def test_thread_count_does_not_change_results():
    envs = [_flat(4, seed=3, nthread=k) for k in (1, 2)]
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        a = _actions(gen, 4)
        (o1, r1, _, _), (o2, r2, _, _) = (e.step(a) for e in envs)
        assert torch.equal(o1, o2) and torch.equal(r1, r2)


def _rollout(env, actions):
    out = []
    for a in actions:
        obs, rew, dones, extras = env.step(a)
        out.append((obs.clone(), extras["observations"]["critic"].clone(), rew.clone(), dones.clone()))
    return out


def test_state_dict_round_trip():
    cfg = {"push_interval_s": 0.1}  # noise, pushes and randomisation on
    env = _flat(4, seed=0, **cfg)
    gen = torch.Generator().manual_seed(3)
    for a in [_actions(gen, 4) for _ in range(5)]:
        env.step(a)
    buf = env.episode_length_buf.clone()
    buf[0] = env.max_episode_length - 3  # one env resets (and is re-randomised) during the replay
    env.episode_length_buf = buf
    state = env.state_dict()
    actions = [_actions(gen, 4) for _ in range(10)]
    first = _rollout(env, actions)
    assert first[2][3][0]  # env 0 timed out inside the window

    env.load_state_dict(state)
    second = _rollout(env, actions)
    # into a fresh env with another seed (other randomised friction / mass): a checkpoint resume
    fresh = _flat(4, seed=99, **cfg)
    fresh.load_state_dict(state)
    assert torch.equal(fresh._friction, state["mj_friction"]) and torch.equal(
        fresh._body_mass, state["mj_body_mass"]
    )
    third = _rollout(fresh, actions)
    for a, b, c in zip(first, second, third):
        for x, y, z in zip(a, b, c):
            assert torch.equal(x, y) and torch.equal(x, z)


def test_load_state_dict_rejects_mismatch():
    state = _flat(2, seed=0).state_dict()
    with pytest.raises(ValueError):
        _flat(3, seed=0).load_state_dict(state)
    incomplete = {k: v for k, v in state.items() if k != "mj_qpos"}
    with pytest.raises(ValueError, match="mj_qpos"):
        _flat(2, seed=0).load_state_dict(incomplete)


# -------------------------------------------------------------------------------------- 9. custom models
def test_custom_model_path(tmp_path):
    text = Path(DEFAULT_MODEL_PATH).read_text(encoding="utf-8")
    path = tmp_path / "robot.xml"
    path.write_text(text.replace('kp="35"', 'kp="50"'), encoding="utf-8")
    env = make_env("quadruped_flat", 2, seed=0, nthread=1, model_path=str(path))
    assert env.num_obs == 45 and (env.kp == 50.0).all()  # the copy was loaded, not the built-in file
    obs, rew, _, _ = env.step(_zeros(env))
    assert torch.isfinite(obs).all() and torch.isfinite(rew).all()


def test_model_without_touch_sensors_raises(tmp_path):
    text = Path(DEFAULT_MODEL_PATH).read_text(encoding="utf-8")
    stripped = re.sub(r"<sensor>.*?</sensor>", "", text, flags=re.S)
    assert stripped != text
    path = tmp_path / "no_sensors.xml"
    path.write_text(stripped, encoding="utf-8")
    with pytest.raises(ValueError, match="touch"):
        make_env("quadruped_flat", 1, seed=0, nthread=1, model_path=str(path))


def test_model_without_free_joint_raises(tmp_path):
    path = tmp_path / "pendulum.xml"
    path.write_text(
        """<mujoco>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom name="foot" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator><position joint="hinge" kp="10"/></actuator>
</mujoco>""",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="free joint"):
        make_env("quadruped_flat", 1, seed=0, nthread=1, model_path=str(path))


def test_missing_model_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        make_env("quadruped_flat", 1, seed=0, nthread=1, model_path=str(tmp_path / "nope.xml"))


# ---------------------------------------------------------------------------------------- 10. PPO runner
def test_one_ppo_iteration(small_cfg):
    from st_rl.runners import OnPolicyRunner

    small_cfg["num_steps_per_env"] = 8
    small_cfg["empirical_normalization"] = True
    # metric_warmup_s below the rollout length so the metrics are measured within the first iteration
    env = _flat(8, seed=0, metric_warmup_s=0.1)
    runner = OnPolicyRunner(env, small_cfg, log_dir=None, device="cpu")
    velrmsd, cot = runner.learn(1)
    for t in (velrmsd, cot):
        assert isinstance(t, torch.Tensor) and t.dim() == 0
        assert torch.isfinite(t) and t > 0
    assert float(velrmsd) == pytest.approx(float(env.tracking_error.mean()))
    assert runner.current_learning_iteration == 1


# ------------------------------------------------------------------------------- gait-shaping and feet (AMP)
def test_foot_positions_match_mujoco_kinematics():
    """``foot_pos_b`` (and the ``<foot>_pos_*_b`` style fields) equal MuJoCo's foot positions relative to the
    base, rotated into the base frame, after steps and after resets."""
    import mujoco

    env = _flat(3, seed=4, init_base_vel=1.0, amp_obs_frame_num=2)
    gen = torch.Generator().manual_seed(2)
    for _ in range(4):
        env.step(_actions(gen, 3))
    env._reset_envs(torch.tensor([False, True, False]))  # a freshly reset robot, too
    feet = env.foot_pos_b
    fields = [f"{foot}_pos_{a}_b" for foot in env.foot_names for a in "xyz"]
    assert torch.equal(env.style_features(fields), feet.reshape(3, -1))
    for i in range(3):
        model, data = env.batch.get_model(i), env.batch.get_data(i)
        mujoco.mj_kinematics(model, data)
        rot = data.xmat[env.base_body].reshape(3, 3)
        expected = (data.geom_xpos[env.foot_geoms] - data.xpos[env.base_body]) @ rot
        assert torch.allclose(feet[i], torch.as_tensor(expected, dtype=torch.float32), atol=1e-5)
    # standing: feet about 0.28 m below the base, front feet ahead, left feet at +y
    env = _flat(1, **CALM)
    home = env.foot_pos_b[0]
    assert torch.allclose(home[:, 2], torch.full((4,), -STANDING_Z), atol=0.03)
    front = torch.tensor(["F" in n[:2] for n in env.foot_names])
    left = torch.tensor([n[1] == "L" for n in env.foot_names])
    assert (home[front, 0] > 0.1).all() and (home[~front, 0] < -0.1).all()
    assert (home[left, 1] > 0.05).all() and (home[~left, 1] < -0.05).all()


def test_default_style_fields_include_base_velocities_and_feet():
    env = _flat(1)
    fields = env.default_style_fields()
    assert fields[:7] == ["root_pos_z", "root_vel_x_b", "root_vel_y_b", "root_vel_z_b",
                          "root_ang_vel_x_b", "root_ang_vel_y_b", "root_ang_vel_z_b"]  # fmt: skip
    assert fields[-12:] == [f"{f}_foot_pos_{a}_b" for f in ("FR", "FL", "RR", "RL") for a in "xyz"]
    assert len(fields) == 7 + 24 + 12


@pytest.mark.parametrize(
    ("contacts", "expected"),
    [
        ([1, 0, 0, 1], 1.0),  # FR + RL down, FL + RR in the air: trot
        ([0, 1, 1, 0], 1.0),  # the other diagonal
        ([1, 1, 1, 1], 0.0),  # standing
        ([0, 0, 0, 0], 0.0),  # flight
        ([1, 1, 0, 0], 0.0),  # bound (front pair together)
        ([1, 0, 1, 0], 0.0),  # pace (right side together)
        ([1, 0, 0, 0], 0.0),  # three feet up
    ],
)
def test_trot_reward_by_hand(contacts, expected):
    """The trot term pays ``scale`` (times dt in the step's reward) while commanded to move when diagonal feet (FR+RL, FL+RR) share a
    contact state that each side's two feet do not; nothing for other contact patterns or without command."""
    scale = 0.5
    env = _flat(2, **CALM, lin_vel_x=(0.5, 0.5), zero_command_prob=0.0, reward_scales=_only("trot", scale))
    assert env.foot_names == ["FR_foot", "FL_foot", "RR_foot", "RL_foot"]
    env.foot_contact = torch.tensor([contacts, contacts], dtype=torch.bool)
    rew = env._compute_rewards(_zeros(env))[:, 0]  # weight * kernel; step() multiplies by dt
    assert torch.allclose(rew, torch.full((2,), scale * expected))
    env.commands[:] = 0.0
    assert (env._compute_rewards(_zeros(env)) == 0).all()
