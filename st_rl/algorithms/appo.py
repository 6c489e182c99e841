"""PPO with Adversarial Motion Priors (APPO) and its teacher-student variant (ATPPO)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.tppo import TPPO
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.replay_buffer import ReplayBuffer
from st_rl.storage.rollout_storage import AmpRolloutStorage, MiniBatch

__all__ = ["APPO", "APPOAlgoMixin", "ATPPO", "MissingAmpDataError"]

DISCRIMINATOR_LOSSES = (
    "discriminator_expert_loss",
    "discriminator_policy_loss",
    "discriminator_grad_pen_loss",
)


class MissingAmpDataError(KeyError):
    """The environment did not provide the AMP windows APPO needs."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class APPOAlgoMixin:
    """Adds Adversarial Motion Priors to PPO / TPPO.

    Each step the environment provides the policy's window of style features,
    ``infos["observations"]["ref_obs"]`` (N, H, F) or (N, H * F), and a reference-motion window
    ``infos["ref_motion"]`` (N, H * F) (the built-in locomotion task does this with ``amp_obs_frame_num`` and
    ``set_ref_motion_source(MotionLoader(...))``; other envs can be wrapped with
    :class:`st_rl.datasets.AmpObservationWrapper`). Both streams update **one** shared normaliser
    (``amp_normalizer``, saved in checkpoints as ``amp_norm_state_dict``), so the discriminator sees their
    mean and variance differences. The policy is trained on the discriminator's combined reward (see
    :class:`st_rl.modules.AMPDiscriminator`); ``Episode_Reward/style_reward`` and
    ``Episode_Reward/task_reward`` are logged.

    Losses added to the parent's (each weighted by ``<name>_coef``):

    * ``discriminator_expert_loss = 0.5 * mean((D(ref_motion) - 1)^2)``,
      ``discriminator_policy_loss = 0.5 * mean((D(policy windows) + 1)^2)`` and ``discriminator_grad_pen_loss``
      (the discriminator's gradient penalty on reference windows): all three weighted by
      ``discriminator_loss_coef``; with 0 the discriminator is not trained. Policy windows are the
      minibatch's plus as many drawn from a replay of past policy windows (``amp_replay_buffer_size``; 0
      disables it).
    * ``mimic_loss = mean ||ref_obs - ref_motion||`` (``mimic_loss_coef``; no policy gradient, a diagnostic of
      how far apart the streams are).
    * ``dagger_loss = mean ||mu - action_labels||`` when ``dagger_loss_coef`` is non-zero.

    Args:
        discriminator_loss_coef: weight of the three discriminator losses.
        mimic_loss_coef: weight of ``mimic_loss`` (0: not computed).
        amp_obs_dim: window width; inferred from the discriminator's ``input_dim`` when None.
        amp_replay_buffer_size: capacity of the replay of past policy windows (0: none).
        style_reward_ramp: ``(start, end)`` learning iterations: the style reward the policy receives is
            off before ``start`` and rises linearly to its full weight at ``end`` (the discriminator trains
            throughout). None (default): full weight from the start. Useful when the style reward, easy to
            collect early, would otherwise win over a slowly learned task reward. The logged
            ``Episode_Reward/style_reward`` is the discriminator's reward before this weight;
            ``Train/style_reward_weight`` is the weight.
    """

    actor_critic: Any
    current_learning_iteration: int
    device: torch.device
    transition: Any
    storage: Any

    def __init__(
        self,
        actor_critic: nn.Module,
        *args: Any,
        discriminator_loss_coef: float = 1.0,
        mimic_loss_coef: float = 0.0,
        amp_obs_dim: int | None = None,
        amp_replay_buffer_size: int = 100_000,
        style_reward_ramp: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_critic, *args, **kwargs)  # type: ignore[call-arg]
        discriminator = getattr(self.actor_critic, "discriminator", None)
        if discriminator is None:
            raise ValueError(
                f"{type(self).__name__} needs a policy with an AMP discriminator (AmpActorCritic, "
                f"AmpActorCriticRecurrent, EncoderAmpActorCriticRecurrent); got {type(self.actor_critic).__name__}"
            )
        disc_dim = int(discriminator.input_dim)
        if amp_obs_dim is not None and int(amp_obs_dim) != disc_dim:
            # st_gym's dataclass default (amp_obs_dim=2) is not the real width: the discriminator decides.
            import warnings

            warnings.warn(
                f"amp_obs_dim={amp_obs_dim} differs from the discriminator's input_dim={disc_dim}; using {disc_dim}.",
                stacklevel=2,
            )
        self.amp_obs_dim = disc_dim
        self.discriminator_loss_coef = discriminator_loss_coef
        for name in DISCRIMINATOR_LOSSES:
            setattr(self, f"{name}_coef", discriminator_loss_coef)
        self.mimic_loss_coef = mimic_loss_coef
        self.amp_normalizer = EmpiricalNormalization(shape=[disc_dim], until=int(1e8)).to(self.device)
        self.amp_normalizer.train()
        # The reference's two attribute names, now one shared normaliser.
        self.ref_obs_normalizer = self.amp_normalizer
        self.ref_motion_normalizer = self.amp_normalizer
        self.amp_replay = (
            ReplayBuffer(disc_dim, amp_replay_buffer_size, self.device)
            if amp_replay_buffer_size > 0
            else None
        )
        self.style_reward_ramp = _check_ramp(style_reward_ramp)

    def style_reward_weight(self, iteration: int | None = None) -> float:
        """The ``style_reward_ramp`` weight at ``iteration`` (default: the current learning iteration)."""
        if self.style_reward_ramp is None:
            return 1.0
        it = self.current_learning_iteration if iteration is None else iteration
        start, end = self.style_reward_ramp
        if it < start:
            return 0.0
        return 1.0 if it >= end else (it - start) / (end - start)

    def _grad_clip_groups(self) -> list[list[nn.Parameter]]:
        """The policy and the discriminator are clipped separately: the discriminator's (gradient-penalty)
        gradients must not shrink the policy's step through a shared norm."""
        disc = list(self.actor_critic.discriminator.parameters())
        disc_ids = {id(p) for p in disc}
        return [[p for p in self.actor_critic.parameters() if id(p) not in disc_ids], disc]

    # ------------------------------------------------------------------ set-up
    def init_storage(self, num_envs: int, num_transitions_per_env: int, *args: Any, **kwargs: Any) -> None:
        """An :class:`AmpRolloutStorage` (keeping ATPPO's action labels and dilation)."""
        amp_shape = kwargs.pop("amp_obs_shape", None)
        if amp_shape is not None:
            width = int(
                torch.tensor(list(amp_shape) if not isinstance(amp_shape, int) else [amp_shape]).prod()
            )
            if width != self.amp_obs_dim:
                raise ValueError(
                    f"storage amp_obs_shape {amp_shape} does not match the discriminator input_dim {self.amp_obs_dim}"
                )
        self.transition = AmpRolloutStorage.Transition()
        self.storage = AmpRolloutStorage(
            num_envs,
            num_transitions_per_env,
            *args,
            device=self.device,
            amp_obs_shape=(self.amp_obs_dim,),
            buffer_dilation_ratio=getattr(self, "buffer_dilation_ratio", 1.0),
            **kwargs,
        )
        self._after_init_storage(num_envs)

    def _after_init_storage(self, num_envs: int) -> None:
        if isinstance(self, TPPO):
            self._has_critic_group = self.storage.privileged_obs_shape is not None
            self.use_teacher_act_mask = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def train_mode(self) -> None:
        super().train_mode()  # type: ignore[misc]
        self.amp_normalizer.train()

    def eval_mode(self) -> None:
        super().eval_mode()  # type: ignore[misc]
        self.amp_normalizer.eval()

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        actions = super().act(obs, critic_obs)  # type: ignore[misc]
        if self.transition.action_labels is None:  # ATPPO's teacher labels are kept
            self.transition.action_labels = actions
        return actions

    def _amp_windows(self, infos: dict[str, Any], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        groups = infos.get("observations") or {}
        if "ref_obs" not in groups:
            raise MissingAmpDataError(
                "APPO needs the policy's style-feature window in infos['observations']['ref_obs'] every step. "
                "Built-in locomotion: set amp_obs_frame_num > 0 in the task config; other environments: wrap "
                "them with st_rl.datasets.AmpObservationWrapper(env, MotionLoader(...), style_features)."
            )
        if "ref_motion" not in infos:
            raise MissingAmpDataError(
                "APPO needs reference-motion windows in infos['ref_motion'] every step. Built-in locomotion: "
                "env.set_ref_motion_source(st_rl.datasets.MotionLoader(motion_file, style_fields, H, env.dt)); "
                "other environments: st_rl.datasets.AmpObservationWrapper."
            )
        ref_obs = groups["ref_obs"].reshape(n, -1).to(self.device, torch.float32)
        ref_motion = infos["ref_motion"].reshape(n, -1).to(self.device, torch.float32)
        for name, x in (("ref_obs", ref_obs), ("ref_motion", ref_motion)):
            if x.shape[1] != self.amp_obs_dim:
                raise ValueError(
                    f"infos {name} windows have {x.shape[1]} values but the discriminator expects "
                    f"{self.amp_obs_dim} (amp_discriminator.input_dim = frames x style features)"
                )
        return ref_obs, ref_motion

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, infos: dict[str, Any]) -> None:
        """Store the AMP windows and train the policy on the combined (task + style) reward."""
        n = rewards.shape[0]
        ref_obs, ref_motion = self._amp_windows(infos, n)
        if self.amp_normalizer.training:
            self.amp_normalizer.update(torch.cat([ref_obs, ref_motion]))
        self.transition.ref_obs = ref_obs
        self.transition.ref_motion = ref_motion
        disc = self.actor_critic.discriminator
        style, task, combined = disc.predict_style_reward(self._normalize(ref_obs), rewards)
        weight = self.style_reward_weight()
        if weight != 1.0:
            combined = disc.combine(weight * style, task)
        key = "episode" if isinstance(infos.get("episode"), dict) else "log"
        log = dict(infos.get(key) or {})
        log["Episode_Reward/style_reward"] = style.mean()
        log["Episode_Reward/task_reward"] = task.mean()
        infos[key] = log
        super().process_env_step(combined, dones, infos)  # type: ignore[misc]

    def update(self, current_learning_iteration: int = 0) -> tuple[dict[str, float], dict[str, float]]:
        result = super().update(current_learning_iteration)  # type: ignore[misc]
        if self.style_reward_ramp is not None:
            result[1]["style_reward_weight"] = self.style_reward_weight(current_learning_iteration)
        if self.amp_replay is not None:
            # This rollout's policy windows become "past policy" samples for the next updates.
            self.amp_replay.insert(self.storage.ref_obs.reshape(-1, self.amp_obs_dim))
        return result

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        norm = self.amp_normalizer
        return (x - norm._mean) / (norm._std + norm.eps)

    # ------------------------------------------------------------------ losses
    def compute_losses(self, minibatch: MiniBatch):
        losses, inter_vars, stats = super().compute_losses(minibatch)  # type: ignore[misc]
        if getattr(self, "dagger_loss_coef", 0) and minibatch.action_labels is not None:
            losses["dagger_loss"] = torch.norm(
                self.actor_critic.action_mean - minibatch.action_labels, dim=-1
            ).mean()
        assert minibatch.ref_obs is not None and minibatch.ref_motion is not None
        policy_x = self._normalize(minibatch.ref_obs.reshape(-1, self.amp_obs_dim))
        expert_x = self._normalize(minibatch.ref_motion.reshape(-1, self.amp_obs_dim))
        if self.mimic_loss_coef:
            losses["mimic_loss"] = torch.norm(policy_x - expert_x, dim=-1).mean()
        if self.discriminator_loss_coef:
            disc = self.actor_critic.discriminator
            if self.amp_replay is not None and self.amp_replay.num_samples > 0:
                replay, _ = self.amp_replay.sample(policy_x.shape[0])
                policy_x = torch.cat([policy_x, self._normalize(replay)])
            policy_d = disc(policy_x)
            expert_d = disc(expert_x)
            losses["discriminator_expert_loss"] = 0.5 * F.mse_loss(expert_d, torch.ones_like(expert_d))
            losses["discriminator_policy_loss"] = 0.5 * F.mse_loss(policy_d, -torch.ones_like(policy_d))
            losses["discriminator_grad_pen_loss"] = disc.compute_grad_pen(expert_x)
            with torch.no_grad():
                stats["discriminator_expert_d"] = expert_d.mean()
                stats["discriminator_policy_d"] = policy_d.mean()
                stats["discriminator_accuracy"] = 0.5 * (
                    (expert_d > 0).float().mean() + (policy_d < 0).float().mean()
                )
        return losses, inter_vars, stats

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()  # type: ignore[misc]
        state["amp_norm_state_dict"] = self.amp_normalizer.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], load_optimizer: bool = True) -> None:
        super().load_state_dict(state_dict, load_optimizer=load_optimizer)  # type: ignore[misc]
        if "amp_norm_state_dict" in state_dict:
            self.amp_normalizer.load_state_dict(state_dict["amp_norm_state_dict"])
        else:
            import warnings

            warnings.warn(
                "The checkpoint has no AMP normaliser state (amp_norm_state_dict); its statistics start fresh.",
                stacklevel=2,
            )


class APPO(APPOAlgoMixin, PPO):
    """PPO with Adversarial Motion Priors (see :class:`APPOAlgoMixin`)."""


class ATPPO(APPOAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) with Adversarial Motion Priors; the teacher's action labels and the
    buffer dilation are kept."""


def _check_ramp(ramp: Sequence[int] | None) -> tuple[int, int] | None:
    if ramp is None:
        return None
    values = list(ramp) if isinstance(ramp, (list, tuple)) else None
    if (
        values is None
        or len(values) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        or not 0 <= values[0] <= values[1]
    ):
        raise ValueError(
            f"style_reward_ramp must be two learning iterations [start, end] with 0 <= start <= end "
            f"(the style reward is off before start and full from end), got {ramp!r}"
        )
    return values[0], values[1]
