"""Left-right mirror functions of the MuJoCo quadruped tasks (``LeggedLocomotion.mirror_functions``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco.batch")

from st_rl.tasks import make_env  # noqa: E402
from st_rl.tasks.locomotion import DEFAULT_MODEL_PATH, LeggedLocomotion, SignedPermutation  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")

TASKS = ("quadruped_flat", "quadruped_rough")
# Tolerance of the physical check. The maps only permute and negate, and MuJoCo's arithmetic is
# sign-symmetric, so on flat ground the mirrored robots' observations come out bit for bit equal (measured
# deviation 0 over 12 steps); on rough ground the height scan's bilinear interpolation rounds differently at
# mirrored points in float32 (measured 2.6e-7 for heights ~0.05). 1e-5 leaves a 40x margin and is far below
# what a wrong rule gives: 4e-2 (scan columns not reversed), 0.5 (yaw command not negated), 1.4 (angular
# velocity mirrored as a polar vector), 7e-3 after one step with the unsymmetrised robot model.
ATOL = 1e-5


def _env(task: str, num_envs: int = 4, **cfg: Any) -> LeggedLocomotion:
    return make_env(task, num_envs, seed=0, nthread=1, **cfg)


def _offset(env: LeggedLocomotion, name: str, critic: bool = False) -> int:
    segments = env.privileged_obs_segments if critic else env.obs_segments
    assert segments is not None
    start = 0
    for key, shape in segments.items():
        if key == name:
            return start
        start += math.prod(shape)
    raise KeyError(name)


# ---------------------------------------------------------------------------------------------- (a) algebra
@pytest.mark.parametrize("task", TASKS)
def test_mirror_maps_are_shape_preserving_involutions(task):
    env = _env(task, amp_obs_frame_num=2)
    maps = env.mirror_functions()
    assert set(maps) == {"obs", "critic_obs", "actions", "ref_obs"}
    obs, extras = env.get_observations()
    groups = extras["observations"]
    samples = {
        "obs": obs,
        "critic_obs": groups["critic"],
        "actions": torch.randn(env.num_envs, env.num_actions),
        "ref_obs": groups["ref_obs"],  # (N, H, F): the map acts on the last dimension
    }
    gen = torch.Generator().manual_seed(0)
    for name, fn in maps.items():
        x = samples[name]
        y = fn(x)
        assert y.shape == x.shape and y.dtype == x.dtype
        assert torch.equal(fn(y), x)
        assert not torch.equal(y, x)  # not the identity on real data
        z = torch.randn(2, 3, x.shape[-1], generator=gen, dtype=torch.float64)  # any leading dims, any dtype
        assert fn(z).shape == z.shape and fn(z).dtype == torch.float64
        assert torch.equal(fn(fn(z)), z)
        with pytest.raises(ValueError, match="applied to shape"):
            fn(torch.zeros(3, x.shape[-1] + 1))
    assert maps["obs"].num_features == env.num_obs
    assert maps["critic_obs"].num_features == env.num_privileged_obs
    assert env.mirror_functions()["obs"] is maps["obs"]  # built once, cached


def test_mirror_constants_follow_the_input_device():
    fn = _env("quadruped_flat", 2).mirror_functions()["obs"]
    x = torch.empty(5, fn.num_features, device="meta")
    assert fn(x).device.type == "meta" and fn(x).shape == x.shape
    assert fn.index.device.type == "cpu"  # the task's own constants stay where they were made


def test_signed_permutation_rejects_non_involutions():
    with pytest.raises(ValueError, match="involution"):
        SignedPermutation([1, 2, 0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="involution"):
        SignedPermutation([1, 0], [1.0, -1.0])
    with pytest.raises(ValueError, match="permutation"):
        SignedPermutation([0, 0], [1.0, 1.0])


# ---------------------------------------------------------------------------------------------- (c) by hand
def test_hand_checked_components():
    env = _env("quadruped_rough")
    maps = env.mirror_functions()
    names = env.joint_names
    assert names[:6] == ["FR_hip_joint", "FR_thigh_joint", "FR_calf_joint", "FL_hip_joint", "FL_thigh_joint",
                         "FL_calf_joint"]  # fmt: skip
    fr_hip, fr_thigh, fl_hip, fl_thigh = 0, 1, 3, 4
    rr_calf, rl_calf = names.index("RR_calf_joint"), names.index("RL_calf_joint")

    obs = torch.zeros(1, env.num_obs)
    obs[0, 0:3] = torch.tensor([0.1, 0.2, 0.3])  # angular velocity: axial vector
    obs[0, 3:6] = torch.tensor([0.1, 0.2, -0.97])  # gravity: polar vector
    obs[0, 6:9] = torch.tensor([1.0, 0.6, -0.25])  # command (vx, vy, yaw rate), scaled
    dof = _offset(env, "dof_pos")
    obs[0, dof + fr_hip] = 0.3  # right front abduction outwards ...
    obs[0, dof + fr_thigh] = 0.4
    scan = _offset(env, "height_measurements")
    nx, ny = env.obs_segments["height_measurements"][1:]
    obs[0, scan + 2 * ny + 0] = 0.05  # scan point (ix=2, iy=0): the rightmost column
    m = maps["obs"](obs)[0]
    torch.testing.assert_close(m[0:3], torch.tensor([-0.1, 0.2, -0.3]))
    torch.testing.assert_close(m[3:6], torch.tensor([0.1, -0.2, -0.97]))
    torch.testing.assert_close(m[6:9], torch.tensor([1.0, -0.6, 0.25]))
    assert m[dof + fl_hip] == -0.3 and m[dof + fl_thigh] == 0.4  # ... is left front abduction outwards
    assert m[dof + fr_hip] == 0.0 and m[dof + fr_thigh] == 0.0
    assert m[scan + 2 * ny + (ny - 1)] == 0.05 and m[scan:].count_nonzero() == 1  # leftmost column

    critic = torch.zeros(1, maps["critic_obs"].num_features)
    critic[0, 0:3] = torch.tensor([0.5, -0.4, 0.1])  # base linear velocity
    critic[0, -6:] = torch.tensor([0.7, 1.5, 1.0, 0.0, 0.0, 1.0])  # friction, added mass, FR FL RR RL contact
    mc = maps["critic_obs"](critic)[0]
    torch.testing.assert_close(mc[0:3], torch.tensor([0.5, 0.4, 0.1]))
    torch.testing.assert_close(mc[-6:], torch.tensor([0.7, 1.5, 0.0, 1.0, 1.0, 0.0]))

    actions = torch.zeros(1, 12)
    actions[0, fl_hip], actions[0, rl_calf] = 0.5, -0.2
    ma = maps["actions"](actions)[0]
    assert ma[fr_hip] == -0.5 and ma[rr_calf] == -0.2 and ma.count_nonzero() == 2


def test_style_features_mirror_by_hand():
    fields = ["root_rot_w", "root_rot_x", "root_rot_y", "root_rot_z", "root_vel_y_w", "root_ang_vel_x_b",
              "FR_hip_joint_dof_pos", "FL_hip_joint_dof_pos", "FR_calf_joint_dof_vel", "FL_calf_joint_dof_vel"]  # fmt: skip
    env = _env("quadruped_flat", amp_obs_frame_num=2, style_fields=fields)
    fn = env.mirror_functions()["ref_obs"]
    x = torch.tensor([[0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.11, -0.12, 1.0, 2.0]])
    expected = torch.tensor([[0.9, -0.1, 0.2, -0.3, -0.4, -0.5, 0.12, -0.11, 2.0, 1.0]])
    torch.testing.assert_close(fn(x), expected)
    # style fields without their mirror partners cannot be mirrored: no "ref_obs" map then
    env = _env("quadruped_flat", amp_obs_frame_num=2, style_fields=["FR_hip_joint_dof_pos"])
    assert "ref_obs" not in env.mirror_functions()


def test_asymmetric_set_ups_are_refused(tmp_path: Path):
    env = _env("quadruped_rough", height_scan_y=(-0.4, 0.3, 5))
    with pytest.raises(ValueError, match="height scan"):
        env.mirror_functions()
    spec = mujoco.MjSpec.from_file(DEFAULT_MODEL_PATH)
    qpos = list(spec.key("home").qpos)
    qpos[7 + 3] = 0.1  # FL abduction equal to FR's instead of its mirror image
    spec.key("home").qpos = qpos
    path = tmp_path / "lopsided.xml"
    path.write_text(spec.to_xml())
    with pytest.raises(ValueError, match="standing pose"):
        _env("quadruped_flat", model_path=str(path)).mirror_functions()


# ---------------------------------------------------------------------------------------------- (b) physics
def _symmetric_model(tmp_path: Path) -> str:
    """The built-in robot with its two small mass asymmetries removed (the trunk's centre of mass is 2 mm left
    of the midline, as in the published figures, and every calf's 1 mm left of the shank, where the thighs'
    offsets are mirrored): the physical check needs an exactly symmetric robot, otherwise the mirrored robots
    drift apart within a few steps."""
    spec = mujoco.MjSpec.from_file(DEFAULT_MODEL_PATH)
    trunk = spec.body("trunk")
    trunk.ipos = [trunk.ipos[0], 0.0, trunk.ipos[2]]
    for right, left in (("FR", "FL"), ("RR", "RL")):
        ipos = spec.body(f"{right}_calf").ipos.copy()
        spec.body(f"{left}_calf").ipos = [ipos[0], -ipos[1], ipos[2]]
    path = tmp_path / "symmetric_quadruped.xml"
    path.write_text(spec.to_xml())
    return str(path)


class _MirrorTerrain(LeggedLocomotion):
    """Rough task whose height field is symmetric about y = 0 and, for the physics, not solid.

    MuJoCo's height-field collision splits every cell along one diagonal, which the mirror turns into the
    other, so the contacts on a height field are never exact mirror images. The robots therefore stand on the
    floor plane while the height scan (computed from ``height_map``) reads the mirror-symmetric rough terrain.
    """

    def _add_height_field(self, spec: Any) -> None:
        super()._add_height_field(spec)
        self.height_map = 0.5 * (self.height_map + self.height_map.flip(0))  # rows are y
        hmax = max(float(self.cfg["terrain_max_height_m"]), 1e-3)
        spec.hfield("terrain").userdata = (self.height_map / hmax).flatten().tolist()
        terrain = spec.geom("terrain")
        terrain.contype, terrain.conaffinity = 0, 0


def _independent_joint_mirror(names: list[str]) -> tuple[list[int], torch.Tensor]:
    """Written from the model by hand: swap FR/FL and RR/RL, negate the abduction ("hip") joints."""
    swap = {"FR": "FL", "FL": "FR", "RR": "RL", "RL": "RR"}
    index = [names.index(swap[n[:2]] + n[2:]) for n in names]
    sign = torch.tensor([-1.0 if n.endswith("_hip_joint") else 1.0 for n in names], dtype=torch.float64)
    return index, sign


def _mirror_state(env: LeggedLocomotion, k: int, gen: torch.Generator) -> None:
    """Give envs [0, k) random states and envs [k, 2k) their mirror images (MuJoCo qpos/qvel, commands,
    actions, dynamics parameters), through the task's ``state_dict``."""
    index, sign = _independent_joint_mirror(env.joint_names)

    def u(*shape: int) -> torch.Tensor:
        return 2.0 * torch.rand(*shape, generator=gen, dtype=torch.float64) - 1.0

    state = env.state_dict()
    qpos, qvel = state["mj_qpos"], state["mj_qvel"]
    quat = torch.cat([torch.ones(k, 1, dtype=torch.float64), 0.1 * u(k, 2), u(k, 1)], dim=1)  # tilt and yaw
    qpos[:k, 0:2] = 0.3 * u(k, 2)
    qpos[:k, 2] = 0.29
    qpos[:k, 3:7] = quat / quat.norm(dim=1, keepdim=True)
    qpos[:k, 7:] = env.default_joint_pos.double() + 0.2 * u(k, 12)
    qvel[:k, 0:6] = 0.5 * u(k, 6)
    qvel[:k, 6:] = 2.0 * u(k, 12)
    # position (x, -y, z); orientation M R M = quaternion (w, -x, y, -z); world linear velocity (x, -y, z);
    # body angular velocity (axial) (-x, y, -z); joints by the hand-written map
    qpos[k:, 0:7] = qpos[:k, 0:7] * torch.tensor([1, -1, 1, 1, -1, 1, -1], dtype=torch.float64)
    qpos[k:, 7:] = qpos[:k, 7:][:, index] * sign
    qvel[k:, 0:6] = qvel[:k, 0:6] * torch.tensor([1, -1, 1, -1, 1, -1], dtype=torch.float64)
    qvel[k:, 6:] = qvel[:k, 6:][:, index] * sign
    state["mj_warm"].zero_()
    state["commands"][k:] = state["commands"][:k] * torch.tensor([1.0, -1.0, -1.0])
    actions = 0.5 * u(k, 12).float()
    state["actions"][:k] = actions
    state["actions"][k:] = actions[:, index] * sign.float()
    for name in ("mj_friction", "mj_body_mass", "friction_coef", "added_mass"):  # mirror-invariant
        state[name][k:] = state[name][:k]
    env.load_state_dict(state)


