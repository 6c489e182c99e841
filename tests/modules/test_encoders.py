"""Encoders on observation components, convolutional models, visual policies and the normalisers."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn as nn

from st_rl.modules import (
    Conv2dHeadModel,
    Conv2dModel,
    EncoderActorCritic,
    EncoderActorCriticRecurrent,
    MlpModel,
    Normalize,
    Normalizer,
    RunningMeanStd,
    VisualDeterministicAC,
    VisualDeterministicRecurrent,
)
from st_rl.modules.encoder import EncoderLayout


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


class SumMax(nn.Module):
    """A hand-checkable "encoder": [sum, max] of all component values."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(start_dim=-3)  # (..., C, H, W) image component
        return torch.stack([flat.sum(-1), flat.max(-1).values], dim=-1)


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., :2] * self.factor


# ---------------------------------------------------------------------------- EncoderLayout
def test_encoder_layout_hand_example():
    segments = OrderedDict([("a", (2,)), ("img", (1, 2, 2)), ("b", (3,))])
    layout = EncoderLayout(segments, ["img"], 2)
    assert layout.input_width == 9 and layout.output_width == 7
    obs = torch.arange(9.0).reshape(1, 9)  # a = [0, 1], img = [2, 3, 4, 5], b = [6, 7, 8]
    assert layout.component_input(obs, 0).shape == (1, 1, 2, 2)
    out = layout.embed(obs, nn.ModuleList([SumMax()]))
    assert out.tolist() == [[0.0, 1.0, 14.0, 5.0, 6.0, 7.0, 8.0]]
    # any leading dims
    out3 = layout.embed(torch.arange(9.0).expand(4, 3, 9), nn.ModuleList([SumMax()]))
    assert out3.shape == (4, 3, 7) and out3[2, 1].tolist() == [0.0, 1.0, 14.0, 5.0, 6.0, 7.0, 8.0]
    with pytest.raises(ValueError):
        layout.embed(torch.zeros(1, 8), nn.ModuleList([SumMax()]))


def test_encoder_layout_several_components_given_out_of_order():
    segments = OrderedDict([("a", (2,)), ("m", (1,)), ("b", (3,)), ("z", (2,))])
    layout = EncoderLayout(segments, ["b", "a"], 2)  # encoder 0 -> b, encoder 1 -> a
    obs = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]])
    out = layout.embed(obs, nn.ModuleList([Scale(10.0), Scale(-1.0)]))
    # a -> -[1, 2]; m stays 3; b -> 10 * [4, 5]; z stays [7, 8]
    assert out.tolist() == [[-1.0, -2.0, 3.0, 40.0, 50.0, 7.0, 8.0]]
    assert layout.output_width == 7


# ---------------------------------------------------------------------------- encoder presets
SEGMENTS = OrderedDict([("vel", (2,)), ("height", (5,)), ("depth", (1, 8, 8)), ("cmd", (3,))])
NUM_OBS = 2 + 5 + 64 + 3
CRITIC_SEGMENTS = OrderedDict(
    [("vel", (2,)), ("height", (5,)), ("depth", (1, 8, 8)), ("cmd", (3,)), ("mass", (1,))]
)
NUM_CRITIC = NUM_OBS + 1
CONV_KW = {"channels": [4], "kernel_sizes": [3], "strides": [2], "hidden_sizes": [8]}


def _enc_ac(cls=EncoderActorCritic, **kw):
    torch.manual_seed(0)
    return cls(
        NUM_OBS,
        NUM_CRITIC,
        2,
        [16],
        [16],
        obs_segments=SEGMENTS,
        privileged_obs_segments=CRITIC_SEGMENTS,
        **kw,
    )


def _manual_embed(obs, enc_height, enc_depth):
    return torch.cat(
        [
            obs[..., 0:2],
            enc_height(obs[..., 2:7]),
            enc_depth(obs[..., 7:71].reshape(-1, 1, 8, 8)),
            obs[..., 71:74],
        ],
        dim=-1,
    )


