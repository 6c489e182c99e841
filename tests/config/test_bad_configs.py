"""A corpus of bad training configs: none may be accepted silently (issue "Configuration that cannot be
silently wrong").

Every case is one mistake applied to a known-good config in both accepted forms: the st_gym flat form
(``SMALL_CFG``, runner keys at the top level) and the legged_gym nested form (``NESTED_CFG``, runner keys in
``runner``). Each must raise :class:`st_rl.config.ConfigError` whose message and ``paths`` name the key
(written in the nested spelling; runner keys lose their ``runner.`` prefix in the flat form), and must leave
the user's dict untouched. Three levels are covered:

* resolution (:func:`st_rl.utils.config.resolve_train_cfg`): types, ranges, choices, unknown keys;
* the environment (``OnPolicyRunner(env, cfg, None)``, then ``learn(1)``): sizes and layouts, minibatch counts;
* command-line overrides (:func:`st_rl.config.apply_overrides`, then resolution).

A few good configs (including legal but unusual values) must resolve without error and without warnings, so
the validation is not over-strict. Cases the library does not yet catch are strict ``xfail`` with the reason.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import NESTED_CFG, SMALL_CFG

from st_rl.config import ConfigError, apply_overrides
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking
from st_rl.utils.config import resolve_train_cfg

FORMS = ("flat", "nested")
BASES: dict[str, dict[str, Any]] = {"flat": SMALL_CFG, "nested": NESTED_CFG}
NAN, INF = math.nan, math.inf
DELETE = object()
"""Edit value: remove the key."""

# Sections of an edit: "runner" (top level in the flat form, `runner` in the nested form), "policy",
# "algorithm", "top" (the config's top level in both forms) and "class" (key "policy"/"algorithm": the class
# name, `<section>.class_name` in the flat form, `runner.<section>_class_name` in the nested form).
R, P, A, T, C = "runner", "policy", "algorithm", "top", "class"
Edit = tuple[str, str, Any]
Call = Callable[[dict[str, Any]], Any]

LEADING_DOT = "flat form: rule problems of runner keys have the path '.<key>' (a leading dot)"
LATE = "accepted by resolve_train_cfg; only the constructor raises a plain ValueError, without the key path"


@dataclass(frozen=True)
class Case:
    """One bad value: ``section.key = value`` (``key`` may be dotted), after the ``setup`` edits.

    ``path`` is the key path the error must name (default ``section.key``, nested spelling); ``fix`` a text the
    message must contain; ``xfail`` the reason, per form, why the library does not yet reject it.
    """

    id: str
    section: str
    key: str
    value: Any
    path: str = ""
    fix: str = ""
    setup: tuple[Edit, ...] = ()
    forms: tuple[str, ...] = FORMS
    xfail: Mapping[str, str] = field(default_factory=dict)

    def edits(self) -> tuple[Edit, ...]:
        return (*self.setup, (self.section, self.key, self.value))

    def expected_path(self, form: str) -> str:
        if self.section == C and form == "nested":  # the nested form names the class in the runner
            return f"runner.{self.key}_class_name"
        path = self.path or (f"runner.{self.key}" if self.section in (R, T) else f"{self.section}.{self.key}")
        return path.removeprefix("runner.") if form == "flat" else path


def everywhere(reason: str) -> dict[str, str]:
    return dict.fromkeys(FORMS, reason)


def flat_only(reason: str) -> dict[str, str]:
    return {"flat": reason}


def cls(section: str, name: str) -> Edit:
    return (C, section, name)


RECURRENT = (cls(P, "ActorCriticRecurrent"),)
NO_RUN_LENGTH = ((R, "max_iterations", DELETE),)

# fmt: off
RESOLVE_CASES = [
    # --- PPO numbers: ranges, NaN/inf, wrong types
    Case("max_grad_norm_negative", A, "max_grad_norm", -1.0),
    Case("max_grad_norm_zero", A, "max_grad_norm", 0.0),
    Case("max_grad_norm_string", A, "max_grad_norm", "1.0"),
    Case("gamma_above_one", A, "gamma", 1.5),
    Case("gamma_negative", A, "gamma", -0.5),
    Case("gamma_nan", A, "gamma", NAN),
    Case("gamma_bool", A, "gamma", True),
    Case("lam_two", A, "lam", 2),
    Case("lam_negative", A, "lam", -0.1),
    Case("clip_param_negative", A, "clip_param", -0.2),
    Case("clip_param_zero", A, "clip_param", 0.0),
    Case("desired_kl_negative", A, "desired_kl", -0.01),
    Case("desired_kl_nan", A, "desired_kl", NAN),
    Case("desired_kl_none_adaptive", A, "desired_kl", None, setup=((A, "schedule", "adaptive"),)),
    Case("value_loss_coef_negative", A, "value_loss_coef", -1.0),
    Case("entropy_coef_negative", A, "entropy_coef", -0.1),
    Case("surrogate_loss_coef_negative", A, "surrogate_loss_coef", -1.0),
    Case("learning_rate_zero", A, "learning_rate", 0.0),
    Case("learning_rate_negative", A, "learning_rate", -1.0),
    Case("learning_rate_string", A, "learning_rate", "1e-3"),
    Case("learning_rate_nan", A, "learning_rate", NAN),
    Case("learning_rate_inf", A, "learning_rate", INF),
    Case("use_clipped_value_loss_string", A, "use_clipped_value_loss", "False"),
    Case("use_clipped_value_loss_int", A, "use_clipped_value_loss", 1),
    Case("empirical_normalization_string", A, "empirical_normalization", "no"),
    Case("num_mini_batches_float", A, "num_mini_batches", 2.5),
    Case("num_mini_batches_zero", A, "num_mini_batches", 0),
    Case("num_mini_batches_bool", A, "num_mini_batches", True),
    Case("num_learning_epochs_zero", A, "num_learning_epochs", 0),
    Case("num_learning_epochs_float", A, "num_learning_epochs", 1.5),
    Case("schedule_typo", A, "schedule", "adaptiv"),
    Case("schedule_none", A, "schedule", None),
    Case("precision_typo", A, "precision", "half"),
    Case("precision_bool", A, "precision", True),
    Case("compile_mode_typo", A, "compile", "fast"),
    Case("compile_number", A, "compile", 1),
    Case("compile_cuda_graphs", A, "compile", "reduce-overhead"),
    Case("cuda_graph_typo", A, "cuda_graph", "on"),
    Case("cuda_graph_number", A, "cuda_graph", 1),
    Case("clip_min_std_negative", A, "clip_min_std", -1.0),
    Case("clip_min_std_list_negative", A, "clip_min_std", [0.1, -0.1]),
    Case("linear_schedule_without_length", A, "schedule", "linear", path="algorithm.lr_anneal_iterations",
         setup=NO_RUN_LENGTH),
    Case("lr_anneal_iterations_zero", A, "lr_anneal_iterations", 0),
    Case("buffer_dilation_ratio_below_one", A, "buffer_dilation_ratio", 0.5),
    Case("use_ppo_loss_string", A, "use_ppo_loss", "yes"),
    Case("optimizer_typo", A, "optimizer_class_name", "Adamm"),
    # --- misspelt and unknown keys
    Case("value_los_coef", A, "value_los_coef", 100, fix="did you mean 'value_loss_coef'"),
    Case("learning_rat", A, "learning_rat", 1e-3, fix="did you mean 'learning_rate'"),
    Case("num_mini_batch", A, "num_mini_batch", 4, fix="did you mean 'num_mini_batches'"),
    Case("gama", A, "gama", 0.99, fix="did you mean 'gamma'"),
    Case("unknown_algorithm_key", A, "frobnicate", True, fix="remove it"),
    Case("actor_hiden_dims", P, "actor_hiden_dims", [32], fix="did you mean 'actor_hidden_dims'"),
    Case("init_noise_sdt", P, "init_noise_sdt", 1.0, fix="did you mean 'init_noise_std'"),
    Case("unknown_policy_key", P, "frobnicate", 1, fix="remove it"),
    Case("num_step_per_env", R, "num_step_per_env", 24, fix="did you mean 'num_steps_per_env'"),
    Case("save_intervall", R, "save_intervall", 10, fix="did you mean 'save_interval'"),
    Case("unknown_runner_key", R, "frobnicate", 1, fix="remove it"),
    # --- runner keys
    Case("num_steps_per_env_float", R, "num_steps_per_env", 2.7),
    Case("num_steps_per_env_zero", R, "num_steps_per_env", 0),
    Case("num_steps_per_env_negative", R, "num_steps_per_env", -1),
    Case("num_steps_per_env_string", R, "num_steps_per_env", "24"),
    Case("save_interval_zero", R, "save_interval", 0),
    Case("log_interval_zero", R, "log_interval", 0),
    Case("max_iterations_zero", R, "max_iterations", 0),
    Case("max_iterations_float", R, "max_iterations", 1e3),
    Case("seed_string", R, "seed", "abc"),
    Case("seed_float", R, "seed", 1.5),
    Case("check_finite_typo", R, "check_finite", "maybe"),
    Case("distributed_timeout_zero", R, "distributed_timeout_s", 0.0),
    Case("resume_string", R, "resume", "yes"),
    Case("runner_empirical_normalization_string", R, "empirical_normalization", "no"),
    Case("inference_mode_rollout_string", R, "inference_mode_rollout", "true"),
    Case("logger_typo", R, "logger", "tensorbord"),
    Case("runner_storage_text", R, "storage", "x", forms=("nested",)),
    Case("storage_int", T, "storage", 5, path="storage"),
    Case("stray_top_level_steps", T, "num_steps_per_env", 48, path="num_steps_per_env", forms=("nested",),
         fix="conflicts with runner.num_steps_per_env"),
    # --- policy keys
    Case("actor_hidden_dims_float", P, "actor_hidden_dims", [16.5]),
    Case("actor_hidden_dims_zero", P, "actor_hidden_dims", [0]),
    Case("actor_hidden_dims_negative", P, "actor_hidden_dims", [-3]),
    Case("actor_hidden_dims_string", P, "actor_hidden_dims", "256"),
    Case("actor_hidden_dims_int", P, "actor_hidden_dims", 256),
    Case("critic_hidden_dims_zero", P, "critic_hidden_dims", [0]),
    Case("critic_hidden_dims_nested_list", P, "critic_hidden_dims", [[32]]),
    Case("init_noise_std_zero", P, "init_noise_std", 0.0),
    Case("init_noise_std_negative", P, "init_noise_std", -1.0),
    Case("init_noise_std_nan", P, "init_noise_std", NAN),
    Case("num_actions_zero", P, "num_actions", 0),
    Case("num_actor_obs_string", P, "num_actor_obs", "6"),
    Case("activation_typo", P, "activation", "elo"),
    Case("mu_activation_typo", P, "mu_activation", "tanhh"),
    Case("rnn_type_typo", P, "rnn_type", "lsmt", setup=RECURRENT),
    Case("rnn_hidden_size_zero", P, "rnn_hidden_size", 0, setup=RECURRENT),
    Case("rnn_num_layers_zero", P, "rnn_num_layers", 0, setup=RECURRENT),
    Case("obs_segments_zero_size", P, "obs_segments", {"base_lin_vel": [0], "commands": [2]}),
    Case("obs_segments_float_size", P, "obs_segments", {"base_lin_vel": [2.0]}),
    Case("amp_discriminator_hidden_dims_zero", P, "amp_discriminator", {"hidden_dims": [0]},
         path="policy.amp_discriminator.hidden_dims", setup=(cls(P, "AmpActorCritic"),)),
    Case("amp_discriminator_unknown_key", P, "amp_discriminator", {"hiden_dims": [16]},
         path="policy.amp_discriminator.hiden_dims", setup=(cls(P, "AmpActorCritic"),)),
    Case("amp_discriminator_lerp_above_one", P, "amp_discriminator", {"task_reward_lerp": 1.5},
         path="policy.amp_discriminator.task_reward_lerp", setup=(cls(P, "AmpActorCritic"),)),
    # --- class names and sections
    Case("policy_class_typo", C, P, "ActorCritc", path="policy.class_name", fix="Did you mean ['ActorCritic'"),
    Case("algorithm_class_typo", C, A, "PPOO", path="algorithm.class_name", fix="Did you mean ['PPO'"),
    Case("policy_class_not_text", C, P, 3, path="policy.class_name"),
    Case("policy_class_conflict", P, "class_name", "ActorCriticRecurrent", forms=("nested",),
         fix="conflicts with runner.policy_class_name"),
    Case("algorithm_class_conflict", A, "class_name", "TPPO", forms=("nested",),
         fix="conflicts with runner.algorithm_class_name"),
    Case("policy_missing", T, "policy", DELETE, path="policy"),
    Case("algorithm_missing", T, "algorithm", DELETE, path="algorithm"),
    Case("policy_list", T, "policy", [{"actor_hidden_dims": [32]}], path="policy"),
    Case("algorithm_list", T, "algorithm", [{"gamma": 0.99}], path="algorithm"),
    # --- extensions
    Case("rnd_weight_negative", A, "rnd_cfg", {"weight": -1.0}, path="algorithm.rnd_cfg.weight"),
    Case("rnd_predictor_zero", A, "rnd_cfg", {"predictor_hidden_dims": [0]},
         path="algorithm.rnd_cfg.predictor_hidden_dims"),
    Case("rnd_num_outputs_zero", A, "rnd_cfg", {"num_outputs": 0}, path="algorithm.rnd_cfg.num_outputs"),
    Case("rnd_unknown_key", A, "rnd_cfg", {"weigth": 0.5}, path="algorithm.rnd_cfg.weigth",
         fix="did you mean 'weight'"),
    Case("rnd_not_mapping", A, "rnd_cfg", True),
    Case("rnd_weight_schedule_mode_typo", A, "rnd_cfg.weight_schedule",
         {"mode": "stepp", "final_step": 10, "final_value": 0.0}),
    Case("symmetry_unknown_key", A, "symmetry_cfg", {"use_mirror_los": True},
         path="algorithm.symmetry_cfg.use_mirror_los", fix="did you mean 'use_mirror_loss'"),
    Case("symmetry_coef_negative", A, "symmetry_cfg.mirror_loss_coef", -1.0),
    Case("symmetry_nothing_on", A, "symmetry_cfg", {"use_mirror_loss": False},
         path="algorithm.symmetry_cfg.use_mirror_loss"),
    Case("extension_unknown_class", A, "extensions", [{"class_name": "Nope"}],
         path="algorithm.extensions[0].class_name"),
    Case("extension_without_class", A, "extensions", [{"weight": 1.0}], path="algorithm.extensions[0].class_name"),
    Case("extension_bad_value", A, "extensions", [{"class_name": "RandomNetworkDistillation", "weight": -1.0}],
         path="algorithm.extensions[0].weight"),
    # --- presets: APPO, TPPO, EstimatorPPO
    Case("appo_discriminator_loss_coef_negative", A, "discriminator_loss_coef", -1.0, setup=(cls(A, "APPO"),)),
    Case("appo_mimic_loss_coef_negative", A, "mimic_loss_coef", -0.5, setup=(cls(A, "APPO"),)),
    Case("appo_replay_buffer_negative", A, "amp_replay_buffer_size", -1, setup=(cls(A, "APPO"),)),
    Case("appo_replay_buffer_float", A, "amp_replay_buffer_size", 1e5, setup=(cls(A, "APPO"),)),
    Case("appo_discriminator_loss_cof", A, "discriminator_loss_cof", 1.0, setup=(cls(A, "APPO"),),
         fix="did you mean 'discriminator_loss_coef'"),
    Case("tppo_teacher_act_prob_above_one", A, "teacher_act_prob", 1.5, setup=(cls(A, "TPPO"),)),
    Case("tppo_teacher_act_prob_typo", A, "teacher_act_prob", "expo", setup=(cls(A, "TPPO"),)),
    Case("tppo_distillation_loss_coef_negative", A, "distillation_loss_coef", -1.0, setup=(cls(A, "TPPO"),)),
    Case("tppo_nested_ppo_gamma", A, "ppo", {"gamma": 3}, path="algorithm.ppo.gamma", setup=(cls(A, "TPPO"),)),
    Case("tppo_nested_ppo_typo", A, "ppo", {"gama": 0.99}, path="algorithm.ppo.gama", setup=(cls(A, "TPPO"),),
         fix="did you mean 'gamma'"),
    Case("tppo_update_times_scale_zero", A, "update_times_scale", 0, setup=(cls(A, "TPPO"),)),
    Case("tppo_resample_prob_above_one", A, "hidden_state_resample_prob", 1.5, setup=(cls(A, "TPPO"),)),
    Case("tppo_using_ppo_string", A, "using_ppo", "yes", setup=(cls(A, "TPPO"),)),
    Case("tppo_distill_target_typo", A, "distill_target", "reel", setup=(cls(A, "TPPO"),)),
    Case("estimator_loss_coef_negative", A, "estimator_loss_coef", -1.0, setup=(cls(A, "EstimatorPPO"),)),
    Case("estimator_loss_func_typo", A, "estimator_loss_func", "mse", setup=(cls(A, "EstimatorPPO"),)),
    # --- upper bounds: sizes that can only be a mistake (the message names the key, the value and the limit)
    Case("num_learning_epochs_huge", A, "num_learning_epochs", 1_000_000, fix="more than 1000"),
    Case("num_mini_batches_huge", A, "num_mini_batches", 1_000_000, fix="more than 65536"),
    Case("num_steps_per_env_huge", R, "num_steps_per_env", 10**7, fix="more than 100000"),
    Case("save_interval_huge", R, "save_interval", 10**12, fix="more than 1000000000"),
    Case("log_interval_huge", R, "log_interval", 10**12, fix="more than 1000000000"),
    Case("actor_hidden_dims_huge", P, "actor_hidden_dims", [256, 10**6], fix="wider than 65536"),
    Case("critic_hidden_dims_huge", P, "critic_hidden_dims", [100_000]),
    Case("rnn_hidden_size_huge", P, "rnn_hidden_size", 10**6, setup=RECURRENT, fix="more than 65536"),
    Case("rnn_num_layers_huge", P, "rnn_num_layers", 1000, setup=RECURRENT, fix="more than 64"),
    Case("buffer_dilation_ratio_huge", A, "buffer_dilation_ratio", 1e6),
    Case("rnd_num_outputs_huge", A, "rnd_cfg", {"num_outputs": 10**6}, path="algorithm.rnd_cfg.num_outputs"),
    Case("rnd_predictor_huge", A, "rnd_cfg", {"predictor_hidden_dims": [10**6]},
         path="algorithm.rnd_cfg.predictor_hidden_dims"),
    Case("amp_discriminator_hidden_dims_huge", P, "amp_discriminator", {"hidden_dims": [10**6]},
         path="policy.amp_discriminator.hidden_dims", setup=(cls(P, "AmpActorCritic"),)),
    # --- storage keys: the rollout storage's arguments and the extensions' storage options only
    Case("storage_unknown_key", T, "storage", {"foo": 1}, path="storage.foo", fix="remove it"),
    Case("storage_typo", T, "storage", {"amp_obs_shap": [4]}, path="storage.amp_obs_shap",
         fix="did you mean 'amp_obs_shape'"),
    Case("storage_ring", T, "storage", {"ring": True}, path="storage.ring"),
    Case("storage_buffer_dilation_ratio", T, "storage", {"buffer_dilation_ratio": 2.0},
         path="storage.buffer_dilation_ratio", fix="algorithm.buffer_dilation_ratio"),
    Case("storage_next_observations_string", T, "storage", {"next_observations": "yes"},
         path="storage.next_observations"),
    Case("storage_amp_obs_shape_text", T, "storage", {"amp_obs_shape": "42"}, path="storage.amp_obs_shape"),
    Case("runner_storage_unknown_key", R, "storage", {"foo": 1}, path="runner.storage.foo", forms=("nested",)),
    # --- empty class names: an error naming the key, not the default class
    Case("policy_class_empty", C, P, "", path="policy.class_name", fix="remove the key for the default"),
    Case("algorithm_class_empty", C, A, "", path="algorithm.class_name"),
    Case("algorithm_class_blank", C, A, "   ", path="algorithm.class_name"),
    Case("runner_class_empty", T, "runner_class_name", "", path="runner.runner_class_name"),
    Case("runner_class_name_empty", R, "class_name", ""),
    # --- TwoStageRunner's dataset keys
    Case("pretrain_dataset_typo", R, "pretrain_dataset", {"data_dir": "demos", "wait_for_data": 5},
         path="runner.pretrain_dataset.wait_for_data", fix="did you mean 'wait_for_data_s'"),
    Case("pretrain_dataset_num_envs", R, "pretrain_dataset", {"data_dir": "demos", "num_envs": 4},
         path="runner.pretrain_dataset.num_envs", fix="num_envs and device come from the runner"),
    # --- found by tools/adversarial_pass.py (docs/security.md, "Adversarial pass")
    Case("pretrain_dataset_data_dir_int", R, "pretrain_dataset", {"data_dir": 3},
         path="runner.pretrain_dataset.data_dir"),
    Case("pretrain_dataset_loops_text", R, "pretrain_dataset", {"data_dir": "demos", "dataset_loops": "x"},
         path="runner.pretrain_dataset.dataset_loops"),
    Case("seed_beyond_torch", R, "seed", 2**70, fix="torch.manual_seed"),
    Case("logger_int", R, "logger", 3),
    Case("optimizer_abstract_base", A, "optimizer_class_name", "Optimizer"),
    Case("lr_scheduler_unknown", A, "lr_scheduler_class_name", "NoSuchLR"),
    Case("extensions_text", A, "extensions", "rnd", fix="must be a list of extensions"),
    Case("extension_number", A, "extensions", [3], path="algorithm.extensions[0]"),
    Case("rnd_weight_schedule_incomplete", A, "rnd_cfg", {"weight_schedule": {"mode": "linear"}},
         path="algorithm.rnd_cfg.weight_schedule", fix="final_step"),
    Case("storage_amp_obs_shape_negative", T, "storage", {"amp_obs_shape": -1}, path="storage.amp_obs_shape"),
    Case("tppo_teacher_path_int", A, "teacher_policy", {"teacher_ac_path": 5},
         path="algorithm.teacher_policy.teacher_ac_path", setup=(cls(A, "TPPO"),)),
    Case("tppo_teacher_act_prob_nan", A, "teacher_act_prob", NAN, setup=(cls(A, "TPPO"),)),
    Case("appo_style_reward_ramp_reversed", A, "style_reward_ramp", [10, 5], setup=(cls(A, "APPO"),)),
    Case("appo_style_reward_ramp_negative", A, "style_reward_ramp", [-1, 5], setup=(cls(A, "APPO"),)),
    Case("amp_discriminator_input_dim_zero", P, "amp_discriminator", {"input_dim": 0},
         path="policy.amp_discriminator.input_dim", setup=(cls(P, "AmpActorCritic"),)),
]

ENV_CASES = [
    Case("num_actor_obs_wrong", P, "num_actor_obs", 7),
    Case("num_critic_obs_wrong", P, "num_critic_obs", 6),
    Case("num_actions_wrong", P, "num_actions", 3),
    Case("obs_segments_too_narrow", P, "obs_segments", {"foo": [3]}),
    Case("privileged_obs_segments_too_narrow", P, "privileged_obs_segments", {"foo": [3]}),
    Case("more_minibatches_than_samples", A, "num_mini_batches", 10_000),
    Case("recurrent_more_minibatches_than_envs", A, "num_mini_batches", 16, setup=RECURRENT),
    Case("activation_typo_at_build", P, "activation", "elo"),
    Case("tppo_teacher_policy_typo", A, "teacher_policy", {"actor_hiden_dims": [8]},
         path="algorithm.teacher_policy.actor_hiden_dims", setup=(cls(A, "TPPO"),),
         fix="did you mean 'actor_hidden_dims'"),
]
# fmt: on


@dataclass(frozen=True)
class CliCase:
    """Command-line overrides (nested spelling, as ``st-rl train`` takes them) and the path the error names."""

    id: str
    items: tuple[str, ...]
    path: str
    fix: str = ""
    xfail: Mapping[str, str] = field(default_factory=dict)

    def expected_path(self, form: str) -> str:
        return self.path.removeprefix("runner.") if form == "flat" else self.path


# fmt: off
CLI_CASES = [
    CliCase("gamma_text", ("algorithm.gamma=abc",), "algorithm.gamma", fix="got text"),
    CliCase("learning_rate_typo_text", ("algorithm.learning_rate=1e-3x",), "algorithm.learning_rate"),
    CliCase("gamma_above_one", ("algorithm.gamma=1.5",), "algorithm.gamma"),
    CliCase("gamma_nan", ("algorithm.gamma=nan",), "algorithm.gamma"),
    CliCase("learning_rate_negative", ("algorithm.learning_rate=-1",), "algorithm.learning_rate"),
    CliCase("max_grad_norm_zero", ("algorithm.max_grad_norm=0",), "algorithm.max_grad_norm"),
    CliCase("schedule_typo", ("algorithm.schedule=adaptiv",), "algorithm.schedule"),
    CliCase("use_clipped_value_loss_text", ("algorithm.use_clipped_value_loss=maybe",),
            "algorithm.use_clipped_value_loss"),
    CliCase("value_los_coef", ("algorithm.value_los_coef=100",), "algorithm.value_los_coef",
            fix="did you mean 'value_loss_coef'"),
    CliCase("rnd_weight_negative", ("algorithm.rnd_cfg.weight=-1",), "algorithm.rnd_cfg.weight"),
    CliCase("actor_hidden_dims_zero", ("policy.actor_hidden_dims=[0]",), "policy.actor_hidden_dims"),
    CliCase("actor_hidden_dims_int", ("policy.actor_hidden_dims=256",), "policy.actor_hidden_dims"),
    CliCase("steps_float", ("runner.num_steps_per_env=2.5",), "runner.num_steps_per_env"),
    CliCase("steps_zero", ("runner.num_steps_per_env=0",), "runner.num_steps_per_env"),
    CliCase("runner_key_typo", ("runner.num_step_per_env=48",), "runner.num_step_per_env",
            fix="did you mean 'num_steps_per_env'"),
    CliCase("seed_text", ("seed=abc",), "seed"),
    CliCase("path_through_a_value", ("algorithm.gamma.x=1",), "algorithm.gamma.x=1", fix="not a section"),
    CliCase("no_equals_sign", ("algorithm.learning_rate",), "algorithm.learning_rate", fix="KEY=VALUE"),
    CliCase("delete_missing_key", ("~algorithm.nope",), "~algorithm.nope"),
    CliCase("last_of_several_wrong", ("algorithm.gamma=0.9", "algorithm.lam=1.2"), "algorithm.lam"),
    CliCase("num_learning_epochs_huge", ("algorithm.num_learning_epochs=1000000",), "algorithm.num_learning_epochs",
            fix="more than 1000"),
    CliCase("num_learning_epochs_1e6", ("algorithm.num_learning_epochs=1e6",), "algorithm.num_learning_epochs"),
    CliCase("storage_unknown_key", ("storage.foo=1",), "storage.foo", fix="remove it"),
    CliCase("algorithm_class_empty", ('algorithm.class_name=""',), "algorithm.class_name"),
]
# fmt: on


# ------------------------------------------------------------------------------------------------ helpers
def apply_edit(cfg: dict[str, Any], form: str, edit: Edit) -> None:
    """Apply one ``(section, key, value)`` edit in place (see the section names above)."""
    section, key, value = edit
    if section == C:
        node, key = (cfg["runner"], f"{key}_class_name") if form == "nested" else (cfg[key], "class_name")
    elif section == T or (section == R and form == "flat"):
        node = cfg
    else:
        node = cfg[section]
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def make_cfg(form: str, edits: Iterable[Edit] = ()) -> dict[str, Any]:
    """A deep copy of the form's base config with ``edits`` applied."""
    cfg = copy.deepcopy(BASES[form])
    for edit in edits:
        apply_edit(cfg, form, edit)
    return cfg


