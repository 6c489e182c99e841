"""Teacher-student distillation and DAgger: a frozen teacher labels every step; the student imitates it."""

from __future__ import annotations

import copy
import difflib
import inspect
import warnings
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812

import st_rl.modules as policy_classes
from st_rl.algorithms.extensions.base import Extension, StorageLayout, masked_mean
from st_rl.algorithms.schedules import as_schedule
from st_rl.config.errors import ConfigError, Problem
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.registry import resolve_class, untrusted_config
from st_rl.storage.rollout_storage import Field, MiniBatch, Transition
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.collections import tree_map
from st_rl.utils.utils import unpad_trajectories

__all__ = ["DISTILL_TARGETS", "LATENT_TARGETS", "Distillation", "build_teacher", "load_teacher_state"]

DISTILL_TARGETS = ("real", "mse_sum", "l1", "tanh", "scaled_tanh", "max_log_prob")
LATENT_TARGETS = ("real", "l1", "tanh", "scaled_tanh")
_EPS = 1e-6
_NORMALIZER_PREFIXES = ("actor_obs_normalizer.", "critic_obs_normalizer.")


def load_teacher_state(path: str, device: str | torch.device = "cpu") -> dict[str, Any]:
    """``{"model", "config"}`` of a teacher checkpoint (ours or rsl_rl's: ``log_std`` becomes ``std``)."""
    state = load_checkpoint(path, map_location=device)
    model = dict(state["model_state_dict"])
    if "log_std" in model and "std" not in model:
        model["std"] = model.pop("log_std").exp()
    config = state.get("config") if isinstance(state.get("config"), dict) else None
    return {"model": model, "config": config}


def build_teacher(
    teacher_policy: dict[str, Any],
    default_class_name: Any,
    student: Any,
    with_critic_obs: bool,
    teacher_ac_path: str | None,
    device: torch.device,
) -> nn.Module:
    """The frozen teacher in eval mode, with its own normalisers when its checkpoint has statistics. Its kwargs
    come from ``teacher_policy``, then its checkpoint's saved config, then the student's sizes."""
    cfg = copy.deepcopy(dict(teacher_policy or {}))
    class_name = cfg.pop("class_name", None)
    path = cfg.pop("teacher_ac_path", None) or teacher_ac_path
    loaded = load_teacher_state(path, device) if path else None
    saved_policy = dict(((loaded or {}).get("config") or {}).get("policy") or {})
    saved_class = saved_policy.pop("class_name", None)
    from_checkpoint = class_name is None and saved_class is not None
    class_name = class_name or saved_class or default_class_name
    critic_segments = student.privileged_obs_segments
    sizes = {  # the student's, the teacher seeing the critic observations with with_critic_obs
        "num_actor_obs": student.num_critic_obs if with_critic_obs else student.num_actor_obs,
        "num_critic_obs": student.num_critic_obs,
        "num_actions": student.num_actions,
        "obs_segments": critic_segments if with_critic_obs else student.obs_segments,
        "privileged_obs_segments": critic_segments,
    }
    kwargs = {**sizes, **saved_policy}
    kwargs.update({k: v for k, v in cfg.items() if v is not None or k not in kwargs})
    kwargs.update({k: v for k, v in sizes.items() if kwargs.get(k) is None})
    kwargs.pop("teacher_ac_path", None)
    # a class named by the checkpoint's config (not by the caller) resolves among st_rl's only
    opt_in = "name the class in teacher_policy.class_name if you trust that checkpoint"
    with untrusted_config(f"{path} (its stored 'config')", opt_in, trusted=not from_checkpoint):
        key = "policy.class_name" if from_checkpoint else None
        cls = resolve_class(class_name, policy_classes, "teacher policy", nn.Module, key=key)
    _check_teacher_keys(cls, cfg)
    teacher: Any = cls(**kwargs)
    if loaded is None:
        warnings.warn("TPPO: no teacher checkpoint (teacher_ac_path): the teacher is random", stacklevel=3)
    else:
        model = loaded["model"]
        teacher.enable_obs_normalization(*(any(k.startswith(p) for k in model) for p in _NORMALIZER_PREFIXES))
        try:
            teacher.load_state_dict(model)
        except RuntimeError as e:
            raise ValueError(
                f"Teacher checkpoint {path} does not fit {cls.__name__}({', '.join(f'{k}=' for k in sorted(cfg))}"
                f"...): {str(e).splitlines()[0]} ... Give the teacher's policy settings in teacher_policy "
                "(class_name, hidden dims, num_actor_obs) as in the run that trained it."
            ) from e
    return teacher.to(device).eval().requires_grad_(False)


