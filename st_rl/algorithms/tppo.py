"""Teacher-student PPO: distil a (privileged) teacher into a student, with or without the PPO loss (DAgger)."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.schedules import GET_PROB_FUNC, as_schedule
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import ActionLabelRollout, MiniBatch
from st_rl.utils.collections import tree_map
from st_rl.utils.utils import unpad_trajectories

__all__ = ["DISTILL_TARGETS", "GET_PROB_FUNC", "TPPO", "build_teacher", "load_teacher_state"]

DISTILL_TARGETS = ("real", "mse_sum", "l1", "tanh", "scaled_tanh", "max_log_prob")
LATENT_TARGETS = ("real", "l1", "tanh", "scaled_tanh")
_EPS = 1e-6


def _policy_size_keys(student: Any, with_critic_obs: bool) -> dict[str, Any]:
    """Dimensions and layouts a teacher inherits from the student when its config leaves them out."""
    seen_obs = student.num_critic_obs if with_critic_obs else student.num_actor_obs
    seen_segments = student.privileged_obs_segments if with_critic_obs else student.obs_segments
    return {
        "num_actor_obs": seen_obs,
        "num_critic_obs": student.num_critic_obs,
        "num_actions": student.num_actions,
        "obs_segments": seen_segments,
        "privileged_obs_segments": student.privileged_obs_segments,
    }


def load_teacher_state(path: str, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a teacher checkpoint (ours or rsl_rl's) into ``{"model", "obs_norm", "config"}``.

    rsl_rl checkpoints map directly where the layout matches (``actor.*``, ``critic.*``, ``std``); a
    ``log_std`` parameter becomes ``std``, and rsl_rl 3.x normalisers stored inside the model
    (``actor_obs_normalizer.*``) become the teacher's observation normaliser.
    """
    from st_rl.utils.checkpoint import load_checkpoint

    state = load_checkpoint(path, map_location=device)
    if "model_state_dict" not in state:
        raise ValueError(f"Teacher checkpoint {path} has no 'model_state_dict' (keys: {sorted(state)})")
    model = dict(state["model_state_dict"])
    obs_norm = state.get("obs_norm_state_dict")
    inner_norm = {
        k[len("actor_obs_normalizer.") :]: v
        for k, v in model.items()
        if k.startswith("actor_obs_normalizer.")
    }
    if inner_norm and obs_norm is None:
        obs_norm = inner_norm
    model = {
        k: v
        for k, v in model.items()
        if not k.startswith(("actor_obs_normalizer.", "critic_obs_normalizer."))
    }
    if "log_std" in model and "std" not in model:
        model["std"] = model.pop("log_std").exp()
    config = state.get("config") if isinstance(state.get("config"), dict) else None
    return {"model": model, "obs_norm": obs_norm, "config": config}


def build_teacher(
    teacher_policy: dict[str, Any],
    default_class_name: Any,
    student: Any,
    with_critic_obs: bool,
    teacher_ac_path: str | None,
    device: torch.device,
) -> tuple[nn.Module, nn.Module]:
    """Build the teacher policy and its observation normaliser (Identity when it had none), in eval mode.

    Keyword arguments come from, in decreasing priority: ``teacher_policy``, the policy config saved in the
    teacher's checkpoint (our checkpoints carry it), and the student's dimensions and layouts.
    """
    import st_rl.modules as modules
    from st_rl.utils.config import resolve_class

    cfg = copy.deepcopy(dict(teacher_policy or {}))
    class_name = cfg.pop("class_name", None)
    path = cfg.pop("teacher_ac_path", None) or teacher_ac_path
    loaded = load_teacher_state(path, device) if path else None
    saved_policy: dict[str, Any] = {}
    if loaded is not None and loaded["config"] is not None:
        saved_policy = dict(loaded["config"].get("policy", {}))
        class_name = class_name or saved_policy.pop("class_name", None)
        saved_policy.pop("class_name", None)
    class_name = class_name or default_class_name
    kwargs = {**_policy_size_keys(student, with_critic_obs), **saved_policy}
    for key, value in cfg.items():
        if value is not None or key not in kwargs:
            kwargs[key] = value
    for key, value in _policy_size_keys(student, with_critic_obs).items():
        if kwargs.get(key) is None:
            kwargs[key] = value
    kwargs.pop("teacher_ac_path", None)
    cls = resolve_class(class_name, modules, "teacher policy", nn.Module)
    teacher: Any = cls(**kwargs)
    normalizer: nn.Module = nn.Identity()
    if loaded is None:
        warnings.warn(
            "TPPO: no teacher checkpoint given (teacher_policy['teacher_ac_path'] or teacher_ac_path); the teacher "
            "is randomly initialised. Train a teacher first and point teacher_ac_path at its model_<it>.pt.",
            stacklevel=3,
        )
    else:
        try:
            teacher.load_state_dict(loaded["model"])
        except RuntimeError as e:
            raise ValueError(
                f"Teacher checkpoint {path} does not fit {cls.__name__}({', '.join(f'{k}=' for k in sorted(cfg))}"
                f"...): {str(e).splitlines()[0]} ... Give the teacher's policy settings in teacher_policy "
                "(class_name, hidden dims, num_actor_obs) as in the run that trained it."
            ) from e
        if loaded["obs_norm"] is not None:
            normalizer = EmpiricalNormalization(shape=[teacher.num_actor_obs])
            normalizer.load_state_dict(loaded["obs_norm"])
    teacher.to(device).eval()
    normalizer.to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher, normalizer