def params(cases: Iterable[Case | CliCase]) -> list[Any]:
    """One pytest parameter per case and form, strict ``xfail`` where the case says so."""
    out = []
    for case in cases:
        for form in getattr(case, "forms", FORMS):
            out.append(pytest.param(case, form, id=f"{form}-{case.id}", marks=xfail_if(case.xfail.get(form))))
    return out


def xfail_if(reason: str | None) -> list[Any]:
    """A strict ``xfail`` mark when there is a reason (a known gap of the library), else none."""
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def assert_names(err: ConfigError, path: str, fix: str = "") -> None:
    """The message and ``err.paths`` name ``path`` (or an element / key below it), and the message holds ``fix``."""
    text = str(err)
    assert path in text, f"{path!r} is not named in the message:\n{text}"
    below = (path + "[", path + ".")
    assert any(p == path or p.startswith(below) for p in err.paths), f"{path!r} not in {err.paths}"
    assert fix in text, f"{fix!r} is not in the message:\n{text}"


def expect_config_error(call: Call, cfg: dict[str, Any], path: str, fix: str = "") -> None:
    """``call(cfg)`` raises ConfigError naming ``path`` and leaves ``cfg`` unchanged."""
    before = copy.deepcopy(cfg)
    with pytest.raises(ConfigError) as err:
        call(cfg)
    assert_names(err.value, path, fix)
    assert cfg == before, "the user's config was mutated"


