"""APPO (PPO with Adversarial Motion Priors) and ATPPO (its teacher-student variant)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.amp import DISCRIMINATOR_LOSSES, AdversarialMotionPrior, MissingAmpDataError
from st_rl.algorithms.extensions.distillation import Distillation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.schedules import GET_PROB_FUNC  # reference name (st_rl/compat.py)
from st_rl.algorithms.tppo import TPPO, with_extension

__all__ = ["APPO", "ATPPO", "DISCRIMINATOR_LOSSES", "GET_PROB_FUNC", "APPOAlgoMixin", "MissingAmpDataError"]


class APPOAlgoMixin:
    """Adds the ``AdversarialMotionPrior`` extension (``self.amp``, built from the keyword arguments) to the
    algorithm listed after it, with the reference's attribute names."""

    config_sources = (AdversarialMotionPrior,)
    amp: AdversarialMotionPrior

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        self.amp, kwargs = with_extension(AdversarialMotionPrior, kwargs.pop("ppo", None), kwargs)
        super().__init__(actor_critic, *args, **kwargs)  # type: ignore[call-arg]

    amp_normalizer = property(attrgetter("amp.normalizer"))
    ref_obs_normalizer = ref_motion_normalizer = amp_normalizer  # the reference's names
    amp_obs_dim = property(attrgetter("amp.amp_obs_dim"))
    amp_replay = property(attrgetter("amp.replay"))

    def style_reward_weight(self, iteration: int | None = None) -> float:
        return self.amp.style_reward_weight(iteration)


class APPO(APPOAlgoMixin, PPO):
    """PPO plus ``AdversarialMotionPrior`` (see there for its arguments)."""


class ATPPO(APPOAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) with Adversarial Motion Priors."""


__all__ += ["Distillation"]  # its reference import path