def _check_teacher_keys(cls: type, cfg: dict[str, Any]) -> None:
    """``ConfigError`` for ``teacher_policy`` keys the teacher class does not take (unless it takes undeclared
    ``**kwargs``)."""
    known: set[str] = set(getattr(cls, "config_tolerated", None) or ())
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass.__module__.startswith("torch."):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        known.update(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    else:
        if getattr(cls, "config_tolerated", None) is None:
            return
    problems = []
    for key in sorted(set(cfg) - known):
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        fix = f"did you mean '{close[0]}'?" if close else "remove it (see docs/configuration.md)"
        problems.append(Problem(f"algorithm.teacher_policy.{key}", cfg[key], "unknown key", fix))
    if problems:
        raise ConfigError(problems)


def _distance(x: torch.Tensor, target: torch.Tensor, metric: str) -> torch.Tensor:
    """Per-sample distance over the last dim: L2 (``"real"``), L1, summed squared error (``"mse_sum"``) or twice
    the BCE of ``(x + 1) / 2`` (``"tanh"``; ``"scaled_tanh"`` squashes both first)."""
    if metric == "real":
        return torch.norm(x - target, dim=-1)
    if metric == "l1":
        return torch.norm(x - target, p=1, dim=-1)
    if metric == "mse_sum":
        return F.mse_loss(x, target, reduction="none").sum(-1)
    if metric == "scaled_tanh":
        x, target = torch.tanh(x), torch.tanh(target)
    prob = ((x + 1) * 0.5).clamp(_EPS, 1 - _EPS)
    return 2 * F.binary_cross_entropy(prob, ((target + 1) * 0.5).clamp(0.0, 1.0), reduction="none").mean(-1)


class Distillation(Extension):
    """The student imitates a frozen teacher, which labels every step (``action_labels``) and acts in envs whose
    per-episode ``use_teacher_act_mask`` is drawn with probability ``teacher_act_prob(iteration)``. Losses:
    ``distillation_loss``, ``distill_latent_<component>`` per mapped encoder latent, ``dagger_loss``. The
    arguments: docs/teacher_student.md and docs/configuration.md."""

    name = "distillation"

    def __init__(
        self,
        teacher_policy_class_name: Any = "ActorCritic",
        teacher_policy: dict[str, Any] | None = None,
        teacher_ac_path: str | None = None,
        label_action_with_critic_obs: bool = True,
        teacher_act_prob: Any = "exp",
        update_times_scale: float = 100,
        distillation_loss_coef: float | str = 1.0,
        distill_target: str = "real",
        distill_latent_coef: float = 1.0,
        distill_latent_target: str = "real",
        distill_latent_obs_component_mapping: dict[str, str] | None = None,
        hidden_state_resample_prob: float = 0.0,
        action_labels_from_sample: bool = False,
        dagger_loss_coef: float = 0.0,
    ) -> None:
        super().__init__()
        if distill_target == "kl":
            raise ValueError(
                "distill_target='kl' is not supported (no teacher distribution is stored): use 'max_log_prob'"
            )
        if distill_target not in DISTILL_TARGETS:
            raise ValueError(f"Unknown distill_target {distill_target!r}; choose one of {DISTILL_TARGETS}")
        self.teacher_cfg = dict(teacher_policy or {})
        self.teacher_class_name = teacher_policy_class_name
        self.teacher_ac_path = teacher_ac_path
        self.label_action_with_critic_obs = label_action_with_critic_obs
        self.update_times_scale = update_times_scale
        self.teacher_act_prob = as_schedule(teacher_act_prob, update_times_scale, "teacher_act_prob")
        self._distill_coef = as_schedule(distillation_loss_coef, update_times_scale, "distillation_loss_coef")
        self.distill_target = distill_target
        self.distill_latent_coef = distill_latent_coef
        self.distill_latent_target = distill_latent_target
        self.latent_mapping = dict(distill_latent_obs_component_mapping or {})
        self.hidden_state_resample_prob = hidden_state_resample_prob
        self.action_labels_from_sample = action_labels_from_sample
        self.dagger_loss_coef = float(dagger_loss_coef)
        self.use_teacher_act_mask: torch.Tensor | None = None

    @property
    def distillation_loss_coef(self) -> float:
        """Weight of ``distillation_loss`` at the current iteration."""
        return float(self._distill_coef(self.iteration))

    def setup(self, policy: Any, device: torch.device) -> None:
        super().setup(policy, device)
        self.student: Any = policy
        with_critic_obs = self.label_action_with_critic_obs
        self.teacher: Any = build_teacher(
            self.teacher_cfg, self.teacher_class_name, policy, with_critic_obs, self.teacher_ac_path, device
        )
        for student_c, teacher_c in self.latent_mapping.items():
            for who, model, comp in (("student", policy, student_c), ("teacher", self.teacher, teacher_c)):
                layout = model.actor_layout
                if layout is None or comp not in layout.component_names:
                    raise ValueError(
                        f"distill_latent_obs_component_mapping: the {who} has no encoder on component '{comp}'"
                    )

    def storage_fields(self, layout: StorageLayout) -> dict[str, Field]:
        self.use_teacher_act_mask = torch.ones(layout.num_envs, dtype=torch.bool, device=self.device)
        return {"action_labels": Field(layout.action_shape)}

    def modules(self) -> list[nn.Module]:
        return [self.teacher]

    def train(self, mode: bool = True) -> None:
        self.teacher.eval()  # frozen

    def teacher_input(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        return critic_obs if self.label_action_with_critic_obs else obs

    def teacher_actions(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        x = self.teacher_input(obs, critic_obs)
        out = self.teacher.act(x) if self.action_labels_from_sample else self.teacher.act_inference(x)
        return out.detach()

    def on_act(self, obs: torch.Tensor, critic_obs: torch.Tensor, transition: Transition) -> torch.Tensor:
        labels = self.teacher_actions(obs, critic_obs)
        transition.action_labels = labels
        if self.use_teacher_act_mask is None or self.use_teacher_act_mask.shape[0] != obs.shape[0]:
            self.use_teacher_act_mask = torch.ones(obs.shape[0], dtype=torch.bool, device=obs.device)
        return torch.where(self.use_teacher_act_mask.unsqueeze(-1), labels, transition.actions)

    def on_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, *_: Any) -> torch.Tensor:
        self.teacher.reset(dones)
        assert self.use_teacher_act_mask is not None
        draw = torch.rand(dones.shape[0], device=self.device) < self.teacher_act_prob(self.iteration)
        self.use_teacher_act_mask = torch.where(dones.bool(), draw, self.use_teacher_act_mask)
        return rewards

    def on_dataset_step(self, transition: Transition) -> None:
        transition.action_labels = transition.actions

    def transform_minibatch(self, minibatch: MiniBatch) -> MiniBatch:
        p = self.hidden_state_resample_prob
        if p <= 0 or minibatch.hidden_states is None:
            return minibatch

        def resample(h: torch.Tensor) -> torch.Tensor:  # (layers, n_traj, H): whole trajectories
            pick = torch.rand(h.shape[1], device=h.device) < p
            noise = torch.rand_like(h) * 2 - 1
            return torch.where(pick.view(1, -1, *([1] * (h.dim() - 2))), noise, h)

        return minibatch._replace(hidden_states=tree_map(resample, minibatch.hidden_states))

    def loss_weights(self) -> dict[str, float]:
        weights = {"distillation_loss": self.distillation_loss_coef, "dagger_loss": self.dagger_loss_coef}
        for component in self.latent_mapping:
            weights[f"distill_latent_{component}"] = self.distill_latent_coef
        return weights

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        losses = {"distillation_loss": self._distillation_loss(minibatch, output)}
        for student_c, teacher_c in self.latent_mapping.items():
            losses[f"distill_latent_{student_c}"] = self._latent_loss(minibatch, student_c, teacher_c)
        if self.dagger_loss_coef:
            losses["dagger_loss"] = torch.norm(
                self._student_mean(minibatch, output) - minibatch.action_labels, dim=-1
            ).mean()
        return losses

    def _student_mean(self, minibatch: MiniBatch, output: PolicyOutput) -> torch.Tensor:
        mean = output.action_mean
        if mean.shape != minibatch.action_labels.shape and minibatch.masks is not None:
            mean = unpad_trajectories(mean, minibatch.masks)
        return mean

    def _distillation_loss(self, minibatch: MiniBatch, output: PolicyOutput) -> torch.Tensor:
        mean, labels = self._student_mean(minibatch, output), minibatch.action_labels
        target = self.distill_target
        if target == "max_log_prob":
            loss = -output.log_prob(labels).mean()
        else:
            loss = _distance(mean, labels, target).mean()
        with torch.no_grad():
            if target == "scaled_tanh":
                mean, labels = torch.tanh(mean), torch.tanh(labels)
            if target in ("tanh", "scaled_tanh"):
                atanh = [torch.atanh(x.clamp(-1 + _EPS, 1 - _EPS)) for x in (mean, labels)]
                self.record(
                    l1distance=torch.norm(mean - labels, p=1, dim=-1).mean(),
                    l1_before_tanh=torch.norm(atanh[0] - atanh[1], p=1, dim=-1).mean(),
                )
            self.record(distillation_abs_error=(mean - labels).abs().mean())
        return loss

    def _latent_loss(self, minibatch: MiniBatch, student_c: str, teacher_c: str) -> torch.Tensor:
        latent = self.student.get_encoder_latent(minibatch.obs, student_c)
        with torch.no_grad():
            target = self.teacher.get_encoder_latent(
                self.teacher_input(minibatch.obs, minibatch.critic_obs), teacher_c
            )
        return masked_mean(_distance(latent, target, self.distill_latent_target), minibatch.masks)