def build_and_learn(cfg: dict[str, Any]) -> None:
    """Build the runner on a small environment and start learning: the error must come before any rollout
    (sizes and layouts are checked when the runner is built, minibatch counts when learning starts)."""
    OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), cfg, None).learn(1)


def resolve_with_overrides(items: tuple[str, ...]) -> Call:
    return lambda cfg: resolve_train_cfg(apply_overrides(cfg, list(items)))


RESOLVE_PARAMS, ENV_PARAMS, CLI_PARAMS = params(RESOLVE_CASES), params(ENV_CASES), params(CLI_CASES)


# -------------------------------------------------------------------------------------------------- bad
@pytest.mark.parametrize("case,form", RESOLVE_PARAMS)
def test_bad_config_is_rejected_when_resolved(case: Case, form: str) -> None:
    expect_config_error(resolve_train_cfg, make_cfg(form, case.edits()), case.expected_path(form), case.fix)


@pytest.mark.parametrize("case,form", ENV_PARAMS)
def test_bad_config_is_rejected_against_the_environment(case: Case, form: str) -> None:
    expect_config_error(build_and_learn, make_cfg(form, case.edits()), case.expected_path(form), case.fix)


@pytest.mark.parametrize("case,form", CLI_PARAMS)
def test_bad_command_line_override_is_rejected(case: CliCase, form: str) -> None:
    expect_config_error(
        resolve_with_overrides(case.items), make_cfg(form), case.expected_path(form), case.fix
    )


