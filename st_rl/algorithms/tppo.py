"""TPPO: PPO with the ``Distillation`` extension (teacher-student distillation / DAgger)."""

from __future__ import annotations

import inspect
from operator import attrgetter
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
        self,
        actor_critic: nn.Module,
        *args: Any,
        ppo: dict[str, Any] | None = None,
        using_ppo: bool = True,
        **kwargs: Any,
    ) -> None:
        self.distillation, kwargs = with_extension(Distillation, ppo, kwargs)
        super().__init__(actor_critic, *args, use_ppo_loss=using_ppo, **kwargs)

    # the reference's attribute names
    using_ppo = property(attrgetter("use_ppo_loss"))
    teacher_actor_critic = property(attrgetter("distillation.teacher"))
    teacher_obs_normalizer = property(attrgetter("distillation.teacher.actor_obs_normalizer"))
    use_teacher_act_mask = property(
        attrgetter("distillation.use_teacher_act_mask"),
        lambda self, mask: setattr(self.distillation, "use_teacher_act_mask", mask),
    )
    teacher_act_prob = property(attrgetter("distillation.teacher_act_prob"))
    distillation_loss_coef = property(attrgetter("distillation.distillation_loss_coef"))

    def teacher_actions(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        return self.distillation.teacher_actions(obs, critic_obs)
