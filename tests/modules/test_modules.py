"""Networks, policies, normaliser and the policy factory of ``st_rl.modules``."""

import copy
import warnings
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from st_rl.modules import (
    ActorCritic,
    EmpiricalNormalization,
    MlpModel,
    build_actor_critic,
    conv2d_output_shape,
    get_activation,
    get_activation_Cls,
)


# ---------------------------------------------------------------------------- MlpModel
def _kinds(seq):
    return [type(m) for m in seq]


def test_mlp_hidden_list_with_output():
    m = MlpModel(5, [8, 6], output_size=3, nonlinearity="elu")
    assert _kinds(m.model) == [nn.Linear, nn.ELU, nn.Linear, nn.ELU, nn.Linear]
    assert [(lin.in_features, lin.out_features) for lin in m.model if isinstance(lin, nn.Linear)] == [
        (5, 8),
        (8, 6),
        (6, 3),
    ]
    assert m.output_size == 3
    assert m(torch.randn(7, 5)).shape == (7, 3)


def test_mlp_without_output_ends_in_activation():
    m = MlpModel(5, [8, 6])  # default nonlinearity nn.ReLU
    assert _kinds(m.model) == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    assert m.output_size == 6
    assert (m(torch.randn(20, 5)) >= 0).all()


def test_mlp_int_hidden_and_class_nonlinearity():
    m = MlpModel(4, 9, output_size=None, nonlinearity=nn.Tanh)
    assert _kinds(m.model) == [nn.Linear, nn.Tanh]
    assert m.output_size == 9


def test_mlp_no_hidden_is_single_linear():
    m = MlpModel(4, None, output_size=2)
    assert _kinds(m.model) == [nn.Linear]
    assert m.output_size == 2
    m2 = MlpModel(4, [], output_size=2)
    assert _kinds(m2.model) == [nn.Linear]


def test_mlp_needs_some_layer():
    with pytest.raises(ValueError):
        MlpModel(4, None, output_size=None)


def test_mlp_unknown_nonlinearity_raises():
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="nonlinearity"):
        MlpModel(4, [3], nonlinearity="nope")


# ---------------------------------------------------------------------------- activations
@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("elu", nn.ELU),
        ("selu", nn.SELU),
        ("relu", nn.ReLU),
        ("crelu", nn.ReLU),
        ("lrelu", nn.LeakyReLU),
        ("tanh", nn.Tanh),
        ("sigmoid", nn.Sigmoid),
        ("Mish", nn.Mish),
        ("ELU", nn.ELU),
        ("Softplus", nn.Softplus),
        (nn.GELU, nn.GELU),
    ],
)
def test_get_activation_cls_known(name, cls):
    assert get_activation_Cls(name) is cls
    assert type(get_activation(name)) is cls


def test_get_activation_cls_unknown_warns_and_returns_none():
    with pytest.warns(UserWarning, match="not_an_act"):
        assert get_activation_Cls("not_an_act") is None
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="not_an_act"):
        get_activation("not_an_act")
    # a torch.nn attribute that is not a Module class is not an activation
    with pytest.warns(UserWarning):
        assert get_activation_Cls("functional") is None


# ---------------------------------------------------------------------------- conv2d_output_shape
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((64, 64, 5, 2, 1), (31, 31)),  # (64 + 2 - 4 - 1)//2 + 1 = 61//2 + 1 = 31
        ((64, 64, 3, 1, 0, 2), (60, 60)),  # dilation 2: (64 - 2*2 - 1)//1 + 1 = 60
        ((10, 20, (3, 5), (1, 2), (1, 0)), (10, 8)),  # h: (10+2-2-1)+1 = 10, w: (20-4-1)//2+1 = 8
        ((7, 7), (7, 7)),  # defaults k=1 s=1 p=0 d=1
        ((32, 16, 4, 4, 0, 1), (8, 4)),  # (32-3-1)//4+1 = 8, (16-3-1)//4+1 = 4
    ],
)
def test_conv2d_output_shape(args, expected):
    assert conv2d_output_shape(*args) == expected


def test_conv2d_output_shape_agrees_with_conv():
    conv = nn.Conv2d(1, 1, kernel_size=(3, 5), stride=(2, 1), padding=(2, 1), dilation=(1, 3))
    out = conv(torch.zeros(1, 1, 23, 17))
    assert tuple(out.shape[-2:]) == conv2d_output_shape(23, 17, (3, 5), (2, 1), (2, 1), (1, 3))


