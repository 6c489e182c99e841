"""Every policy preset, built from a config dict through ``OnPolicyRunner``, plus the estimator contracts.

The environment is a small native-API task (a subclass of ``VelocityTracking``) whose actor observations hold
a depth image ``forward_depth`` (1, 8, 8), a ``height`` vector and ``friction`` (so the privileged adaptor has
a target), and whose critic group adds ``mass``.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn

from st_rl.algorithms import PPO, EstimatorPPO
from st_rl.modules import (
    ActorCritic,
    EncoderActorCritic,
    StateAc,
    StateAcRecurrent,
    VisualDeterministicAC,
    VisualDeterministicRecurrent,
)
from st_rl.runners import OnPolicyRunner
from st_rl.storage.rollout_storage import MiniBatch
from st_rl.tasks import VelocityTracking
from st_rl.utils.collections import tree_flatten

NUM_ENVS = 6
ACTOR_SEGMENTS = OrderedDict(
    [
        ("base_lin_vel", (2,)),
        ("commands", (2,)),
        ("forward_depth", (1, 8, 8)),
        ("last_actions", (2,)),
        ("height", (5,)),
        ("friction", (1,)),
    ]
)
CRITIC_SEGMENTS = OrderedDict(
    [
        ("base_lin_vel", (2,)),
        ("commands", (2,)),
        ("last_actions", (2,)),
        ("height", (5,)),
        ("friction", (1,)),
        ("mass", (1,)),
    ]
)
NUM_OBS = sum(math.prod(s) for s in ACTOR_SEGMENTS.values())  # 76
NUM_CRITIC_OBS = sum(math.prod(s) for s in CRITIC_SEGMENTS.values())  # 13


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


class VisualVelocityTracking(VelocityTracking):
    """VelocityTracking with an image, a height scan and friction in the actor observations."""

    def __init__(self, num_envs: int = NUM_ENVS, seed: int = 0, **cfg) -> None:
        super().__init__(num_envs=num_envs, device="cpu", seed=seed, episode_length_s=1.0, **cfg)
        self.obs_segments = copy.deepcopy(ACTOR_SEGMENTS)
        self.privileged_obs_segments = copy.deepcopy(CRITIC_SEGMENTS)
        self.num_obs = NUM_OBS
        self.num_privileged_obs = NUM_CRITIC_OBS
        self._compute_observations()

    def _compute_observations(self) -> None:
        # built from the state buffers only, so it does not depend on the parent's observation layout
        n = self.num_envs
        v = self.base_lin_vel
        vel_obs = v + self._rand(n, 2, low=-0.05, high=0.05)
        grid = torch.linspace(-1.0, 1.0, 8)
        gy, gx = torch.meshgrid(grid, grid, indexing="ij")
        depth = torch.tanh(
            gx * v[:, 0, None, None] + gy * v[:, 1, None, None] + self.commands[:, 0, None, None]
        )
        height = torch.sin(torch.arange(5.0) * self.commands[:, 1:2] + v[:, 0:1])
        self.obs_buf = torch.cat(
            [vel_obs, self.commands, depth.reshape(n, 64), self.last_actions, height, self.friction], dim=1
        )
        self.critic_obs_buf = torch.cat(
            [self.base_lin_vel, self.commands, self.last_actions, height, self.friction, self.mass], dim=1
        )


RNN_LSTM = {"rnn_type": "lstm", "rnn_hidden_size": 12, "rnn_num_layers": 1}
RNN_GRU = {"rnn_type": "gru", "rnn_hidden_size": 12, "rnn_num_layers": 1}
ENC = {
    "encoder_component_names": ["height", "forward_depth"],
    "encoder_class_name": ["MlpModel", "Conv2dHeadModel"],
    "encoder_kwargs": [
        {"hidden_sizes": [8]},
        {"channels": [4], "kernel_sizes": [3], "strides": [2], "hidden_sizes": [8]},
    ],
    "encoder_output_size": 6,
}
EST = {
    "estimator_obs_components": ["commands", "last_actions", "height"],
    "estimator_target_components": ["base_lin_vel"],
    "estimator_kwargs": {"hidden_sizes": [8]},
    "replace_state_prob": 0.5,
}
VIS = {
    "visual_component_name": "forward_depth",
    "visual_kwargs": {"channels": [4], "kernel_sizes": [3], "strides": [2], "hidden_sizes": [8]},
    "visual_latent_size": 8,
}
PRIV = {
    "adaptor_obs_components": ["base_lin_vel", "last_actions"],
    "adaptor_target_components": ["friction"],
    "adaptor_kwargs": {"hidden_sizes": [8]},
    "privilege_replace_state_prob": 0.5,
}

PRESETS = {
    "ActorCritic": {},
    "ActorCriticRecurrent": RNN_LSTM,
    "EncoderActorCritic": ENC,
    "EncoderActorCriticRecurrent": {**ENC, **RNN_GRU},
    "StateAc": EST,
    "StateAcRecurrent": {**EST, **RNN_GRU},
    "EncoderStateAc": {**ENC, **EST},
    "EncoderStateAcRecurrent": {**ENC, **EST, **RNN_LSTM},
    "PrivilegeStateAc": {**EST, **PRIV},
    "PrivilegeStateAcRecurrent": {**EST, **PRIV, **RNN_LSTM},
    "VisualDeterministicAC": VIS,
    "VisualDeterministicRecurrent": {**VIS, **RNN_GRU},
}
RECURRENT = [n for n in PRESETS if "Recurrent" in n]
PRIVILEGED = [n for n in PRESETS if n.startswith("Privilege")]
ENCODER = [n for n in PRESETS if n.startswith("Encoder")]
ESTIMATOR = [n for n in PRESETS if "State" in n]


def make_cfg(name: str, seed: int = 0) -> dict:
    return {
        "seed": seed,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "logger": "none",
        "policy": {
            "class_name": name,
            "actor_hidden_dims": [16, 16],
            "critic_hidden_dims": [16],
            "activation": "elu",
            "init_noise_std": 0.5,
            **copy.deepcopy(PRESETS[name]),
        },
        "algorithm": {
            "class_name": "EstimatorPPO" if name in ESTIMATOR else "PPO",
            "num_learning_epochs": 1,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "fixed",
        },
    }


def make_runner(name: str, seed: int = 0, env_seed: int = 0) -> OnPolicyRunner:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # visual presets warn that the critic reads raw observations
        return OnPolicyRunner(VisualVelocityTracking(seed=env_seed), make_cfg(name, seed))


def _leaves(hidden) -> list[torch.Tensor]:
    return [h for h in tree_flatten(hidden) if h is not None]


# ---------------------------------------------------------------------------- per-preset behaviour
@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_builds_from_config_with_expected_shapes(name):
    runner = make_runner(name)
    ac = runner.alg.actor_critic
    assert type(ac).__name__ == name
    assert isinstance(runner.alg, EstimatorPPO if name in ESTIMATOR else PPO)
    assert ac.is_recurrent == (name in RECURRENT)
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    assert obs.shape == (NUM_ENVS, NUM_OBS) and critic_obs.shape == (NUM_ENVS, NUM_CRITIC_OBS)
    assert ac.obs_segments == ACTOR_SEGMENTS and ac.privileged_obs_segments == CRITIC_SEGMENTS
    actions = ac.act(obs)
    assert actions.shape == (NUM_ENVS, 2)
    assert ac.action_mean.shape == ac.action_std.shape == (NUM_ENVS, 2)
    ac.reset()
    assert ac.act_inference(obs).shape == (NUM_ENVS, 2)
    assert ac.evaluate(critic_obs).shape == (NUM_ENVS, 1)
    assert ac.get_actions_log_prob(actions).shape == (NUM_ENVS,)
    if name in ESTIMATOR:
        assert ac.get_estimated_state().shape == (NUM_ENVS, 2)
    if name in PRIVILEGED:
        assert ac.get_adapted_state().shape == (NUM_ENVS, 1)
        assert (ac.memory_p is not None) == (name in RECURRENT)


@pytest.mark.parametrize("name", list(PRESETS))
def test_exporter_attributes(name):
    ac = make_runner(name).alg.actor_critic
    assert hasattr(ac, "rnn_type")
    assert isinstance(ac.actor, nn.Sequential) and isinstance(ac.actor[0], nn.Linear)
    if name in RECURRENT:
        assert ac.rnn_type == PRESETS[name]["rnn_type"]
        assert isinstance(ac.memory_a.rnn, nn.LSTM if ac.rnn_type == "lstm" else nn.GRU)
        assert ac.actor[0].in_features == 12
    else:
        assert ac.rnn_type is None
    if name in ENCODER:
        assert ac.encoders[0].output_size == 6
        assert ac.encoders[1].output_size == 6
        if name not in RECURRENT:  # 76 - 5 - 64 + 2 * 6
            assert ac.actor[0].in_features == NUM_OBS - 5 - 64 + 12
    if name.startswith("Visual") and name not in RECURRENT:
        assert ac.actor[0].in_features == NUM_OBS - 64 + 8
        assert ac.critic[0].in_features == NUM_CRITIC_OBS


@pytest.mark.parametrize("name", list(PRESETS))
def test_learn_updates_every_parameter_with_finite_losses(name):
    runner = make_runner(name)
    env = runner.env
    # envs 0 and 1 time out on the 3rd step of the first rollout: trajectories split mid-rollout
    buf = env.episode_length_buf.clone()
    buf[:2] = env.max_episode_length - 3
    env.episode_length_buf = buf
    recorded = []
    update = runner.alg.update

    def recording_update(*a, **kw):
        out = update(*a, **kw)
        recorded.append(out[0])
        return out

    runner.alg.update = recording_update
    before = {k: p.detach().clone() for k, p in runner.alg.actor_critic.named_parameters()}
    runner.learn(2)
    assert runner.current_learning_iteration == 2
    assert len(recorded) == 2
    for losses in recorded:
        assert {"surrogate_loss", "value_loss", "entropy", "total_loss"} <= set(losses)
        if name in ESTIMATOR:
            assert "estimator_loss" in losses
        if name in PRIVILEGED:
            assert "adaptor_loss" in losses
        assert all(math.isfinite(v) for v in losses.values()), losses
    unchanged = [
        k for k, p in runner.alg.actor_critic.named_parameters() if torch.equal(p.detach(), before[k])
    ]
    if name.startswith("Visual"):
        # Deterministic policies store actions == mean, so the PPO surrogate has zero gradient w.r.t. the
        # actor path (they are meant for distillation); the critic and std still learn.
        unchanged = [k for k in unchanged if not k.startswith(("actor.", "visual_encoder.", "memory_a."))]
    assert unchanged == []


@pytest.mark.parametrize("name", list(PRESETS))
def test_checkpoint_round_trip_gives_identical_inference(name, tmp_path):
    runner = make_runner(name, seed=0)
    runner.learn(1)
    path = str(tmp_path / "model.pt")
    runner.save(path)
    fresh = make_runner(name, seed=5, env_seed=7)
    obs = runner.env_adapter.get_observations()[
        0
    ].clone()  # a normal tensor (the rollout ran in inference mode)
    a, b = runner.alg.actor_critic, fresh.alg.actor_critic
    a.reset()
    before_load = b.act_inference(obs).clone()
    fresh.load(path)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    a.reset()
    b.reset()
    out_a, out_b = a.act_inference(obs), b.act_inference(obs)
    assert torch.equal(out_a, out_b)
    assert not torch.allclose(before_load, out_b)  # the load changed the policy
    assert fresh.current_learning_iteration == 1


@pytest.mark.parametrize("name", RECURRENT)
def test_reset_zeroes_exactly_the_finished_envs_across_an_episode_boundary(name):
    runner = make_runner(name)
    env, alg, ac = runner.env, runner.alg, runner.alg.actor_critic
    buf = env.episode_length_buf.clone()
    buf[[1, 4]] = env.max_episode_length - 3
    env.episode_length_buf = buf
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    saw_boundary = False
    with torch.no_grad():
        for step in range(5):
            actions = alg.act(obs, critic_obs)
            h_before = [h.clone() for h in _leaves(ac.get_hidden_states())]
            obs, critic_obs, rewards, dones, infos = runner.env_adapter.step(actions)
            alg.process_env_step(rewards, dones, infos)
            h_after = _leaves(ac.get_hidden_states())
            assert len(h_after) == len(h_before) >= 2
            for hb, ha in zip(h_before, h_after):
                assert hb.shape[1] == NUM_ENVS
                assert torch.all(ha[:, dones] == 0)
                assert torch.equal(ha[:, ~dones], hb[:, ~dones])
                assert hb[:, dones].abs().sum() > 0 or not dones.any()
            if step == 2:
                assert dones[[1, 4]].all()
                assert not dones.all()
                saw_boundary = True
    assert saw_boundary


@pytest.mark.parametrize("name", ["EncoderStateAc", "EncoderStateAcRecurrent"])
def test_encoder_state_presets_estimate_from_raw_obs_then_encode(name):
    ac = make_runner(name).alg.actor_critic
    est_in = ac.memory_s.rnn.input_size if ac.memory_s is not None else ac.estimator.input_size
    assert est_in == 2 + 2 + 5  # raw commands, last_actions, height (not the 6-wide height latent)
    ac.replace_state_prob = 1.0
    obs = torch.randn(NUM_ENVS, NUM_OBS)
    with torch.no_grad():
        ac.reset()
        ac.act_inference(obs)
        substituted = obs.clone()
        substituted[:, 0:2] = ac.get_estimated_state()
        features = ac.encode_actor(substituted)
        if ac.is_recurrent:
            ac.reset()
            features = ac.memory_a(features[None], None, ac.memory_a.initial_state(NUM_ENVS))[0]
        torch.testing.assert_close(ac.action_mean, ac.actor(features))


def test_feed_forward_adaptor_reads_raw_components_and_substitutes_its_estimate():
    from st_rl.env.layout import get_subobs_by_components, substitute_estimated_state

    ac = make_runner("PrivilegeStateAc").alg.actor_critic
    assert ac.memory_p is None and ac.adaptor.input_size == 2 + 2  # base_lin_vel, last_actions
    ac.privilege_replace_state_prob, ac.replace_state_prob = 1.0, 0.0
    obs = torch.randn(NUM_ENVS, NUM_OBS)
    with torch.no_grad():
        actions = ac.act_inference(obs)
        x = ac.normalize_actor_obs(obs)
        adapted = ac.adaptor(get_subobs_by_components(x, ["base_lin_vel", "last_actions"], ACTOR_SEGMENTS))
        torch.testing.assert_close(ac.get_adapted_state(), adapted)
        substituted = substitute_estimated_state(x.clone(), ["friction"], adapted, ACTOR_SEGMENTS)
        torch.testing.assert_close(actions, ac.actor(substituted))
        assert not torch.allclose(actions, ac.actor(x))


# ---------------------------------------------------------------------------- deterministic / visual
@pytest.mark.parametrize("cls", [VisualDeterministicAC, VisualDeterministicRecurrent])
def test_deterministic_policy_act_returns_the_mean(cls):
    torch.manual_seed(0)
    kw = dict(RNN_GRU) if cls is VisualDeterministicRecurrent else {}
    ac = cls(NUM_OBS, NUM_OBS, 2, [8], [8], obs_segments=ACTOR_SEGMENTS, init_noise_std=1.0, **VIS, **kw)
    obs = torch.randn(NUM_ENVS, NUM_OBS)
    out = ac.act(obs)
    assert torch.equal(out, ac.action_mean)
    ac.reset()
    assert torch.allclose(ac.act_inference(obs), out)


# ---------------------------------------------------------------------------- state estimator
EST_SEGMENTS = OrderedDict([("vel", (2,)), ("cmd", (2,)), ("proprio", (3,))])


def _state_ac(p: float, cls=StateAc, **kw) -> StateAc:
    torch.manual_seed(0)
    return cls(
        7,
        7,
        2,
        [8],
        [8],
        obs_segments=EST_SEGMENTS,
        estimator_obs_components=["cmd", "proprio"],
        estimator_target_components=["vel"],
        estimator_kwargs={"hidden_sizes": [6]},
        replace_state_prob=p,
        **kw,
    )


def _substituted(obs: torch.Tensor, estimate: torch.Tensor) -> torch.Tensor:
    out = obs.clone()
    out[:, 0:2] = estimate
    return out


def test_estimator_replace_prob_one_feeds_the_detached_estimate():
    ac = _state_ac(1.0)
    obs = torch.randn(5, 7)
    ac.act(obs)
    estimate = ac.estimator(obs[:, 2:7])
    assert torch.allclose(ac.get_estimated_state(), estimate)
    assert torch.allclose(ac.action_mean, ac.actor(_substituted(obs, estimate)))
    assert not torch.allclose(ac.action_mean, ac.actor(obs))
    ac.zero_grad(set_to_none=True)
    ac.action_mean.sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in ac.estimator.parameters())
    assert ac.actor[0].weight.grad is not None and ac.actor[0].weight.grad.any()
    # the estimator itself is still differentiable (for the estimator loss)
    ac.get_estimated_state().sum().backward()
    assert any(p.grad is not None and p.grad.any() for p in ac.estimator.parameters())


def test_estimator_replace_prob_one_is_detached_for_recurrent_estimator_memory():
    ac = _state_ac(1.0, StateAcRecurrent, rnn_type="gru", rnn_hidden_size=6)
    obs = torch.randn(5, 7)
    ac.act(obs)
    ac.action_mean.sum().backward()
    est_params = list(ac.estimator.parameters()) + list(ac.memory_s.parameters())
    assert all(p.grad is None or not p.grad.any() for p in est_params)


def test_estimator_replace_prob_zero_leaves_the_observation_unchanged():
    ac = _state_ac(0.0)
    obs = torch.randn(5, 7)
    obs_copy = obs.clone()
    ac.act(obs)
    assert torch.equal(obs, obs_copy)
    assert torch.allclose(ac.action_mean, ac.actor(obs))
    assert torch.allclose(ac.act_inference(obs), ac.actor(obs))
    assert torch.allclose(ac.get_estimated_state(), ac.estimator(obs[:, 2:7]))


def test_estimator_substitution_at_inference_is_deterministic():
    ac = _state_ac(0.3)
    obs = torch.randn(64, 7)
    obs_copy = obs.clone()
    a1 = ac.act_inference(obs).clone()
    a2 = ac.act_inference(obs)
    assert torch.equal(a1, a2)
    assert torch.equal(obs, obs_copy)  # substitution works on a copy
    expected = ac.actor(_substituted(obs, ac.estimator(obs[:, 2:7])))
    assert torch.allclose(a1, expected)


def test_estimator_substitution_in_training_is_per_sample():
    ac = _state_ac(0.5)
    obs = torch.randn(200, 7)
    torch.manual_seed(1)
    ac.act(obs)
    mean = ac.action_mean.detach()
    with torch.no_grad():
        raw = ac.actor(obs)
        sub = ac.actor(_substituted(obs, ac.estimator(obs[:, 2:7])))
    is_raw = torch.isclose(mean, raw, atol=1e-6).all(-1)
    is_sub = torch.isclose(mean, sub, atol=1e-6).all(-1)
    assert (is_raw | is_sub).all()
    assert 40 < int(is_sub.sum()) < 160


def test_use_actor_rnn_constraints():
    with pytest.raises(ValueError, match="replace_state_prob"):
        _state_ac(0.5, StateAcRecurrent, use_actor_rnn=True, rnn_hidden_size=6)
    with pytest.raises(ValueError, match="recurrent"):
        _state_ac(0.0, StateAc, use_actor_rnn=True)
    ac = _state_ac(0.0, StateAcRecurrent, use_actor_rnn=True, rnn_type="gru", rnn_hidden_size=6)
    assert ac.memory_s is None
    obs = torch.randn(3, 7)
    ac.act(obs)
    hidden = ac.memory_a.hidden_states  # after the step: the memory output of a 1-layer GRU
    assert torch.allclose(ac.get_estimated_state(), ac.estimator(hidden[-1]))


def test_estimator_ppo_rejects_a_policy_without_estimator():
    with pytest.raises(ValueError, match="estimator"):
        EstimatorPPO(ActorCritic(7, 7, 2, [8], [8], obs_segments=EST_SEGMENTS))
    with pytest.raises(ValueError, match="estimator"):
        EstimatorPPO(StateAc(7, 7, 2, [8], [8], obs_segments=EST_SEGMENTS))  # no estimator components


def test_estimator_loss_equals_hand_computation():
    critic_segments = OrderedDict([("mass", (1,)), ("vel", (2,)), ("cmd", (2,)), ("proprio", (3,))])
    ac = StateAc(
        7,
        8,
        2,
        [8],
        [8],
        obs_segments=EST_SEGMENTS,
        privileged_obs_segments=critic_segments,
        estimator_obs_components=["cmd", "proprio"],
        estimator_target_components=["vel"],
        estimator_kwargs={"hidden_sizes": [4]},
    )
    with torch.no_grad():  # constant estimate (1, 2)
        for p in ac.estimator.parameters():
            p.zero_()
        ac.estimator.model[-1].bias.copy_(torch.tensor([1.0, 2.0]))
    alg = EstimatorPPO(ac, desired_kl=None)
    obs = torch.randn(2, 7)
    # the targets sit at columns 1:3 of the critic observation (critic layout), not 0:2
    critic_obs = torch.tensor(
        [[9.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0, 5.0], [9.0, 1.0, 4.0, 5.0, 5.0, 5.0, 5.0, 5.0]]
    )
    z2 = torch.zeros(2, 2)
    z1 = torch.zeros(2, 1)
    mb = MiniBatch(obs=obs, critic_obs=critic_obs, actions=z2, values=z1, advantages=z1, returns=z1,
                   old_actions_log_prob=z1, old_mu=z2, old_sigma=torch.ones(2, 2))  # fmt: skip
    losses, _, _ = alg.compute_losses(mb)
    stats = alg.estimator.log_scalars()
    # rows: (1-0)^2 + (2-0)^2 = 5 and (1-1)^2 + (2-4)^2 = 4 -> mean 4.5
    assert losses["estimator_loss"].item() == pytest.approx(4.5)
    assert stats["estimator_abs_error"] == pytest.approx((1 + 2 + 0 + 2) / 4)
    alg_l1 = EstimatorPPO(ac, desired_kl=None, estimator_loss_func="l1_loss")
    losses, _, _ = alg_l1.compute_losses(mb)
    assert losses["estimator_loss"].item() == pytest.approx((3 + 2) / 2)


# ---------------------------------------------------------------------------- misaligned load
def test_load_misaligned_state_dict_copies_common_columns():
    torch.manual_seed(0)
    old_segments = OrderedDict([("a", (3,)), ("b", (4,))])
    new_segments = OrderedDict([("a", (3,)), ("c", (2,)), ("b", (4,))])
    src = ActorCritic(7, 7, 2, [5], [4], obs_segments=old_segments)
    dst = ActorCritic(9, 9, 2, [5], [4], obs_segments=new_segments)
    with torch.no_grad():
        src.actor[0].weight.copy_(torch.arange(35.0).reshape(5, 7))
        src.critic[0].weight.copy_(100 + torch.arange(28.0).reshape(4, 7))
    init_actor_c = dst.actor[0].weight[:, 3:5].clone()
    init_critic_c = dst.critic[0].weight[:, 3:5].clone()
    report = dst.load_misaligned_state_dict(src, old_segments)

    w = dst.actor[0].weight
    # row r of the source is [7r, ..., 7r + 6]: a -> columns 0..2, b -> columns 3..6
    for r in range(5):
        assert w[r, 0:3].tolist() == [7.0 * r, 7.0 * r + 1, 7.0 * r + 2]
        assert w[r, 5:9].tolist() == [7.0 * r + 3, 7.0 * r + 4, 7.0 * r + 5, 7.0 * r + 6]
    assert torch.equal(w[:, 3:5], init_actor_c)
    wc = dst.critic[0].weight
    assert wc[0, 0:3].tolist() == [100.0, 101.0, 102.0]
    assert wc[0, 5:9].tolist() == [103.0, 104.0, 105.0, 106.0]
    assert torch.equal(wc[:, 3:5], init_critic_c)
    # everything else has equal shapes and is copied
    for key in ("actor.0.bias", "actor.2.weight", "actor.2.bias", "critic.2.weight", "std"):
        assert torch.equal(dst.state_dict()[key], src.state_dict()[key])
        assert key in report["loaded"]
    assert set(report["remapped"]) == {"actor.0.weight", "critic.0.weight"}
    assert "actor:c" in report["new_components"] and "critic:c" in report["new_components"]
    assert not any(n.endswith(":a") or n.endswith(":b") for n in report["new_components"])


def test_load_misaligned_state_dict_from_state_dict_with_encoders():
    torch.manual_seed(0)
    old = OrderedDict([("p", (2,)), ("h", (4,))])
    new = OrderedDict([("h", (4,)), ("p", (2,)), ("q", (1,))])
    kw = {"encoder_component_names": ["h"], "encoder_kwargs": {"hidden_sizes": [3]}, "encoder_output_size": 2}
    src = EncoderActorCritic(6, 6, 1, [5], [4], obs_segments=old, **kw)
    dst = EncoderActorCritic(7, 7, 1, [5], [4], obs_segments=new, **kw)
    report = dst.load_misaligned_state_dict(src.state_dict(), old)
    ws, wd = (
        src.actor[0].weight,
        dst.actor[0].weight,
    )  # feature layouts: [p(2), h-latent(2)] -> [h(2), p(2), q(1)]
    assert torch.equal(wd[:, 0:2], ws[:, 2:4])
    assert torch.equal(wd[:, 2:4], ws[:, 0:2])
    assert torch.equal(dst.encoders[0].model[0].weight, src.encoders[0].model[0].weight)
    assert "actor:q" in report["new_components"]
