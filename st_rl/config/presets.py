"""Typed training configs and the presets of the built-in tasks (``to_dict()``: the flat st_gym form)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from st_rl.config.defaults import RUNNER_DEFAULTS, PPODefaults

__all__ = [
    "AMP_DISCRIMINATOR_GRAD_PEN", "AMP_LEARNING_RATE", "AMP_STYLE_REWARD_COEF", "DEFAULT_TASK", "PRESETS",
    "AlgorithmCfg", "PolicyCfg", "TaskPreset", "TrainCfg", "amp_train_config", "get_preset",
    "gymnasium_mujoco_preset",
]  # fmt: skip


@dataclass
class PolicyCfg:
    """Policy network settings."""

    class_name: str = "ActorCritic"
    """Any class exported by ``st_rl.modules`` or ``"package.module:Class"``."""
    init_noise_std: float = 1.0
    """Initial action standard deviation."""
    actor_hidden_dims: list[int] = field(default_factory=lambda: [256, 256, 256])
    """Hidden sizes of the actor MLP."""
    critic_hidden_dims: list[int] = field(default_factory=lambda: [256, 256, 256])
    """Hidden sizes of the critic MLP."""
    activation: str = "elu"
    """Activation name."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further keyword arguments of the policy class (e.g. an encoder's), merged into the policy config."""


@dataclass
class AlgorithmCfg(PPODefaults):
    """PPO settings; the defaults are legged_gym's (:data:`~st_rl.config.defaults.CONFIG_CLASS_DEFAULTS`), not
    those of ``PPO.__init__`` (:data:`~st_rl.config.defaults.PPO_SIGNATURE_DEFAULTS`)."""

    class_name: str = "PPO"
    rnd_cfg: dict[str, Any] | None = None
    """Random network distillation (a curiosity reward): keyword arguments of
    :class:`st_rl.algorithms.extensions.RandomNetworkDistillation`; None: off."""


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


def _preset_point_mass() -> TaskPreset:
    cfg = TrainCfg(experiment_name="point_mass", max_iterations=60, save_interval=20)
    cfg.policy.actor_hidden_dims = [64, 64]
    cfg.policy.critic_hidden_dims = [64, 64]
    cfg.algorithm.entropy_coef = 0.0
    return TaskPreset("point_mass", 256, cfg, description="2-D point mass reaching random goals")


def _preset_velocity_tracking() -> TaskPreset:
    cfg = TrainCfg(experiment_name="velocity_tracking", max_iterations=150, save_interval=50)
    cfg.empirical_normalization = True
    cfg.policy.actor_hidden_dims = [128, 64]
    cfg.policy.critic_hidden_dims = [128, 64]
    cfg.algorithm.entropy_coef = 0.0
    return TaskPreset(
        "velocity_tracking",
        512,
        cfg,
        description="planar body tracking velocity commands (privileged critic)",
    )


def _preset_sparse_goal() -> TaskPreset:
    # The reward is zero until the goal is first reached, so exploration decides. RND's curiosity reward (on
    # the position only) is on for 120 iterations, then fades out by iteration 180, leaving 70 iterations on the
    # task reward alone; without ``rnd_cfg`` this is plain PPO with the same settings. The learning rate is
    # fixed (PPO's own default): the adaptive-KL schedule raises it while every reward is zero, which turns
    # PPO's updates on pure-noise advantages into a fast random walk of the policy that stumbles on the goal
    # more often (see benchmarks/RESULTS.md, bench_rnd.py).
    cfg = TrainCfg(experiment_name="sparse_goal", max_iterations=250, save_interval=50)
    cfg.empirical_normalization = True
    cfg.policy.actor_hidden_dims = [64, 64]
    cfg.policy.critic_hidden_dims = [64, 64]
    cfg.algorithm.schedule = "fixed"
    cfg.algorithm.learning_rate = 1e-3
    cfg.algorithm.rnd_cfg = {
        "weight": 0.5,
        "obs_components": ["position"],
        "weight_schedule": {"mode": "linear", "initial_step": 120, "final_step": 180, "final_value": 0.0},
    }
    return TaskPreset(
        "sparse_goal", 256, cfg, description="point mass rewarded only at a distant, unseen goal (PPO + RND)"
    )