# ---------------------------------------------------------------------------- ActorCritic
def _ac(**kwargs):
    torch.manual_seed(0)
    base = {"actor_hidden_dims": [16, 8], "critic_hidden_dims": [12], "init_noise_std": 0.7}
    base.update(kwargs)
    return ActorCritic(6, 9, 3, **base)


def test_actor_critic_attributes():
    ac = _ac()
    assert ac.is_recurrent is False
    assert ac.rnn_type is None
    assert isinstance(ac.actor, nn.Sequential) and isinstance(ac.actor[0], nn.Linear)
    assert ac.actor[0].in_features == 6
    assert isinstance(ac.critic[0], nn.Linear) and ac.critic[0].in_features == 9
    assert ac.actor[-1].out_features == 3 and ac.critic[-1].out_features == 1
    assert _kinds(ac.actor) == [nn.Linear, nn.ELU, nn.Linear, nn.ELU, nn.Linear]  # default 'elu'
    assert isinstance(ac.std, nn.Parameter)
    torch.testing.assert_close(ac.std.detach(), torch.full((3,), 0.7))
    assert ac.actor_hidden_dims == [16, 8] and ac.critic_hidden_dims == [12]
    assert (ac.num_actor_obs, ac.num_critic_obs, ac.num_actions) == (6, 9, 3)


def test_actor_critic_reference_default_hidden_dims():
    ac = ActorCritic(4, 4, 2)
    assert ac.actor_hidden_dims == [256, 256, 256] and ac.critic_hidden_dims == [256, 256, 256]
    assert ac.std.detach().tolist() == [1.0, 1.0]


def test_act_shapes_and_distribution():
    ac = _ac()
    obs = torch.randn(5, 6)
    a = ac.act(obs)
    assert a.shape == (5, 3)
    assert ac.action_mean.shape == (5, 3) and ac.action_std.shape == (5, 3)
    torch.testing.assert_close(ac.action_mean, ac.actor(obs))
    torch.testing.assert_close(ac.action_std, torch.full((5, 3), 0.7))
    assert not torch.allclose(a, ac.action_mean)  # sampled


def test_act_samples_have_policy_std():
    ac = _ac(init_noise_std=0.5)
    obs = torch.zeros(20000, 6)
    a = ac.act(obs)
    assert (a - ac.action_mean).std().item() == pytest.approx(0.5, rel=0.03)


def test_act_inference_is_mean_and_evaluate_shape():
    ac = _ac()
    obs = torch.randn(4, 6)
    torch.testing.assert_close(ac.act_inference(obs), ac.actor(obs))
    torch.testing.assert_close(ac.act_inference(obs), ac.action_mean)
    v = ac.evaluate(torch.randn(4, 9))
    assert v.shape == (4, 1)
    assert ac.evaluate(torch.randn(2, 4, 9)).shape == (2, 4, 1)


def test_log_prob_and_entropy_match_torch_normal():
    ac = _ac()
    with torch.no_grad():
        ac.std.copy_(torch.tensor([0.3, 1.0, 2.5]))
    ac.act(torch.randn(6, 6))
    actions = torch.randn(6, 3)
    dist = torch.distributions.Normal(ac.action_mean, ac.action_std)
    lp = ac.get_actions_log_prob(actions)
    assert lp.shape == (6,)
    torch.testing.assert_close(lp, dist.log_prob(actions).sum(-1))
    torch.testing.assert_close(ac.entropy, dist.entropy().sum(-1))


def test_log_prob_hand_value():
    # N(0,1), a = 1, one action: -1/2 - 0.5*ln(2 pi) = -0.5 - 0.9189385 = -1.4189385
    ac = ActorCritic(1, 1, 1, [2], [2], init_noise_std=1.0)
    ac.act_inference(torch.zeros(1, 1))
    ac._mean = torch.zeros(1, 1)
    assert ac.get_actions_log_prob(torch.ones(1, 1)).item() == pytest.approx(-1.4189385, abs=1e-6)
    assert ac.entropy.item() == pytest.approx(1.4189385, abs=1e-6)  # 0.5 + 0.5 ln(2 pi)


def test_mu_activation_tanh_bounds_mean():
    ac = _ac(mu_activation="tanh")
    assert isinstance(ac.actor[-1], nn.Tanh)
    mean = ac.act_inference(torch.randn(64, 6) * 1000)
    assert mean.abs().max().item() <= 1.0


