"""Legged locomotion on MuJoCo (``mujoco.batch``): a quadruped follows velocity commands, legged_gym style.
Observations, rewards, randomisation, terminations, metrics: docs/environments.md; options: LOCOMOTION_CFG."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import torch

import st_rl.tasks.locomotion_model as mdl
import st_rl.tasks.locomotion_style as style
import st_rl.tasks.locomotion_terms as terms
from st_rl.tasks.base import BuiltinTask
from st_rl.tasks.locomotion_mirror import SignedPermutation, build_mirror_maps
from st_rl.tasks.locomotion_model import DEFAULT_MODEL_PATH, quat_rotate_inverse

__all__ = ["DEFAULT_MODEL_PATH", "LeggedLocomotion", "SignedPermutation", "quat_rotate_inverse"]


LOCOMOTION_CFG: dict[str, Any] = {
    "dt": 0.02,  # policy step (s); must be a multiple of the model timestep
    "episode_length_s": 20.0,
    "clip_actions": 10.0,
    "model_path": None,  # None: the built-in Go1-class quadruped
    "foot_geom_names": None,  # None: geoms whose name contains "foot"
    "urdf_kp": 35.0,  # URDF models: position-servo gain of the added actuators
    "urdf_base_height": 0.35,  # URDF models: initial base height (m) of the added "home" keyframe
    "urdf_joint_angles": None,  # URDF models: {joint name: standing angle}; missing joints start at 0
    "home_keyframe": "home",
    "action_scale": 0.25,
    "nthread": 0,  # MuJoCo threads; 0: torch.get_num_threads()
    "lin_vel_x": (-1.0, 1.0),
    "lin_vel_y": (-0.6, 0.6),
    "ang_vel_yaw": (-1.0, 1.0),
    "resampling_time_s": 10.0,
    "zero_command_prob": 0.1,
    "obs_scale_lin_vel": 2.0,
    "obs_scale_ang_vel": 0.25,
    "obs_scale_dof_vel": 0.05,
    "noise_level": 1.0,
    "noise_ang_vel": 0.2,
    "noise_gravity": 0.05,
    "noise_dof_pos": 0.01,
    "noise_dof_vel": 1.5,
    "noise_height": 0.05,
    "friction_range": (0.4, 1.25),
    "added_mass_range": (-1.0, 2.0),
    "push_interval_s": 8.0,
    "max_push_vel_xy": 0.5,
    "init_joint_scale_range": (0.8, 1.2),
    "init_base_vel": 0.3,
    "tracking_sigma": 0.25,
    "feet_air_time_target": 0.3,
    "reward_scales": {
        "tracking_lin_vel": 1.5,
        "tracking_ang_vel": 0.75,
        "lin_vel_z": -2.0,
        "ang_vel_xy": -0.05,
        "orientation": -1.0,
        "torques": -2e-4,
        "dof_acc": -2.5e-7,
        "action_rate": -0.01,
        "feet_air_time": 1.0,
        "trot": 0.0,
        "termination": -10.0,
    },
    "terminate_on_trunk_contact": True,
    "max_tilt_rad": 1.0,
    "min_base_height": 0.12,
    "terrain": "flat",  # "flat" or "rough"
    "terrain_size_m": 16.0,
    "terrain_resolution_m": 0.1,
    "terrain_max_height_m": 0.06,
    "height_scan": None,  # None: on for rough terrain
    "height_scan_x": (-0.6, 0.6, 7),
    "height_scan_y": (-0.4, 0.4, 5),
    "metric_warmup_s": 1.0,
    # AMP reference motion: frames of style features in extras["observations"]["ref_obs"]
    "amp_obs_frame_num": 0,  # H; 0 disables ref_obs
    "style_fields": None,  # None: root height, base velocities, joints, feet (body frame)
}


class LeggedLocomotion(BuiltinTask):
    """Velocity-command tracking for a legged robot on MuJoCo; ``device`` is ignored (MuJoCo runs on the CPU)."""

    DEFAULT_CFG: dict[str, Any] = LOCOMOTION_CFG
    failure_terms = ("trunk_contact", "tilt", "base_height")
    metric_terms = ("tracking_error", "CoT")
    _partners: tuple[list[int], list[int]]  # diagonal and lateral foot partners (the trot reward)

    def __init__(
        self, num_envs: int = 1024, device: str | torch.device = "cpu", seed: int | None = None, **cfg: Any
    ) -> None:
        scales = terms.reward_scales(self.DEFAULT_CFG["reward_scales"], cfg.pop("reward_scales", None))
        self.reward_scales = {k: float(v) for k, v in scales.items() if v != 0}
        self.reward_terms = tuple(self.reward_scales)
        if str(torch.device(device)) != "cpu":
            device = "cpu"  # MuJoCo state lives in host memory
        super().__init__(num_envs, device, seed, **cfg, reward_scales=scales)

    def _setup(self) -> None:
        self.mujoco = mdl.import_mujoco()
        c = self.cfg
        self.terrain = str(c["terrain"])
        if self.terrain not in ("flat", "rough"):
            raise ValueError(f"terrain must be 'flat' or 'rough', got {self.terrain!r}")
        self.use_height_scan = self.terrain == "rough" if c["height_scan"] is None else bool(c["height_scan"])
        self._build_model(c["model_path"] or DEFAULT_MODEL_PATH)
        self._build_buffers()
        if "trot" in self.reward_terms:  # a robot without four corner feet is refused here
            home = self.default_qpos.numpy()
            data, to_base = mdl.base_frame_kinematics(self.mujoco, self.model, self.base_body, home)
            self._partners = terms.gait_partners(to_base(data.geom_xpos[self.foot_geoms]))

    def _build_model(self, path: str) -> None:
        mj = self.mujoco
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Robot model not found: {path}")
        spec = mj.MjSpec.from_file(path)
        if path.lower().endswith(".urdf"):
            mdl.complete_urdf(mj, spec, self.cfg)
        if self.terrain == "rough":
            self._add_height_field(spec)
        self.model = model = spec.compile()
        self.sim_dt, self.decimation, self.base_body = mdl.check_model(mj, model, self.dt, path)
        self.num_actions = int(model.nu)
        trn = model.actuator_trnid[:, 0]
        self.actuated_qpos = mdl.index_of([int(model.jnt_qposadr[j]) for j in trn])
        self.actuated_dof = mdl.index_of([int(model.jnt_dofadr[j]) for j in trn])
        self.joint_names = [mj.mj_id2name(model, mj.mjtObj.mjOBJ_JOINT, int(j)) for j in trn]
        self.kp = torch.as_tensor(model.actuator_gainprm[:, 0], dtype=torch.float32)
        self.foot_geoms, self.foot_names = mdl.find_feet(mj, model, self.cfg["foot_geom_names"], path)
        self.num_feet = len(self.foot_names)
        self.foot_bodies = np.asarray([model.geom_bodyid[g] for g in self.foot_geoms])
        touch = mdl.find_touch_sensors(mj, model, self.foot_bodies, self.base_body, path)
        self.foot_touch_adr, self.trunk_touch_adr = touch
        self.key_id = key = mj.mj_name2id(model, mj.mjtObj.mjOBJ_KEY, self.cfg["home_keyframe"])
        home = model.key_qpos[key] if key >= 0 else model.qpos0
        self.default_qpos = torch.as_tensor(home, dtype=torch.float64)
        self.default_joint_pos = self.default_qpos[self.actuated_qpos].float()
        self.total_mass = float(model.body_subtreemass[self.base_body])
        self.nominal_trunk_mass = float(model.body_mass[self.base_body])
        self.nominal_foot_friction = float(model.geom_friction[self.foot_geoms[0], 0])
        self._bind_batch(model)

    def _add_height_field(self, spec: Any) -> None:
        """Add a random rough height field (``height_map``) beside the flat floor."""
        self.height_map = mdl.add_height_field(self.mujoco, spec, self.cfg, self._generator)
        self.terrain_res = float(self.cfg["terrain_resolution_m"])
        self.terrain_half = float(self.cfg["terrain_size_m"]) / 2.0

    def _bind_batch(self, model: Any) -> None:
        """The batched simulation and torch views of its state (no copies)."""
        nthread = int(self.cfg["nthread"]) or torch.get_num_threads()
        self.batch = batch = self.mujoco.batch.Batch(model, nsim=self.num_envs, nthread=nthread)
        state = ("qpos", "qvel", "ctrl", "qacc_warmstart")
        self._qpos, self._qvel, self._ctrl, self._warm = (torch.from_numpy(batch.bind(f)) for f in state)
        with warnings.catch_warnings():  # derived fields are read-only views; we only read them
            warnings.simplefilter("ignore", UserWarning)
            derived = ("actuator_force", "sensordata", "geom_xpos", "xpos")
            self._act_force, self._sensordata, self._geom_xpos, self._xpos = (
                torch.from_numpy(batch.bind(f)) for f in derived
            )
        model_fields = ("geom_friction", "body_mass")
        self._friction, self._body_mass = (torch.from_numpy(batch.expand(f)) for f in model_fields)

    def _build_buffers(self) -> None:
        n, a, f = self.num_envs, self.num_actions, self.num_feet
        c = self.cfg
        actor, critic, points = terms.observation_layout(a, f, c, self.use_height_scan)
        self._set_layout(actor, critic)
        if points is not None:
            self.scan_points = points
        num_points = 0 if points is None else len(points)
        self._obs_scale, self._noise_scale = terms.observation_scales(c, a, num_points)
        self.commands, self.feet_air_time = torch.zeros(n, 3), torch.zeros(n, f)
        self.actions, self.last_actions, self.last_dof_vel = (torch.zeros(n, a) for _ in range(3))
        self.last_contacts, self.foot_contact = (torch.zeros(n, f, dtype=torch.bool) for _ in range(2))
        self.trunk_contact = torch.zeros(n, dtype=torch.bool)
        self.friction_coef = torch.full((n,), self.nominal_foot_friction)
        self.added_mass, self._err_sq_sum, self._err_count = (torch.zeros(n) for _ in range(3))
        self._power_sum, self._speed_sum, self._last_rmsd, self._last_cot = (torch.zeros(n) for _ in range(4))
        names = "commands actions last_actions last_dof_vel feet_air_time last_contacts foot_contact"
        names += " trunk_contact added_mass friction_coef _err_sq_sum _err_count _power_sum _speed_sum"
        self._state_buffers += [*names.split(), "_last_rmsd", "_last_cot"]
        self._resample_steps = max(1, int(round(c["resampling_time_s"] / self.dt)))
        push_steps = max(1, int(round(c["push_interval_s"] / self.dt)))
        self._push_steps = push_steps if c["max_push_vel_xy"] > 0 else 0
        self._warmup_steps = int(round(c["metric_warmup_s"] / self.dt))
        self._cache: dict[str, torch.Tensor] = {}
        self._mirror_maps: dict[str, SignedPermutation] | None = None
        self.ref_motion_source: Any = None
        self.amp_obs_frame_num = int(c["amp_obs_frame_num"])
        self.style_fields = list(c["style_fields"] or self.default_style_fields())
        self._style_index = style.style_columns(self.available_style_fields(), self.style_fields)
        self._style_needs_feet = any(f in style.foot_style_fields(self.foot_names) for f in self.style_fields)
        if self.amp_obs_frame_num > 0:
            self.ref_obs_buf = torch.zeros(n, self.amp_obs_frame_num, len(self.style_fields))
            self._state_buffers.append("ref_obs_buf")

    def _cached(self, key: str, fn: Any) -> torch.Tensor:
        # Derived state is computed once per step; the cache is cleared whenever the MuJoCo state changes.
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    @property
    def base_quat(self) -> torch.Tensor:
        return self._cached("quat", lambda: self._qpos[:, 3:7].float())

    @property
    def base_lin_vel(self) -> torch.Tensor:
        """Base linear velocity in the base frame (m/s)."""
        return self._cached("lin", lambda: quat_rotate_inverse(self.base_quat, self._qvel[:, 0:3].float()))

    @property
    def base_ang_vel(self) -> torch.Tensor:
        """Base angular velocity in the base frame (rad/s); MuJoCo stores it in the local frame."""
        return self._cached("ang", lambda: self._qvel[:, 3:6].float())

    @property
    def projected_gravity(self) -> torch.Tensor:
        """Gravity direction in the base frame."""
        g = torch.tensor([[0.0, 0.0, -1.0]]).expand(self.num_envs, 3)
        return self._cached("grav", lambda: quat_rotate_inverse(self.base_quat, g))

    @property
    def foot_pos_b(self) -> torch.Tensor:
        """Foot positions relative to the base, in the base frame, (N, feet, 3) (m)."""
        return self._cached("feet", self._compute_foot_pos_b)

    def _compute_foot_pos_b(self) -> torch.Tensor:
        self.batch.forward(stage=self.mujoco.mjtStage.mjSTAGE_POS)
        rel = (self._geom_xpos[:, self.foot_geoms] - self._xpos[:, self.base_body, None]).float()
        q = self.base_quat[:, None].expand(-1, self.num_feet, 4).reshape(-1, 4)
        return quat_rotate_inverse(q, rel.reshape(-1, 3)).reshape(self.num_envs, self.num_feet, 3)

    @property
    def dof_pos(self) -> torch.Tensor:
        return self._cached("dof_pos", lambda: self._qpos[:, self.actuated_qpos].float())

    @property
    def dof_vel(self) -> torch.Tensor:
        return self._cached("dof_vel", lambda: self._qvel[:, self.actuated_dof].float())

    def task_metrics(self) -> dict[str, torch.Tensor]:
        """Velocity-tracking RMSD (``velrmsd``, :attr:`tracking_error`) and cost of transport (``CoT``)."""
        return {"velrmsd": self.tracking_error, "CoT": self.CoT}

    @property
    def tracking_error(self) -> torch.Tensor:
        """Per-env RMS xy velocity error (m/s) of the episode (the last one during ``metric_warmup_s``)."""
        return self._metric(0, self._last_rmsd)

    @property
    def CoT(self) -> torch.Tensor:  # noqa: N802 - name used by the trainers
        """Per-env ``mean(sum |tau * qdot|) / (m g mean(|v_xy|))`` of the episode (the last one during warm-up)."""
        return self._metric(1, self._last_cot)

    def _metric(self, column: int, last: torch.Tensor) -> torch.Tensor:
        return torch.where(self._err_count >= self._warmup_steps, self._episode_metrics()[:, column], last)

    def _physics_step(self, actions: torch.Tensor) -> None:
        self.last_actions = self.actions
        self.actions = actions
        targets = self.default_joint_pos + self.cfg["action_scale"] * actions
        self._ctrl.copy_(targets.double())
        self.last_dof_vel = self.dof_vel.clone()
        self.batch.step(nstep=self.decimation)
        self._cache.clear()
        self.foot_contact = self._sensordata[:, self.foot_touch_adr] > 1.0
        self.trunk_contact = self._sensordata[:, self.trunk_touch_adr] > 1.0
        if self._push_steps:
            push_now = (self.episode_length_buf + 1) % self._push_steps == 0
            kick = self._rand(self.num_envs, 2, low=-1.0, high=1.0) * self.cfg["max_push_vel_xy"]
            self._qvel[:, 0:2] += torch.where(push_now[:, None], kick, torch.zeros_like(kick)).double()
            self._cache.clear()
        v = self.base_lin_vel[:, :2]
        self._err_sq_sum += (self.commands[:, :2] - v).square().sum(dim=1)
        self._err_count += 1
        self._power_sum += (self._act_force.float() * self.dof_vel).abs().sum(dim=1)
        self._speed_sum += v.norm(dim=1)
        self._sample_commands_where((self.episode_length_buf + 1) % self._resample_steps == 0)

    def _compute_rewards(self, actions: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        cmd, lin, ang, sigma = self.commands, self.base_lin_vel, self.base_ang_vel, c["tracking_sigma"]
        contact = self.foot_contact
        moving = cmd[:, :2].norm(dim=1) > 0.1
        air = terms.feet_air_time(
            self.feet_air_time, contact, self.last_contacts, moving, c["feet_air_time_target"]
        )
        self.feet_air_time = torch.where(contact | self.last_contacts, 0.0, self.feet_air_time + self.dt)
        self.last_contacts = contact
        failed = self._compute_failures().any(dim=1)
        kernels = {  # unweighted, per env
            "tracking_lin_vel": lambda: torch.exp(-(cmd[:, :2] - lin[:, :2]).square().sum(1) / sigma),
            "tracking_ang_vel": lambda: torch.exp(-(cmd[:, 2] - ang[:, 2]).square() / sigma),
            "lin_vel_z": lambda: lin[:, 2].square(),
            "ang_vel_xy": lambda: ang[:, :2].square().sum(1),
            "orientation": lambda: self.projected_gravity[:, :2].square().sum(1),
            "torques": lambda: self._act_force.float().square().sum(1),
            "dof_acc": lambda: ((self.dof_vel - self.last_dof_vel) / self.dt).square().sum(1),
            "action_rate": lambda: (actions - self.last_actions).square().sum(1),
            "feet_air_time": lambda: air,
            "trot": lambda: terms.trot(contact, *self._partners, moving),
            "termination": lambda: failed.float() / self.dt,  # one-off penalty: scale * 1
        }
        return torch.stack([self.reward_scales[t] * kernels[t]() for t in self.reward_terms], dim=1)

    def _compute_failures(self) -> torch.Tensor:
        args = (self.trunk_contact, self.projected_gravity, self._qpos, self._ground_height, self.cfg)
        return self._cached("failures", lambda: terms.failures(*args))

    def _episode_metrics(self) -> torch.Tensor:
        rmsd = torch.sqrt(self._err_sq_sum / self._err_count.clamp_min(1.0))
        weight = (self.total_mass + self.added_mass) * 9.81  # including the randomised added mass
        cot = self._power_sum / (weight * self._speed_sum.clamp_min(1e-3))
        return torch.stack([rmsd, cot], dim=1)

    def _reset_state(self, mask: torch.Tensor) -> None:
        n, c = self.num_envs, self.cfg
        m = mask[:, None]
        done_metrics = self._episode_metrics()
        self._where(mask, _last_rmsd=done_metrics[:, 0], _last_cot=done_metrics[:, 1])
        self._where(mask, _err_sq_sum=0.0, _err_count=0.0, _power_sum=0.0, _speed_sum=0.0)

        nv = self._qvel.shape[1]
        qpos, qvel = terms.initial_state(self._rand, n, self.default_qpos, self.actuated_qpos, nv, c)
        self._qpos.copy_(torch.where(m, qpos, self._qpos))
        self._qvel.copy_(torch.where(m, qvel, self._qvel))
        self._warm.copy_(torch.where(m, 0.0, self._warm))
        default_ctrl = self.default_joint_pos.double().expand(n, -1)
        self._ctrl.copy_(torch.where(m, default_ctrl, self._ctrl))
        self._cache.clear()

        self._where(mask, actions=0.0, last_actions=0.0, feet_air_time=0.0)
        self._where(mask, last_contacts=False, foot_contact=False, trunk_contact=False)
        self.last_dof_vel = torch.where(m, qvel[:, self.actuated_dof].float(), self.last_dof_vel)
        self._sample_commands_where(mask)
        (f0, f1), (m0, m1) = c["friction_range"], c["added_mass_range"]  # randomised dynamics
        self.friction_coef = torch.where(mask, self._rand(n, low=f0, high=f1), self.friction_coef)
        self.added_mass = torch.where(mask, self._rand(n, low=m0, high=m1), self.added_mass)
        ids = torch.nonzero(mask).flatten()  # CPU tensor: no device synchronisation involved
        if ids.numel() == 0:
            return
        for g in self.foot_geoms:
            self._friction[ids, g, 0] = self.friction_coef[ids].double()
        self._body_mass[ids, self.base_body] = self.nominal_trunk_mass + self.added_mass[ids].double()
        self.batch.set_const(ids.numpy().astype(np.int32))

    def _sample_commands_where(self, mask: torch.Tensor) -> None:
        new = terms.sample_commands(self._rand, self.num_envs, self.cfg)
        self.commands = torch.where(mask[:, None], new, self.commands)

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every environment; the reference-motion history starts full of the first frame."""
        super().reset()
        self._post_reset(torch.ones(self.num_envs, dtype=torch.bool))
        return self.get_observations()

    def _post_reset(self, dones: torch.Tensor) -> None:
        if self.amp_obs_frame_num > 0:  # the history of a new episode starts full of its first frame
            self.ref_obs_buf = style.roll_window(self.ref_obs_buf, self.style_features(), dones)

    def _ground_height(self, xy: torch.Tensor) -> torch.Tensor:
        """Terrain height under world points ``xy`` (..., 2) (0 on flat ground)."""
        if self.terrain == "rough":
            return mdl.ground_height(self.height_map, self.terrain_res, self.terrain_half, xy)
        return torch.zeros(xy.shape[:-1])

    def _compute_observations(self) -> None:
        c = self.cfg
        parts = [
            self.base_ang_vel,
            self.projected_gravity,
            self.commands,
            self.dof_pos - self.default_joint_pos,
            self.dof_vel,
            self.actions,
        ]
        if self.use_height_scan:
            pos = self._qpos[:, 0:3].float()
            parts.append(terms.height_scan(self.base_quat, pos, self.scan_points, self._ground_height))
        clean = torch.cat(parts, dim=1) * self._obs_scale  # in obs_segments order
        self.obs_buf = clean
        if float(c["noise_level"]) > 0:
            noise = self._rand(self.num_envs, clean.shape[1], low=-1.0, high=1.0)
            self.obs_buf = clean + self._noise_scale * noise
        privileged = [
            self.base_lin_vel * c["obs_scale_lin_vel"],
            clean,
            self.friction_coef[:, None],
            self.added_mass[:, None],
            self.foot_contact.float(),
        ]
        self.critic_obs_buf = torch.cat(privileged, dim=1)

    def available_style_fields(self) -> list[str]:
        """Style feature names in the motion-file convention (``ancestor_spec.md`` section 3.1)."""
        return style.available_style_fields(self.joint_names, self.foot_names)

    def default_style_fields(self) -> list[str]:
        """Root height, base velocities, joint positions and velocities, feet (all in the base frame)."""
        return style.default_style_fields(self.joint_names, self.foot_names)

    def all_style_features(self, feet: bool = True) -> torch.Tensor:
        """Every field of :meth:`available_style_fields`, (N, F_all); ``feet=False`` leaves out the feet."""
        pos, lin_vel_w = self._qpos[:, 0:3].float(), self._qvel[:, 0:3].float()
        feet_b = self.foot_pos_b.reshape(self.num_envs, -1) if feet else None
        joints = [self.dof_pos, self.dof_vel]
        return style.all_style_features(pos, self.base_quat, lin_vel_w, self.base_ang_vel, joints, feet_b)

    def style_features(self, fields: list[str] | None = None) -> torch.Tensor:
        """Style features (N, F) of the named fields (default: ``style_fields``)."""
        if fields is None:
            index, feet = self._style_index, self._style_needs_feet
        else:
            index = style.style_columns(self.available_style_fields(), fields)
            feet = any(f in style.foot_style_fields(self.foot_names) for f in fields)
        return self.all_style_features(feet=feet)[:, index]

    def set_ref_motion_source(self, source: Any) -> None:
        """Add ``source(num_envs) -> (N, H * F)`` as ``extras["ref_motion"]``; its ``style_fields`` must be
        ours (else a ``ValueError`` names the motion file(s) and the fields missing or extra)."""
        if source is not None:
            style.check_motion_source(source, self.style_fields, self.amp_obs_frame_num, type(self).__name__)
        self.ref_motion_source = source

    def _obs_groups(self) -> dict[str, torch.Tensor]:
        groups = super()._obs_groups()
        if self.amp_obs_frame_num > 0:
            groups["ref_obs"] = self.ref_obs_buf
        return groups

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, dones, extras = super().step(actions)
        if self.ref_motion_source is not None:
            extras["ref_motion"] = self.ref_motion_source(self.num_envs)
        return obs, rewards, dones, extras

    def mirror_functions(self) -> dict[str, SignedPermutation]:
        """Left-right mirror maps (``SignedPermutation``) of obs, critic_obs, actions [, ref_obs]; ValueError
        when the robot, its standing pose or the height-scan grid is not left-right symmetric."""
        if self._mirror_maps is None:
            self._mirror_maps = build_mirror_maps(self)
        return dict(self._mirror_maps)

    _MJ_STATE = ("_qpos", "_qvel", "_ctrl", "_warm", "_friction", "_body_mass")

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Task buffers plus the MuJoCo state and randomised model fields."""
        return {**super().state_dict(), **{"mj" + n: getattr(self, n).clone() for n in self._MJ_STATE}}

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        self._cache.clear()
        state = {k: v for k, v in state_dict.items() if not k.startswith("mj_")}
        super().load_state_dict(state)
        for name in self._MJ_STATE:
            value = state_dict.get("mj" + name)
            if value is None or tuple(value.shape) != tuple(getattr(self, name).shape):
                raise ValueError(f"state_dict lacks a matching 'mj{name}' entry")
            getattr(self, name).copy_(value)
        self.batch.set_const()
        self.batch.forward()
