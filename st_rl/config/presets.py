"""Typed training configs and the presets of the built-in tasks (``to_dict()``: the flat st_gym form)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from st_rl.config.defaults import RUNNER_DEFAULTS, PPODefaults

__all__ = [
    "AMP_DISCRIMINATOR_GRAD_PEN",
    "AMP_LEARNING_RATE",
    "AMP_STYLE_REWARD_COEF",
    "AMP_UPDATE_SETTINGS",
    "DEFAULT_TASK",
    "PRESETS",
    "AlgorithmCfg",
    "PolicyCfg",
    "TaskPreset",
    "TrainCfg",
    "amp_train_config",
    "get_preset",
    "gymnasium_mujoco_preset",
]


@dataclass
class PolicyCfg:
    """Policy network settings."""

    class_name: str = "ActorCritic"  # a class of st_rl.modules or "package.module:Class"
    init_noise_std: float = 1.0
    actor_hidden_dims: list[int] = field(default_factory=lambda: [256, 256, 256])
    critic_hidden_dims: list[int] = field(default_factory=lambda: [256, 256, 256])
    activation: str = "elu"
    extra: dict[str, Any] = field(default_factory=dict)  # further policy keyword arguments


@dataclass
class AlgorithmCfg(PPODefaults):
    """PPO settings with legged_gym's defaults (not those of ``PPO.__init__``)."""

    class_name: str = "PPO"
    rnd_cfg: dict[str, Any] | None = None  # RandomNetworkDistillation's keyword arguments; None: off


@dataclass
class TrainCfg:
    """Runner settings plus the policy and algorithm configs (flat st_gym form)."""

    seed: int = 42
    num_steps_per_env: int = RUNNER_DEFAULTS.num_steps_per_env
    max_iterations: int = 300
    empirical_normalization: bool = False
    save_interval: int = RUNNER_DEFAULTS.save_interval
    log_interval: int = RUNNER_DEFAULTS.log_interval
    experiment_name: str = "st_rl"
    run_name: str = ""
    logger: str = RUNNER_DEFAULTS.logger
    policy: PolicyCfg = field(default_factory=PolicyCfg)
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)

    def to_dict(self) -> dict[str, Any]:
        out = copy.deepcopy(dataclasses.asdict(self))
        out["policy"].update(out["policy"].pop("extra"))
        return out


@dataclass
class TaskPreset:
    """A built-in task with the settings it trains well with."""

    task: str
    num_envs: int
    train: TrainCfg
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def _train(name: str, iterations: int, save_interval: int, hidden: list[int], **kwargs: Any) -> TrainCfg:
    policy = PolicyCfg(actor_hidden_dims=list(hidden), critic_hidden_dims=list(hidden))
    return TrainCfg(
        experiment_name=name, max_iterations=iterations, save_interval=save_interval, policy=policy, **kwargs
    )


def _preset_point_mass() -> TaskPreset:
    cfg = _train("point_mass", 60, 20, [64, 64], algorithm=AlgorithmCfg(entropy_coef=0.0))
    return TaskPreset("point_mass", 256, cfg, description="2-D point mass reaching random goals")


def _preset_velocity_tracking() -> TaskPreset:
    algorithm = AlgorithmCfg(entropy_coef=0.0)
    cfg = _train("velocity_tracking", 150, 50, [128, 64], empirical_normalization=True, algorithm=algorithm)
    description = "planar body tracking velocity commands (privileged critic)"
    return TaskPreset("velocity_tracking", 512, cfg, description=description)


def _preset_sparse_goal() -> TaskPreset:
    # RND's curiosity reward (on the position) fades out from iteration 120 to 180; a fixed learning rate, as the
    # adaptive schedule raises it while every reward is zero (benchmarks/RESULTS.md, bench_rnd.py).
    fade = {"mode": "linear", "initial_step": 120, "final_step": 180, "final_value": 0.0}
    rnd = {"weight": 0.5, "obs_components": ["position"], "weight_schedule": fade}
    algorithm = AlgorithmCfg(schedule="fixed", rnd_cfg=rnd)
    cfg = _train("sparse_goal", 250, 50, [64, 64], empirical_normalization=True, algorithm=algorithm)
    description = "point mass rewarded only at a distant, unseen goal (PPO + RND)"
    return TaskPreset("sparse_goal", 256, cfg, description=description)


