"""Adversarial Motion Priors: a discriminator's style reward added to the task reward."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.extensions.base import Extension, StorageLayout
from st_rl.config.errors import ConfigError, Problem
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.modules.checkpoint_compat import DISCRIMINATOR_ENTRY, discriminator_state
from st_rl.modules.discriminator import policy_discriminator
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.replay_buffer import ReplayBuffer
from st_rl.storage.rollout_storage import Field, MiniBatch, RolloutStorage, Transition

__all__ = ["AMP_PRESETS", "DISCRIMINATOR_LOSSES", "AdversarialMotionPrior", "MissingAmpDataError"]

DISCRIMINATOR_LOSSES = tuple(f"discriminator_{part}_loss" for part in ("expert", "policy", "grad_pen"))
# The reference's name of the gradient penalty, logged as a copy (weight 0).
REFERENCE_GRAD_PEN_KEY = "discriminator_grad_len_loss"

# What the presets give the arguments left at None (see AdversarialMotionPrior).
AMP_PRESETS: dict[str, dict[str, Any]] = {
    "reference": {"amp_replay_buffer_size": 0, "amp_separate_clipping": False},
    "st_rl": {"amp_replay_buffer_size": 100_000, "amp_separate_clipping": True},
}


class MissingAmpDataError(KeyError):
    """The environment did not provide the AMP windows APPO needs."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


# st_gym's default `amp_obs_dim` (overwritten when AMP is on): a 2 that differs from the window width is no choice.
ST_GYM_AMP_OBS_DIM_PLACEHOLDER = 2