def test_mlp_and_conv_encoders_per_component():
    ac = _enc_ac(
        encoder_component_names=["height", "depth"],
        encoder_class_name=["MlpModel", "Conv2dHeadModel"],
        encoder_kwargs=[{"hidden_sizes": [16]}, CONV_KW],
        encoder_output_size=6,
    )
    mlp, conv = ac.encoders
    assert isinstance(mlp, MlpModel) and isinstance(conv, Conv2dHeadModel)
    # MLP encoder: hidden_sizes + [out], ending in an activation (default ReLU, the reference's)
    assert [type(m) for m in mlp.model] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    assert (mlp.model[0].in_features, mlp.model[0].out_features, mlp.model[2].out_features) == (5, 16, 6)
    assert conv.conv.conv[0].out_channels == 4 and conv.conv.conv[0].stride == (2, 2)
    assert mlp.output_size == conv.output_size == 6
    assert ac.actor[0].in_features == NUM_OBS - 5 - 64 + 2 * 6
    assert ac.critic[0].in_features == NUM_CRITIC  # critic mode None: raw observations
    obs = torch.randn(4, NUM_OBS)
    critic = torch.randn(4, NUM_CRITIC)
    with torch.no_grad():
        torch.testing.assert_close(ac.encode_actor(obs), _manual_embed(obs, mlp, conv))
        torch.testing.assert_close(ac.act_inference(obs), ac.actor(_manual_embed(obs, mlp, conv)))
        torch.testing.assert_close(ac.evaluate(critic), ac.critic(critic))
        torch.testing.assert_close(
            ac.get_encoder_latent(obs, "depth"), conv(obs[:, 7:71].reshape(4, 1, 8, 8))
        )


def test_single_class_name_and_kwargs_apply_to_every_component():
    ac = _enc_ac(
        encoder_component_names=["vel", "cmd"], encoder_kwargs={"hidden_sizes": [7]}, encoder_output_size=4
    )
    assert len(ac.encoders) == 2
    for enc, width in zip(ac.encoders, (2, 3)):
        assert isinstance(enc, MlpModel)
        assert [(m.in_features, m.out_features) for m in enc.model if isinstance(m, nn.Linear)] == [
            (width, 7),
            (7, 4),
        ]
    assert ac.encoders[0].model[0].weight.data_ptr() != ac.encoders[1].model[0].weight.data_ptr()


def test_default_encoder_kwargs_and_output_size():
    segments = OrderedDict([("h", (5,)), ("img", (1, 16, 16))])
    ac = EncoderActorCritic(
        5 + 256,
        5 + 256,
        2,
        [8],
        [8],
        obs_segments=segments,
        encoder_component_names=["h", "img"],
        encoder_class_name=["MlpModel", "Conv2dHeadModel"],
        encoder_output_size=None,
    )
    assert ac.encoder_output_size == 32
    mlp, conv = ac.encoders
    assert [(m.in_features, m.out_features) for m in mlp.model if isinstance(m, nn.Linear)] == [
        (5, 128),
        (128, 64),
        (64, 32),
    ]
    convs = [m for m in conv.conv.conv if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32]
    assert [c.kernel_size for c in convs] == [(5, 5), (3, 3)]
    assert [c.stride for c in convs] == [(2, 2), (2, 2)]
    head = [m for m in conv.head.model if isinstance(m, nn.Linear)]
    # 16x16 -> 6x6 -> 2x2 with 32 channels = 128 features -> 64 -> 32
    assert [(m.in_features, m.out_features) for m in head] == [(128, 64), (64, 32)]
    assert ac.actor[0].in_features == 64
    assert ac.act_inference(torch.randn(3, 261)).shape == (3, 2)


@pytest.mark.parametrize("cls", [EncoderActorCritic, EncoderActorCriticRecurrent])
def test_empty_encoder_list_works(cls):
    kw = {"rnn_hidden_size": 8} if cls is EncoderActorCriticRecurrent else {}
    ac = _enc_ac(cls, encoder_component_names=[], **kw)
    assert ac.actor_layout is None and ac.critic_layout is None
    assert (ac.memory_a.rnn.input_size if ac.is_recurrent else ac.actor[0].in_features) == NUM_OBS
    obs = torch.randn(3, NUM_OBS)
    assert ac.act(obs).shape == (3, 2)
    assert ac.evaluate(torch.randn(3, NUM_CRITIC)).shape == (3, 1)


