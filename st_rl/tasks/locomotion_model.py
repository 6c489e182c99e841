"""MuJoCo model building and kinematics helpers of :class:`~st_rl.tasks.locomotion.LeggedLocomotion`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

DEFAULT_MODEL_PATH = os.path.join(os.path.dirname(__file__), "assets", "quadruped.xml")


def import_mujoco() -> Any:
    """MuJoCo with its batched API (``mujoco.batch``)."""
    try:
        import mujoco
        import mujoco.batch  # noqa: F401
    except ImportError as e:  # pragma: no cover - mujoco is a core dependency
        raise ImportError("The locomotion task needs MuJoCo's batched API: pip install 'mujoco>=3.17'") from e
    return mujoco


def quat_rotate_inverse(q_wxyz: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate world vectors ``v`` into the frame of unit quaternions ``q`` (w, x, y, z)."""
    w, xyz = q_wxyz[:, :1], q_wxyz[:, 1:]
    a = v * (2.0 * w.square() - 1.0)
    b = torch.cross(xyz, v, dim=-1) * w * 2.0
    c = xyz * (xyz * v).sum(dim=-1, keepdim=True) * 2.0
    return a - b + c


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions (w, x, y, z) of rotations by ``yaw`` about z."""
    half, zeros = 0.5 * yaw, torch.zeros_like(yaw)
    return torch.stack([torch.cos(half), zeros, zeros, torch.sin(half)], dim=-1)


def index_of(ids: list[int]) -> slice | torch.Tensor:
    """A slice when the ids are contiguous (cheap views), else a long tensor."""
    if ids == list(range(ids[0], ids[0] + len(ids))):
        return slice(ids[0], ids[0] + len(ids))
    return torch.as_tensor(ids, dtype=torch.long)


def complete_urdf(mj: Any, spec: Any, cfg: dict[str, Any]) -> None:
    """Add a free joint, a floor, position servos, touch sensors (base, ``*foot*`` bodies) and a ``home`` key."""
    spec.compiler.fusestatic = False
    root = spec.worldbody.first_body()
    if root is None:
        raise ValueError("The URDF has no links")
    if not root.joints:
        root.add_freejoint(name="root")
    if not any(g.type == mj.mjtGeom.mjGEOM_PLANE for g in spec.worldbody.geoms):
        spec.worldbody.add_geom(
            name="floor", type=mj.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], friction=[1.0, 0.02, 0.01]
        )
    angles = dict(cfg["urdf_joint_angles"] or {})
    home_joints = []
    for joint in spec.joints:
        if joint.type not in (mj.mjtJoint.mjJNT_HINGE, mj.mjtJoint.mjJNT_SLIDE):
            continue
        act = spec.add_actuator(name=joint.name, target=joint.name, trntype=mj.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=float(cfg["urdf_kp"]))
        if joint.range[1] > joint.range[0]:
            act.ctrlrange = list(joint.range)
            act.ctrllimited = mj.mjtLimited.mjLIMITED_TRUE
        if joint.actfrcrange[1] > joint.actfrcrange[0]:
            act.forcerange = list(joint.actfrcrange)
            act.forcelimited = mj.mjtLimited.mjLIMITED_TRUE
        home_joints.append(float(angles.get(joint.name, 0.0)))
    feet = [b for b in spec.bodies if "foot" in (b.name or "").lower()]
    if not feet:
        raise ValueError("The URDF has no links named '*foot*'; name the foot links or use an MJCF model")
    touch = {"type": mj.mjtSensor.mjSENS_TOUCH, "objtype": mj.mjtObj.mjOBJ_SITE}
    for body in feet:
        for i, geom in enumerate(body.geoms):
            geom.name = geom.name or f"{body.name}_foot_geom{i}"
        site = body.add_site(name=f"{body.name}_touch_site", size=[0.03, 0.03, 0.03])
        spec.add_sensor(name=f"{body.name}_touch", objname=site.name, **touch)
    base_site = root.add_site(name="base_touch_site", type=mj.mjtGeom.mjGEOM_BOX, size=[0.2, 0.12, 0.08])
    spec.add_sensor(name="base_touch", objname=base_site.name, **touch)
    qpos = [0.0, 0.0, float(cfg["urdf_base_height"]), 1.0, 0.0, 0.0, 0.0, *home_joints]
    spec.add_key(name=str(cfg["home_keyframe"]), qpos=qpos, ctrl=home_joints)


def add_height_field(mj: Any, spec: Any, cfg: dict[str, Any], generator: torch.Generator) -> torch.Tensor:
    """Add a random rough height field (flat at the spawn) to ``spec``; return its heights (rows = y, cols = x)."""
    size, res = float(cfg["terrain_size_m"]), float(cfg["terrain_resolution_m"])
    n = int(round(size / res)) + 1
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
    noise = torch.rand(1, 1, n, n, generator=gen)
    smooth = torch.nn.functional.conv2d(noise, torch.ones(1, 1, 3, 3) / 9.0, padding=1)[0, 0]
    smooth = (smooth - smooth.min()) / (smooth.max() - smooth.min() + 1e-9)
    center, flat = n // 2, 3  # a flat spawn patch of +-3 cells around the origin
    smooth[center - flat : center + flat + 1, center - flat : center + flat + 1] = 0.0
    hmax = float(cfg["terrain_max_height_m"])
    height_map = (smooth * hmax).to(torch.float32)
    hf = spec.add_hfield(name="terrain", nrow=n, ncol=n, size=[size / 2, size / 2, max(hmax, 1e-3), 0.1])
    hf.userdata = (height_map / max(hmax, 1e-3)).flatten().tolist()
    spec.worldbody.add_geom(
        name="terrain",
        type=mj.mjtGeom.mjGEOM_HFIELD,
        hfieldname="terrain",
        contype=1,
        conaffinity=1,
        friction=[1.0, 0.02, 0.01],
        rgba=[0.45, 0.5, 0.45, 1],
    )
    return height_map


def ground_height(height_map: torch.Tensor, res: float, half: float, xy: torch.Tensor) -> torch.Tensor:
    """Height of a height field centred at the origin under world points ``xy`` (..., 2), bilinear; 0 outside."""
    rows, cols = height_map.shape
    gx_raw, gy_raw = (xy[..., 0] + half) / res, (xy[..., 1] + half) / res
    inside = (gx_raw >= 0) & (gx_raw <= cols - 1) & (gy_raw >= 0) & (gy_raw <= rows - 1)
    gx, gy = gx_raw.clamp(0, cols - 1.001), gy_raw.clamp(0, rows - 1.001)
    x0, y0 = gx.floor().long(), gy.floor().long()
    fx, fy = gx - x0, gy - y0
    h00, h01 = height_map[y0, x0], height_map[y0, x0 + 1]
    h10, h11 = height_map[y0 + 1, x0], height_map[y0 + 1, x0 + 1]
    height = (h00 * (1 - fx) + h01 * fx) * (1 - fy) + (h10 * (1 - fx) + h11 * fx) * fy
    return torch.where(inside, height, 0.0)


def check_model(mj: Any, model: Any, dt: float, path: str) -> tuple[float, int, int]:
    """The model's timestep, the physics steps per policy step ``dt`` and the floating base body."""
    sim_dt = float(model.opt.timestep)
    decimation = dt / sim_dt
    if abs(decimation - round(decimation)) > 1e-6 or round(decimation) < 1:
        raise ValueError(f"dt={dt} is not a multiple of the model timestep {sim_dt}")
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mj.mjtJoint.mjJNT_FREE]
    if len(free) != 1:
        raise ValueError(f"{path}: expected exactly one free joint (the floating base), found {len(free)}")
    if model.nu == 0:
        raise ValueError(f"{path}: the model has no actuators; add position actuators on the leg joints")
    return sim_dt, int(round(decimation)), int(model.jnt_bodyid[free[0]])


