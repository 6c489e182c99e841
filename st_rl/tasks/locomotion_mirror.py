"""Left-right mirror maps (``y -> -y`` in the base frame) of :class:`~st_rl.tasks.locomotion.LeggedLocomotion`.

Polar vectors map ``(x, y, z) -> (x, -y, z)``, axial ones ``(-x, y, -z)``; joints take their mirror partner's
value, negated for hinges whose axis lies in the mirror plane (hip abduction); the height scan flips its columns.
Partners and signs come from the model's geometry at ``qpos0``, so any mirror-symmetric robot works."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from st_rl.tasks.locomotion_model import base_frame_kinematics


class SignedPermutation:
    """The mirror map ``x -> sign * x[..., index]`` of the last dimension; must be an involution.

    ``index``: the source of each output feature (a permutation of ``range(len(index))``); ``sign``: +1 or -1
    per output feature; ``device``: where the constants are made (copied to another device once, on use)."""

    def __init__(
        self, index: Sequence[int], sign: Sequence[float], device: str | torch.device = "cpu"
    ) -> None:
        index, sign = [int(i) for i in index], [float(s) for s in sign]
        n = len(index)
        if len(sign) != n or sorted(index) != list(range(n)) or any(s not in (1.0, -1.0) for s in sign):
            raise ValueError("SignedPermutation needs a permutation of range(n) and n signs of +-1")
        if any(index[index[i]] != i or sign[index[i]] != sign[i] for i in range(n)):
            raise ValueError("SignedPermutation must be an involution (its own inverse)")
        self.index = torch.as_tensor(index, dtype=torch.long, device=device)
        self.sign = torch.as_tensor(sign, dtype=torch.float32, device=device)
        self._constants = {self.index.device: (self.index, self.sign)}

    @property
    def num_features(self) -> int:
        """Size of the last dimension the map applies to."""
        return int(self.index.numel())

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.num_features:
            raise ValueError(f"mirror map of {self.num_features} features applied to shape {tuple(x.shape)}")
        constants = self._constants.get(x.device)
        if constants is None:
            constants = self._constants[x.device] = (self.index.to(x.device), self.sign.to(x.device))
        index, sign = constants
        return x.index_select(-1, index) * sign.to(x.dtype)

    def __repr__(self) -> str:
        return f"SignedPermutation(index={self.index.tolist()}, sign={self.sign.tolist()})"


def mirror_structure(task: Any) -> tuple[list[int], list[float], list[int]]:
    """Mirror partner and sign of every actuated joint, and mirror partner of every foot (model at ``qpos0``)."""
    mj, model = task.mujoco, task.model
    data, to_base = base_frame_kinematics(mj, model, task.base_body)
    rot = data.xmat[task.base_body].reshape(3, 3)
    flip = np.array([1.0, -1.0, 1.0])
    tol = 1e-4  # pairing tolerance (m, and 1 - |cos| for axes); model numbers mirror far more exactly
    joints = model.actuator_trnid[:, 0]
    anchors, axes = to_base(data.xanchor[joints]), data.xaxis[joints] @ rot
    hinge, slide = int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE)
    partners, signs = [], []
    for i, j in enumerate(joints):
        distance = np.linalg.norm(anchors - anchors[i] * flip, axis=1)
        alignment = axes @ (axes[i] * flip)  # +-1 for an axis (anti)parallel to the mirrored one
        found = np.flatnonzero((distance < tol) & (np.abs(alignment) > 1.0 - tol))
        jtype = int(model.jnt_type[j])
        if found.size == 0 or jtype not in (hinge, slide):
            joint = task.joint_names[i]
            why = "(a hinge or slide joint at the mirrored anchor and axis); the robot is not symmetric"
            raise ValueError(f"mirror_functions: joint {joint!r} has no left-right mirror partner {why}")
        k = int(found[np.argmin(distance[found])])
        # A reflection turns a rotation by q about axis a into one by -q about M a; a translation into one by q.
        same = float(np.sign(alignment[k]))
        partners.append(k)
        signs.append(-same if jtype == hinge else same)
    feet = to_base(data.geom_xpos[task.foot_geoms])
    foot_partners = []
    for f in range(task.num_feet):
        distance = np.linalg.norm(feet - feet[f] * flip, axis=1)
        if distance.min() > tol:
            raise ValueError(f"mirror_functions: foot {f} has no left-right mirror partner")
        foot_partners.append(int(np.argmin(distance)))
    home = task.default_joint_pos
    mirrored_home = home[partners] * torch.tensor(signs)
    if not torch.allclose(mirrored_home, home, atol=1e-6):
        wrong = torch.nonzero(~torch.isclose(mirrored_home, home, atol=1e-6)).flatten().tolist()
        bad = [task.joint_names[i] for i in wrong]
        raise ValueError(f"mirror_functions: the standing pose is not left-right symmetric (joints {bad})")
    return partners, signs, foot_partners


def _layout_map(
    segments: OrderedDict[str, tuple[int, ...]], table: dict[str, tuple[list[int], list[float]]], device: Any
) -> SignedPermutation:
    index, sign = [], []
    for name, shape in segments.items():
        if name not in table:
            raise ValueError(f"mirror_functions: no mirror rule for observation component {name!r}")
        local, local_sign = table[name]
        if len(local) != math.prod(shape):
            raise ValueError(f"mirror_functions: component {name!r} has {math.prod(shape)} features")
        index += [len(index) + i for i in local]
        sign += local_sign
    return SignedPermutation(index, sign, device)


def build_mirror_maps(task: Any) -> dict[str, SignedPermutation]:
    """The maps :meth:`LeggedLocomotion.mirror_functions` returns."""
    joint_partner, joint_sign, foot_partner = mirror_structure(task)
    polar = ([0, 1, 2], [1.0, -1.0, 1.0])
    joint = (joint_partner, joint_sign)
    table: dict[str, tuple[list[int], list[float]]] = {
        "base_lin_vel": polar,
        "base_ang_vel": ([0, 1, 2], [-1.0, 1.0, -1.0]),
        "projected_gravity": polar,
        "commands": ([0, 1, 2], [1.0, -1.0, -1.0]),
        "dof_pos": joint,
        "dof_vel": joint,
        "last_actions": joint,
        "friction": ([0], [1.0]),
        "added_mass": ([0], [1.0]),
        "foot_contact": (foot_partner, [1.0] * task.num_feet),
    }
    if task.use_height_scan:
        lo, hi, ny = task.cfg["height_scan_y"]
        nx, ny = int(task.cfg["height_scan_x"][2]), int(ny)
        if not math.isclose(float(lo), -float(hi), abs_tol=1e-9):
            raise ValueError(f"mirror_functions: the height scan's y grid {lo}..{hi} is not symmetric")
        # scan point ix * ny + iy sits at (x_ix, y_iy); its mirror image is at (x_ix, y_{ny - 1 - iy})
        scan = [ix * ny + (ny - 1 - iy) for ix in range(nx) for iy in range(ny)]
        table["height_measurements"] = (scan, [1.0] * len(scan))
    maps = {
        "obs": _layout_map(task.obs_segments, table, task.device),
        "critic_obs": _layout_map(task.privileged_obs_segments, table, task.device),
        "actions": SignedPermutation(joint_partner, joint_sign, task.device),
    }
    if task.amp_obs_frame_num > 0:
        style = style_mirror(task, joint_partner, joint_sign, foot_partner)
        if style is not None:
            maps["ref_obs"] = style
    return maps


def style_mirror(
    task: Any, joint_partner: list[int], joint_sign: list[float], foot_partner: list[int]
) -> SignedPermutation | None:
    """Mirror map of the style features (``style_fields``), or None when a field's partner is missing."""
    rule: dict[str, tuple[str, float]] = {}
    polar, axial = {"x": 1.0, "y": -1.0, "z": 1.0}, {"x": -1.0, "y": 1.0, "z": -1.0}
    for ax in "xyz":
        rule[f"root_pos_{ax}"] = (f"root_pos_{ax}", polar[ax])
        for frame in "bw":
            rule[f"root_vel_{ax}_{frame}"] = (f"root_vel_{ax}_{frame}", polar[ax])
            rule[f"root_ang_vel_{ax}_{frame}"] = (f"root_ang_vel_{ax}_{frame}", axial[ax])
    for ax, sign in zip("wxyz", (1.0, -1.0, 1.0, -1.0)):
        rule[f"root_rot_{ax}"] = (f"root_rot_{ax}", sign)
    for i, name in enumerate(task.joint_names):
        for kind in ("dof_pos", "dof_vel"):
            rule[f"{name}_{kind}"] = (f"{task.joint_names[joint_partner[i]]}_{kind}", joint_sign[i])
    for f, name in enumerate(task.foot_names):
        for ax in "xyz":
            rule[f"{name}_pos_{ax}_b"] = (f"{task.foot_names[foot_partner[f]]}_pos_{ax}_b", polar[ax])
    fields = task.style_fields
    if any(rule[f][0] not in fields for f in fields):
        return None
    index = [fields.index(rule[f][0]) for f in fields]
    return SignedPermutation(index, [rule[f][1] for f in fields], task.device)
