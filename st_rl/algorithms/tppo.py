"""TPPO: PPO with the ``Distillation`` extension (teacher-student distillation / DAgger)."""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn as nn

from st_rl.algorithms.extensions.base import Extension
from st_rl.algorithms.extensions.distillation import (
    DISTILL_TARGETS,
    Distillation,
    build_teacher,
    load_teacher_state,
)
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.schedules import GET_PROB_FUNC

__all__ = ["DISTILL_TARGETS", "GET_PROB_FUNC", "TPPO", "build_teacher", "load_teacher_state", "split_kwargs"]


def split_kwargs(kwargs: dict[str, Any], cls: type) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(those of kwargs that cls.__init__ takes, the rest)``."""
    names = set(inspect.signature(cls.__init__).parameters) - {"self"}
    inside = {k: v for k, v in kwargs.items() if k in names}
    return inside, {k: v for k, v in kwargs.items() if k not in names}


def with_extension(
    cls: type[Extension], ppo: dict[str, Any] | None, kwargs: dict[str, Any]
) -> tuple[Any, dict]:
    """``(cls built from its kwargs, the other kwargs with it first in extensions)``; st_gym's nested ``ppo``
    dict is merged under the explicit arguments."""
    if ppo:
        kwargs = {**{k: v for k, v in dict(ppo).items() if k != "class_name"}, **kwargs}
    ext_kwargs, kwargs = split_kwargs(kwargs, cls)
    extension = cls(**ext_kwargs)
    return extension, {**kwargs, "extensions": [extension, *kwargs.get("extensions", [])]}


class TPPO(PPO):
    """PPO plus ``Distillation`` (see there for the teacher arguments); ``ppo``: st_gym's nested PPO config
    (explicit arguments win), ``using_ppo``: False for pure imitation."""

    config_sources = (Distillation,)

    def __init__(
        self, actor_critic: nn.Module, *args: Any, ppo: dict[str, Any] | None = None, using_ppo: bool = True,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        self.distillation, kwargs = with_extension(Distillation, ppo, kwargs)
        super().__init__(actor_critic, *args, use_ppo_loss=using_ppo, **kwargs)

    @property
    def using_ppo(self) -> bool:
        return self.use_ppo_loss

    @property
    def teacher_actor_critic(self) -> Any:
        return self.distillation.teacher

    @property
    def teacher_obs_normalizer(self) -> nn.Module:
        return self.distillation.teacher.actor_obs_normalizer

    @property
    def use_teacher_act_mask(self) -> torch.Tensor | None:
        return self.distillation.use_teacher_act_mask

    @use_teacher_act_mask.setter
    def use_teacher_act_mask(self, value: torch.Tensor) -> None:
        self.distillation.use_teacher_act_mask = value

    @property
    def teacher_act_prob(self) -> Any:
        return self.distillation.teacher_act_prob

    @property
    def distillation_loss_coef(self) -> float:
        return self.distillation.distillation_loss_coef

    def teacher_actions(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        return self.distillation.teacher_actions(obs, critic_obs)
