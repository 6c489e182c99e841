"""Custom policy classes composed from the reference's mixins, the way reference users write them.

Each composition is built through ``OnPolicyRunner``'s config path (a class object, or a ``"module:Class"``
string) on the built-in ``velocity_tracking`` task with ``actor_dynamics_slots=True`` (actor components
``base_lin_vel``, ``commands``, ``last_actions``, ``mass``, ``friction``) and trains one iteration; the
composition of a preset's mixins is the preset.
"""

from __future__ import annotations

import copy
import math
import sys
import warnings
from typing import Any

import pytest
import torch

from st_rl.algorithms import PPO, EstimatorPPO
from st_rl.config.schema import class_fields, schema_for
from st_rl.modules import (
    ActorCritic,
    ActorCriticRecurrent,
    AmpActorCriticRecurrent,
    DeterministicPolicyMixin,
    EncoderActorCritic,
    EncoderActorCriticMixin,
    EncoderAmpActorCriticRecurrent,
    EncoderStateAc,
    EncoderStateAcRecurrent,
    EstimatorMixin,
    PolicyParts,
    PrivilegeEstimatorMixin,
    PrivilegeStateAc,
    PrivilegeStateAcRecurrent,
    StateAc,
    VisualActorCriticMixin,
    VisualDeterministicRecurrent,
)
from st_rl.modules.mixins import AmpMixin
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

NUM_ENVS = 4


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


# ---------------------------------------------------------------------------- the user's classes
class EncoderEstimatorRecurrent(EstimatorMixin, EncoderActorCriticMixin, ActorCriticRecurrent):
    """The reference's EncoderStateAcRecurrent, written by a user."""


class EncoderEstimatorAc(EstimatorMixin, EncoderActorCriticMixin, ActorCritic):
    """The reference's EncoderStateAc, written by a user."""


class AdaptedEstimatorRecurrent(PrivilegeEstimatorMixin, EstimatorMixin, ActorCriticRecurrent):
    """The reference's PrivilegeStateAcRecurrent, written by a user."""


class AdaptedEstimatorAc(PrivilegeEstimatorMixin, EstimatorMixin, ActorCritic):
    """The feed-forward PrivilegeStateAc, written by a user."""


class DeterministicEncoderAc(DeterministicPolicyMixin, EncoderActorCriticMixin, ActorCritic):
    """A composition no preset offers: encoders and a deterministic ``act``."""


