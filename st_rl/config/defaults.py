"""Every default that more than one place needs, written once (a leaf: imports nothing of st_rl)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONFIG_CLASS_DEFAULTS",
    "PPO_SIGNATURE_DEFAULTS",
    "RUNNER_DEFAULTS",
    "PPODefaults",
    "RunnerDefaults",
]


@dataclass
class PPODefaults:
    """The PPO keys both default sets give; the field defaults are legged_gym's (the config classes')."""

    value_loss_coef: float = 1.0
    use_clipped_value_loss: bool = True
    clip_param: float = 0.2
    entropy_coef: float = 0.01
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    learning_rate: float = 1e-3
    schedule: str = "adaptive"
    gamma: float = 0.99
    lam: float = 0.95
    desired_kl: float = 0.01
    max_grad_norm: float = 1.0


CONFIG_CLASS_DEFAULTS = PPODefaults()
"""legged_gym's ``LeggedRobotCfgPPO.algorithm``: the defaults of ``AlgorithmCfg`` and the presets."""

PPO_SIGNATURE_DEFAULTS = PPODefaults(
    entropy_coef=0.0, num_learning_epochs=1, num_mini_batches=1, schedule="fixed", gamma=0.998
)
"""The reference ``PPO.__init__``'s defaults: what a key left out of an algorithm config becomes."""


@dataclass(frozen=True)
class RunnerDefaults:
    """Runner keys whose default the runner, the schema and the config classes share."""

    num_steps_per_env: int = 24
    save_interval: int = 50
    log_interval: int = 1
    logger: str = "tensorboard"
    check_finite: str = "rollout"
    distributed_timeout_s: float = 600.0
    runner_class_name: str = "OnPolicyRunner"


RUNNER_DEFAULTS = RunnerDefaults()
