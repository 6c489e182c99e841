"""A held-out environment with the legged_gym / parkour ``VecEnv`` API, for client tests (pure PyTorch).

API (legged_gym ``BaseTask`` / ``LeggedRobot``, parkour's observation components; ancestor_spec.md 1.1):
``LeggedGymLikeEnv(cfg, sim_params, physics_engine, sim_device, headless)`` with a legged_gym-style env config
(:class:`LeggedRobotCfg` and subclasses, instances of :class:`clients.legged_gym_cfg.BaseConfig`); attributes
``num_envs``, ``num_obs``, ``num_privileged_obs`` (None without ``env.privileged_obs_components``),
``num_actions``, ``max_episode_length`` (``np.ceil(episode_length_s / dt)``, a numpy float as in legged_gym),
``max_episode_length_s``, ``episode_length_buf`` (long, writable), ``obs_buf``, ``privileged_obs_buf``,
``rew_buf``, ``reset_buf`` (bool), ``time_out_buf``, ``extras``, ``device`` (a string), ``dt``, ``cfg``;
``step(actions) -> (obs, privileged_obs | None, rewards, dones, infos)`` with the finished envs reset inside (the
returned obs of a done env is its first one after the reset); ``reset() -> (obs, privileged_obs)`` (all envs,
then one zero-action step); ``get_observations()``, ``get_privileged_observations()``; the properties
``obs_segments`` / ``privileged_obs_segments`` (OrderedDict name -> shape tuple; the latter None without
privileged components). ``infos["episode"]`` is written when envs reset and, as in legged_gym, then stays in
the (reused) extras dict: ``rew_<term>`` (episode sum / ``max_episode_length_s``), ``timeout_ratio``,
``max_command_x``; ``infos["time_outs"]`` (bool) with ``env.send_timeouts``, refreshed every step (legged_gym
refreshes it only at steps where some env resets, which with thousands of envs is every step). st_gym's metric
attributes ``tracking_error`` (per-env RMS velocity-tracking error of the current episode) and ``CoT`` (per-env
cost of transport) are there too.

Components (parkour names): ``lin_vel(3,)``, ``ang_vel(3,)``, ``projected_gravity(3,)``, ``commands(3,)``,
``dof_pos(12,)``, ``dof_vel(12,)``, ``last_actions(12,)``, ``height_measurements(1, 21, 11)`` (the Go2 grid of
``terrain.measured_points_x/y``), ``forward_depth(1, H, W)`` (``sensor.forward_camera.output_resolution``), so
parkour's Go2 configs (``48 + 21 * 11`` observations) fit unchanged.

The task (invented for these tests): a 12-joint quadruped reduced to kinematics. Actions set joint targets
``q* = q0 + action_scale * a``; joints follow them with a first-order lag (time constant 0.04 s). The body's
velocity relaxes (0.1 s) towards what the legs produce: forward speed from the mean thigh deviation, lateral
speed from the mean hip deviation, yaw rate from the left-right thigh difference (each times 3), plus noise.
Front-rear and left-right calf differences tilt the body (pitch, roll; restored at 2/s); a tilt beyond 0.8 rad
terminates the episode. The ground is ``h(x, y) = 0.08 sin(2 pi x / 1.6) cos(2 pi y / 1.6)``: the height map
samples it around the body (``h(base) - h(point)``), the depth image along rays ahead. Reward (legged_gym
style, each scale multiplied by ``dt``; scales 1, 0.5, -0.001, -0.01): ``tracking_lin_vel exp(-|cmd_xy -
v_xy|^2 / 0.5)``, ``tracking_ang_vel exp(-(cmd_yaw - w_z)^2 / 0.5)``, ``action_rate |a - a_prev|^2``,
``dof_error |q - q0|^2``. Over 100 steps a zero-action policy earns about 0.9 per env, the linear oracle (command
mapped to thigh / hip targets) about 2.9; legged_gym's default PPO config gets from 0.9 to about 2.2 in 25
iterations of 128 envs. ``dt = 0.02`` s (sim dt 0.005 x decimation 4).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from clients.legged_gym_cfg import BaseConfig

__all__ = ["LeggedGymLikeEnv", "LeggedRobotCfg", "ToyDistillCfg", "ToyFieldCfg", "ToyRoughCfg", "make_env"]

JOINT_NAMES = [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR") for part in ("hip", "thigh", "calf")]


class LeggedRobotCfg(BaseConfig):
    """The env config, written as legged_gym writes ``LeggedRobotCfg`` (only what this env reads)."""

    seed = 1

    class env:
        num_envs = 32
        num_observations = None  # No use, use obs_components
        num_privileged_obs = None  # No use, use privileged_obs_components
        num_actions = 12
        send_timeouts = True  # send time out information to the algorithm
        episode_length_s = 4  # episode length in seconds
        obs_components = [
            "lin_vel",
            "ang_vel",
            "projected_gravity",
            "commands",
            "dof_pos",
            "dof_vel",
            "last_actions",
            "height_measurements",
        ]

    class terrain:
        measure_heights = True
        measured_points_x = [round(-0.5 + 0.1 * i, 2) for i in range(21)]  # [-0.5, 1.5]
        measured_points_y = [round(-0.5 + 0.1 * i, 2) for i in range(11)]  # [-0.5, 0.5]
        amplitude = 0.08  # [m]
        wavelength = 1.6  # [m]

    class commands:
        resampling_time = 5  # [s]

        class ranges:
            lin_vel_x = [-1.0, 1.5]
            lin_vel_y = [-1.0, 1.0]
            ang_vel_yaw = [-2.0, 2.0]

    class init_state:
        pos = [0.0, 0.0, 0.3]  # [m]
        default_joint_angles = {
            name: {"hip": (0.1 if name.startswith(("FL", "RL")) else -0.1), "thigh": 0.8, "calf": -1.5}[
                name.split("_")[1]
            ]
            for name in JOINT_NAMES
        }

    class control:
        action_scale = 0.5
        decimation = 4

    class normalization:
        class obs_scales:
            lin_vel = 1.0
            ang_vel = 0.25
            dof_pos = 1.0
            dof_vel = 0.05
            height_measurements = 5.0

        clip_observations = 100.0
        clip_actions = 100.0

    class rewards:
        class scales:
            tracking_lin_vel = 1.0
            tracking_ang_vel = 0.5
            action_rate = -0.001
            dof_error = -0.01

        tracking_sigma = 0.5
        max_tilt = 0.8  # [rad] roll or pitch that terminates the episode

    class noise:
        add_noise = False

    class sim:
        dt = 0.005
        gravity = [0.0, 0.0, -9.81]


class ToyRoughCfg(LeggedRobotCfg):
    """Walking on gentle waves (parkour's ``Go2RoughCfg`` components)."""


class ToyFieldCfg(ToyRoughCfg):
    """The same robot on higher waves (parkour's field task keeps the rough task's components)."""

    class terrain(ToyRoughCfg.terrain):
        amplitude = 0.15


class ToyDistillCfg(ToyFieldCfg):
    """parkour's distillation task: the actor sees a depth image instead of the height map, the critic (and the
    teacher, which labels with the critic observations) the field task's components."""

    class env(ToyFieldCfg.env):
        episode_length_s = 1
        obs_components = [
            "lin_vel",
            "ang_vel",
            "projected_gravity",
            "commands",
            "dof_pos",
            "dof_vel",
            "last_actions",
            "forward_depth",
        ]
        privileged_obs_components = [
            "lin_vel",
            "ang_vel",
            "projected_gravity",
            "commands",
            "dof_pos",
            "dof_vel",
            "last_actions",
            "height_measurements",
        ]

    class sensor:
        class forward_camera:
            obs_components = ["forward_depth"]
            output_resolution = [24, 32]  # parkour's Go2 camera gives [48, 64]; smaller keeps the tests fast
            depth_range = [0.0, 3.0]

    class normalization(ToyFieldCfg.normalization):
        class obs_scales(ToyFieldCfg.normalization.obs_scales):
            forward_depth = 1.0


class LeggedGymLikeEnv:
    """See the module docstring."""

    def __init__(
        self,
        cfg: LeggedRobotCfg,
        sim_params: Any = None,
        physics_engine: Any = None,
        sim_device: str = "cpu",
        headless: bool = True,
    ) -> None:
        self.cfg = cfg
        self.sim_params = sim_params
        self.physics_engine = physics_engine
        self.headless = headless
        self.device = sim_device
        self.num_envs = int(cfg.env.num_envs)
        self.num_actions = int(cfg.env.num_actions)
        self.dt = cfg.control.decimation * cfg.sim.dt
        self.max_episode_length_s = cfg.env.episode_length_s
        self.max_episode_length = np.ceil(self.max_episode_length_s / self.dt)
        self.obs_components = list(cfg.env.obs_components)
        self.privileged_obs_components = getattr(cfg.env, "privileged_obs_components", None)
        self.num_obs = self._segments_width(self.obs_segments)
        priv = self.privileged_obs_segments
        self.num_privileged_obs = None if priv is None else self._segments_width(priv)

        n, a, dev = self.num_envs, self.num_actions, self.device
        self.default_dof_pos = torch.tensor(
            [cfg.init_state.default_joint_angles[name] for name in JOINT_NAMES[:a]], device=dev
        )
        scales = cfg.rewards.scales
        self.reward_scales = {
            k: float(getattr(scales, k)) * self.dt for k in dir(scales) if not k.startswith("_")
        }
        self.episode_sums = {k: torch.zeros(n, device=dev) for k in self.reward_scales}
        self.dof_pos = self.default_dof_pos.repeat(n, 1)
        self.dof_vel = torch.zeros(n, a, device=dev)
        self.actions = torch.zeros(n, a, device=dev)
        self.last_actions = torch.zeros(n, a, device=dev)
        self.base_lin_vel = torch.zeros(n, 3, device=dev)
        self.base_ang_vel = torch.zeros(n, 3, device=dev)
        self.roll_pitch = torch.zeros(n, 2, device=dev)
        self.base_pos = torch.zeros(n, 2, device=dev)
        self.base_yaw = torch.zeros(n, device=dev)
        self.commands = torch.zeros(n, 3, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.reset_buf = torch.ones(n, dtype=torch.bool, device=dev)
        self.time_out_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.rew_buf = torch.zeros(n, device=dev)
        self.obs_buf = torch.zeros(n, self.num_obs, device=dev)
        self.privileged_obs_buf = (
            None if self.num_privileged_obs is None else torch.zeros(n, self.num_privileged_obs, device=dev)
        )
        self.extras: dict[str, Any] = {}
        self.common_step_counter = 0
        ranges, obs_scales = cfg.commands.ranges, cfg.normalization.obs_scales
        self._command_low = torch.tensor(
            [ranges.lin_vel_x[0], ranges.lin_vel_y[0], ranges.ang_vel_yaw[0]], device=dev
        )
        self._command_high = torch.tensor(
            [ranges.lin_vel_x[1], ranges.lin_vel_y[1], ranges.ang_vel_yaw[1]], device=dev
        )
        self._commands_scale = torch.tensor(
            [obs_scales.lin_vel, obs_scales.lin_vel, obs_scales.ang_vel], device=dev
        )
        self._err_sq_sum = torch.zeros(n, device=dev)
        self._power_sum = torch.zeros(n, device=dev)
        self._speed_sum = torch.zeros(n, device=dev)
        self._steps = torch.zeros(n, device=dev)
        px = torch.tensor(cfg.terrain.measured_points_x, device=dev)
        py = torch.tensor(cfg.terrain.measured_points_y, device=dev)
        gx, gy = torch.meshgrid(px, py, indexing="ij")  # (nx, ny), x-major as parkour's height map
        self._height_points = torch.stack([gx.flatten(), gy.flatten()], dim=-1)  # (nx * ny, 2)
        if "forward_depth" in self.obs_components + list(self.privileged_obs_components or []):
            h, w = cfg.sensor.forward_camera.output_resolution
            dist = torch.linspace(2.0, 0.3, h, device=dev)  # image rows: far (top) to near (bottom)
            lateral = torch.linspace(0.6, -0.6, w, device=dev)
            gd, gl = torch.meshgrid(dist, lateral, indexing="ij")
            self._depth_points = torch.stack([gd.flatten(), gl.flatten()], dim=-1)  # (h * w, 2)
            self._depth_base = gd.flatten()
        self.reset_idx(torch.arange(n, device=dev))
        self.extras = {}  # nothing has finished yet
        self.compute_observations()

    # ------------------------------------------------------------------ layout
    def _component_shape(self, name: str) -> tuple[int, ...]:
        a = self.num_actions
        if name in ("lin_vel", "ang_vel", "projected_gravity", "commands"):
            return (3,)
        if name in ("dof_pos", "dof_vel", "last_actions"):
            return (a,)
        if name == "height_measurements":
            return (1, len(self.cfg.terrain.measured_points_x), len(self.cfg.terrain.measured_points_y))
        if name == "forward_depth":
            return (1, *self.cfg.sensor.forward_camera.output_resolution)
        raise ValueError(f"Unknown observation component {name!r}")

    @staticmethod
    def _segments_width(segments: OrderedDict) -> int:
        return int(sum(math.prod(shape) for shape in segments.values()))

    @property
    def obs_segments(self) -> OrderedDict:
        """Actor observation layout: component name -> shape, in the order of the flat observation."""
        return OrderedDict((name, self._component_shape(name)) for name in self.obs_components)

    @property
    def privileged_obs_segments(self) -> OrderedDict | None:
        """Critic observation layout (None without privileged components)."""
        if self.privileged_obs_components is None:
            return None
        return OrderedDict((name, self._component_shape(name)) for name in self.privileged_obs_components)

    # ------------------------------------------------------------------ VecEnv API
    def get_observations(self) -> torch.Tensor:
        return self.obs_buf

    def get_privileged_observations(self) -> torch.Tensor | None:
        return self.privileged_obs_buf

    def reset(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Reset all envs, then take one zero-action step."""
        self.reset_idx(torch.arange(self.num_envs, device=self.device))
        obs, privileged_obs, _, _, _ = self.step(
            torch.zeros(self.num_envs, self.num_actions, device=self.device)
        )
        return obs, privileged_obs

    def step(self, actions: torch.Tensor):
        clip = self.cfg.normalization.clip_actions
        self.actions = torch.clip(actions, -clip, clip).to(self.device)
        self._physics_step()
        self.post_physics_step()
        clip_obs = self.cfg.normalization.clip_observations
        self.obs_buf = torch.clip(self.obs_buf, -clip_obs, clip_obs)
        if self.privileged_obs_buf is not None:
            self.privileged_obs_buf = torch.clip(self.privileged_obs_buf, -clip_obs, clip_obs)
        return self.obs_buf, self.privileged_obs_buf, self.rew_buf, self.reset_buf, self.extras

    # ------------------------------------------------------------------ dynamics
    def _physics_step(self) -> None:
        dt = self.dt
        n = self.num_envs
        target = self.default_dof_pos + self.cfg.control.action_scale * self.actions
        alpha = 1.0 - math.exp(-dt / 0.04)
        new_pos = self.dof_pos + alpha * (target - self.dof_pos)
        self.dof_vel = (new_pos - self.dof_pos) / dt
        self._torques = 40.0 * (target - self.dof_pos)
        self.dof_pos = new_pos
        d = (self.dof_pos - self.default_dof_pos).view(n, 4, 3)  # legs FL, FR, RL, RR x (hip, thigh, calf)
        hip, thigh, calf = d[..., 0], d[..., 1], d[..., 2]
        v_target = torch.stack(
            [
                3.0 * thigh.mean(-1),
                3.0 * hip.mean(-1),
                3.0 * (thigh[:, [0, 2]].mean(-1) - thigh[:, [1, 3]].mean(-1)),
            ],
            dim=-1,
        )
        beta = 1.0 - math.exp(-dt / 0.1)
        v = torch.stack([self.base_lin_vel[:, 0], self.base_lin_vel[:, 1], self.base_ang_vel[:, 2]], dim=-1)
        v = v + beta * (v_target - v) + 0.05 * math.sqrt(dt) * torch.randn(n, 3, device=self.device)
        tilt_rate = torch.stack(
            [
                2.0 * (calf[:, [0, 2]].mean(-1) - calf[:, [1, 3]].mean(-1)),  # roll: left - right
                2.0 * (calf[:, [0, 1]].mean(-1) - calf[:, [2, 3]].mean(-1)),  # pitch: front - rear
            ],
            dim=-1,
        )
        tilt_rate = tilt_rate - 2.0 * self.roll_pitch + 0.3 * torch.randn(n, 2, device=self.device)
        self.roll_pitch = self.roll_pitch + dt * tilt_rate
        self.base_lin_vel = torch.stack([v[:, 0], v[:, 1], 0.02 * torch.randn(n, device=self.device)], -1)
        self.base_ang_vel = torch.cat([tilt_rate, v[:, 2:3]], dim=-1)
        self.base_yaw = self.base_yaw + dt * v[:, 2]
        cos, sin = torch.cos(self.base_yaw), torch.sin(self.base_yaw)
        self.base_pos = self.base_pos + dt * torch.stack(
            [cos * v[:, 0] - sin * v[:, 1], sin * v[:, 0] + cos * v[:, 1]], dim=-1
        )

    def _terrain_height(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        k = 2.0 * math.pi / self.cfg.terrain.wavelength
        return self.cfg.terrain.amplitude * torch.sin(k * x) * torch.cos(k * y)

    def _terrain_around(self, body_points: torch.Tensor) -> torch.Tensor:
        """Ground height at body-frame (x, y) offsets ``(P, 2)`` minus the height under the body: ``(N, P)``."""
        cos, sin = torch.cos(self.base_yaw)[:, None], torch.sin(self.base_yaw)[:, None]
        px, py = body_points[:, 0], body_points[:, 1]
        bx, by = self.base_pos[:, 0:1], self.base_pos[:, 1:2]
        points = self._terrain_height(cos * px - sin * py + bx, sin * px + cos * py + by)
        return points - self._terrain_height(bx, by)

    def post_physics_step(self) -> None:
        self.episode_length_buf += 1
        self.common_step_counter += 1
        resample = int(self.cfg.commands.resampling_time / self.dt)
        env_ids = (self.episode_length_buf % resample == 0).nonzero(as_tuple=False).flatten()
        self._resample_commands(env_ids)
        self.check_termination()
        self.compute_reward()
        self._update_metrics()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()
        self.reset_idx(env_ids)
        self.compute_observations()
        self.last_actions[:] = self.actions

    def check_termination(self) -> None:
        self.reset_buf = (self.roll_pitch.abs() > self.cfg.rewards.max_tilt).any(dim=-1)
        self.time_out_buf = self.episode_length_buf > self.max_episode_length
        self.reset_buf |= self.time_out_buf
        if self.cfg.env.send_timeouts:
            # legged_gym sets it in reset_idx, i.e. only at steps where some env resets (every step with
            # thousands of envs); with a few dozen envs a stale flag would bootstrap envs that did not time out
            self.extras["time_outs"] = self.time_out_buf

    def _reward_terms(self) -> dict[str, torch.Tensor]:
        sigma = self.cfg.rewards.tracking_sigma
        lin_err = ((self.commands[:, :2] - self.base_lin_vel[:, :2]) ** 2).sum(-1)
        ang_err = (self.commands[:, 2] - self.base_ang_vel[:, 2]) ** 2
        return {
            "tracking_lin_vel": torch.exp(-lin_err / sigma),
            "tracking_ang_vel": torch.exp(-ang_err / sigma),
            "action_rate": ((self.last_actions - self.actions) ** 2).sum(-1),
            "dof_error": ((self.dof_pos - self.default_dof_pos) ** 2).sum(-1),
        }

    def compute_reward(self) -> None:
        self.rew_buf = torch.zeros(self.num_envs, device=self.device)
        for name, value in self._reward_terms().items():
            rew = value * self.reward_scales[name]
            self.rew_buf += rew
            self.episode_sums[name] += rew

    def _update_metrics(self) -> None:
        err = ((self.commands[:, :2] - self.base_lin_vel[:, :2]) ** 2).sum(-1)
        self._err_sq_sum += err
        self._power_sum += (self._torques * self.dof_vel).abs().sum(-1)
        self._speed_sum += self.base_lin_vel[:, :2].norm(dim=-1)
        self._steps += 1

    @property
    def tracking_error(self) -> torch.Tensor:
        """Per-env RMS velocity-tracking error of the current episode (st_gym's metric attribute)."""
        return torch.sqrt(self._err_sq_sum / self._steps.clamp(min=1))

    @property
    def CoT(self) -> torch.Tensor:  # noqa: N802 - st_gym's name
        """Per-env cost of transport of the current episode: mean power / (m g mean speed), m = 15 kg."""
        return self._power_sum / (15.0 * 9.81 * self._speed_sum.clamp(min=0.1))

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) == 0:
            return
        k = len(env_ids)
        dev = self.device
        self.dof_pos[env_ids] = self.default_dof_pos + 0.05 * torch.randn(k, self.num_actions, device=dev)
        self.dof_vel[env_ids] = 0.0
        self.base_lin_vel[env_ids] = 0.0
        self.base_ang_vel[env_ids] = 0.0
        self.roll_pitch[env_ids] = 0.05 * torch.randn(k, 2, device=dev)
        self.base_pos[env_ids] = 2.0 * torch.rand(k, 2, device=dev) - 1.0
        self.base_yaw[env_ids] = (2.0 * torch.rand(k, device=dev) - 1.0) * math.pi
        self.last_actions[env_ids] = 0.0
        self._resample_commands(env_ids)
        self.extras["episode"] = {}
        for key in self.episode_sums:
            self.extras["episode"]["rew_" + key] = (
                torch.mean(self.episode_sums[key][env_ids]) / self.max_episode_length_s
            )
            self.episode_sums[key][env_ids] = 0.0
        self.extras["episode"]["timeout_ratio"] = self.time_out_buf[env_ids].float().mean()
        self.extras["episode"]["max_command_x"] = self.cfg.commands.ranges.lin_vel_x[1]
        self.episode_length_buf[env_ids] = 0
        self.reset_buf[env_ids] = True
        for buf in (self._err_sq_sum, self._power_sum, self._speed_sum, self._steps):
            buf[env_ids] = 0.0

    def _resample_commands(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) == 0:
            return
        low, high = self._command_low, self._command_high
        self.commands[env_ids] = low + (high - low) * torch.rand(len(env_ids), 3, device=self.device)

    # ------------------------------------------------------------------ observations
    def _component(self, name: str) -> torch.Tensor:
        scales = self.cfg.normalization.obs_scales
        n = self.num_envs
        if name == "lin_vel":
            return self.base_lin_vel * scales.lin_vel
        if name == "ang_vel":
            return self.base_ang_vel * scales.ang_vel
        if name == "projected_gravity":
            roll, pitch = self.roll_pitch[:, 0], self.roll_pitch[:, 1]
            return torch.stack(
                [-torch.sin(pitch), torch.sin(roll) * torch.cos(pitch), -torch.cos(roll) * torch.cos(pitch)],
                -1,
            )
        if name == "commands":
            return self.commands * self._commands_scale
        if name == "dof_pos":
            return (self.dof_pos - self.default_dof_pos) * scales.dof_pos
        if name == "dof_vel":
            return self.dof_vel * scales.dof_vel
        if name == "last_actions":
            return self.actions
        if name == "height_measurements":
            rise = self._terrain_around(self._height_points)
            return torch.clip(-rise, -1.0, 1.0) * scales.height_measurements
        if name == "forward_depth":
            near, far = self.cfg.sensor.forward_camera.depth_range
            depth = self._depth_base[None] - 2.0 * self._terrain_around(self._depth_points)
            return ((depth.clip(near, far) - near) / (far - near)).view(n, -1) * scales.forward_depth
        raise ValueError(f"Unknown observation component {name!r}")

    def compute_observations(self) -> None:
        n = self.num_envs
        parts = {name: self._component(name).reshape(n, -1) for name in self.obs_components}
        self.obs_buf = torch.cat([parts[name] for name in self.obs_components], dim=-1)
        if self.privileged_obs_components is not None:
            for name in self.privileged_obs_components:
                if name not in parts:
                    parts[name] = self._component(name).reshape(n, -1)
            self.privileged_obs_buf = torch.cat([parts[name] for name in self.privileged_obs_components], -1)


def make_env(cfg_class: type[LeggedRobotCfg], num_envs: int | None = None, seed: int | None = None):
    """legged_gym's ``task_registry.make_env``: an env config instance (``--num_envs`` applied), the global seed
    set from ``env_cfg.seed``, the env built from the config. Returns ``(env, env_cfg)``."""
    env_cfg = cfg_class()
    if num_envs is not None:
        env_cfg.env.num_envs = num_envs
    if seed is not None:
        env_cfg.seed = seed
    torch.manual_seed(env_cfg.seed)
    np.random.seed(env_cfg.seed)
    env = LeggedGymLikeEnv(cfg=env_cfg, sim_params=None, physics_engine=None, sim_device="cpu", headless=True)
    return env, env_cfg