def _preset_quadruped(terrain: str) -> TaskPreset:
    # Tuned for a 2-core CPU (512 robots); no feet air-time bonus or termination penalty: on a small budget they
    # keep the robot standing still. 8 minibatches (twice the gradient steps for the same arithmetic) and a KL
    # target of 0.02 learn about twice as much per iteration as legged_gym's 4 and 0.01; a quarter of its entropy
    # weight lets the action noise fall (std 0.22 instead of 0.46 at 15 minutes), so the deterministic policy that
    # play and deployment run walks the gait it was trained in (benchmarks/RESULTS.md).
    algorithm = AlgorithmCfg(num_mini_batches=8, desired_kl=0.02, entropy_coef=0.0025)
    cfg = _train(f"quadruped_{terrain}", 1000, 100, [256, 128, 64], algorithm=algorithm)
    if terrain == "rough":
        # an MLP encoder of the (1, 7, 5) height scan
        cfg.policy.class_name = "EncoderActorCritic"
        cfg.policy.extra = {
            "encoder_component_names": ["height_measurements"],
            "encoder_kwargs": {"hidden_sizes": [64, 32]},
            "encoder_output_size": 16,
        }
    scales = {"tracking_lin_vel": 2.0, "dof_acc": -1e-7, "action_rate": -0.005, "orientation": -0.2}
    env_kwargs = {"reward_scales": {**scales, "termination": 0.0, "feet_air_time": 0.0}}
    description = f"Go1-class quadruped following velocity commands on {terrain} ground (MuJoCo)"
    return TaskPreset(f"quadruped_{terrain}", 512, cfg, env_kwargs=env_kwargs, description=description)