def test_clip_std_scalar_and_per_action():
    ac = _ac()
    with torch.no_grad():
        ac.std.copy_(torch.tensor([0.01, 0.5, 3.0]))
    ac.clip_std(min=0.1)
    torch.testing.assert_close(ac.std.detach(), torch.tensor([0.1, 0.5, 3.0]))
    ac.clip_std(min=torch.tensor([0.2, 0.6, 0.0]), max=2.0)
    torch.testing.assert_close(ac.std.detach(), torch.tensor([0.2, 0.6, 2.0]))
    ac.clip_std(min=[0.0, 0.0, 0.0], max=[0.15, 1.0, 1.0])
    torch.testing.assert_close(ac.std.detach(), torch.tensor([0.15, 0.6, 1.0]))
    assert isinstance(ac.std, nn.Parameter)  # still the same registered parameter


def test_reset_is_noop_and_forward_raises():
    ac = _ac()
    before = {k: v.clone() for k, v in ac.state_dict().items()}
    ac.reset()
    ac.reset(torch.tensor([True, False]))
    assert all(torch.equal(before[k], v) for k, v in ac.state_dict().items())
    assert ac.get_hidden_states() is None
    with pytest.raises(NotImplementedError):
        ac(torch.randn(2, 6))


def test_action_mean_before_act_raises():
    with pytest.raises(RuntimeError):
        _ = _ac().action_mean


