"""The reference's policy mixins, as declarations of parts.

The reference builds policies by stacking mixins on a base class, e.g.
``class EncoderStateAcRecurrent(EstimatorMixin, EncoderActorCriticMixin, ActorCriticRecurrent)``. Here a mixin
only declares the :class:`~st_rl.modules.actor_critic.PolicyParts` field it switches on (``policy_parts``); a
class listing mixins before an :class:`~st_rl.modules.actor_critic.ActorCritic` base gets its base's ``parts``
plus its mixins'. The mixins add no constructor (:class:`ActorCritic` takes every part's keyword arguments, see
the preset named in each docstring), and the parts always run in one order (adaptor, estimator, encoders /
visual encoder, memories, heads), whatever the order of the mixins.
"""

from __future__ import annotations

from typing import Any, ClassVar

from st_rl.modules.actor_critic import ActorCritic

__all__ = [
    "AmpMixin",
    "DeterministicPolicyMixin",
    "EncoderActorCriticMixin",
    "EstimatorMixin",
    "PolicyMixin",
    "PrivilegeEstimatorMixin",
    "VisualActorCriticMixin",
]


class PolicyMixin:
    """Base of the policy mixins: a subclass declares ``policy_parts`` (``PolicyParts`` fields to switch on),
    added to the ``parts`` of an :class:`ActorCritic` subclass unless that class sets ``parts`` itself."""

    policy_parts: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, ActorCritic) or "parts" in cls.__dict__:
            return
        declared: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            declared.update(klass.__dict__.get("policy_parts", {}))
        cls.parts = cls.parts.add(**declared)


class EncoderActorCriticMixin(PolicyMixin):
    """Encoders on named observation components (arguments as ``EncoderActorCritic``)."""

    policy_parts: ClassVar[dict[str, Any]] = {"encoders": True}


class EstimatorMixin(PolicyMixin):
    """A supervised state estimator, trained by ``EstimatorPPO`` (arguments as ``StateAc``)."""

    policy_parts: ClassVar[dict[str, Any]] = {"estimator": True}


class PrivilegeEstimatorMixin(PolicyMixin):
    """A privileged-state adaptor, with its own memory on a recurrent base (arguments as
    ``PrivilegeStateAc`` / ``PrivilegeStateAcRecurrent``)."""

    policy_parts: ClassVar[dict[str, Any]] = {"adaptor": True}


class VisualActorCriticMixin(PolicyMixin):
    """A convolutional encoder on the actor's image component (arguments as ``VisualDeterministicAC``)."""

    policy_parts: ClassVar[dict[str, Any]] = {"visual": True}


class DeterministicPolicyMixin(PolicyMixin):
    """``act`` returns the action mean."""

    policy_parts: ClassVar[dict[str, Any]] = {"deterministic": True}


class AmpMixin(PolicyMixin):
    """An AMP discriminator built from the ``amp_discriminator`` dict (trained by ``APPO``)."""

    policy_parts: ClassVar[dict[str, Any]] = {"discriminator": True}