@pytest.mark.parametrize("task", TASKS)
def test_mirrored_robots_observe_the_mirror_image(task, tmp_path):
    """Robots started in mirror-image states and driven by mirrored actions observe the mirror image of what
    the originals observe (actor, critic and AMP style observations), step after step."""
    k, steps, frames = 8, 12, 2
    calm = {"noise_level": 0.0, "max_push_vel_xy": 0.0, "amp_obs_frame_num": frames}
    model = _symmetric_model(tmp_path)
    if task == "quadruped_rough":
        env = _MirrorTerrain(2 * k, seed=0, nthread=1, terrain="rough", model_path=model, **calm)
    else:
        env = _env(task, 2 * k, model_path=model, **calm)
    maps = env.mirror_functions()
    index, sign = _independent_joint_mirror(env.joint_names)
    gen = torch.Generator().manual_seed(1)
    _mirror_state(env, k, gen)
    worst = {"obs": 0.0, "critic": 0.0, "ref_obs": 0.0}
    for t in range(steps):
        a = torch.rand(k, 12, generator=gen) - 0.5
        obs, _, dones, extras = env.step(torch.cat([a, a[:, index] * sign.float()]))
        assert not dones.any()
        groups = {
            "obs": obs,
            "critic": extras["observations"]["critic"],
            "ref_obs": extras["observations"]["ref_obs"],
        }
        for name, fn in (("obs", maps["obs"]), ("critic", maps["critic_obs"]), ("ref_obs", maps["ref_obs"])):
            if name == "ref_obs" and t < frames - 1:
                continue  # the history still holds frames of the un-mirrored start state
            x = groups[name]
            worst[name] = max(worst[name], float((x[k:] - fn(x[:k])).abs().max()))
            # the pairs really differ (otherwise the check would be vacuous)
            assert float((x[k:] - x[:k]).abs().max()) > 0.05
    print(f"{task}: largest deviation from the mirror image over {steps} steps: {worst}")
    assert max(worst.values()) < ATOL, worst
    if task == "quadruped_rough":  # the scan saw rough ground, not just the flat spawn patch
        scan = obs[:, _offset(env, "height_measurements") :]
        assert float(scan.std(dim=1).min()) > 1e-3


def test_symmetry_extension_takes_the_task_mirror_functions():
    from st_rl.configs import get_preset
    from st_rl.runners import build_runner

    preset = get_preset("quadruped_flat")
    cfg = preset.train.to_dict()
    cfg["algorithm"]["symmetry_cfg"] = {"mirror_loss_coef": 1.0}
    env = _env("quadruped_flat", 4, **preset.env_kwargs)
    runner = build_runner("OnPolicyRunner", env, cfg, log_dir=None)
    ext: Any = runner.alg.extensions["symmetry"]
    maps = env.mirror_functions()
    assert ext.mirror_obs is maps["obs"] and ext.mirror_actions is maps["actions"]
    assert ext.mirror_critic_obs is maps["critic_obs"]
