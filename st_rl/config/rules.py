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
        except (TypeError, ValueError, OverflowError):
            return True


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _in(lo: float, hi: float = math.inf, above: bool = False) -> Callable[[Any], bool]:
    """Numbers in [lo, hi] (in (lo, hi] when ``above``); other values pass (the schema checks types)."""
    return lambda x: not _num(x) or (lo < x if above else lo <= x) and x <= hi


def _range(lo: float, hi: float = math.inf, fix: str = "", above: bool = False, none: bool = False) -> Rule:
    """A number in [lo, hi] (> lo when ``above``); None only when ``none``."""
    text = (
        f"must be > {lo}" if above else f"must be >= {lo}" if hi == math.inf else f"must lie in [{lo}, {hi}]"
    )
    return Rule(text, _in(lo, hi, above), fix, none)


def _all_in(lo: float, hi: float = math.inf) -> Callable[[Any], bool]:
    """Every number of a list (or a single number) in [lo, hi]."""
    return lambda x: all(map(_in(lo, hi), x if isinstance(x, Sequence) and not isinstance(x, str) else [x]))


def _choice(*choices: str, fix: str = "pick one of them") -> Rule:
    """A string among ``choices`` (not None)."""
    text = f"must be one of {', '.join(map(repr, choices))}"
    return Rule(text, lambda x: not isinstance(x, str) or x in choices, fix, allow_none=False)


def _names(module: Any, base: type, *abstract: str) -> Callable[[Any], bool]:
    """A name of a ``base`` subclass in ``module`` (not one of the ``abstract`` ones)."""
    return lambda x: (
        isinstance(c := vars(module).get(str(x)), type) and issubclass(c, base) and x not in abstract
    )


def _activation(x: Any) -> bool:
    return not isinstance(x, str) or x.lower() in _ACTIVATIONS or _names(nn, nn.Module)(x)


def _logger(x: Any) -> bool:
    if isinstance(x, str):
        return x in ("tensorboard", "wandb", "neptune", "none") or ":" in x
    # a writer class or factory, or {"class_name": ...}
    return callable(x) or (isinstance(x, Mapping) and "class_name" in x)


def _schedule_or(hi: float) -> Rule:
    """A schedule name, or a finite number in [0, hi]."""
    what = "a probability in [0, 1]" if hi == 1 else ">= 0"
    return Rule(
        f"must be {what} or a schedule 'linear', 'exp' or 'tanh'",
        lambda x: x in ("linear", "exp", "tanh") if isinstance(x, str) else _num(x) and 0 <= x <= hi,
        allow_none=False,
    )


def _weight_schedule(x: Any) -> bool:
    if not isinstance(x, Mapping):
        return False
    numbers = ["final_step", "final_value"] + (["initial_step"] if "initial_step" in x else [])
    return x.get("mode") in ("step", "linear") and all(_num(x.get(k)) for k in numbers)


UNIT = _range(0, 1, "use a value between 0 and 1", none=True)
POSITIVE = _range(0, fix="use a positive value", above=True)
NONNEG = _range(0, fix="use 0 to switch the term off, or a positive weight")
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


_WIDEST = LIMITS["hidden_dims"][0]
SIZES = Rule(
    f"every entry must be an integer in [1, {_WIDEST}]",
    _all_in(1, _WIDEST),
    f"list layer widths such as [256, 128]; wider than {_WIDEST} can only be a mistake",
)
CLASS_NAME = Rule(
    "is an empty class name",
    lambda x: not isinstance(x, str) or bool(x.strip()),
    "name a class ('ActorCritic', 'PPO', 'OnPolicyRunner', or 'package.module:Class'), or remove the key for the default",
)

