"""The reference's policy mixins, as declarations of ``PolicyParts`` fields added to an ``ActorCritic`` base's."""

from __future__ import annotations

from typing import Any, ClassVar

from st_rl.modules.actor_critic import ActorCritic


class PolicyMixin:
    """Base of the mixins: ``policy_parts`` are added to an ``ActorCritic`` subclass's ``parts``, unless it sets them."""

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
    """A privileged-state adaptor (arguments as ``PrivilegeStateAc``)."""

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
