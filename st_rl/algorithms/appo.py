"""APPO (PPO with Adversarial Motion Priors) and ATPPO (its teacher-student variant): presets of
:class:`~st_rl.algorithms.ppo.PPO` with the
:class:`~st_rl.algorithms.extensions.amp.AdversarialMotionPrior` extension (and
:class:`~st_rl.algorithms.extensions.distillation.Distillation` for ATPPO)."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from st_rl.algorithms.extensions.amp import DISCRIMINATOR_LOSSES, AdversarialMotionPrior, MissingAmpDataError
from st_rl.algorithms.extensions.distillation import Distillation
from st_rl.algorithms.ppo import PPO
from st_rl.algorithms.schedules import GET_PROB_FUNC  # reference name (st_rl/compat.py)
from st_rl.algorithms.tppo import TPPO, merge_nested_ppo, split_kwargs

__all__ = ["APPO", "ATPPO", "DISCRIMINATOR_LOSSES", "GET_PROB_FUNC", "APPOAlgoMixin", "MissingAmpDataError"]


class APPOAlgoMixin:
    """Adds Adversarial Motion Priors to the algorithm it is listed before, under the reference's name:
    ``class APPO(APPOAlgoMixin, PPO)`` and ``class ATPPO(APPOAlgoMixin, TPPO)`` are this library's presets, and a
    user's ``class MyAlgo(APPOAlgoMixin, TPPO)`` is the same algorithm as :class:`ATPPO`.

    The mixin holds no algorithm code: its constructor takes the
    :class:`~st_rl.algorithms.extensions.amp.AdversarialMotionPrior` keyword arguments
    (``discriminator_loss_coef``, ``mimic_loss_coef``, ``amp_obs_dim``, ...; st_gym's nested ``ppo`` dict is
    merged first), builds that extension as ``self.amp`` and hands it to the base with the other arguments;
    the rest are the reference's attribute names, read from the extension.
    """

    config_sources = (AdversarialMotionPrior,)
    amp: AdversarialMotionPrior

    def __init__(self, actor_critic: nn.Module, *args: Any, **kwargs: Any) -> None:
        kwargs = merge_nested_ppo(kwargs.pop("ppo", None), kwargs)
        amp_kwargs, kwargs = split_kwargs(kwargs, AdversarialMotionPrior)
        self.amp = AdversarialMotionPrior(**amp_kwargs)
        extensions = [self.amp, *kwargs.pop("extensions", [])]
        super().__init__(actor_critic, *args, extensions=extensions, **kwargs)  # type: ignore[call-arg]

    @property
    def amp_normalizer(self) -> nn.Module:
        """The normaliser shared by policy and reference windows."""
        return self.amp.normalizer

    ref_obs_normalizer = amp_normalizer  # reference name (st_rl/compat.py)
    ref_motion_normalizer = amp_normalizer  # reference name (st_rl/compat.py)

    @property
    def amp_obs_dim(self) -> int:
        return self.amp.amp_obs_dim

    @property
    def amp_replay(self) -> Any:
        return self.amp.replay

    def style_reward_weight(self, iteration: int | None = None) -> float:
        return self.amp.style_reward_weight(iteration)


class APPO(APPOAlgoMixin, PPO):
    """PPO plus :class:`~st_rl.algorithms.extensions.amp.AdversarialMotionPrior` (arguments
    ``discriminator_loss_coef``, ``mimic_loss_coef``, ``bc_loss_coef``, ``amp_obs_dim``, ``amp_preset``
    (``"reference"``: the reference's defaults, no replay and one gradient clip; ``"st_rl"``: 100k replay and
    separate clipping), ``amp_replay_buffer_size``, ``amp_separate_clipping``, ``style_reward_ramp``; the
    others as :class:`PPO`; see docs/amp.md). The policy must carry a discriminator (``AmpActorCritic``,
    ``AmpActorCriticRecurrent``, ``EncoderAmpActorCriticRecurrent``)."""


class ATPPO(APPOAlgoMixin, TPPO):
    """Teacher-student PPO (:class:`TPPO`) with Adversarial Motion Priors: PPO plus ``Distillation`` plus
    ``AdversarialMotionPrior`` (the teacher's labels, buffer dilation and ``dagger_loss_coef`` are kept)."""


# Reference import path of the distillation extension class, for ATPPO users who subclass it.
__all__ += ["Distillation"]