def test_critic_shared_encoders():
    ac = _enc_ac(
        encoder_component_names=["height", "depth"],
        encoder_class_name=["MlpModel", "Conv2dHeadModel"],
        encoder_kwargs=[{"hidden_sizes": [16]}, CONV_KW],
        encoder_output_size=6,
        critic_encoder_component_names="shared",
    )
    assert not hasattr(ac, "critic_encoders") or len(getattr(ac, "critic_encoders", [])) == 0
    assert ac.critic[0].in_features == NUM_CRITIC - 5 - 64 + 12
    mlp, conv = ac.encoders
    critic = torch.randn(4, NUM_CRITIC)
    with torch.no_grad():
        expected = torch.cat([_manual_embed(critic[:, :74], mlp, conv), critic[:, 74:]], dim=-1)
        torch.testing.assert_close(ac.encode_critic(critic), expected)
        torch.testing.assert_close(ac.evaluate(critic), ac.critic(expected))
        torch.testing.assert_close(ac.get_encoder_latent(critic, "height", critic=True), mlp(critic[:, 2:7]))
        obs = critic[:, :74]
        torch.testing.assert_close(
            ac.get_encoder_latent(critic, "depth", critic=True), ac.get_encoder_latent(obs, "depth")
        )


def test_critic_shared_needs_actor_encoders():
    with pytest.raises(ValueError):
        _enc_ac(encoder_component_names=[], critic_encoder_component_names="shared")


def test_critic_encoder_list_is_separate_and_defaults_to_actor_settings():
    ac = _enc_ac(
        encoder_component_names=["height"],
        encoder_kwargs={"hidden_sizes": [16]},
        encoder_output_size=6,
        critic_encoder_component_names=["height", "mass"],
    )
    assert len(ac.critic_encoders) == 2
    assert all(isinstance(e, MlpModel) for e in ac.critic_encoders)
    assert ac.critic_encoders[0].model[0].out_features == 16  # actor kwargs reused
    assert ac.critic_encoders[0] is not ac.encoders[0]
    assert ac.critic[0].in_features == NUM_CRITIC - 5 - 1 + 12
    critic = torch.randn(4, NUM_CRITIC)
    with torch.no_grad():
        he, me = ac.critic_encoders
        expected = torch.cat([critic[:, 0:2], he(critic[:, 2:7]), critic[:, 7:74], me(critic[:, 74:75])], -1)
        torch.testing.assert_close(ac.evaluate(critic), ac.critic(expected))
        torch.testing.assert_close(ac.get_encoder_latent(critic, "mass", critic=True), me(critic[:, 74:75]))
    with pytest.raises(ValueError):
        ac.get_encoder_latent(critic[:, :74], "mass")  # not an actor component

    custom = _enc_ac(
        encoder_component_names=["height"],
        encoder_kwargs={"hidden_sizes": [16]},
        critic_encoder_component_names=["depth"],
        critic_encoder_class_name="Conv2dHeadModel",
        critic_encoder_kwargs=CONV_KW,
    )
    assert isinstance(custom.critic_encoders[0], Conv2dHeadModel)


def test_get_encoder_latent_unknown_component_raises():
    ac = _enc_ac(encoder_component_names=["height"], encoder_kwargs={"hidden_sizes": [4]})
    with pytest.raises(ValueError):
        ac.get_encoder_latent(torch.randn(2, NUM_OBS), "cmd")
    with pytest.raises(ValueError):
        ac.get_encoder_latent(torch.randn(2, NUM_CRITIC), "height", critic=True)  # critic mode None


def test_unsupported_encoder_class_raises():
    with pytest.raises(ValueError):
        _enc_ac(encoder_component_names=["height"], encoder_class_name="Transformer")
    with pytest.raises(ValueError):  # a conv encoder needs an image component
        _enc_ac(
            encoder_component_names=["height"], encoder_class_name="Conv2dHeadModel", encoder_kwargs=CONV_KW
        )
    with pytest.raises(ValueError):  # one entry per component
        _enc_ac(encoder_component_names=["height", "cmd"], encoder_class_name=["MlpModel"])


