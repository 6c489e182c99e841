"""Encoders on legged_gym height maps: components shaped (1, nx, ny).

An ``MlpModel`` encoder reads its component flattened (nx * ny inputs), a ``Conv2dHeadModel`` reads it in its
(C, H, W) shape. Every encoder preset, feed-forward and recurrent, is built from obs_segments, acts, evaluates
and takes one PPO update; the built-in ``quadruped_rough`` task's (1, 7, 5) height scan trains one iteration.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn as nn
from utils.reference_fixtures import build_policy, flat_size, legged_segments, part_kwargs, rollout

from st_rl.algorithms import PPO, EstimatorPPO
from st_rl.modules import (
    Conv2dHeadModel,
    EncoderActorCritic,
    EncoderActorCriticRecurrent,
    EncoderAmpActorCriticRecurrent,
    EncoderStateAc,
    EncoderStateAcRecurrent,
    MlpModel,
)
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

N, T, A = 4, 6, 4
HEIGHT = (1, 21, 11)  # the parkour height map that crashed ("84x11 and 231x128")

ACTOR_SEGMENTS, CRITIC_SEGMENTS = legged_segments(
    [("base_lin_vel", (3,)), ("base_ang_vel", (3,)), ("projected_gravity", (3,)), ("dof_pos", (A,)),
     ("last_actions", (A,))],
    HEIGHT,
)  # fmt: skip
NUM_OBS, NUM_CRITIC = flat_size(ACTOR_SEGMENTS), flat_size(CRITIC_SEGMENTS)

PRESETS = [
    EncoderActorCritic,
    EncoderActorCriticRecurrent,
    EncoderStateAc,
    EncoderStateAcRecurrent,
    EncoderAmpActorCriticRecurrent,
]
ESTIMATOR_PRESETS = (EncoderStateAc, EncoderStateAcRecurrent)
RECURRENT_PRESETS = (EncoderActorCriticRecurrent, EncoderStateAcRecurrent, EncoderAmpActorCriticRecurrent)
ENCODERS = {
    "MlpModel": {"hidden_sizes": [16]},
    "Conv2dHeadModel": {"channels": [4], "kernel_sizes": [3], "strides": [2], "hidden_sizes": [8]},
}
CRITIC_MODES = [None, "shared", ["height_measurements"]]


def _policy(cls: type, encoder: str, critic_mode: Any) -> Any:
    kwargs: dict[str, Any] = dict(
        encoder_component_names=["height_measurements"],
        encoder_class_name=encoder,
        encoder_kwargs=ENCODERS[encoder],
        encoder_output_size=6,
        critic_encoder_component_names=critic_mode,
    )
    estimator = {
        "estimator_obs_components": ["base_ang_vel", "projected_gravity", "dof_pos"],
        "estimator_target_components": ["base_lin_vel"],
        "estimator_kwargs": {"hidden_sizes": [8], "rnn_hidden_size": 8},
        "replace_state_prob": 0.5,
    }
    kwargs.update(
        part_kwargs(
            recurrent=cls in RECURRENT_PRESETS,
            estimator=estimator if cls in ESTIMATOR_PRESETS else None,
            amp_input_dim=6 if cls is EncoderAmpActorCriticRecurrent else None,
        )
    )
    return build_policy(cls, ACTOR_SEGMENTS, CRITIC_SEGMENTS, A, **kwargs)


def _ppo_update(policy: Any) -> dict[str, Any]:
    alg_cls = EstimatorPPO if isinstance(policy, ESTIMATOR_PRESETS) else PPO
    alg = alg_cls(policy, num_learning_epochs=1, num_mini_batches=2, learning_rate=1e-3)
    alg.init_storage(N, T, [NUM_OBS], [NUM_CRITIC], [A])
    rollout(alg, N, T, NUM_OBS, NUM_CRITIC, done_steps=[3])  # one finished episode in env 3
    losses, _ = alg.update()
    return losses


@pytest.mark.parametrize("critic_mode", CRITIC_MODES, ids=["critic-raw", "critic-shared", "critic-own"])
@pytest.mark.parametrize("encoder", sorted(ENCODERS))
@pytest.mark.parametrize("cls", PRESETS, ids=lambda c: c.__name__)
def test_height_map_encoder_acts_evaluates_and_updates(cls, encoder, critic_mode):
    torch.manual_seed(0)
    policy = _policy(cls, encoder, critic_mode)
    enc = policy.encoders[0]
    if encoder == "MlpModel":
        assert isinstance(enc, MlpModel)
        assert enc.model[0].in_features == math.prod(HEIGHT)  # the whole map, flattened
    else:
        assert isinstance(enc, Conv2dHeadModel)
    assert enc.output_size == 6
    obs, critic = torch.randn(N, NUM_OBS), torch.randn(N, NUM_CRITIC)
    with torch.no_grad():
        actions = policy.act(obs)
        assert actions.shape == (N, A) and torch.isfinite(actions).all()
        assert policy.act_inference(obs).shape == (N, A)
        assert policy.evaluate(critic).shape == (N, 1)
        latent = policy.get_encoder_latent(obs, "height_measurements")
        assert latent.shape == (N, 6)
        if critic_mode is not None:
            assert policy.get_encoder_latent(critic, "height_measurements", critic=True).shape == (N, 6)
    policy.reset()
    losses = _ppo_update(policy)
    assert all(math.isfinite(float(v)) for v in losses.values()), losses
    if cls in ESTIMATOR_PRESETS:
        assert "estimator_loss" in losses


def test_mlp_latent_is_the_flattened_component():
    policy = _policy(EncoderActorCritic, "MlpModel", None)
    obs = torch.randn(2, 3, NUM_OBS)  # any leading dims
    start = NUM_OBS - math.prod(HEIGHT)
    with torch.no_grad():
        latent = policy.get_encoder_latent(obs, "height_measurements")
        torch.testing.assert_close(latent, policy.encoders[0](obs[..., start:]))
        torch.testing.assert_close(policy.encode_actor(obs)[..., -6:], latent)


def test_conv_latent_reads_the_image_shape():
    policy = _policy(EncoderActorCritic, "Conv2dHeadModel", None)
    obs = torch.randn(3, NUM_OBS)
    start = NUM_OBS - math.prod(HEIGHT)
    with torch.no_grad():
        latent = policy.get_encoder_latent(obs, "height_measurements")
        torch.testing.assert_close(latent, policy.encoders[0](obs[:, start:].reshape(3, *HEIGHT)))


def test_default_encoder_nonlinearity_is_the_reference_relu():
    policy: Any = EncoderActorCritic(
        NUM_OBS, NUM_CRITIC, A, [16], [16], "elu",
        obs_segments=ACTOR_SEGMENTS, encoder_component_names=["height_measurements"],
    )  # fmt: skip
    kinds = {type(m) for m in policy.encoders[0].model}
    assert nn.ReLU in kinds and nn.ELU not in kinds


@pytest.mark.parametrize("policy_class", ["EncoderActorCritic", "EncoderStateAcRecurrent"])
def test_quadruped_rough_height_scan_trains_one_iteration(policy_class):
    env = make_env("quadruped_rough", 4, nthread=1)
    assert tuple(env.obs_segments["height_measurements"]) == (1, 7, 5)
    policy: dict[str, Any] = {
        "class_name": policy_class,
        "actor_hidden_dims": [32],
        "critic_hidden_dims": [32],
        "encoder_component_names": ["height_measurements"],
        "encoder_kwargs": {"hidden_sizes": [16]},
        "encoder_output_size": 8,
        "critic_encoder_component_names": "shared",
    }
    algorithm: dict[str, Any] = {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2}
    if policy_class == "EncoderStateAcRecurrent":
        policy.update(
            rnn_type="gru",
            rnn_hidden_size=16,
            estimator_obs_components=["base_ang_vel", "projected_gravity", "dof_pos", "dof_vel"],
            estimator_target_components=["projected_gravity"],
            estimator_kwargs={"hidden_sizes": [16]},
        )
        algorithm["class_name"] = "EstimatorPPO"
    cfg = {"num_steps_per_env": 4, "save_interval": 100, "policy": policy, "algorithm": algorithm}
    runner = OnPolicyRunner(env, cfg, device="cpu")
    ac: Any = runner.alg.actor_critic
    assert ac.encoders[0].model[0].in_features == 35
    runner.learn(1)
    assert runner.current_learning_iteration == 1
