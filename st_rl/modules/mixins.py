"""The reference's policy mixins, as declarations of ``PolicyParts`` fields added to an ``ActorCritic`` base's."""

from __future__ import annotations

from typing import Any, ClassVar

from st_rl.modules.actor_critic import ActorCritic


class PolicyMixin:
    """Base of the mixins (``class M(PolicyMixin, part="name")``): their ``policy_parts`` are added to an
    ``ActorCritic`` subclass's ``parts``, unless it sets them."""

    policy_parts: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, part: str | None = None, **kwargs: Any) -> None:
        sets_parts = "parts" in cls.__dict__
        super().__init_subclass__(**kwargs)  # ActorCritic's adds the keyword parts
        if part is not None:
            cls.policy_parts = {part: True}
        if not issubclass(cls, ActorCritic) or sets_parts:
            return
        declared: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            declared.update(klass.__dict__.get("policy_parts", {}))
        cls.parts = cls.parts.add(**declared)


class EncoderActorCriticMixin(PolicyMixin, part="encoders"):
    """Encoders on named observation components (arguments as ``EncoderActorCritic``)."""


class EstimatorMixin(PolicyMixin, part="estimator"):
    """A supervised state estimator, trained by ``EstimatorPPO`` (arguments as ``StateAc``)."""


class PrivilegeEstimatorMixin(PolicyMixin, part="adaptor"):
    """A privileged-state adaptor (arguments as ``PrivilegeStateAc``)."""


class VisualActorCriticMixin(PolicyMixin, part="visual"):
    """A convolutional encoder on the actor's image component (arguments as ``VisualDeterministicAC``)."""


class DeterministicPolicyMixin(PolicyMixin, part="deterministic"):
    """``act`` returns the action mean."""


class AmpMixin(PolicyMixin, part="discriminator"):
    """An AMP discriminator built from the ``amp_discriminator`` dict (trained by ``APPO``)."""