def test_encoder_recurrent_memory_reads_the_latents():
    ac = _enc_ac(
        EncoderActorCriticRecurrent,
        encoder_component_names=["depth"],
        encoder_class_name="Conv2dHeadModel",
        encoder_kwargs=CONV_KW,
        encoder_output_size=5,
        rnn_type="gru",
        rnn_hidden_size=8,
    )
    assert ac.memory_a.rnn.input_size == NUM_OBS - 64 + 5
    assert ac.memory_c.rnn.input_size == NUM_CRITIC
    x = torch.randn(3, 4, NUM_OBS)  # batch mode with leading (T, B)
    with torch.no_grad():
        ac.act(x, hidden_states=torch.zeros(1, 4, 8))
        mean = ac.action_mean
        emb = torch.cat([x[..., :7], ac.encoders[0](x[..., 7:71].reshape(3, 4, 1, 8, 8)), x[..., 71:]], -1)
        expected = ac.actor(ac.memory_a(emb, None, torch.zeros(1, 4, 8)))
    torch.testing.assert_close(mean, expected)


# ---------------------------------------------------------------------------- Conv2dModel / Conv2dHeadModel
@pytest.mark.parametrize(
    ("norm", "cls"),
    [("batchnorm", nn.BatchNorm2d), ("layernorm", nn.GroupNorm), (nn.BatchNorm2d, nn.BatchNorm2d)],
)
def test_conv2d_model_normlayer(norm, cls):
    m = Conv2dModel(1, [4, 6], [3, 3], [1, 1], normlayer=norm)
    norms = [x for x in m.conv if isinstance(x, cls)]
    assert len(norms) == 2
    kinds = [type(x) for x in m.conv]
    assert kinds == [nn.Conv2d, cls, nn.ReLU, nn.Conv2d, cls, nn.ReLU]
    assert [n.num_features if cls is nn.BatchNorm2d else n.num_channels for n in norms] == [4, 6]
    assert not any(isinstance(x, (nn.BatchNorm2d, nn.GroupNorm)) for x in Conv2dModel(1, [4], [3], [1]).conv)


def test_conv2d_model_string_nonlinearity():
    m = Conv2dModel(2, [3, 3], [3, 3], [1, 1], nonlinearity="elu")
    assert sum(isinstance(x, nn.ELU) for x in m.conv) == 2
    assert not any(isinstance(x, nn.ReLU) for x in m.conv)


@pytest.mark.parametrize(
    ("kw", "hw"),
    [
        ({"channels": [4, 8], "kernel_sizes": [3, 3], "strides": [2, 2]}, (17, 13)),
        ({"channels": [4, 8], "kernel_sizes": [3, 3], "strides": [2, 2], "use_maxpool": True}, (17, 13)),
        (
            {"channels": [4], "kernel_sizes": [5], "strides": [3], "paddings": [2], "use_maxpool": True},
            (16, 16),
        ),
        ({"channels": [4, 4], "kernel_sizes": [3, 2], "strides": [1, 2], "paddings": [1, 0]}, (9, 10)),
    ],
)
def test_conv_out_resolution_and_size_match_a_real_forward(kw, hw):
    m = Conv2dModel(2, **kw)
    if kw.get("use_maxpool"):
        pools = [x for x in m.conv if isinstance(x, nn.MaxPool2d)]
        assert len(pools) == sum(s > 1 for s in kw["strides"])
        assert all(c.stride == (1, 1) for c in m.conv if isinstance(c, nn.Conv2d))
    y = m(torch.randn(3, 2, *hw))
    assert tuple(y.shape[-2:]) == m.conv_out_resolution(*hw)
    assert y[0].numel() == m.conv_out_size(*hw)