# ------------------------------------------------------------------------------------------------- good
EVERY_PPO_KEY: dict[str, Any] = {
    "num_learning_epochs": 5,
    "num_mini_batches": 4,
    "clip_param": 0.2,
    "gamma": 0.99,
    "lam": 0.95,
    "value_loss_coef": 1.0,
    "entropy_coef": 0.01,
    "surrogate_loss_coef": 1.0,
    "learning_rate": 1e-3,
    "max_grad_norm": 1.0,
    "use_clipped_value_loss": True,
    "clip_min_std": 1e-15,
    "optimizer_class_name": "AdamW",
    "schedule": "adaptive",
    "desired_kl": 0.01,
    "lr_anneal_iterations": 100,
    "empirical_normalization": True,
    "extensions": [],
    "rnd_cfg": {
        "weight": 0.5,
        "weight_schedule": {"mode": "linear", "initial_step": 10, "final_step": 100, "final_value": 0.0},
        "use_critic_obs": False,
        "obs_components": None,
        "state_normalization": True,
        "reward_normalization": True,
        "predictor_hidden_dims": [32, 32],
        "target_hidden_dims": [32, 32],
        "num_outputs": 8,
        "activation": "elu",
        "learning_rate": 1e-3,
    },
    "symmetry_cfg": {"use_mirror_loss": True, "mirror_loss_coef": 0.5, "use_data_augmentation": False},
    "use_ppo_loss": True,
    "buffer_dilation_ratio": 1.0,
    "lr_scheduler_class_name": "StepLR",
    "lr_scheduler": {"step_size": 100},
}