def find_feet(mj: Any, model: Any, names: list[str] | None, path: str) -> tuple[np.ndarray, list[str]]:
    """Geom ids and names of the feet: ``names``, or the geoms whose name contains ``foot``."""
    geoms = [mj.mj_id2name(model, mj.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom)]
    if names is None:
        names = [g for g in geoms if "foot" in g.lower()]
    if not names:
        raise ValueError(f"{path}: no foot geoms found; name them '*foot*' or pass foot_geom_names")
    return np.asarray([geoms.index(n) for n in names]), list(names)


def find_touch_sensors(
    mj: Any, model: Any, foot_bodies: np.ndarray, base_body: int, path: str
) -> tuple[torch.Tensor, int]:
    """Sensor data addresses of one touch sensor per foot body and one on the base body."""
    by_body: dict[int, int] = {}
    for s in range(model.nsensor):
        if model.sensor_type[s] == mj.mjtSensor.mjSENS_TOUCH:
            by_body.setdefault(int(model.site_bodyid[model.sensor_objid[s]]), int(model.sensor_adr[s]))
    if any(int(b) not in by_body for b in foot_bodies) or base_body not in by_body:
        fix = "add a <touch> sensor on a site of each foot body and one around the base (see quadruped.xml)"
        raise ValueError(f"{path}: the task reads contacts from touch sensors; {fix}.")
    return torch.as_tensor([by_body[int(b)] for b in foot_bodies], dtype=torch.long), by_body[base_body]


def base_frame_kinematics(
    mj: Any, model: Any, base_body: int, qpos: np.ndarray | None = None
) -> tuple[Any, Callable[[np.ndarray], np.ndarray]]:
    """MuJoCo kinematics at ``qpos`` (default ``qpos0``) and a map of world points into the base frame."""
    data = mj.MjData(model)
    if qpos is not None:
        data.qpos[:] = qpos
    mj.mj_kinematics(model, data)
    origin = data.xpos[base_body].copy()
    rot = data.xmat[base_body].reshape(3, 3).copy()  # base -> world
    return data, lambda p: (p - origin) @ rot