def gymnasium_mujoco_preset(
    env_id: str = "HalfCheetah-v5", total_steps: int = 1_000_000, num_envs: int | None = None
) -> TaskPreset:
    """CleanRL's ``ppo_continuous_action`` settings (2048-sample batches from ``num_envs`` environments, default 8)
    for a Gymnasium MuJoCo task (Box spaces) run for ``total_steps`` environment steps."""
    steps_per_iter = 2048
    n = 8 if num_envs is None else int(num_envs)
    if n < 1 or steps_per_iter % n:
        raise ValueError(f"num_envs must be a divisor of {steps_per_iter}, got {num_envs}")
    algorithm = AlgorithmCfg(
        learning_rate=3e-4,
        schedule="linear",
        num_learning_epochs=10,
        num_mini_batches=32,
        entropy_coef=0.0,
        value_loss_coef=0.25,
        max_grad_norm=0.5,
    )
    iterations = -(-int(total_steps) // steps_per_iter)
    run = {"seed": 1, "num_steps_per_env": steps_per_iter // n, "empirical_normalization": True}
    cfg = _train(f"gym_{env_id}", iterations, 100, [64, 64], algorithm=algorithm, **run)
    cfg.policy.activation = "tanh"
    env_kwargs = {"normalize_reward": True, "reward_gamma": 0.99, "clip_reward": 10.0}
    description = f"Gymnasium {env_id} (needs st-rl[gymnasium]); CleanRL-style PPO, 1M steps"
    return TaskPreset(f"gym:{env_id}", n, cfg, env_kwargs=env_kwargs, description=description)


def _preset_quadruped_gait() -> TaskPreset:
    # The flat preset with gait shaping (trot bonus, swings over 0.2 s paid): its recorded motion is an AMP reference.
    preset = _preset_quadruped("flat")
    preset.train.experiment_name = "quadruped_gait"
    scales = dict(preset.env_kwargs["reward_scales"], trot=0.5, feet_air_time=0.5)
    env_kwargs = {"reward_scales": scales, "feet_air_time_target": 0.2}
    description = "quadruped_flat with gait-shaping rewards (trot phase, feet air time): AMP reference gaits"
    return dataclasses.replace(preset, task="quadruped_gait", env_kwargs=env_kwargs, description=description)


PRESETS = {
    "point_mass": _preset_point_mass,
    "velocity_tracking": _preset_velocity_tracking,
    "sparse_goal": _preset_sparse_goal,
    "quadruped_flat": lambda: _preset_quadruped("flat"),
    "quadruped_rough": lambda: _preset_quadruped("rough"),
    "quadruped_gait": _preset_quadruped_gait,
}
DEFAULT_TASK = "quadruped_flat"


def get_preset(task: str) -> TaskPreset:
    """The preset of a built-in task or of ``"gym:<Gymnasium id>"``; a ValueError lists them."""
    if task.startswith("gym:"):
        return gymnasium_mujoco_preset(task.removeprefix("gym:"))
    if task not in PRESETS:
        raise ValueError(
            f"No training preset for task '{task}'; available: {sorted(PRESETS)} and 'gym:<Gymnasium id>' "
            "(e.g. 'gym:HalfCheetah-v5')"
        )
    return PRESETS[task]()


AMP_STYLE_REWARD_COEF = 0.03
"""Default style reward weight per step of :func:`amp_train_config` and ``st-rl train --motion``."""
AMP_DISCRIMINATOR_GRAD_PEN = 2.0
"""Default gradient-penalty weight of the discriminator in :func:`amp_train_config`."""
AMP_LEARNING_RATE = 4e-4
"""Default initial learning rate of :func:`amp_train_config` (replaces the PPO config's)."""
AMP_UPDATE_SETTINGS: dict[str, Any] = {
    "num_mini_batches": PPODefaults.num_mini_batches,
    "desired_kl": PPODefaults.desired_kl,
    "entropy_coef": PPODefaults.entropy_coef,
}
"""PPO update settings :func:`amp_train_config` sets with its learning rate: those its defaults were tuned with."""


def amp_train_config(
    train_cfg: dict[str, Any],
    style_reward_coef: float = AMP_STYLE_REWARD_COEF,
    discriminator_hidden_dims: tuple[int, ...] = (256, 128),
    recurrent: bool = False,
    style_reward_ramp: tuple[int, int] | list[int] | None = None,
    discriminator_grad_pen: float = AMP_DISCRIMINATOR_GRAD_PEN,
    task_reward_lerp: float = 0.0,
    learning_rate: float | None = AMP_LEARNING_RATE,
    amp_replay_buffer_size: int | None = None,
) -> dict[str, Any]:
    """A flat PPO training config in its AMP form (``AmpPolicyRunner``, ``APPO`` with ``amp_preset="st_rl"``, an
    AMP policy), with the defaults an ``st-rl tune --motion`` study found (docs/amp.md). ``style_reward_coef`` is
    in task-reward units per step; None keeps the config's ``learning_rate`` (and its minibatches, KL target and
    entropy weight, otherwise ``AMP_UPDATE_SETTINGS``) / the preset's replay size."""
    cfg = copy.deepcopy(train_cfg)
    cfg["runner_class_name"] = "AmpPolicyRunner"
    cfg["policy"] = {
        **cfg["policy"],
        "class_name": "AmpActorCriticRecurrent" if recurrent else "AmpActorCritic",
        "amp_discriminator": {
            "input_dim": None,
            "style_reward_coef": style_reward_coef,
            "hidden_dims": list(discriminator_hidden_dims),
            "discriminator_grad_pen": discriminator_grad_pen,
            "task_reward_lerp": task_reward_lerp,
        },
    }
    cfg["algorithm"] = {
        **cfg["algorithm"],
        "class_name": "APPO",
        "discriminator_loss_coef": 1.0,
        "amp_preset": "st_rl",
    }
    if style_reward_ramp is not None:
        cfg["algorithm"]["style_reward_ramp"] = list(style_reward_ramp)
    if learning_rate is not None:
        cfg["algorithm"].update(AMP_UPDATE_SETTINGS, learning_rate=float(learning_rate))
    if amp_replay_buffer_size is not None:
        cfg["algorithm"]["amp_replay_buffer_size"] = int(amp_replay_buffer_size)
    return cfg