# The reference's AMP config (st_gym APPO with AmpActorCriticRecurrent, as in tests/algorithms/test_appo.py).
APPO_REFERENCE: tuple[Edit, ...] = (
    (T, "runner_class_name", "AmpPolicyRunner"),
    (T, "storage", {"amp_obs_shape": (4,)}),
    cls(P, "AmpActorCriticRecurrent"),
    (P, "rnn_type", "lstm"),
    (P, "num_actor_obs", None),
    (
        P,
        "amp_discriminator",
        {
            "input_dim": None,
            "style_reward_coef": 1.0,
            "discriminator_grad_pen": 10.0,
            "hidden_dims": [32, 32],
            "task_reward_lerp": 0.0,
        },
    ),  # fmt: skip
    cls(A, "APPO"),
    (A, "discriminator_loss_coef", 1.0),
    (A, "mimic_loss_coef", 0.0),
    (A, "amp_obs_dim", 2),
    (A, "amp_replay_buffer_size", 100_000),
    (A, "bc_loss_coef", 0.001),
)

# The reference's teacher-student config (st_gym TPPO form with a nested ppo dict, docs/teacher_student.md).
TPPO_REFERENCE: tuple[Edit, ...] = (
    cls(P, "ActorCriticRecurrent"),
    (P, "rnn_type", "gru"),
    (P, "rnn_hidden_size", 64),
    cls(A, "TPPO"),
    (A, "ppo", {"gamma": 0.99, "lam": 0.95, "num_learning_epochs": 2, "num_mini_batches": 2}),
    (A, "teacher_policy", {"teacher_ac_path": "teacher/model_100.pt"}),
    (A, "teacher_act_prob", "exp"),
    (A, "update_times_scale", 10),
    (A, "using_ppo", True),
    (A, "distill_target", "real"),
    (A, "distillation_loss_coef", 1.0),
    (A, "hidden_state_resample_prob", 0.5),
    (A, "dagger_loss_coef", 0.0),
)

