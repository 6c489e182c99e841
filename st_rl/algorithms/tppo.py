"""TPPO: PPO whose student also imitates a teacher (teacher-student distillation / DAgger); a preset of
:class:`~st_rl.algorithms.ppo.PPO` with the :class:`~st_rl.algorithms.extensions.distillation.Distillation`
extension."""

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
    return {k: v for k, v in kwargs.items() if k in names}, {
        k: v for k, v in kwargs.items() if k not in names
    }


def with_extension(
    cls: type[Extension], ppo: dict[str, Any] | None, kwargs: dict[str, Any]
) -> tuple[Any, dict]:
    """A preset's extension ``cls`` built from its keyword arguments (st_gym's nested ``ppo`` dict merged under
    the explicit ones), and the other arguments, with the extension first in ``extensions``."""
    if ppo:
        kwargs = {**{k: v for k, v in dict(ppo).items() if k != "class_name"}, **kwargs}
    ext_kwargs, kwargs = split_kwargs(kwargs, cls)
    extension = cls(**ext_kwargs)
    return extension, {**kwargs, "extensions": [extension, *kwargs.get("extensions", [])]}


class TPPO(PPO):
    """PPO plus :class:`~st_rl.algorithms.extensions.distillation.Distillation` (see there for the teacher
    arguments: ``teacher_policy``, ``teacher_ac_path``, ``teacher_act_prob``, ``distill_target``, ...).

    Args:
        ppo: st_gym's nested PPO config, merged into the PPO arguments (explicit arguments win).
        using_ppo: keep the PPO losses (False: pure imitation; returns are then not computed).
        (other arguments as :class:`~st_rl.algorithms.ppo.PPO` and ``Distillation``)
    """

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

    # The reference's attribute names.
    @property
    def teacher_actor_critic(self) -> Any:
        """The frozen teacher policy."""
        return self.distillation.teacher

    @property
    def teacher_obs_normalizer(self) -> nn.Module:
        """The teacher's own observation normaliser (inside the teacher policy)."""
        return self.distillation.teacher.actor_obs_normalizer

    @property
    def use_teacher_act_mask(self) -> torch.Tensor | None:
        """Per env: the teacher's actions are executed this episode."""
        return self.distillation.use_teacher_act_mask

    @use_teacher_act_mask.setter
    def use_teacher_act_mask(self, value: torch.Tensor) -> None:
        self.distillation.use_teacher_act_mask = value

    @property
    def teacher_act_prob(self) -> Any:
        """Schedule ``iteration -> probability`` that an env executes the teacher's actions for an episode."""
        return self.distillation.teacher_act_prob

    @property
    def distillation_loss_coef(self) -> float:
        return self.distillation.distillation_loss_coef

    def teacher_actions(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        return self.distillation.teacher_actions(obs, critic_obs)