def test_conv2d_head_model_output_size():
    m = Conv2dHeadModel((1, 8, 8), [4], [3], [1], hidden_sizes=[16], output_size=5)
    assert m.output_size == 5
    assert m(torch.randn(2, 1, 8, 8)).shape == (2, 5)
    assert m(torch.randn(3, 2, 1, 8, 8)).shape == (3, 2, 5)  # extra leading dims folded
    m2 = Conv2dHeadModel((1, 8, 8), [4], [3], [1], hidden_sizes=[16, 7])
    assert m2.output_size == 7 and m2(torch.randn(2, 1, 8, 8)).shape == (2, 7)
    m3 = Conv2dHeadModel((1, 8, 8), [4], [3], [1], hidden_sizes=None)
    assert isinstance(m3.head, nn.Identity)
    assert m3.output_size == 4 * 6 * 6 and m3(torch.randn(2, 1, 8, 8)).shape == (2, 144)
    with pytest.raises(ValueError):
        Conv2dHeadModel((1, 4, 4), [4, 4], [3, 3], [2, 2], hidden_sizes=[4])


# ---------------------------------------------------------------------------- visual policies
VIS_SEGMENTS = OrderedDict([("vel", (2,)), ("forward_depth", (1, 8, 8)), ("cmd", (3,))])
VIS_KW = {
    "visual_kwargs": {"channels": [4], "kernel_sizes": [3], "strides": [2], "hidden_sizes": [8]},
    "visual_latent_size": 6,
}


@pytest.mark.parametrize("cls", [VisualDeterministicAC, VisualDeterministicRecurrent])
def test_visual_latent_replaces_only_the_actor_image(cls):
    torch.manual_seed(0)
    critic_segments = OrderedDict([*VIS_SEGMENTS.items(), ("mass", (1,))])
    kw = {"rnn_type": "gru", "rnn_hidden_size": 8} if cls is VisualDeterministicRecurrent else {}
    with pytest.warns(UserWarning, match="critic"):
        ac = cls(
            69,
            70,
            2,
            [8],
            [8],
            obs_segments=VIS_SEGMENTS,
            privileged_obs_segments=critic_segments,
            **VIS_KW,
            **kw,
        )
    enc = ac.visual_encoder
    assert isinstance(enc, Conv2dHeadModel) and enc.output_size == 6
    obs = torch.randn(4, 69)
    critic = torch.randn(4, 70)
    with torch.no_grad():
        embedded = ac.embed_visual_latent(obs)
        expected = torch.cat([obs[:, :2], enc(obs[:, 2:66].reshape(4, 1, 8, 8)), obs[:, 66:]], -1)
        torch.testing.assert_close(embedded, expected)
        if ac.is_recurrent:
            assert ac.memory_a.rnn.input_size == 2 + 6 + 3
            assert ac.memory_c.rnn.input_size == 70
            torch.testing.assert_close(
                ac.evaluate(critic[None], hidden_states=torch.zeros(1, 4, 8))[0],
                ac.critic(ac.memory_c(critic[None], None, torch.zeros(1, 4, 8))[0]),
            )
        else:
            assert ac.actor[0].in_features == 11
            assert ac.critic[0].in_features == 70
            torch.testing.assert_close(ac.evaluate(critic), ac.critic(critic))
        ac.reset()
        a1 = ac.act_inference(obs).clone()
        ac.reset()
        a2 = ac.act_with_embedded_latent(embedded).clone()
    torch.testing.assert_close(a1, a2)


def test_visual_component_must_be_an_image():
    with pytest.raises(ValueError):
        VisualDeterministicAC(69, 69, 2, [8], [8], obs_segments=VIS_SEGMENTS, visual_component_name="cmd")


def test_visual_default_kwargs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac = VisualDeterministicAC(69, 69, 2, [8], [8], obs_segments=VIS_SEGMENTS, visual_latent_size=4)
    convs = [m for m in ac.visual_encoder.conv.conv if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 64]
    assert [c.kernel_size for c in convs] == [(3, 3), (3, 3)] and [c.stride for c in convs] == [
        (1, 1),
        (1, 1),
    ]
    head = [m for m in ac.visual_encoder.head.model if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in head] == [(64 * 4 * 4, 256), (256, 4)]