def _preset_quadruped(terrain: str) -> TaskPreset:
    # Tuned for a 2-core CPU: 512 robots give more policy updates per minute than legged_gym's 4096; the
    # observations are already scaled (legged_gym style), so running normalisation stays off; the feet
    # air-time bonus and the termination penalty are off, because on a small sample budget they keep the
    # robot standing still (stepping is first penalised for short swings).
    cfg = TrainCfg(experiment_name=f"quadruped_{terrain}", max_iterations=1000, save_interval=100)
    cfg.empirical_normalization = False
    cfg.policy.actor_hidden_dims = [256, 128, 64]
    cfg.policy.critic_hidden_dims = [256, 128, 64]
    cfg.algorithm.entropy_coef = 0.01
    if terrain == "rough":
        # What a legged_gym user picks for rough ground: an MLP encoder of the (1, 7, 5) height scan.
        cfg.policy.class_name = "EncoderActorCritic"
        cfg.policy.extra = {
            "encoder_component_names": ["height_measurements"],
            "encoder_kwargs": {"hidden_sizes": [64, 32]},
            "encoder_output_size": 16,
        }
    env_kwargs = {
        "reward_scales": {
            "tracking_lin_vel": 2.0,
            "dof_acc": -1e-7,
            "action_rate": -0.005,
            "orientation": -0.2,
            "termination": 0.0,
            "feet_air_time": 0.0,
        }
    }
    return TaskPreset(
        f"quadruped_{terrain}",
        512,
        cfg,
        env_kwargs=env_kwargs,
        description=f"Go1-class quadruped following velocity commands on {terrain} ground (MuJoCo)",
    )