GOOD_CASES: dict[str, tuple[Edit, ...]] = {
    "base": (),
    "every_ppo_key": tuple((A, k, v) for k, v in EVERY_PPO_KEY.items()),
    "appo_reference": APPO_REFERENCE,
    "tppo_reference": TPPO_REFERENCE,
    "estimator_ppo": (
        cls(A, "EstimatorPPO"),
        (A, "estimator_loss_func", "l1_loss"),
        (A, "estimator_loss_coef", 0.5),
    ),
    # legal but unusual values: accepted without a warning
    "discount_edges": ((A, "gamma", 1.0), (A, "lam", 0.0), (A, "entropy_coef", 0.0)),
    "integers_for_floats": ((A, "gamma", 1), (A, "learning_rate", 1), (A, "max_grad_norm", 10)),
    "no_grad_clipping": ((A, "max_grad_norm", None),),
    "fixed_schedule_without_kl": ((A, "schedule", "fixed"), (A, "desired_kl", None)),
    "linear_schedule_from_run_length": ((A, "schedule", "linear"), (R, "max_iterations", 100)),
    "per_action_min_std": ((A, "clip_min_std", [0.1, 0.2]),),
    "linear_policy": ((P, "actor_hidden_dims", []), (P, "critic_hidden_dims", [8])),
    "sizes_as_none": ((P, "num_actor_obs", None), (P, "num_critic_obs", None), (P, "num_actions", None)),
    "upper_case_gru": (*RECURRENT, (P, "rnn_type", "GRU"), (P, "rnn_hidden_size", 8)),
    "quiet_runner": (
        (T, "seed", None),  # legged_gym keeps the seed at the top level
        (R, "check_finite", "off"),
        (R, "logger", "none"),
        (R, "log_interval", 10),
    ),
    "extension_as_dict": ((A, "extensions", [{"class_name": "RandomNetworkDistillation", "weight": 0.1}]),),
    # st_gym sends its AMP storage option with every config, PPO's too
    "st_gym_storage_on_ppo": ((T, "storage", {"amp_obs_shape": (42,)}),),
    "storage_next_observations": ((T, "storage", {"next_observations": True}),),
    # the upper bounds themselves are legal
    "at_the_limits": (
        (A, "num_learning_epochs", 1000),
        (A, "buffer_dilation_ratio", 1000.0),
        (R, "save_interval", 10**9),  # the usual "never"
        (R, "log_interval", 10**9),
        (R, "num_steps_per_env", 100_000),
        (P, "actor_hidden_dims", [65536]),
    ),
    "class_names_none_mean_default": ((C, P, None), (C, A, None)),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", list(GOOD_CASES))
def test_good_config_resolves_without_warnings(name: str, form: str) -> None:
    cfg = make_cfg(form, GOOD_CASES[name])
    before = copy.deepcopy(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolved = resolve_train_cfg(cfg)
    assert cfg == before
    assert resolved.source_format == form


GOOD_OVERRIDES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "common": (
        (
            "algorithm.learning_rate=3e-4",
            "policy.actor_hidden_dims=[64,64]",
            "runner.num_steps_per_env=32",
            "algorithm.rnd_cfg.weight=0.5",
            "seed=7",
        ),
        {"num_steps_per_env": 32, "seed": 7},
    ),  # fmt: skip
    # docs/configuration.md: "In either form `seed=3` and `runner.seed=3` work."
    "runner_seed": (("runner.seed=5",), {"seed": 5}),
}


OVERRIDES_REJECTED: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize(
    "name,form",
    [
        pytest.param(name, form, id=f"{form}-{name}", marks=xfail_if(OVERRIDES_REJECTED.get((name, form))))
        for name in GOOD_OVERRIDES
        for form in FORMS
    ],
)
def test_good_overrides_resolve_without_warnings(name: str, form: str) -> None:
    items, runner = GOOD_OVERRIDES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolved = resolve_train_cfg(apply_overrides(make_cfg(form), list(items)))
    assert {k: resolved.runner[k] for k in runner} == runner


# ----------------------------------------------------------------------------------------------- corpus
def test_corpus_holds_at_least_120_bad_configs() -> None:
    for level in (RESOLVE_PARAMS, ENV_PARAMS, CLI_PARAMS):
        ids = [p.id for p in level]
        assert len(ids) == len(set(ids)), "case ids must be unique"
    total = len(RESOLVE_PARAMS) + len(ENV_PARAMS) + len(CLI_PARAMS)
    assert total >= 120, f"only {total} bad configs"
    assert {"flat", "nested"} <= {p.values[1] for p in RESOLVE_PARAMS}
    assert len(ENV_PARAMS) >= 10 and len(CLI_PARAMS) >= 20
