"""The reference's policy mixins, as declarations of parts.

The reference builds its policies by stacking mixins on a base class, e.g.
``class EncoderStateAcRecurrent(EstimatorMixin, EncoderActorCriticMixin, ActorCriticRecurrent)``, and users
write their own compositions the same way. Here every mixin only declares the part of
:class:`~st_rl.modules.actor_critic.PolicyParts` it switches on (``policy_parts``); a class that lists mixins
before an :class:`~st_rl.modules.actor_critic.ActorCritic` base gets its base's ``parts`` plus those of its
mixins, so::

    class MyAC(EstimatorMixin, EncoderActorCriticMixin, ActorCriticRecurrent):
        pass

is the same policy as :class:`~st_rl.modules.actor_critic_recurrent.EncoderStateAcRecurrent`, with the same
keyword arguments (the mixins add no constructor: :class:`ActorCritic` takes every part's arguments). The parts
always run in one order (adaptor, estimator, encoders / visual encoder, memories, heads), whatever the order of
the mixins in the class statement; the reference's own compositions list them in that order.
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
    """Base of the policy mixins: a subclass declares ``policy_parts`` (``PolicyParts`` fields to switch on).

    When a class with an :class:`ActorCritic` base is created, the ``policy_parts`` of every mixin in its MRO are
    added to the ``parts`` it inherits, unless the class sets ``parts`` itself.
    """

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
    """Encoders on named observation components (the ``encoders`` part).

    Keyword arguments as :class:`~st_rl.modules.actor_critic.EncoderActorCritic`: ``encoder_component_names``,
    ``encoder_class_name``, ``encoder_kwargs``, ``encoder_output_size``, ``critic_encoder_component_names``,
    ``critic_encoder_class_name``, ``critic_encoder_kwargs``.
    """

    policy_parts: ClassVar[dict[str, Any]] = {"encoders": True}


class EstimatorMixin(PolicyMixin):
    """A supervised state estimator (the ``estimator`` part; train it with ``EstimatorPPO``).

    Keyword arguments as :class:`~st_rl.modules.actor_critic.StateAc`: ``estimator_obs_components``,
    ``estimator_target_components``, ``estimator_kwargs``, ``use_actor_rnn``, ``replace_state_prob``.
    """

    policy_parts: ClassVar[dict[str, Any]] = {"estimator": True}


class PrivilegeEstimatorMixin(PolicyMixin):
    """A privileged-state adaptor (the ``adaptor`` part; with its own memory on a recurrent base, an MLP on a
    feed-forward one).

    Keyword arguments as :class:`~st_rl.modules.actor_critic.PrivilegeStateAc` /
    :class:`~st_rl.modules.actor_critic_recurrent.PrivilegeStateAcRecurrent`:
    ``adaptor_obs_components``, ``adaptor_target_components``, ``adaptor_kwargs``,
    ``privilege_replace_state_prob``.
    """

    policy_parts: ClassVar[dict[str, Any]] = {"adaptor": True}


class VisualActorCriticMixin(PolicyMixin):
    """A convolutional encoder on the actor's image component (the ``visual`` part).

    Keyword arguments as :class:`~st_rl.modules.actor_critic.VisualDeterministicAC`: ``visual_component_name``,
    ``visual_kwargs``, ``visual_latent_size``.
    """

    policy_parts: ClassVar[dict[str, Any]] = {"visual": True}


class DeterministicPolicyMixin(PolicyMixin):
    """``act`` returns the action mean (the ``deterministic`` part)."""

    policy_parts: ClassVar[dict[str, Any]] = {"deterministic": True}


class AmpMixin(PolicyMixin):
    """An AMP discriminator built from the ``amp_discriminator`` dict (the ``discriminator`` part; trained by
    ``APPO`` / the ``AdversarialMotionPrior`` extension)."""

    policy_parts: ClassVar[dict[str, Any]] = {"discriminator": True}