class ScaledEstimatorAc(EstimatorMixin, ActorCritic):
    """A user's class with a constructor argument of its own."""

    def __init__(self, *args: Any, action_gain: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.action_gain = action_gain


ENC = {
    "encoder_component_names": ["commands"],
    "encoder_kwargs": {"hidden_sizes": [8]},
    "encoder_output_size": 3,
    "critic_encoder_component_names": "shared",
}
EST = {
    "estimator_obs_components": ["commands", "last_actions"],
    "estimator_target_components": ["base_lin_vel"],
    "estimator_kwargs": {"hidden_sizes": [8], "rnn_hidden_size": 6},
    "replace_state_prob": 0.5,
}
PRIV = {
    "adaptor_obs_components": ["base_lin_vel", "last_actions"],
    "adaptor_target_components": ["friction"],
    "adaptor_kwargs": {"hidden_sizes": [8], "rnn_hidden_size": 6},
    "privilege_replace_state_prob": 0.5,
}
GRU = {"rnn_type": "gru", "rnn_hidden_size": 8}

COMPOSED: dict[str, tuple[Any, dict[str, Any], type]] = {
    # name: (class_name as the config gives it, policy keys, algorithm)
    "encoder_estimator_recurrent": (EncoderEstimatorRecurrent, {**ENC, **EST, **GRU}, EstimatorPPO),
    "encoder_estimator_ff": (f"{__name__}:EncoderEstimatorAc", {**ENC, **EST}, EstimatorPPO),
    "adapted_estimator_recurrent": (AdaptedEstimatorRecurrent, {**EST, **PRIV, **GRU}, EstimatorPPO),
    "adapted_estimator_ff": (AdaptedEstimatorAc, {**EST, **PRIV}, EstimatorPPO),
    "deterministic_encoder_ff": (DeterministicEncoderAc, ENC, PPO),
    "user_init_ff": (ScaledEstimatorAc, {**EST, "action_gain": 0.5}, EstimatorPPO),
}


def _env():
    return make_env("velocity_tracking", num_envs=NUM_ENVS, seed=0, actor_dynamics_slots=True)


def _cfg(class_name: Any, policy: dict[str, Any], alg: type) -> dict[str, Any]:
    return {
        "seed": 0,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "logger": "none",
        "policy": {
            "class_name": class_name,
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
            **copy.deepcopy(policy),
        },
        "algorithm": {
            "class_name": alg.__name__,
            "num_learning_epochs": 1,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "fixed",
        },
    }


# ---------------------------------------------------------------------------- tests
def test_compositions_are_the_presets():
    assert EncoderEstimatorRecurrent.parts == EncoderStateAcRecurrent.parts
    assert EncoderEstimatorAc.parts == EncoderStateAc.parts
    assert AdaptedEstimatorRecurrent.parts == PrivilegeStateAcRecurrent.parts
    assert DeterministicEncoderAc.parts == PolicyParts(encoders=True, deterministic=True)
    assert ScaledEstimatorAc.parts == StateAc.parts

    class Visual(DeterministicPolicyMixin, VisualActorCriticMixin, ActorCriticRecurrent):
        pass

    class EncoderAmp(EncoderActorCriticMixin, AmpActorCriticRecurrent):
        pass

    class AmpEncoder(AmpMixin, EncoderActorCriticMixin, ActorCriticRecurrent):
        pass

    assert Visual.parts == VisualDeterministicRecurrent.parts
    assert EncoderAmp.parts == AmpEncoder.parts == EncoderAmpActorCriticRecurrent.parts

    class Sub(EncoderEstimatorRecurrent):  # a subclass keeps its parts
        pass

    class OnAPreset(EstimatorMixin, EncoderActorCritic):  # a mixin on a preset adds to the preset's parts
        pass

    class Declared(EstimatorMixin, ActorCritic):  # a class that sets parts itself keeps them
        parts = PolicyParts()

    assert Sub.parts == EncoderStateAcRecurrent.parts
    assert OnAPreset.parts == EncoderStateAc.parts
    assert Declared.parts == PolicyParts()
    assert not issubclass(EstimatorMixin, torch.nn.Module)


def test_privilege_mixin_on_a_feed_forward_base_is_the_feed_forward_preset():
    assert AdaptedEstimatorAc.parts == PrivilegeStateAc.parts
    assert PrivilegeStateAc.parts.adaptor and PrivilegeStateAc.parts.memory is None


@pytest.mark.parametrize(
    ("composed", "preset", "policy"),
    [
        (EncoderEstimatorRecurrent, EncoderStateAcRecurrent, {**ENC, **EST, **GRU}),
        (EncoderEstimatorAc, EncoderStateAc, {**ENC, **EST}),
        (AdaptedEstimatorRecurrent, PrivilegeStateAcRecurrent, {**EST, **PRIV, **GRU}),
        (AdaptedEstimatorAc, PrivilegeStateAc, {**EST, **PRIV}),
    ],
)
def test_composed_class_equals_its_preset(composed, preset, policy):
    env = _env()
    kwargs = dict(
        num_actor_obs=env.num_obs,
        num_critic_obs=env.num_obs,
        num_actions=env.num_actions,
        actor_hidden_dims=[16],
        critic_hidden_dims=[16],
        obs_segments=env.obs_segments,
        **copy.deepcopy(policy),
    )
    torch.manual_seed(0)
    a = composed(**kwargs)
    torch.manual_seed(0)
    b = preset(**kwargs)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    assert all(sa[k].shape == sb[k].shape and torch.equal(sa[k], sb[k]) for k in sa)
    obs = torch.randn(NUM_ENVS, env.num_obs)
    for inference in (False, True):
        torch.manual_seed(1)
        act_a = a.act_inference(obs) if inference else a.act(obs)
        torch.manual_seed(1)
        act_b = b.act_inference(obs) if inference else b.act(obs)
        assert torch.equal(act_a, act_b)
        assert torch.equal(a.get_estimated_state(), b.get_estimated_state())
    assert torch.equal(a.evaluate(obs), b.evaluate(obs))
    assert a.is_recurrent == b.is_recurrent


@pytest.mark.parametrize("name", list(COMPOSED))
def test_composed_class_trains_from_a_config(name):
    class_name, policy, alg = COMPOSED[name]
    cls = (
        class_name
        if isinstance(class_name, type)
        else getattr(sys.modules[__name__], class_name.split(":")[1])
    )
    fields, _, open_kwargs = class_fields(cls)
    assert set(policy) <= set(fields) and not open_kwargs
    schema_for(cls)(**_cfg(class_name, policy, alg)["policy"])  # the schema accepts the config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = OnPolicyRunner(_env(), _cfg(class_name, policy, alg))
    ac = runner.alg.actor_critic
    assert type(ac) is cls and isinstance(runner.alg, alg)
    before = {k: p.detach().clone() for k, p in ac.named_parameters()}
    recorded = []
    update = runner.alg.update

    def recording_update(*a: Any, **kw: Any) -> Any:
        out = update(*a, **kw)
        recorded.append(out[0])
        return out

    runner.alg.update = recording_update  # type: ignore[method-assign]
    runner.learn(1)
    assert runner.current_learning_iteration == 1 and len(recorded) == 1
    losses = recorded[0]
    assert all(math.isfinite(v) for v in losses.values()), losses
    if alg is EstimatorPPO:
        assert "estimator_loss" in losses
    if cls in (AdaptedEstimatorRecurrent, AdaptedEstimatorAc):
        assert "adaptor_loss" in losses
    if cls is ScaledEstimatorAc:
        assert ac.action_gain == 0.5
    changed = [k for k, p in ac.named_parameters() if not torch.equal(p.detach(), before[k])]
    assert "critic.0.weight" in changed and "std" in changed
    obs, _, _ = runner.env_adapter.get_observations()
    with torch.inference_mode():  # the rollout memories hold inference tensors after learn()
        assert ac.act_inference(obs).shape == (NUM_ENVS, runner.env_adapter.num_actions)
