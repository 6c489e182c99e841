"""The training presets at their former path (the docs and scripts import them from here):
:mod:`st_rl.config.presets`."""

from st_rl.config.presets import (
    AMP_DISCRIMINATOR_GRAD_PEN,
    AMP_LEARNING_RATE,
    AMP_STYLE_REWARD_COEF,
    DEFAULT_TASK,
    PRESETS,
    AlgorithmCfg,
    PolicyCfg,
    TaskPreset,
    TrainCfg,
    amp_train_config,
    get_preset,
    gymnasium_mujoco_preset,
)

__all__ = [
    "AMP_DISCRIMINATOR_GRAD_PEN",
    "AMP_LEARNING_RATE",
    "AMP_STYLE_REWARD_COEF",
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