class TPPO(PPO):
    """PPO whose student also imitates a teacher policy (teacher-student distillation / DAgger).

    During rollouts the teacher labels every step (``action_labels``); in envs where the per-episode mask
    ``use_teacher_act_mask`` is set (drawn at each episode end with probability
    ``teacher_act_prob(iteration)``) the teacher's action is executed instead of the student's. The executed
    action's log-probability is recomputed under the student's rollout distribution, so the PPO ratio stays
    consistent. The loss adds ``distillation_loss`` (and ``distill_latent_<component>`` losses) to the PPO
    losses, or replaces them when ``using_ppo=False`` (pure imitation; returns are then not computed).

    The teacher sees raw observations through its own normaliser (loaded from its checkpoint): the student's
    normalisation is undone first.

    Args:
        ppo: st_gym's nested PPO config, merged into the PPO arguments (explicit arguments win).
        teacher_policy_class_name: teacher class when ``teacher_policy`` has no ``class_name``.
        teacher_policy: teacher policy kwargs plus optional ``class_name`` and ``teacher_ac_path``. Missing
            dimensions and layouts come from the teacher checkpoint's saved config, then from the student.
        teacher_ac_path: legged_gym's top-level teacher checkpoint path.
        label_action_with_critic_obs: the teacher acts on the critic (privileged) observations.
        teacher_act_prob: ``"linear"`` / ``"exp"`` / ``"tanh"`` (see :func:`GET_PROB_FUNC`), a callable of the
            iteration, or a number.
        update_times_scale: iteration scale of the schedules.
        using_ppo: keep the PPO losses.
        distillation_loss_coef: weight of ``distillation_loss``; a schedule name makes it decay.
        distill_target: ``"real"`` (L2 distance), ``"mse_sum"``, ``"l1"``, ``"tanh"`` (2 BCE on (x+1)/2,
            for outputs in [-1, 1]), ``"scaled_tanh"`` (tanh-squash both, then as ``tanh``) or
            ``"max_log_prob"`` (``-log pi(label)``).
        distill_latent_coef: weight of each latent loss.
        distill_latent_target: ``"real"``, ``"l1"``, ``"tanh"`` or ``"scaled_tanh"``.
        distill_latent_obs_component_mapping: ``{student_component: teacher_component}``: the student's encoder
            latent of its component imitates the teacher's latent of its component.
        buffer_dilation_ratio: keep this many rollouts' worth of steps (see ``QueueRolloutStorage``).
        lr_scheduler_class_name: a ``torch.optim.lr_scheduler`` class, stepped once per update.
        lr_scheduler: its keyword arguments.
        hidden_state_resample_prob: probability of replacing a minibatch trajectory's initial hidden state
            by U(-1, 1) noise (recurrent students).
        action_labels_from_sample: labels are teacher samples instead of its mean.
        (other arguments as :class:`PPO`)
    """

    def __init__(
        self,
        actor_critic: nn.Module,
        *args: Any,
        ppo: dict[str, Any] | None = None,
        teacher_policy_class_name: Any = "ActorCritic",
        teacher_policy: dict[str, Any] | None = None,
        teacher_ac_path: str | None = None,
        label_action_with_critic_obs: bool = True,
        teacher_act_prob: Any = "exp",
        update_times_scale: float = 100,
        using_ppo: bool = True,
        distillation_loss_coef: float | str = 1.0,
        distill_target: str = "real",
        distill_latent_coef: float = 1.0,
        distill_latent_target: str = "real",
        distill_latent_obs_component_mapping: dict[str, str] | None = None,
        buffer_dilation_ratio: float = 1.0,
        lr_scheduler_class_name: str | None = None,
        lr_scheduler: dict[str, Any] | None = None,
        hidden_state_resample_prob: float = 0.0,
        action_labels_from_sample: bool = False,
        **kwargs: Any,
    ) -> None:
        if ppo:
            base = {k: v for k, v in dict(ppo).items() if k != "class_name"}
            kwargs = {**base, **kwargs}
        super().__init__(actor_critic, *args, **kwargs)
        if distill_target == "kl":
            raise ValueError(
                "distill_target='kl' is not supported: the storage keeps the teacher's actions, not its "
                "distribution. Use 'max_log_prob' (maximum likelihood of the teacher's actions) or 'real'."
            )
        if distill_target not in DISTILL_TARGETS:
            raise ValueError(f"Unknown distill_target {distill_target!r}; choose one of {DISTILL_TARGETS}")
        if distill_latent_target not in LATENT_TARGETS:
            raise ValueError(
                f"Unknown distill_latent_target {distill_latent_target!r}; choose one of {LATENT_TARGETS}"
            )
        if not 0.0 <= hidden_state_resample_prob <= 1.0:
            raise ValueError("hidden_state_resample_prob must be in [0, 1]")
        self.label_action_with_critic_obs = label_action_with_critic_obs
        self.update_times_scale = update_times_scale
        self.teacher_act_prob = as_schedule(teacher_act_prob, update_times_scale, "teacher_act_prob")
        self.using_ppo = using_ppo
        self._distill_coef = as_schedule(distillation_loss_coef, update_times_scale, "distillation_loss_coef")
        self.distill_target = distill_target
        self.distill_latent_coef = distill_latent_coef
        self.distill_latent_target = distill_latent_target
        self.distill_latent_obs_component_mapping = dict(distill_latent_obs_component_mapping or {})
        for component in self.distill_latent_obs_component_mapping:
            setattr(self, f"distill_latent_{component}_coef", distill_latent_coef)
        self.buffer_dilation_ratio = buffer_dilation_ratio
        self.hidden_state_resample_prob = hidden_state_resample_prob
        self.action_labels_from_sample = action_labels_from_sample

        self.teacher_actor_critic: Any
        self.teacher_actor_critic, self.teacher_obs_normalizer = build_teacher(
            teacher_policy or {},
            teacher_policy_class_name,
            self.actor_critic,
            label_action_with_critic_obs,
            teacher_ac_path,
            self.device,
        )
        for student_c, teacher_c in self.distill_latent_obs_component_mapping.items():
            for who, model, comp in (
                ("student", self.actor_critic, student_c),
                ("teacher", self.teacher_actor_critic, teacher_c),
            ):
                layout = getattr(model, "actor_layout", None)
                if layout is None or comp not in layout.component_names:
                    raise ValueError(
                        f"distill_latent_obs_component_mapping: the {who} has no encoder on component '{comp}'"
                    )

        self.lr_scheduler: Any = None
        if lr_scheduler_class_name is not None:
            sched_cls = getattr(torch.optim.lr_scheduler, lr_scheduler_class_name, None)
            if sched_cls is None:
                raise ValueError(
                    f"Unknown lr_scheduler_class_name {lr_scheduler_class_name!r} (torch.optim.lr_scheduler)"
                )
            if self.schedule == "adaptive":
                warnings.warn(
                    "TPPO: both an lr scheduler and schedule='adaptive' are set; the scheduler decides the "
                    "learning rate after each update.",
                    stacklevel=2,
                )
            self.lr_scheduler = sched_cls(self.optimizer, **dict(lr_scheduler or {}))
        self.use_teacher_act_mask: torch.Tensor | None = None
        self._has_critic_group = True

    # ------------------------------------------------------------------ schedules
    @property
    def distillation_loss_coef(self) -> float:
        """Current weight of ``distillation_loss`` (evaluated at the current learning iteration)."""
        return float(self._distill_coef(self.current_learning_iteration))

    # ------------------------------------------------------------------ set-up
    def init_storage(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        actor_obs_shape,
        critic_obs_shape,
        action_shape,
        **kwargs: Any,
    ) -> None:  # type: ignore[override]
        """Allocate an :class:`ActionLabelRollout` (with ``buffer_dilation_ratio``)."""
        self.transition = ActionLabelRollout.Transition()
        self.storage = ActionLabelRollout(
            num_envs,
            num_transitions_per_env,
            actor_obs_shape,
            critic_obs_shape,
            action_shape,
            device=self.device,
            buffer_dilation_ratio=self.buffer_dilation_ratio,
            **kwargs,
        )
        self._has_critic_group = self.storage.privileged_obs_shape is not None
        self.use_teacher_act_mask = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def train_mode(self) -> None:
        super().train_mode()
        self.teacher_actor_critic.eval()

    # ------------------------------------------------------------------ teacher
    def teacher_input(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """What the teacher sees: the raw observations (student normalisation undone), teacher-normalised."""
        if self.label_action_with_critic_obs and self._has_critic_group:
            raw = self._denormalize(critic_obs, self.critic_obs_normalizer)
        else:
            raw = self._denormalize(
                critic_obs if self.label_action_with_critic_obs else obs, self.obs_normalizer
            )
        return self.teacher_obs_normalizer(raw)

    @staticmethod
    def _denormalize(x: torch.Tensor, normalizer: Any) -> torch.Tensor:
        return normalizer.inverse(x) if isinstance(normalizer, EmpiricalNormalization) else x

    def teacher_actions(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        x = self.teacher_input(obs, critic_obs)
        teacher = self.teacher_actor_critic
        out = teacher.act(x) if self.action_labels_from_sample else teacher.act_inference(x)
        return out.detach()

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """Student acts; the teacher labels; teacher actions replace the student's where the mask is set."""
        actions = super().act(obs, critic_obs)
        labels = self.teacher_actions(obs, critic_obs)
        self.transition.action_labels = labels
        if self.use_teacher_act_mask is None:
            self.use_teacher_act_mask = torch.ones(obs.shape[0], dtype=torch.bool, device=obs.device)
        actions = torch.where(self.use_teacher_act_mask.unsqueeze(-1), labels, actions)
        self.transition.actions = actions
        self.transition.actions_log_prob = self.actor_critic.get_actions_log_prob(actions).detach()
        return actions

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, infos: dict[str, Any]) -> None:
        super().process_env_step(rewards, dones, infos)
        self.teacher_actor_critic.reset(dones)
        assert self.use_teacher_act_mask is not None
        prob = self.teacher_act_prob(self.current_learning_iteration)
        draw = torch.rand(dones.shape[0], device=self.device) < prob
        self.use_teacher_act_mask = torch.where(dones.bool(), draw, self.use_teacher_act_mask)

    def collect_transition_from_dataset(self, transition: Any, infos: dict[str, Any]) -> None:
        """Record a dataset transition as if the dataset's action had been executed.

        The student acts on the (normalised) dataset observations to record its values and distribution; the
        dataset's action is both the executed action (with its log-probability under the student's rollout
        distribution) and the label; the dataset's reward and done close the step.
        """
        obs = transition.observation
        critic_obs = getattr(transition, "privileged_observation", None)
        if critic_obs is None:
            critic_obs = obs
        PPO.act(self, obs, critic_obs)
        actions = transition.action.to(self.device)
        self.transition.actions = actions
        self.transition.actions_log_prob = self.actor_critic.get_actions_log_prob(actions).detach()
        self.transition.action_labels = actions
        dones = transition.done.to(self.device).reshape(-1).bool()
        PPO.process_env_step(self, transition.reward.to(self.device).reshape(-1), dones, infos)
        self.teacher_actor_critic.reset(dones)

    def compute_returns(self, last_critic_obs: torch.Tensor) -> None:
        if self.using_ppo:
            super().compute_returns(last_critic_obs)

    def update(self, current_learning_iteration: int = 0) -> tuple[dict[str, float], dict[str, float]]:
        losses, stats = super().update(current_learning_iteration)
        if self.lr_scheduler is not None:
            self.lr_scheduler.step()
            self.learning_rate = self.optimizer.param_groups[0]["lr"]
        return losses, stats

    # ------------------------------------------------------------------ losses
    def _resample_hidden_states(self, hidden: Any) -> Any:
        p = self.hidden_state_resample_prob

        def resample(h: torch.Tensor) -> torch.Tensor:
            # (layers, n_traj, H): replace whole trajectories' initial states.
            pick = torch.rand(h.shape[1], device=h.device) < p
            noise = torch.rand_like(h) * 2 - 1
            return torch.where(pick.view(1, -1, *([1] * (h.dim() - 2))), noise, h)

        return tree_map(resample, hidden)

    def compute_losses(self, minibatch: MiniBatch):
        if self.hidden_state_resample_prob > 0 and minibatch.hidden_states is not None:
            minibatch = minibatch._replace(
                hidden_states=self._resample_hidden_states(minibatch.hidden_states)
            )
        if self.using_ppo:
            losses, inter_vars, stats = super().compute_losses(minibatch)
        else:
            losses, inter_vars, stats = {}, {}, {}
            kw: dict[str, Any] = {}
            if self.actor_critic.is_recurrent:
                hidden = minibatch.hidden_states
                kw = {"masks": minibatch.masks, "hidden_states": hidden.actor if hidden is not None else None}
            self.actor_critic.act(minibatch.obs, **kw)
        if minibatch.action_labels is None:
            raise ValueError("TPPO minibatches need action_labels (use ActionLabelRollout storage)")
        losses["distillation_loss"] = self._distillation_loss(minibatch, stats)
        for student_c, teacher_c in self.distill_latent_obs_component_mapping.items():
            losses[f"distill_latent_{student_c}"] = self._latent_loss(minibatch, student_c, teacher_c)
        return losses, inter_vars, stats

    def _distillation_loss(self, minibatch: MiniBatch, stats: dict[str, torch.Tensor]) -> torch.Tensor:
        mean = self.actor_critic.action_mean
        labels = minibatch.action_labels
        assert labels is not None
        if mean.shape != labels.shape and minibatch.masks is not None:
            mean = unpad_trajectories(mean, minibatch.masks)
        target = self.distill_target
        if target == "real":
            loss = torch.norm(mean - labels, dim=-1).mean()
        elif target == "mse_sum":
            loss = F.mse_loss(mean, labels, reduction="none").sum(-1).mean()
        elif target == "l1":
            loss = torch.norm(mean - labels, p=1, dim=-1).mean()
        elif target in ("tanh", "scaled_tanh"):
            if target == "scaled_tanh":
                mean, labels = torch.tanh(mean), torch.tanh(labels)
            prob = ((mean + 1) * 0.5).clamp(_EPS, 1 - _EPS)
            label_prob = ((labels + 1) * 0.5).clamp(0.0, 1.0)
            loss = 2 * F.binary_cross_entropy(prob, label_prob)
            with torch.no_grad():
                stats["l1distance"] = torch.norm(mean - labels, p=1, dim=-1).mean()
                stats["l1_before_tanh"] = torch.norm(
                    torch.atanh(mean.clamp(-1 + _EPS, 1 - _EPS))
                    - torch.atanh(labels.clamp(-1 + _EPS, 1 - _EPS)),
                    p=1,
                    dim=-1,
                ).mean()
        else:  # max_log_prob; recurrent outputs are already unpadded to the labels' (T, n_envs) shape
            loss = -self.actor_critic.get_actions_log_prob(labels).mean()
        with torch.no_grad():
            stats["distillation_abs_error"] = (mean.detach() - labels).abs().mean()
        return loss

    def _latent_loss(self, minibatch: MiniBatch, student_c: str, teacher_c: str) -> torch.Tensor:
        latent = self.actor_critic.get_encoder_latent(minibatch.obs, student_c)
        with torch.no_grad():
            teacher_in = self.teacher_input(minibatch.obs, minibatch.critic_obs)
            target = self.teacher_actor_critic.get_encoder_latent(teacher_in, teacher_c)
        metric = self.distill_latent_target
        if metric == "real":
            per = torch.norm(latent - target, dim=-1)
        elif metric == "l1":
            per = torch.norm(latent - target, p=1, dim=-1)
        else:
            if metric == "scaled_tanh":
                latent, target = torch.tanh(latent), torch.tanh(target)
            prob = ((latent + 1) * 0.5).clamp(_EPS, 1 - _EPS)
            per = 2 * F.binary_cross_entropy(
                prob, ((target + 1) * 0.5).clamp(0.0, 1.0), reduction="none"
            ).mean(-1)
        if minibatch.masks is not None and per.shape == minibatch.masks.shape:
            mask = minibatch.masks.float()
            return (per * mask).sum() / mask.sum().clamp(min=1.0)
        return per.mean()