class AdversarialMotionPrior(Extension):
    """Adversarial Motion Priors (docs/amp.md, arguments there): a discriminator, built from the policy's
    ``amp_discriminator`` config and owned (trained, saved) here, scores the policy's windows
    ``infos["observations"]["ref_obs"]`` against reference windows ``infos["ref_motion"]`` (one shared
    normaliser); its style reward joins the task reward. Losses: ``discriminator_{expert,policy,grad_pen}_loss``,
    ``mimic_loss``, ``bc_loss``."""

    name = "amp"
    storage_options = {"amp_obs_shape": int | Sequence[int] | None}  # checked against the window width

    def __init__(
        self,
        discriminator_loss_coef: float = 1.0,
        mimic_loss_coef: float = 0.0,
        amp_obs_dim: int | None = None,
        bc_loss_coef: float = 0.0,
        amp_preset: str = "reference",
        amp_replay_buffer_size: int | None = None,
        amp_separate_clipping: bool | None = None,
        style_reward_ramp: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if amp_preset not in AMP_PRESETS:
            raise ValueError(f"amp_preset must be one of {sorted(AMP_PRESETS)}, got {amp_preset!r}")
        preset = AMP_PRESETS[amp_preset]
        self.amp_preset = amp_preset
        self.discriminator_loss_coef = float(discriminator_loss_coef)
        self.mimic_loss_coef = float(mimic_loss_coef)
        self.bc_loss_coef = float(bc_loss_coef)
        if self.bc_loss_coef < 0:
            raise ValueError(f"bc_loss_coef must be >= 0 (0 switches bc_loss off), got {bc_loss_coef!r}")
        self._requested_dim = amp_obs_dim
        size = preset["amp_replay_buffer_size"] if amp_replay_buffer_size is None else amp_replay_buffer_size
        separate = preset["amp_separate_clipping"] if amp_separate_clipping is None else amp_separate_clipping
        self.separate_clipping = bool(separate)
        self.replay_buffer_size = int(size)
        if self.replay_buffer_size < 0:
            raise ValueError(f"amp_replay_buffer_size must be >= 0 (0: no replay), got {size!r}")
        if style_reward_ramp is not None and not valid_ramp(style_reward_ramp):
            raise ValueError(
                f"style_reward_ramp must be [start, end] iterations, 0 <= start <= end; got {style_reward_ramp!r}"
            )
        self.style_reward_ramp = None if style_reward_ramp is None else tuple(style_reward_ramp)

    def setup(self, policy: Any, device: torch.device) -> None:
        super().setup(policy, device)
        self._policy: Any = policy
        discriminator = policy_discriminator(policy)
        if discriminator is None:
            name = type(policy).__name__
            raise ValueError(f"AMP needs an AMP discriminator (an AmpActorCritic-style policy); got {name}")
        self.discriminator: Any = discriminator
        self.amp_obs_dim = int(discriminator.input_dim)
        requested = self._requested_dim
        fix = f"set algorithm.amp_obs_dim={self.amp_obs_dim}"
        if requested == ST_GYM_AMP_OBS_DIM_PLACEHOLDER and self.amp_obs_dim != requested:
            msg = f"algorithm.amp_obs_dim={requested} is st_gym's placeholder default; using the width of one AMP "
            warnings.warn(f"{msg}window, {self.amp_obs_dim} ({fix} to silence this).", stacklevel=4)
        elif type(requested) is int and requested != self.amp_obs_dim:
            rule = f"differs from the width of one AMP window ({self.amp_obs_dim}: the discriminator's input_dim)"
            raise ConfigError(Problem("algorithm.amp_obs_dim", requested, rule, f"{fix} or remove it"))
        self.normalizer = EmpiricalNormalization(shape=[self.amp_obs_dim], until=int(1e8)).to(device)
        size = self.replay_buffer_size
        self.replay = ReplayBuffer(self.amp_obs_dim, size, device) if size > 0 else None

    def storage_fields(self, layout: StorageLayout) -> dict[str, Field]:
        shape = layout.options.get("amp_obs_shape")
        if shape is not None:
            width = int(torch.tensor([shape] if isinstance(shape, int) else list(shape)).prod())
            if width != self.amp_obs_dim:
                raise ValueError(
                    f"storage amp_obs_shape {shape} is not the discriminator's input_dim {self.amp_obs_dim}"
                )
        return {"ref_obs": Field((self.amp_obs_dim,)), "ref_motion": Field((self.amp_obs_dim,))}

    def modules(self) -> list[nn.Module]:
        return [self.discriminator, self.normalizer]

    def shared_parameters(self) -> list[nn.Parameter]:
        return list(self.discriminator.parameters())

    def clip_groups(self) -> list[list[nn.Parameter]]:
        return [list(self.discriminator.parameters())] if self.separate_clipping else []

    def style_reward_weight(self, iteration: int | None = None) -> float:
        """The ``style_reward_ramp`` weight at ``iteration`` (default: the current one)."""
        if self.style_reward_ramp is None:
            return 1.0
        it = self.iteration if iteration is None else iteration
        start, end = self.style_reward_ramp
        if it < start:
            return 0.0
        return 1.0 if it >= end else (it - start) / (end - start)

    def windows(self, infos: dict[str, Any], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's ``(ref_obs, ref_motion)`` windows, ``(n, amp_obs_dim)`` each."""
        groups = infos.get("observations") or {}
        if "ref_obs" not in groups:
            raise MissingAmpDataError(
                "APPO needs infos['observations']['ref_obs'] every step: set amp_obs_frame_num > 0 (built-in "
                "locomotion) or wrap the env with st_rl.datasets.AmpObservationWrapper."
            )
        if "ref_motion" not in infos:
            raise MissingAmpDataError(
                "APPO needs infos['ref_motion'] every step: env.set_ref_motion_source(MotionLoader(...)) (built-in "
                "locomotion) or st_rl.datasets.AmpObservationWrapper."
            )
        ref_obs = groups["ref_obs"].reshape(n, -1).to(self.device, torch.float32)
        ref_motion = infos["ref_motion"].reshape(n, -1).to(self.device, torch.float32)
        for name, x in (("ref_obs", ref_obs), ("ref_motion", ref_motion)):
            if x.shape[1] != self.amp_obs_dim:
                expected = f"{self.amp_obs_dim} (its input_dim)"
                raise ValueError(
                    f"{name} windows have {x.shape[1]} values, the discriminator expects {expected}"
                )
        return ref_obs, ref_motion

    def on_env_step(
        self, rewards: torch.Tensor, dones: Any, infos: dict[str, Any], transition: Transition, *_: Any
    ) -> torch.Tensor:
        ref_obs, ref_motion = self.windows(infos, rewards.shape[0])
        if self.normalizer.training:
            self.normalizer.update(torch.cat([ref_obs, ref_motion]))
        transition.ref_obs = ref_obs
        transition.ref_motion = ref_motion
        disc = self.discriminator
        style, task, combined = disc.predict_style_reward(self.normalizer.normalize(ref_obs), rewards)
        weight = self.style_reward_weight()
        if weight != 1.0:
            combined = disc.combine(weight * style, task)
        key = "episode" if isinstance(infos.get("episode"), dict) else "log"
        log = dict(infos.get(key) or {})
        log["Episode_Reward/style_reward"] = style.mean()
        log["Episode_Reward/task_reward"] = task.mean()
        infos[key] = log
        return combined

    def loss_weights(self) -> dict[str, float]:
        weights: dict[str, float] = dict.fromkeys(DISCRIMINATOR_LOSSES, self.discriminator_loss_coef)
        weights["mimic_loss"] = self.mimic_loss_coef
        weights["bc_loss"] = self.bc_loss_coef
        weights[REFERENCE_GRAD_PEN_KEY] = 0.0  # a logged copy of discriminator_grad_pen_loss
        return weights

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        losses: dict[str, torch.Tensor] = {}
        policy_x = self.normalizer.normalize(minibatch.ref_obs.reshape(-1, self.amp_obs_dim))
        expert_x = self.normalizer.normalize(minibatch.ref_motion.reshape(-1, self.amp_obs_dim))
        if self.mimic_loss_coef:
            losses["mimic_loss"] = torch.norm(policy_x - expert_x, dim=-1).mean()
        if self.bc_loss_coef:
            labels = minibatch.get("action_labels", minibatch.actions)
            losses["bc_loss"] = torch.norm(output.action_mean - labels, dim=-1).mean()
        if self.discriminator_loss_coef:
            disc = self.discriminator
            if self.replay is not None and self.replay.num_samples > 0:
                replay, _ = self.replay.sample(policy_x.shape[0])
                policy_x = torch.cat([policy_x, self.normalizer.normalize(replay)])
            policy_d = disc(policy_x)
            expert_d = disc(expert_x)
            losses["discriminator_expert_loss"] = 0.5 * F.mse_loss(expert_d, torch.ones_like(expert_d))
            losses["discriminator_policy_loss"] = 0.5 * F.mse_loss(policy_d, -torch.ones_like(policy_d))
            losses["discriminator_grad_pen_loss"] = disc.compute_grad_pen(expert_x)
            losses[REFERENCE_GRAD_PEN_KEY] = losses["discriminator_grad_pen_loss"].detach()
            with torch.no_grad():
                accuracy = 0.5 * ((expert_d > 0).float().mean() + (policy_d < 0).float().mean())
            self.record(
                discriminator_expert_d=expert_d.mean(),
                discriminator_policy_d=policy_d.mean(),
                discriminator_accuracy=accuracy,
            )
        return losses

    def after_update(self, storage: RolloutStorage) -> None:
        if self.replay is not None:
            # This rollout's policy windows become "past policy" samples for the next updates.
            self.replay.insert(storage.ref_obs.reshape(-1, self.amp_obs_dim))

    def log_scalars(self) -> dict[str, float]:
        scalars = super().log_scalars()
        if self.style_reward_ramp is not None:
            scalars["style_reward_weight"] = self.style_reward_weight()
        return scalars

    def state_dict(self) -> dict[str, Any]:
        return {
            DISCRIMINATOR_ENTRY: self.discriminator.state_dict(),
            "amp_norm_state_dict": self.normalizer.state_dict(),
        }

    def load_state_dict(self, checkpoint: dict[str, Any], load_optimizer: bool = True) -> None:
        disc = discriminator_state(checkpoint)  # older checkpoints: discriminator.* keys of model_state_dict
        if disc is None:
            raise KeyError(
                "The checkpoint has no AMP discriminator; to start AMP from it (e.g. a PPO run) load it with "
                'ckpt_manipulator="add_amp_discriminator"'
            )
        self.discriminator.load_state_dict(disc)
        if "amp_norm_state_dict" in checkpoint:
            self.normalizer.load_state_dict(checkpoint["amp_norm_state_dict"])
        else:
            warnings.warn("No amp_norm_state_dict in the checkpoint: fresh AMP statistics.", stacklevel=3)


def valid_ramp(ramp: Any) -> bool:
    """Two learning iterations ``[start, end]`` with ``0 <= start <= end``."""
    ints = isinstance(ramp, (list, tuple)) and all(type(v) is int for v in ramp)
    return ints and len(ramp) == 2 and 0 <= ramp[0] <= ramp[1]
