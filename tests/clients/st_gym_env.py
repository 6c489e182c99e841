"""A held-out task presented the way st_gym's ``StRlVecEnvWrapper`` presents an Isaac Lab env to st_rl.

The wrapper derives from ``st_rl.env.VecEnv`` and gives (st_gym ``wrappers/st_rl/vecenv_wrapper.py``, Isaac Lab's
``RslRlVecEnvWrapper`` underneath): ``get_observations() -> (obs, extras)`` and ``reset() -> (obs, extras)``,
``step(actions) -> (obs, rewards, dones, extras)`` with LONG 0/1 dones, ``extras["observations"]`` holding the
groups ``"policy"``, ``"critic"`` and (AMP) ``"ref_obs"`` of shape ``(N, H, F)`` oldest frame first,
``extras["ref_motion"]`` the expert window ``(N, H * F)`` frame-major, ``extras["time_outs"]`` and
``extras["log"]`` (flat, keys with "/"); properties ``num_envs``, ``num_actions``, ``num_obs``,
``num_privileged_obs`` (0 without a critic group), ``episode_length_buf`` (get and set), ``cfg``, ``unwrapped``;
attributes ``device`` and ``max_episode_length`` set in ``__init__``; ``seed()``, ``close()``; the metric
properties ``CoT`` and ``tracking_error``.

The task (invented for these tests, not one of st_rl's): a planar body with first-order velocity dynamics and
unknown friction must follow a velocity command. Actions ``a`` (4) are two force commands and two "posture"
joints; ``v' = v + dt (f - friction * v)``. Policy observations (12): command (2), measured velocity (2, noisy),
posture joints (2), last actions (4), and the joint observations (2: the joint positions again through a fixed
nonlinearity) last, so that an encoder on ``"joint_obs"`` sees the last component, as st_gym's exporter assumes.
Critic observations (15): the policy's plus true velocity (2) and friction (1). Reward:
``exp(-|v - cmd|^2 / 0.25) - 0.01 |a|^2``; an episode ends when ``|v| > 4`` (termination) or after
``max_episode_length`` steps (time-out). Style (AMP) features per frame: ``(v_x, v_y, |a_joints|)``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from st_rl.env import VecEnv

OBS_SEGMENTS = {"obs": 10, "joint_obs": 2}
CRITIC_OBS_SEGMENTS = {"obs": 10, "joint_obs": 2, "privileged_obs": 3}
STYLE_FEATURES, STYLE_FRAMES = 3, 2
STYLE_WIDTH = STYLE_FEATURES * STYLE_FRAMES


class StGymLikeEnv(VecEnv):
    """st_gym's wrapped env, as st_rl sees it (see the module docstring).

    Args:
        num_envs: parallel envs.
        amp: emit ``ref_obs`` / ``ref_motion`` (a task with a reference-motion loader).
        teacher_obs: the policy group is the critic's (a privileged teacher's task).
        episode_length: time-out in steps.
        seed: RNG seed of the env's own generator.
    """

    def __init__(
        self, num_envs: int = 32, *, amp: bool = False, teacher_obs: bool = False, episode_length: int = 40,
        seed: int = 0,
    ) -> None:  # fmt: skip
        self.device = torch.device("cpu")
        self.max_episode_length = episode_length
        self._num_envs = num_envs
        self.amp = amp
        self.teacher_obs = teacher_obs
        self.gen = torch.Generator().manual_seed(seed)
        self._cfg = SimpleNamespace(sim=SimpleNamespace(dt=0.005), decimation=4, seed=seed)
        self.dt = 0.05
        self.vel = torch.zeros(num_envs, 2)
        self.cmd = torch.zeros(num_envs, 2)
        self.friction = torch.zeros(num_envs, 1)
        self.joints = torch.zeros(num_envs, 2)
        self.last_actions = torch.zeros(num_envs, 4)
        self.style_history = torch.zeros(num_envs, STYLE_FRAMES, STYLE_FEATURES)
        self._episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.episode_sums = {"track": torch.zeros(num_envs), "effort": torch.zeros(num_envs)}
        self.sq_error_sum = torch.zeros(num_envs)
        self.closed = False
        self._reset(torch.arange(num_envs))

    # ----------------------------------------------------------------------------- st_gym's properties
    @property
    def unwrapped(self) -> Any:
        return self

    @property
    def cfg(self) -> Any:
        return self._cfg

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def num_actions(self) -> int:
        return 4

    @property
    def num_obs(self) -> int:
        return 15 if self.teacher_obs else 12

    @property
    def num_privileged_obs(self) -> int:
        return 15

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self._episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self._episode_length_buf = value

    @property
    def CoT(self) -> torch.Tensor:  # noqa: N802 - st_gym's name
        power = (self.last_actions[:, :2] * self.vel).abs().sum(-1)
        speed = self.vel.norm(dim=-1).clamp(min=1e-3)
        return power / (9.8 * speed)

    @property
    def tracking_error(self) -> torch.Tensor:
        steps = self._episode_length_buf.clamp(min=1).float()
        return (self.sq_error_sum / steps).sqrt().mean()

    def seed(self, seed: int = -1) -> int:
        if seed >= 0:
            self.gen.manual_seed(seed)
        return seed

    def close(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------------------------ the task
    def _rand(self, n: int, k: int, lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, k, generator=self.gen)

    def _reset(self, ids: torch.Tensor) -> None:
        n = len(ids)
        if n == 0:
            return
        self.vel[ids] = 0.0
        self.cmd[ids] = self._rand(n, 2, -1.0, 1.0)
        self.friction[ids] = self._rand(n, 1, 0.5, 1.5)
        self.joints[ids] = 0.0
        self.last_actions[ids] = 0.0
        self.style_history[ids] = 0.0
        self._episode_length_buf[ids] = 0
        self.sq_error_sum[ids] = 0.0

    def _groups(self) -> dict[str, torch.Tensor]:
        noise = 0.05 * torch.randn(self.num_envs, 2, generator=self.gen)
        joint_obs = torch.sin(self.joints)
        policy = torch.cat([self.cmd, self.vel + noise, self.joints, self.last_actions, joint_obs], dim=-1)
        critic = torch.cat([policy, self.vel, self.friction], dim=-1)
        groups = {"policy": critic.clone() if self.teacher_obs else policy, "critic": critic}
        if self.amp:
            groups["ref_obs"] = self.style_history.clone()
        return groups

    def _ref_motion(self) -> torch.Tensor:
        # the expert moves at its command with relaxed joints
        frame = torch.cat([self.cmd, torch.zeros(self.num_envs, 1)], dim=-1)
        return frame.repeat(1, STYLE_FRAMES)

    def get_observations(self) -> tuple[torch.Tensor, dict[str, Any]]:
        groups = self._groups()
        extras: dict[str, Any] = {"observations": groups}
        if self.amp:
            extras["ref_motion"] = self._ref_motion()
        return groups["policy"], extras

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        self._reset(torch.arange(self.num_envs))
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        if self.closed:
            raise RuntimeError("step() on a closed env")
        a = actions.detach().to(self.device).clamp(-5.0, 5.0)
        self.vel = self.vel + self.dt * (a[:, :2] - self.friction * self.vel)
        self.joints = 0.9 * self.joints + 0.1 * a[:, 2:]
        self.last_actions = a
        error = (self.vel - self.cmd).pow(2).sum(-1)
        track = torch.exp(-error / 0.25)
        effort = 0.01 * a.pow(2).sum(-1)
        rewards = track - effort
        self.episode_sums["track"] += track
        self.episode_sums["effort"] += effort
        self.sq_error_sum += error
        frame = torch.cat([self.vel, a[:, 2:].abs().sum(-1, keepdim=True)], dim=-1)
        self.style_history = torch.cat([self.style_history[:, 1:], frame.unsqueeze(1)], dim=1)
        self._episode_length_buf += 1
        terminated = self.vel.norm(dim=-1) > 4.0
        time_outs = self._episode_length_buf >= self.max_episode_length
        dones = terminated | time_outs
        log: dict[str, Any] = {}
        ids = dones.nonzero(as_tuple=False).flatten()
        if len(ids):
            seconds = self.max_episode_length * self.dt
            for name, sums in self.episode_sums.items():
                log[f"Episode_Reward/{name}"] = sums[ids].mean() / seconds
                sums[ids] = 0.0
            log["Episode_Termination/time_out"] = time_outs[ids].float().mean()
        log["Episode_Command/lin_vel_x_max"] = self.cmd[:, 0].max()
        self._reset(ids)
        obs, extras = self.get_observations()
        extras["time_outs"] = time_outs
        extras["log"] = log
        return obs, rewards, dones.long(), extras