# ---------------------------------------------------------------------------- normalisers
def test_normalize_unit_norm():
    x = torch.tensor([[3.0, 4.0], [0.0, -2.0]])
    y = Normalize()(x)
    torch.testing.assert_close(y, torch.tensor([[0.6, 0.8], [0.0, -1.0]]))
    z = Normalize()(torch.randn(3, 5, 7))
    torch.testing.assert_close(z.norm(dim=-1), torch.ones(3, 5))


def test_running_mean_std_merges_to_the_joined_stats():
    rng = np.random.default_rng(0)
    a = rng.normal(2.0, 3.0, size=(50, 3))
    b = rng.normal(-1.0, 0.5, size=(30, 3))
    rms = RunningMeanStd(epsilon=1e-12, shape=(3,))
    rms.update(a)
    rms.update(torch.as_tensor(b))
    joined = np.concatenate([a, b])
    np.testing.assert_allclose(rms.mean, joined.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var, joined.var(0), rtol=1e-9)
    assert rms.count == pytest.approx(80.0)
    # with the default epsilon the prior (mean 0, var 1) counts as a pseudo-sample of weight 1e-4
    rms2 = RunningMeanStd(shape=(3,))
    rms2.update(a)
    eps, n = 1e-4, 50
    mean_a, var_a = a.mean(0), a.var(0)
    np.testing.assert_allclose(rms2.mean, n * mean_a / (eps + n), rtol=1e-12)
    np.testing.assert_allclose(
        rms2.var, (eps + n * var_a + mean_a**2 * eps * n / (eps + n)) / (eps + n), rtol=1e-12
    )


def test_running_mean_std_hand_values():
    rms = RunningMeanStd(epsilon=1e-12, shape=())
    rms.update(np.array([1.0, 3.0]))
    rms.update(np.array([5.0]))
    assert rms.mean == pytest.approx(3.0)
    assert rms.var == pytest.approx(8.0 / 3.0)


def test_normalizer_clips_and_numpy_and_torch_agree():
    norm = Normalizer(2, epsilon=1e-4, clip_obs=2.0)
    norm.mean = np.array([1.0, -1.0])
    norm.var = np.array([4.0, 0.25])
    x = np.array([[3.0, -1.0], [100.0, -100.0], [1.0, 0.0]])
    expected = np.clip((x - norm.mean) / np.sqrt(norm.var + 1e-4), -2.0, 2.0)
    np.testing.assert_allclose(expected[1], [2.0, -2.0])
    np.testing.assert_allclose(norm.normalize(x), expected)
    t = norm.normalize_torch(torch.as_tensor(x, dtype=torch.float32))
    assert t.dtype == torch.float32
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(norm.mean, [1.0, -1.0])  # no update by default
    np.testing.assert_allclose(norm.var, [4.0, 0.25])


def test_normalizer_update_flag_updates_statistics():
    norm = Normalizer(2, epsilon=1e-12, clip_obs=100.0)
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    y = norm.normalize_torch(x, update=True)
    np.testing.assert_allclose(norm.mean, [2.0, 4.0], rtol=1e-9)
    np.testing.assert_allclose(norm.var, [1.0, 4.0], rtol=1e-9)
    torch.testing.assert_close(y, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]))


def test_normalizer_update_normalizer_and_state_dict_round_trip():
    norm = Normalizer(3, epsilon=1e-12)
    rollouts = [np.ones((4, 3)), np.full((4, 3), 3.0)]
    expert = [(np.full((8, 3), 2.0), "label")]
    norm.update_normalizer(rollouts, expert)
    np.testing.assert_allclose(norm.mean, [2.0] * 3, rtol=1e-9)
    np.testing.assert_allclose(norm.var, [0.5] * 3, rtol=1e-9)
    state = norm.state_dict()
    other = Normalizer(3, epsilon=1e-12)
    other.load_state_dict(state)
    x = np.random.default_rng(1).normal(size=(5, 3))
    np.testing.assert_array_equal(other.normalize(x), norm.normalize(x))
    assert other.count == norm.count
    state["mean"][0] = 99.0  # the state dict is a copy
    assert norm.mean[0] == pytest.approx(2.0)