RULES: dict[str, Rule] = {
    **{key: _bounded_size(key) for key in LIMITS},  # replaced below for keys that take more
    **dict.fromkeys(("max_iterations", "lr_anneal_iterations", "input_dim", "amp_obs_dim"), SIZE_OR_NONE),
    **dict.fromkeys(("num_actor_obs", "num_critic_obs", "num_actions"), SIZE_OR_NONE),  # the env's when None
    # runner
    "seed": Rule(
        "must be an integer in [-2**63, 2**64 - 1] (torch.manual_seed's range) or None",
        _in(-(2**63), 2**64 - 1),
        "e.g. 42",
    ),
    "distributed_timeout_s": POSITIVE,
    "logger": Rule(
        "must be 'tensorboard', 'wandb', 'neptune', 'none' or a custom writer ('package.module:Class')",
        _logger,
        "see docs/logging.md",
    ),
    "check_finite": _choice("rollout", "step", "off"),
    **dict.fromkeys(
        ("runner_class_name", "class_name", "policy_class_name", "algorithm_class_name"), CLASS_NAME
    ),
    # PPO
    "gamma": _range(0, 1, "typical: 0.99 (the discount factor)"),
    "lam": _range(0, 1, "typical: 0.95 (the GAE lambda)"),
    "clip_param": _range(0, fix="typical: 0.2 (the PPO ratio clip)", above=True),
    "learning_rate": _range(0, fix="typical: 1e-3 (PPO), 3e-4", above=True),
    "max_grad_norm": Rule("must be > 0, or None for no clipping", _in(0, above=True), "typical: 1.0"),
    "desired_kl": _range(0, fix="typical: 0.01 (the adaptive schedule's KL target)", above=True, none=True),
    "schedule": _choice("fixed", "adaptive", "linear"),
    "compile": Rule(
        "must be true, false or a torch.compile mode without CUDA graphs",
        lambda x: isinstance(x, bool) or x in COMPILE_MODES,
        "true (default mode), 'max-autotune-no-cudagraphs' or false (the CUDA-graph modes 'reduce-overhead' "
        "and 'max-autotune' are not supported: the update reads outputs that their next replay overwrites)",
        False,
    ),
    "cuda_graph": Rule(
        "must be true, false or 'auto'",
        lambda x: isinstance(x, bool) or x == "auto",
        "'auto' (default): on a GPU the update and the rollout step replay as CUDA graphs where they can; false: eager",
        False,
    ),
    "precision": _choice(
        "fp32", "bf16", "auto", fix="'auto': bf16 where it is faster for the policy at hand, else fp32"
    ),
    "buffer_dilation_ratio": _range(
        1, LIMITS["buffer_dilation_ratio"][0], "1 keeps one rollout; each unit one more"
    ),
    "clip_min_std": Rule("must be >= 0", _all_in(0), "typical: 1e-15 or a per-action list", False),
    "optimizer_class_name": Rule(
        "must name a torch.optim optimizer",
        _names(optim, optim.Optimizer, "Optimizer"),
        "e.g. 'Adam', 'SGD'",
        False,
    ),
    # distillation (TPPO, ATPPO, EstimatorTPPO)
    "teacher_act_prob": _schedule_or(1),
    "distillation_loss_coef": _schedule_or(math.inf),
    "distill_target": _choice("real", "mse_sum", "l1", "tanh", "scaled_tanh", "max_log_prob", fix=""),
    "distill_latent_target": _choice("real", "l1", "tanh", "scaled_tanh", fix=""),
    "estimator_loss_func": Rule(
        "must name a torch.nn.functional loss",
        lambda x: callable(F.__dict__.get(str(x))),
        "e.g. 'mse_loss'",
        False,
    ),
    "weight_schedule": Rule(
        "needs mode 'step' or 'linear' with numbers final_step and final_value",
        _weight_schedule,
        "{'mode': 'step', 'final_step': s, 'final_value': v} or {'mode': 'linear', 'initial_step': a, "
        "'final_step': b, 'final_value': v}",
    ),
    "lr_scheduler_class_name": Rule(
        "must name a torch.optim.lr_scheduler class",
        _names(schedulers, schedulers.LRScheduler, "LRScheduler", "_LRScheduler"),
        "e.g. 'StepLR'",
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
    "task_reward_lerp": UNIT,
    "discriminator_grad_pen": NONNEG,
    "update_times_scale": POSITIVE,
    "amp_replay_buffer_size": Rule(
        "must be an integer >= 0 or None", _in(0), "0: no replay; None: the preset's"
    ),
    "amp_preset": _choice(
        "reference", "st_rl", fix="'reference' (the reference APPO) or 'st_rl' (replay, separate clipping)"
    ),
    # RND
    "weight": _range(0, fix="the intrinsic reward weight, e.g. 0.5"),
    # policies
    "init_noise_std": _range(0, fix="typical: 1.0", above=True),
    "activation": Rule(
        "must name an activation", _activation, "e.g. 'elu', 'tanh', or a torch.nn class", False
    ),
    "mu_activation": Rule("must name an activation or be None", _activation, "e.g. 'tanh', or None"),
    "rnn_type": Rule(
        "must be 'lstm' or 'gru' (None only on a feed-forward policy)",
        lambda x: not isinstance(x, str) or x.lower() in ("lstm", "gru"),
        "pick one of them",
    ),
    "encoder_output_size": _bounded_size("encoder_output_size", none=True),
    "env_action_scale": _range(0, fix="the env's action scale, e.g. 0.5", above=True, none=True),
}

RUNNER_RULES = RULES  # the runner's keys are in the same table


def _shape(x: Any) -> bool:
    dims = x if isinstance(x, Sequence) and not isinstance(x, str) else [x]
    return bool(dims) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)


SEGMENT_SHAPE = Rule(
    "a component's shape must be a list of integers >= 1", _shape, "e.g. [3], or [1, 7, 5] for a map", False
)
_SET_BY_ALGORITHM = Rule(
    "is set by the algorithm, not by the storage section",
    lambda x: False,
    "remove it; algorithm.buffer_dilation_ratio sets it (the storage is a ring when it is > 1)",
    False,
)
STORAGE_RULES = {
    "amp_obs_shape": Rule("every entry must be an integer >= 1", _all_in(1)),
    "buffer_dilation_ratio": _SET_BY_ALGORITHM,
    "ring": _SET_BY_ALGORITHM,
}


def rule_for(key: str) -> Rule | None:
    """The rule of ``key``: by name, else by suffix (``*_coef`` >= 0, ``*_prob`` in [0, 1], hidden dims)."""
    if key in RULES:
        return RULES[key]
    if key.endswith("_coef"):
        return NONNEG
    if key.endswith("_prob"):
        return UNIT
    if key.endswith("_hidden_dims") or key.endswith("_sizes"):
        return SIZES
    return None
