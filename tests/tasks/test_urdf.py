"""The locomotion task loads a URDF robot: floating base, servos, touch sensors and keyframe are added."""

from __future__ import annotations

import os

import pytest
import torch

from st_rl.tasks import make_env

URDF = os.path.join(os.path.dirname(__file__), "simple_quadruped.urdf")
LEGS = ("FR", "FL", "RR", "RL")


def _env(**kw):
    angles = {f"{leg}_thigh_joint": 0.9 for leg in LEGS} | {f"{leg}_calf_joint": -1.8 for leg in LEGS}
    return make_env(
        "quadruped_flat", 4, seed=0, nthread=1, model_path=URDF, urdf_joint_angles=angles,
        urdf_base_height=0.32, max_push_vel_xy=0.0, noise_level=0.0, **kw,
    )  # fmt: skip


def test_urdf_robot_is_completed_and_steps():
    env = _env()
    # 8 revolute joints in the file (the fixed foot joints get no actuator).
    assert env.num_actions == 8
    assert env.joint_names == [f"{leg}_{j}_joint" for leg in LEGS for j in ("thigh", "calf")]
    assert env.num_obs == 3 + 3 + 3 + 3 * 8
    assert env.num_feet == 4
    # The home keyframe holds the configured standing angles; actions are offsets from it.
    assert torch.allclose(env.default_joint_pos, torch.tensor([0.9, -1.8] * 4))
    # Servo force limits come from the URDF efforts.
    assert env.model.actuator_forcerange[1].tolist() == [-35.0, 35.0]
    for _ in range(50):
        obs, rew, dones, extras = env.step(torch.zeros(4, 8))
        assert torch.isfinite(obs).all() and torch.isfinite(rew).all()
    assert bool(env.foot_contact.any()), "the feet rest on the added floor"


def test_urdf_without_feet_is_rejected(tmp_path):
    with open(URDF) as f:
        text = f.read().replace("_foot", "_toe")
    path = tmp_path / "nofeet.urdf"
    path.write_text(text)
    with pytest.raises(ValueError, match="foot"):
        make_env("quadruped_flat", 2, seed=0, nthread=1, model_path=str(path))