def gymnasium_mujoco_preset(
    env_id: str = "HalfCheetah-v5", total_steps: int = 1_000_000, num_envs: int | None = None
) -> TaskPreset:
    """PPO settings for Gymnasium MuJoCo tasks (CleanRL's ``ppo_continuous_action`` settings, 8 environments).

    8 environments collecting 256 steps each per iteration (CleanRL: 1 x 2048; the same 2048-sample batch and
    number of updates, about 2x the throughput on CPU), 10 epochs of 32 minibatches (64 samples), Adam from
    3e-4 (annealed, below), gamma 0.99, lambda 0.95, clip 0.2, no entropy bonus, gradient norm 0.5, separate 64x64 tanh
    actor and critic, running observation normalisation (the runner's ``empirical_normalization``) and reward
    normalisation by the discounted-return std with a +-10 clip (done by the Gymnasium adapter, see
    ``env_kwargs``). CleanRL's value loss is ``0.5 * 0.5 * mse``; st_rl's is ``mse``, hence
    ``value_loss_coef=0.25``. The learning rate anneals linearly to 0 over ``max_iterations`` (``schedule="linear"``),
    as in CleanRL.

    Args:
        env_id: Gymnasium id of a task with Box observation and action spaces (``HalfCheetah-v5``, ``Ant-v5``...).
        total_steps: environment steps of a full run (sets ``max_iterations``).
        num_envs: environments stepped together (default 8); 2048 must divide by it, each collects
            ``2048 / num_envs`` steps per iteration, so the batch and the number of updates stay the same.
    """
    steps_per_iter = 2048
    n = 8 if num_envs is None else int(num_envs)
    if n < 1 or steps_per_iter % n:
        raise ValueError(f"num_envs must be a divisor of {steps_per_iter}, got {num_envs}")
    cfg = TrainCfg(
        seed=1,
        num_steps_per_env=steps_per_iter // n,
        max_iterations=-(-int(total_steps) // steps_per_iter),
        empirical_normalization=True,
        save_interval=100,
        experiment_name=f"gym_{env_id}",
    )
    cfg.policy.actor_hidden_dims = [64, 64]
    cfg.policy.critic_hidden_dims = [64, 64]
    cfg.policy.activation = "tanh"
    cfg.policy.init_noise_std = 1.0
    alg = cfg.algorithm
    alg.learning_rate = 3e-4
    alg.schedule = "linear"
    alg.gamma = 0.99
    alg.lam = 0.95
    alg.num_learning_epochs = 10
    alg.num_mini_batches = 32
    alg.clip_param = 0.2
    alg.entropy_coef = 0.0
    alg.value_loss_coef = 0.25
    alg.use_clipped_value_loss = True
    alg.max_grad_norm = 0.5
    return TaskPreset(
        f"gym:{env_id}",
        n,
        cfg,
        env_kwargs={"normalize_reward": True, "reward_gamma": 0.99, "clip_reward": 10.0},
        description=f"Gymnasium {env_id} (needs st-rl[gymnasium]); CleanRL-style PPO, 1M steps",
    )


def _preset_quadruped_gait() -> TaskPreset:
    # The flat preset plus gait-shaping terms, to train a policy whose recorded motion serves as an AMP
    # reference (st-rl record-motion --checkpoint ... --grid-vx ...): a two-beat trot bonus while commanded to
    # move, and an air-time term that pays swings longer than 0.2 s (and charges shorter shuffles).
    preset = _preset_quadruped("flat")
    preset.train.experiment_name = "quadruped_gait"
    scales = dict(preset.env_kwargs["reward_scales"], trot=0.5, feet_air_time=0.5)
    return TaskPreset(
        "quadruped_gait",
        preset.num_envs,
        preset.train,
        env_kwargs={"reward_scales": scales, "feet_air_time_target": 0.2},
        description="quadruped_flat with gait-shaping rewards (trot phase, feet air time): AMP reference gaits",
    )


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
    """The preset of a built-in task, or of a Gymnasium MuJoCo task named ``"gym:<id>"`` (e.g.
    ``"gym:HalfCheetah-v5"``, see :func:`gymnasium_mujoco_preset`).

    Raises:
        ValueError: listing the tasks with presets.
    """
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
    """Turn a flat PPO training config into its AMP form (``AmpPolicyRunner``, ``APPO`` with
    ``amp_preset="st_rl"``, an AMP policy).

    The defaults (style weight 0.03, gradient penalty 2, initial learning rate 4e-4, the ``st_rl`` preset's
    replay of 100,000 windows) are the best of an ``st-rl tune --motion`` study on ``quadruped_flat`` from
    scratch, confirmed on three other seeds (docs/amp.md, "How the defaults were found").
    ``style_reward_coef`` is in task-reward units per step: the built-in quadruped's task rewards are scaled by
    ``dt`` (at most about 0.055 per step), so 0.03 weighs the gait style at about half the tracking reward.
    ``learning_rate`` replaces the PPO config's initial learning rate (None keeps it; an adaptive schedule
    moves it from there); ``amp_replay_buffer_size`` sets the replay of past policy windows (None: the
    ``st_rl`` preset's 100,000). ``style_reward_ramp=(start, end)`` keeps the style reward off until iteration
    ``start`` and ramps it to full weight at ``end`` (see :class:`st_rl.algorithms.APPO`). The
    discriminator's ``input_dim`` is left ``None`` (filled from the environment's ``ref_obs`` windows).
    """
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
    # our AMP settings (replay of past policy windows, discriminator clipped apart), not the reference's defaults
    cfg["algorithm"] = {
        **cfg["algorithm"],
        "class_name": "APPO",
        "discriminator_loss_coef": 1.0,
        "amp_preset": "st_rl",
    }
    if style_reward_ramp is not None:
        cfg["algorithm"]["style_reward_ramp"] = list(style_reward_ramp)
    if learning_rate is not None:
        cfg["algorithm"]["learning_rate"] = float(learning_rate)
    if amp_replay_buffer_size is not None:
        cfg["algorithm"]["amp_replay_buffer_size"] = int(amp_replay_buffer_size)
    return cfg
