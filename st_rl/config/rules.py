"""Value rules of the config keys (range or choice, and the fix), by key name or suffix (``*_coef``, ``*_prob``,
``*_hidden_dims``); types come from the constructors (:mod:`st_rl.config.schema`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.optim.lr_scheduler as schedulers

from st_rl.algorithms.extensions.amp import valid_ramp
from st_rl.algorithms.ppo import COMPILE_MODES
from st_rl.modules.utils import _ACTIVATIONS

__all__ = ["LIMITS", "Rule", "RUNNER_RULES", "RULES", "SEGMENT_SHAPE", "STORAGE_RULES", "rule_for"]


@dataclass(frozen=True)
class Rule:
    """``check(value)`` is True when acceptable; ``text`` says what it must be, ``fix`` what to write."""

    text: str
    check: Callable[[Any], bool]
    fix: str = ""
    allow_none: bool = True

    def violated(self, value: Any) -> bool:
        if value is None:
            return not self.allow_none
        try:
            return not self.check(value)
        except (TypeError, ValueError):
            return True


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _finite(x: Any) -> bool:
    return not isinstance(x, float) or math.isfinite(x)


def _in(lo: float, hi: float = math.inf) -> Callable[[Any], bool]:
    """Numbers in [lo, hi]; other values pass (the schema checks types)."""
    return lambda x: not _num(x) or lo <= x <= hi


def _gt(lo: float) -> Callable[[Any], bool]:
    return lambda x: not _num(x) or x > lo


def _all_in(lo: float, hi: float = math.inf) -> Callable[[Any], bool]:
    """Every number of a list (or a single number) in [lo, hi]."""
    return lambda x: all(map(_in(lo, hi), x if isinstance(x, Sequence) and not isinstance(x, str) else [x]))


def _choice(*choices: str, fix: str = "pick one of them") -> Rule:
    """A string among ``choices`` (not None)."""
    text = f"must be one of {', '.join(map(repr, choices))}"
    return Rule(text, lambda x: not isinstance(x, str) or x in choices, fix, allow_none=False)


def _activation(x: Any) -> bool:
    if not isinstance(x, str):
        return True
    return x.lower() in _ACTIVATIONS or _names_subclass(nn, x, nn.Module)


def _names_subclass(module: Any, name: Any, base: type) -> bool:
    obj = vars(module).get(str(name))
    return isinstance(obj, type) and issubclass(obj, base)


def _optimizer(x: Any) -> bool:
    return _names_subclass(optim, x, optim.Optimizer) and x != "Optimizer"  # not the abstract base


def _lr_scheduler(x: Any) -> bool:
    bases = ("LRScheduler", "_LRScheduler")
    return _names_subclass(schedulers, x, schedulers.LRScheduler) and x not in bases


def _functional_loss(x: Any) -> bool:
    return callable(F.__dict__.get(str(x)))


def _logger(x: Any) -> bool:
    if isinstance(x, str):
        return x in ("tensorboard", "wandb", "neptune", "none") or ":" in x
    # a writer class or factory, or {"class_name": ...}
    return callable(x) or (isinstance(x, Mapping) and "class_name" in x)


_SCHEDULE = "a schedule 'linear', 'exp' or 'tanh'"


def _schedule_or(hi: float) -> Callable[[Any], bool]:
    """A schedule name, or a finite number in [0, hi]."""
    in_range = _in(0.0, hi)
    return lambda x: x in ("linear", "exp", "tanh") if isinstance(x, str) else in_range(x) and _finite(x)


def _weight_schedule(x: Any) -> bool:
    if not isinstance(x, Mapping):
        return False
    numbers = ["final_step", "final_value"] + (["initial_step"] if "initial_step" in x else [])
    return x.get("mode") in ("step", "linear") and all(_num(x.get(k)) for k in numbers)


def _seed(x: Any) -> bool:
    return not isinstance(x, int) or isinstance(x, bool) or -(2**63) <= x < 2**64


UNIT = Rule("must lie in [0, 1]", _in(0.0, 1.0), "use a value between 0 and 1")
PROB = Rule("is a probability and must lie in [0, 1]", _in(0.0, 1.0), "use a value between 0 and 1")
POSITIVE = Rule("must be > 0", _gt(0.0), "use a positive value", allow_none=False)
NONNEG = Rule("must be >= 0", _in(0.0), "use 0 to switch the term off, or a positive weight", False)
SIZE = Rule("must be an integer >= 1", _in(1), "use a positive integer", allow_none=False)
SIZE_OR_NONE = Rule("must be an integer >= 1 or None", _in(1), "use a positive integer, or None")
# Key -> (upper bound, typical values): a larger value can only be a mistake (a typo, an extra zero).
LIMITS: dict[str, tuple[int, str]] = {
    "num_learning_epochs": (1000, "1-10 passes over each rollout"),
    "num_mini_batches": (65536, "1-8 minibatches per epoch"),
    "num_steps_per_env": (100_000, "24-100 steps per environment and iteration"),
    "save_interval": (10**9, "50-500 iterations (the last one is always saved; 10**9: no periodic saves)"),
    "log_interval": (10**9, "1-50 iterations (10**9: log only the last one)"),
    "hidden_dims": (65536, "layer widths such as [256, 128]"),
    "rnn_hidden_size": (65536, "64-512"),
    "rnn_num_layers": (64, "1-3"),
    "num_outputs": (65536, "8-128"),
    "encoder_output_size": (65536, "16-256"),
    "visual_latent_size": (65536, "64-512"),
    "buffer_dilation_ratio": (1000, "1-10 rollouts kept"),
}


def _bounded_size(key: str, none: bool = False) -> Rule:
    """An integer in [1, ``LIMITS[key]``] (or None when ``none``)."""
    hi, typical = LIMITS[key]
    or_none = (" or None", ", None for the default") if none else ("", "")
    fix = f"typical: {typical}; more than {hi} can only be a mistake{or_none[1]}"
    return Rule(f"must be an integer in [1, {hi}]{or_none[0]}", _in(1, hi), fix, allow_none=none)


SIZES = Rule(
    f"every entry must be an integer in [1, {LIMITS['hidden_dims'][0]}]",
    _all_in(1, LIMITS["hidden_dims"][0]),
    f"list layer widths such as [256, 128]; wider than {LIMITS['hidden_dims'][0]} can only be a mistake",
)

CLASS_NAME = Rule(
    "is an empty class name",
    lambda x: not isinstance(x, str) or bool(x.strip()),
    "name a class (a short name such as 'ActorCritic', 'PPO', 'OnPolicyRunner', or 'package.module:Class'), "
    "or remove the key for the default",
)

RULES: dict[str, Rule] = {
    # PPO
    "gamma": Rule("is the discount factor and must lie in [0, 1]", _in(0.0, 1.0), "typical: 0.99", False),
    "lam": Rule("is the GAE lambda and must lie in [0, 1]", _in(0.0, 1.0), "typical: 0.95", False),
    "clip_param": Rule("is the PPO ratio clip and must be > 0", _gt(0.0), "typical: 0.2", False),
    "learning_rate": Rule("must be > 0", _gt(0.0), "typical: 1e-3 (PPO), 3e-4", False),
    "max_grad_norm": Rule("must be > 0, or None for no clipping", _gt(0.0), "typical: 1.0"),
    "desired_kl": Rule("is the adaptive schedule's KL target and must be > 0", _gt(0.0), "typical: 0.01"),
    "num_learning_epochs": _bounded_size("num_learning_epochs"),
    "num_mini_batches": _bounded_size("num_mini_batches"),
    "schedule": _choice("fixed", "adaptive", "linear"),
    "lr_anneal_iterations": SIZE_OR_NONE,
    "compile": Rule(
        "must be true, false or a torch.compile mode without CUDA graphs",
        lambda x: isinstance(x, bool) or x in COMPILE_MODES,
        "true (default mode), 'max-autotune-no-cudagraphs' or false (the CUDA-graph modes 'reduce-overhead' "
        "and 'max-autotune' are not supported: the update reads outputs that their next replay overwrites)",
        False,
    ),
    "precision": _choice(
        "fp32", "bf16", "auto", fix="'auto': bf16 where it is faster for the policy at hand, else fp32"
    ),
    "buffer_dilation_ratio": Rule(
        "must lie in [1, 1000]", _in(1.0, 1000), "1 keeps one rollout; each unit one more", False
    ),
    "clip_min_std": Rule("must be >= 0", _all_in(0.0), "typical: 1e-15 or a per-action list", False),
    "hidden_state_resample_prob": PROB,
    "optimizer_class_name": Rule(
        "must name a torch.optim optimizer", _optimizer, "e.g. 'Adam', 'SGD'", False
    ),
    # distillation (TPPO, ATPPO, EstimatorTPPO)
    "teacher_act_prob": Rule(f"must be a probability in [0, 1] or {_SCHEDULE}", _schedule_or(1.0), "", False),
    "distillation_loss_coef": Rule(f"must be >= 0 or {_SCHEDULE}", _schedule_or(math.inf), "", False),
    "distill_target": _choice("real", "mse_sum", "l1", "tanh", "scaled_tanh", "max_log_prob", fix=""),
    "distill_latent_target": _choice("real", "l1", "tanh", "scaled_tanh", fix=""),
    "estimator_loss_func": Rule(
        "must name a torch.nn.functional loss", _functional_loss, "e.g. 'mse_loss'", False
    ),
    "weight_schedule": Rule(
        "needs mode 'step' or 'linear' with numbers final_step and final_value",
        _weight_schedule,
        "{'mode': 'step', 'final_step': s, 'final_value': v} or {'mode': 'linear', 'initial_step': a, "
        "'final_step': b, 'final_value': v}",
    ),
    "lr_scheduler_class_name": Rule(
        "must name a torch.optim.lr_scheduler class", _lr_scheduler, "e.g. 'StepLR'"
    ),
    "teacher_ac_path": Rule(
        "must be the path of the teacher's checkpoint (a string)",
        lambda x: isinstance(x, str),
        "e.g. 'logs/teacher/model_1000.pt'",
    ),
    "style_reward_ramp": Rule(
        "must be two learning iterations [start, end] with 0 <= start <= end",
        valid_ramp,
        "e.g. [100, 300]: no style reward before iteration 100, full weight from 300; None: always full",
    ),
    # the AMP discriminator (policy.amp_discriminator)
    "hidden_dims": SIZES,
    "input_dim": SIZE_OR_NONE,
    "task_reward_lerp": UNIT,
    "discriminator_grad_pen": NONNEG,
    "style_reward_coef": NONNEG,
    "update_times_scale": POSITIVE,
    "amp_replay_buffer_size": Rule(
        "must be an integer >= 0 or None", _in(0), "0: no replay; None: the preset's"
    ),
    "amp_preset": _choice(
        "reference",
        "st_rl",
        fix="'reference' (the reference APPO, default) or 'st_rl' (replay, separate clipping)",
    ),
    "bc_loss_coef": NONNEG,
    "amp_obs_dim": SIZE_OR_NONE,
    # RND
    "weight": Rule("must be >= 0", _in(0.0), "the intrinsic reward weight, e.g. 0.5", False),
    "num_outputs": _bounded_size("num_outputs"),
    # policies
    "init_noise_std": Rule("must be > 0", _gt(0.0), "typical: 1.0", False),
    "activation": Rule(
        "must name an activation", _activation, "e.g. 'elu', 'tanh', or a torch.nn class", False
    ),
    "mu_activation": Rule("must name an activation or be None", _activation, "e.g. 'tanh', or None"),
    "rnn_type": Rule(
        "must be 'lstm' or 'gru' (None only on a feed-forward policy)",
        lambda x: not isinstance(x, str) or x.lower() in ("lstm", "gru"),
        "pick one of them",
    ),
    "rnn_hidden_size": _bounded_size("rnn_hidden_size"),
    "rnn_num_layers": _bounded_size("rnn_num_layers"),
    "num_actor_obs": SIZE_OR_NONE,
    "num_critic_obs": SIZE_OR_NONE,
    "num_actions": SIZE_OR_NONE,
    "encoder_output_size": _bounded_size("encoder_output_size", none=True),
    "visual_latent_size": _bounded_size("visual_latent_size"),
    "env_action_scale": Rule("must be > 0", _gt(0.0), "the env's action scale, e.g. 0.5"),
}

RUNNER_RULES: dict[str, Rule] = {
    "seed": Rule(
        "must be an integer in [-2**63, 2**64 - 1] (torch.manual_seed's range) or None", _seed, "e.g. 42"
    ),
    "num_steps_per_env": _bounded_size("num_steps_per_env"),
    "max_iterations": SIZE_OR_NONE,
    "save_interval": _bounded_size("save_interval"),
    "log_interval": _bounded_size("log_interval"),
    "distributed_timeout_s": POSITIVE,
    "logger": Rule(
        "must be 'tensorboard', 'wandb', 'neptune', 'none' or a custom writer ('package.module:Class')",
        _logger,
        "see docs/logging.md",
    ),
    "check_finite": _choice("rollout", "step", "off"),
    "runner_class_name": CLASS_NAME,
    "class_name": CLASS_NAME,
    "policy_class_name": CLASS_NAME,
    "algorithm_class_name": CLASS_NAME,
}


def _shape(x: Any) -> bool:
    dims = x if isinstance(x, Sequence) and not isinstance(x, str) else [x]
    return bool(dims) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)


SEGMENT_SHAPE = Rule(
    "a component's shape must be a list of integers >= 1", _shape, "e.g. [3], or [1, 7, 5] for a map", False
)
STORAGE_RULES = {"amp_obs_shape": Rule("every entry must be an integer >= 1", _all_in(1))}


def rule_for(key: str) -> Rule | None:
    """The rule of ``key``: by name, else by suffix (``*_coef`` >= 0, ``*_prob`` in [0, 1], hidden dims)."""
    if key in RULES:
        return RULES[key]
    if key.endswith("_coef"):
        return NONNEG
    if key.endswith("_prob"):
        return PROB
    if key.endswith("_hidden_dims") or key.endswith("_sizes"):
        return SIZES
    return None
