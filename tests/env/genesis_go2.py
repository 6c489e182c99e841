"""A minimal Go2 velocity-tracking env on Genesis, with the interface of Genesis's locomotion examples.

Genesis's wheel has no environment classes (its ``Go2Env`` lives in ``examples/locomotion/go2_env.py``), so
the test of st_rl's Genesis adapter builds this one, written for st_rl from Genesis's documented API: a plane
and the Go2 URDF shipped in the wheel, PD position control of the 12 leg joints, commands resampled per
episode, a 45-wide observation (angular velocity, projected gravity, commands, joint positions and
velocities, last actions), tracking rewards, roll/pitch termination and a time limit; ``get_observations() ->
(obs, extras)`` with ``extras["observations"]["critic"]``, ``step -> (obs, rewards, dones, extras)`` with float
``extras["time_outs"]`` and ``extras["episode"]`` at resets, like the example.
"""

from __future__ import annotations

import math
from typing import Any

import torch

JOINTS = [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]
DEFAULT_ANGLES = {"hip": 0.0, "thigh": 0.8, "calf": -1.5}


class MinimalGo2Env:
    """Go2 on flat ground following random (vx, vy, yaw-rate) commands (see the module docstring)."""

    def __init__(self, gs: Any, num_envs: int, episode_length_s: float = 20.0) -> None:
        from genesis.utils.geom import inv_quat, quat_to_xyz, transform_by_quat

        self._inv_quat, self._quat_to_xyz, self._transform_by_quat = inv_quat, quat_to_xyz, transform_by_quat
        self.num_envs = num_envs
        self.num_obs = 45
        self.num_privileged_obs = None
        self.num_actions = 12
        self.device = gs.device
        self.dt = 0.02
        self.max_episode_length = math.ceil(episode_length_s / self.dt)
        self.action_scale = 0.25
        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=self.dt, substeps=2),
            rigid_options=gs.options.RigidOptions(
                enable_collision=True, enable_joint_limit=True, max_collision_pairs=30
            ),
            show_viewer=False,
        )
        self.scene.add_entity(gs.morphs.URDF(file="urdf/plane/plane.urdf", fixed=True))
        self.init_pos = torch.tensor([0.0, 0.0, 0.42], device=self.device)
        self.init_quat = torch.tensor([1.0, 0.0, 0.0, 0.0], device=self.device)
        self.robot = self.scene.add_entity(
            gs.morphs.URDF(
                file="urdf/go2/urdf/go2.urdf",
                pos=self.init_pos.cpu().numpy(),
                quat=self.init_quat.cpu().numpy(),
            )
        )
        self.scene.build(n_envs=num_envs)
        self.dofs = [self.robot.get_joint(name).dof_start for name in JOINTS]
        self.robot.set_dofs_kp([20.0] * 12, self.dofs)
        self.robot.set_dofs_kv([0.5] * 12, self.dofs)
        n, dev = num_envs, self.device
        self.default_dof_pos = torch.tensor(
            [DEFAULT_ANGLES[name.split("_")[1]] for name in JOINTS], device=dev, dtype=torch.float32
        )
        self.gravity = torch.tensor([0.0, 0.0, -1.0], device=dev).repeat(n, 1)
        self.commands = torch.zeros(n, 3, device=dev)
        self.actions = torch.zeros(n, 12, device=dev)
        self.last_actions = torch.zeros(n, 12, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.int32, device=dev)
        self.episode_sums = {
            "tracking_lin_vel": torch.zeros(n, device=dev),
            "action_rate": torch.zeros(n, device=dev),
        }
        self.obs_buf = torch.zeros(n, self.num_obs, device=dev)
        self.extras: dict[str, Any] = {"observations": {}}
        self.reset()

    def _resample(self, idx: torch.Tensor) -> None:
        ranges = torch.tensor([[-0.5, 1.0], [-0.3, 0.3], [-0.5, 0.5]], device=self.device)
        u = torch.rand(len(idx), 3, device=self.device)
        self.commands[idx] = ranges[:, 0] + u * (ranges[:, 1] - ranges[:, 0])

    def _state(self) -> None:
        inv = self._inv_quat(self.robot.get_quat())
        self.base_lin_vel = self._transform_by_quat(self.robot.get_vel(), inv)
        self.base_ang_vel = self._transform_by_quat(self.robot.get_ang(), inv)
        self.projected_gravity = self._transform_by_quat(self.gravity, inv)
        self.rpy = self._quat_to_xyz(self.robot.get_quat(), rpy=True, degrees=True)
        self.dof_pos = self.robot.get_dofs_position(self.dofs)
        self.dof_vel = self.robot.get_dofs_velocity(self.dofs)

    def _observe(self) -> None:
        self.obs_buf = torch.cat(
            [
                self.base_ang_vel * 0.25,
                self.projected_gravity,
                self.commands * torch.tensor([2.0, 2.0, 0.25], device=self.device),
                self.dof_pos - self.default_dof_pos,
                self.dof_vel * 0.05,
                self.actions,
            ],
            dim=-1,
        ).float()
        self.extras["observations"]["critic"] = self.obs_buf

    def reset_idx(self, idx: torch.Tensor) -> None:
        if len(idx) == 0:
            return
        self.robot.set_dofs_position(
            self.default_dof_pos.repeat(len(idx), 1), self.dofs, zero_velocity=True, envs_idx=idx
        )
        self.robot.set_pos(self.init_pos.repeat(len(idx), 1), zero_velocity=False, envs_idx=idx)
        self.robot.set_quat(self.init_quat.repeat(len(idx), 1), zero_velocity=False, envs_idx=idx)
        self.robot.zero_all_dofs_velocity(idx)
        self.last_actions[idx] = 0.0
        self.actions[idx] = 0.0
        self.episode_length_buf[idx] = 0
        self.extras["episode"] = {}
        for key, sums in self.episode_sums.items():
            self.extras["episode"][f"rew_{key}"] = float(sums[idx].mean()) / (
                self.max_episode_length * self.dt
            )
            sums[idx] = 0.0
        self._resample(idx)

    def reset(self) -> tuple[torch.Tensor, None]:
        self.reset_idx(torch.arange(self.num_envs, device=self.device))
        self._state()
        self._observe()
        return self.obs_buf, None

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        self.extras["observations"]["critic"] = self.obs_buf
        return self.obs_buf, self.extras

    def get_privileged_observations(self) -> None:
        return None

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        self.actions = actions.clamp(-100.0, 100.0).to(self.device)
        self.robot.control_dofs_position(self.actions * self.action_scale + self.default_dof_pos, self.dofs)
        self.scene.step()
        self.episode_length_buf += 1
        self._state()
        tracking = torch.exp(-((self.commands[:, :2] - self.base_lin_vel[:, :2]) ** 2).sum(-1) / 0.25)
        action_rate = ((self.actions - self.last_actions) ** 2).sum(-1)
        rew = (1.0 * tracking - 0.005 * action_rate) * self.dt
        self.episode_sums["tracking_lin_vel"] += tracking * self.dt
        self.episode_sums["action_rate"] += -0.005 * action_rate * self.dt
        time_out = self.episode_length_buf > self.max_episode_length
        fallen = (self.rpy[:, 0].abs() > 10.0) | (self.rpy[:, 1].abs() > 10.0)
        reset_buf = time_out | fallen
        self.extras["time_outs"] = time_out.float()
        self.last_actions = self.actions.clone()
        self.reset_idx(reset_buf.nonzero(as_tuple=False).reshape(-1))
        if bool(reset_buf.any()):
            self._state()
        self._observe()
        return self.obs_buf, rew, reset_buf, self.extras


def make_go2_env(gs: Any, num_envs: int = 4) -> MinimalGo2Env:
    """Initialise Genesis on the CPU (once per process) and build :class:`MinimalGo2Env`."""
    if not getattr(gs, "_initialized", False):
        gs.init(backend=gs.cpu, logging_level="warning")
    return MinimalGo2Env(gs, num_envs)