def test_unknown_kwargs_warn_but_common_keys_do_not():
    with pytest.warns(UserWarning, match="bogus_arg"):
        _ac(bogus_arg=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ac(class_name="ActorCritic", rnn_type=None, teacher_ac_path="x.pt", encoder_component_names=None)


def test_critic_obs_segments_alias():
    seg = {"a": 4, "b": [5]}
    ac = ActorCritic(6, 9, 3, [4], [4], obs_segments={"x": 6}, critic_obs_segments=seg)
    assert dict(ac.privileged_obs_segments) == {"a": (4,), "b": (5,)}
    assert dict(ac.obs_segments) == {"x": (6,)}
    # privileged segments default to the actor ones
    ac2 = ActorCritic(6, 6, 3, [4], [4], obs_segments={"x": (2, 3)})
    assert dict(ac2.privileged_obs_segments) == {"x": (2, 3)}


# ---------------------------------------------------------------------------- EmpiricalNormalization
def test_normalizer_two_batches_equal_concatenated_stats():
    torch.manual_seed(0)
    norm = EmpiricalNormalization(3)
    a, b = torch.randn(7, 3) * 2 + 1, torch.randn(13, 3) * 0.5 - 4
    norm(a)
    norm(b)
    data = torch.cat([a, b]).double()
    torch.testing.assert_close(norm.mean.double(), data.mean(0), atol=1e-6, rtol=0)
    torch.testing.assert_close(norm._var[0].double(), data.var(0, correction=0), atol=1e-5, rtol=1e-6)
    torch.testing.assert_close(norm.std.double(), data.std(0, correction=0), atol=1e-6, rtol=1e-6)
    assert int(norm.count) == 20


def test_normalizer_hand_values():
    # batch1 [0, 2] -> mean 1 var 1 ; batch2 [4] -> all [0,2,4]: mean 2, population var 8/3
    norm = EmpiricalNormalization(1, eps=0.0)
    norm(torch.tensor([[0.0], [2.0]]))
    torch.testing.assert_close(norm.mean, torch.tensor([1.0]))
    norm(torch.tensor([[4.0]]))
    torch.testing.assert_close(norm.mean, torch.tensor([2.0]))
    torch.testing.assert_close(norm._var[0], torch.tensor([8.0 / 3.0]))
    norm.eval()
    # (5 - 2) / sqrt(8/3) = 3 / 1.6329932 = 1.8371173
    torch.testing.assert_close(norm(torch.tensor([[5.0]])), torch.tensor([[1.8371173]]))


def test_normalizer_leading_dims_flattened():
    norm = EmpiricalNormalization([2])
    x = torch.randn(3, 4, 2)
    out = norm(x)
    assert out.shape == (3, 4, 2)
    assert int(norm.count) == 12
    torch.testing.assert_close(norm.mean, x.reshape(-1, 2).mean(0))


def test_normalizer_count_in_state_dict_round_trip():
    norm = EmpiricalNormalization(2, until=25)
    norm(torch.randn(20, 2))
    sd = norm.state_dict()
    assert "count" in sd and int(sd["count"]) == 20
    other = EmpiricalNormalization(2, until=25)
    other.load_state_dict(sd)
    assert int(other.count) == 20
    torch.testing.assert_close(other.mean, norm.mean)
    # the restored count matters: 20 + 10 >= until is reached after one more batch
    other(torch.randn(10, 2))
    assert int(other.count) == 30
    frozen = other.mean
    other(torch.randn(10, 2) + 100)
    torch.testing.assert_close(other.mean, frozen)


def test_normalizer_state_without_count_is_treated_as_mature():
    # rsl_rl 2.0 checkpoints have no "count": the loaded statistics must not be overwritten
    src = EmpiricalNormalization(2, until=100)
    src(torch.randn(10, 2) + 5)
    sd = {k: v for k, v in src.state_dict().items() if k != "count"}
    dst = EmpiricalNormalization(2, until=100)
    dst.load_state_dict(sd)
    assert int(dst.count) == 100
    dst(torch.randn(10, 2) - 50)
    torch.testing.assert_close(dst.mean, src.mean)


def test_normalizer_until_stops_updates():
    norm = EmpiricalNormalization(2, until=4)
    a = torch.randn(4, 2)
    norm(a)
    norm(torch.randn(8, 2) + 50)
    assert int(norm.count) == 4
    torch.testing.assert_close(norm.mean, a.mean(0))


def test_normalizer_eval_mode_does_not_update():
    norm = EmpiricalNormalization(2)
    norm.eval()
    x = torch.randn(5, 2) + 3
    out = norm(x)
    assert int(norm.count) == 0
    torch.testing.assert_close(norm.mean, torch.zeros(2))
    torch.testing.assert_close(out, x / (1 + 1e-2))


def test_normalizer_update_in_inference_mode_keeps_normal_buffers():
    norm = EmpiricalNormalization(3)
    with torch.inference_mode():
        norm(torch.randn(8, 3))
    for buf in (norm._mean, norm._var, norm._std, norm.count):
        assert not buf.is_inference()
    assert int(norm.count) == 8
    # usable in autograd afterwards, and still updatable outside inference mode
    x = torch.randn(4, 3, requires_grad=True)
    norm(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert int(norm.count) == 12


def test_normalizer_inverse():
    norm = EmpiricalNormalization(3)
    norm(torch.randn(30, 3) * 4 + 2)
    norm.eval()
    x = torch.randn(6, 3)
    torch.testing.assert_close(norm.inverse(norm(x)), x, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------- build_actor_critic
def _env(num_privileged_obs):
    return SimpleNamespace(
        num_obs=6, num_privileged_obs=num_privileged_obs, num_actions=2, obs_segments={"p": 4, "q": [2]}
    )


@pytest.mark.parametrize("num_priv", [None, 0])
def test_build_actor_critic_fills_dims_from_env(num_priv):
    cfg = {
        "class_name": "ActorCritic",
        "num_actor_obs": None,
        "num_critic_obs": None,
        "num_actions": None,
        "actor_hidden_dims": [8],
        "critic_hidden_dims": [8],
    }
    snapshot = copy.deepcopy(cfg)
    ac = build_actor_critic(_env(num_priv), "ActorCritic", cfg)
    assert cfg == snapshot
    assert isinstance(ac, ActorCritic)
    assert (ac.num_actor_obs, ac.num_critic_obs, ac.num_actions) == (6, 6, 2)
    assert ac.actor[0].in_features == 6 and ac.critic[0].in_features == 6
    assert dict(ac.obs_segments) == {"p": (4,), "q": (2,)}


def test_build_actor_critic_privileged_and_explicit_dims():
    cfg = {"actor_hidden_dims": [8], "critic_hidden_dims": [8], "num_actions": 2}
    snapshot = copy.deepcopy(cfg)
    ac = build_actor_critic(_env(11), ActorCritic, cfg)
    assert cfg == snapshot
    assert ac.num_critic_obs == 11 and ac.critic[0].in_features == 11


def test_build_actor_critic_unknown_class_lists_names():
    with pytest.raises(ValueError, match="NoSuchPolicy") as info:
        build_actor_critic(_env(None), "NoSuchPolicy", {})
    assert "ActorCritic" in str(info.value)
