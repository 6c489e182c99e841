"""The import paths, names and signatures reference (st_gym / legged_gym / parkour) code uses.

Imports of every reference module path, the obs-layout helpers and ``ActorCriticRecurrent`` called
positionally and with the reference's keywords, the estimator/encoder default nonlinearity, ``PPO.update``
results usable as the reference's tensors and as floats, the estimator algorithm's attributes and the storage
minibatch hook with the reference's four arguments.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pickle
from collections import OrderedDict
from typing import Any

import pytest
import torch
import torch.nn as nn
from utils.reference_fixtures import flat_size, legged_segments, part_kwargs, rollout

from st_rl.algorithms import PPO, EstimatorPPO
from st_rl.storage import RolloutStorage

SEGMENTS: Any = OrderedDict([("lin_vel", (3,)), ("dof_pos", (2,)), ("height", (1, 2, 2))])


# ---------------------------------------------------------------------------------------------- imports
def test_st_rl_utils_exports_the_reference_helpers():
    from st_rl.utils import (
        get_obs_slice,
        get_subobs_by_components,
        get_subobs_size,
        split_and_pad_trajectories,
        store_code_state,
        substitute_estimated_state,
        unpad_trajectories,
        utils,
    )

    assert unpad_trajectories is utils.unpad_trajectories
    assert split_and_pad_trajectories is utils.split_and_pad_trajectories
    assert store_code_state is utils.store_code_state
    assert get_obs_slice(SEGMENTS, "height") == (slice(5, 9), (1, 2, 2))
    assert get_subobs_size(SEGMENTS, ["lin_vel", "height"]) == 7
    x = torch.arange(9.0).expand(2, 9)
    assert get_subobs_by_components(x, ["dof_pos"], SEGMENTS).tolist() == [[3.0, 4.0]] * 2
    substitute_estimated_state(x.clone(), ["dof_pos"], torch.zeros(2, 2), SEGMENTS)
    dones = torch.tensor([[0, 1, 0], [0, 0, 0]], dtype=torch.bool).T  # (T=3, N=2)
    traj = torch.randn(3, 2, 4)
    padded, masks = split_and_pad_trajectories(traj, dones)
    torch.testing.assert_close(unpad_trajectories(padded, masks), traj)


REFERENCE_MODULES = {
    "st_rl.modules.state_estimator": [
        "EstimatorActorHiddenState",
        "EstimatorMixin",
        "StateAc",
        "StateAcRecurrent",
    ],
    "st_rl.modules.state_adaptor": [
        "AdaptorActorHiddenState",
        "PrivilegeEstimatorMixin",
        "PrivilegeStateAc",
        "PrivilegeStateAcRecurrent",
    ],
    "st_rl.modules.actor_critic": ["ActorCritic", "Actor", "Critic", "SimpleActorCritic"],  # seed 003's names
    "st_rl.modules.encoder_actor_critic": [
        "EncoderActorCriticMixin",
        "EncoderActorCritic",
        "EncoderActorCriticRecurrent",
        "EncoderAmpActorCriticRecurrent",
    ],
    "st_rl.modules.visual_actor_critic": [
        "VisualActorCriticMixin",
        "VisualDeterministicAC",
        "VisualDeterministicRecurrent",
    ],
    "st_rl.modules.deterministic_policy": ["DeterministicPolicyMixin"],
    "st_rl.modules.all_mixer": ["EncoderStateAc", "EncoderStateAcRecurrent"],
    "st_rl.modules.actor_critic_field_mutex": ["ActorCriticFieldMutex", "ActorCriticClimbMutex"],
    "st_rl.modules.actor_critic_recurrent": [
        "ActorCriticRecurrent",
        "ActorCriticHiddenState",
        "LstmHiddenState",
        "Memory",
    ],
    "st_rl.datasets.dagger_saver": ["DaggerSaver"],
    "st_rl.algorithms.appo": ["APPO", "ATPPO", "APPOAlgoMixin", "GET_PROB_FUNC"],
    "st_rl.algorithms.estimator": ["EstimatorAlgoMixin", "EstimatorPPO", "EstimatorTPPO"],
    "st_rl.utils.collections": [
        "namedarraytuple",
        "is_namedarraytuple",
        "is_namedtuple",
        "namedarraytuple_like",
        "AttrDict",
        "NamedTupleSchema",
        "NamedTuple",
        "NamedArrayTupleSchema",
        "NamedArrayTuple",
    ],
}


@pytest.mark.parametrize("module", sorted(REFERENCE_MODULES))
def test_reference_module_paths_export_the_reference_names(module):
    mod = importlib.import_module(module)
    for name in REFERENCE_MODULES[module]:
        assert hasattr(mod, name), f"{module} lacks {name}"
    if module.startswith("st_rl.modules."):
        import st_rl.modules as modules

        for name in REFERENCE_MODULES[module]:
            if hasattr(modules, name):
                assert getattr(mod, name) is getattr(modules, name)


def test_reference_module_aliases_are_thin():
    """Alias modules are listed in st_rl/compat.py and define nothing of their own."""
    from st_rl.compat import REFERENCE_NAMES

    listed = {name.partition(":")[0] for name in REFERENCE_NAMES}
    for module in [m for m in REFERENCE_MODULES if m not in ("st_rl.utils.collections",)]:
        assert module in listed, module
    for module in ["state_estimator", "state_adaptor", "encoder_actor_critic", "visual_actor_critic",
                   "deterministic_policy", "all_mixer", "actor_critic_field_mutex"]:  # fmt: skip
        mod = importlib.import_module(f"st_rl.modules.{module}")
        for name in mod.__all__:
            assert getattr(mod, name).__module__ != mod.__name__


def test_lstm_hidden_state_is_a_namedarraytuple():
    from st_rl.modules.actor_critic_recurrent import LstmHiddenState
    from st_rl.utils.collections import is_namedarraytuple

    h = LstmHiddenState(torch.zeros(1, 4, 3), torch.ones(1, 4, 3))
    assert is_namedarraytuple(h) and h[:, :2].cell.shape == (1, 2, 3) and "hidden" in h


def test_get_prob_func_from_appo():
    from st_rl.algorithms.appo import GET_PROB_FUNC

    assert GET_PROB_FUNC("linear", 10)(5) == pytest.approx(0.5)
    assert GET_PROB_FUNC("exp", 10)(2) == pytest.approx(0.81)
    assert GET_PROB_FUNC("tanh", 10)(10) == pytest.approx(0.5)


def test_named_tuple_schemas():
    from st_rl.utils.collections import (
        NamedArrayTuple,
        NamedArrayTupleSchema,
        NamedTuple,
        NamedTupleSchema,
        is_namedarraytuple,
        namedarraytuple_like,
    )

    point = NamedTupleSchema("Point", "x y")
    p = point(1, y=2)
    assert isinstance(p, NamedTuple) and (p.x, p.y) == (1, 2) and p._asdict() == {"x": 1, "y": 2}
    assert p._replace(x=5) == (5, 2) and repr(p) == "Point(x=1, y=2)"
    with pytest.raises(AttributeError):
        p.x = 3
    with pytest.raises(ValueError):
        NamedTupleSchema("Bad", ["_x"])
    batch = NamedArrayTupleSchema("Batch", ["obs", "act"])
    b = batch(torch.zeros(4, 2), torch.arange(4.0))
    assert isinstance(b, NamedArrayTuple) and is_namedarraytuple(b)
    assert b[1:3].act.tolist() == [1.0, 2.0] and b.get(1) is b.act and "obs" in b
    b[0] = 7.0
    assert b.obs[0].tolist() == [7.0, 7.0] and b.act[0] == 7.0
    assert b.get_leading_dims() == (4,)
    assert dict(b.items()).keys() == {"obs", "act"}
    restored = pickle.loads(pickle.dumps(b))
    assert isinstance(restored, NamedArrayTuple) and restored._typename == "Batch"
    cls = namedarraytuple_like(batch)
    assert cls._fields == ("obs", "act") and cls.__name__ == "Batch"
    with pytest.raises(ValueError):
        NamedArrayTupleSchema("Bad", ["get"])


# ---------------------------------------------------------------------------------------------- signatures
@pytest.mark.parametrize("name", ["get_subobs_by_components", "substitute_estimated_state"])
@pytest.mark.parametrize("module", ["st_rl.utils", "st_rl.utils.utils", "st_rl.env.layout"])
def test_layout_helpers_take_the_reference_keywords(module, name):
    func = getattr(importlib.import_module(module), name)
    params = list(inspect.signature(func).parameters)
    expected = {
        "get_subobs_by_components": ["observations", "component_names", "obs_segments"],
        "substitute_estimated_state": [
            "observations",
            "target_components",
            "estimated_state",
            "obs_segments",
        ],
    }[name]
    assert params[: len(expected)] == expected  # the reference's names, in its order
    assert "segments" in params  # st_rl's former keyword, still accepted


def test_get_subobs_by_components_positional_and_keywords():
    from st_rl.utils import get_subobs_by_components

    obs = torch.arange(18.0).reshape(2, 9)
    expected = obs[:, 3:9]
    for call in (
        lambda: get_subobs_by_components(obs, ["height", "dof_pos"], SEGMENTS),
        lambda: get_subobs_by_components(obs, component_names=["height", "dof_pos"], obs_segments=SEGMENTS),
        lambda: get_subobs_by_components(
            observations=obs, component_names=["dof_pos", "height"], obs_segments=SEGMENTS
        ),  # fmt: skip
        lambda: get_subobs_by_components(obs, ["height", "dof_pos"], segments=SEGMENTS),
    ):
        torch.testing.assert_close(call(), expected)
    with pytest.raises(TypeError, match="both"):
        get_subobs_by_components(obs, ["dof_pos"], SEGMENTS, segments=SEGMENTS)
    with pytest.raises(TypeError, match="obs_segments"):
        get_subobs_by_components(obs, ["dof_pos"])


def test_substitute_estimated_state_positional_and_keywords():
    from st_rl.utils import substitute_estimated_state

    est = torch.full((2, 3), -1.0)
    for call in (
        lambda o: substitute_estimated_state(o, ["lin_vel"], est, SEGMENTS),
        lambda o: substitute_estimated_state(
            o, target_components=["lin_vel"], estimated_state=est, obs_segments=SEGMENTS
        ),  # fmt: skip
        lambda o: substitute_estimated_state(o, ["lin_vel"], est, segments=SEGMENTS),
    ):
        obs = torch.zeros(2, 9)
        out = call(obs)
        assert out is obs and obs[:, :3].eq(-1).all() and obs[:, 3:].eq(0).all()
    with pytest.raises(TypeError):
        substitute_estimated_state(torch.zeros(2, 9), ["lin_vel"], est)


REFERENCE_ACR_PARAMS = [
    ("num_actor_obs", inspect.Parameter.empty),
    ("num_critic_obs", inspect.Parameter.empty),
    ("num_actions", inspect.Parameter.empty),
    ("actor_hidden_dims", [256, 256, 256]),
    ("critic_hidden_dims", [256, 256, 256]),
    ("activation", "elu"),
    ("rnn_type", "lstm"),
    ("rnn_hidden_size", 256),
    ("rnn_num_layers", 1),
    ("init_noise_std", 1.0),
]


def test_actor_critic_recurrent_signature_is_the_references():
    from st_rl.modules import ActorCriticRecurrent

    params = list(inspect.signature(ActorCriticRecurrent).parameters.values())
    got = [(p.name, p.default) for p in params[: len(REFERENCE_ACR_PARAMS)]]
    normalised = [(n, list(d) if isinstance(d, tuple) else d) for n, d in got]
    assert normalised == REFERENCE_ACR_PARAMS
    assert params[-1].kind is inspect.Parameter.VAR_KEYWORD


def test_actor_critic_recurrent_positional_order():
    from st_rl.modules import ActorCriticRecurrent

    ac = ActorCriticRecurrent(10, 12, 3, [32], [16], "tanh", "gru", 24, 2, 0.5)
    assert isinstance(ac.memory_a.rnn, nn.GRU)
    assert (ac.memory_a.rnn.hidden_size, ac.memory_a.rnn.num_layers) == (24, 2)
    assert ac.std.detach().tolist() == [0.5] * 3
    assert ac.actor[0].in_features == 24 and ac.actor[0].out_features == 32
    assert ac.critic[0].out_features == 16 and isinstance(ac.actor[1], nn.Tanh)
    # keyword callers (st_rl configs, the reference's keywords) keep working
    kw = ActorCriticRecurrent(num_actor_obs=10, num_critic_obs=12, num_actions=3, init_noise_std=0.3,
                              rnn_type="lstm", rnn_hidden_size=8, actor_hidden_dims=[4],
                              critic_hidden_dims=[4], mu_activation="tanh")  # fmt: skip
    assert isinstance(kw.memory_c.rnn, nn.LSTM) and kw.std.detach().tolist() == pytest.approx([0.3] * 3)
    assert isinstance(kw.actor[-1], nn.Tanh)
    with torch.no_grad():
        assert ac.act(torch.randn(5, 10)).shape == (5, 3)
        assert ac.evaluate(torch.randn(5, 12)).shape == (5, 1)


def test_recurrent_presets_share_the_positional_order():
    from st_rl.modules import StateAcRecurrent

    segs = OrderedDict([("a", (3,)), ("b", (2,))])
    ac = StateAcRecurrent(5, 5, 2, [8], [8], "elu", "gru", 6, 1, 0.7, obs_segments=segs,
                          estimator_obs_components=["a"], estimator_target_components=["b"])  # fmt: skip
    assert isinstance(ac.memory_a.rnn, nn.GRU) and ac.memory_a.rnn.hidden_size == 6
    assert ac.std.detach().tolist() == pytest.approx([0.7, 0.7])


def _activation_kinds(module: nn.Module) -> set[type]:
    return {type(m) for m in module.modules() if not isinstance(m, (nn.Linear, nn.Sequential))}


@pytest.mark.parametrize("recurrent", [False, True])
def test_estimator_default_nonlinearity_is_relu_not_the_policy_activation(recurrent):
    from st_rl.modules import StateAc, StateAcRecurrent

    segs = OrderedDict([("a", (3,)), ("b", (2,))])
    cls: Any = StateAcRecurrent if recurrent else StateAc
    ac = cls(5, 5, 2, [8], [8], "elu", obs_segments=segs, estimator_obs_components=["a"],
             estimator_target_components=["b"], estimator_kwargs={"hidden_sizes": [4]})  # fmt: skip
    kinds = _activation_kinds(ac.estimator)
    assert nn.ReLU in kinds and nn.ELU not in kinds
    assert nn.ELU in _activation_kinds(ac.actor)  # the policy keeps its activation
    custom = cls(5, 5, 2, [8], [8], "elu", obs_segments=segs, estimator_obs_components=["a"],
                 estimator_target_components=["b"], estimator_kwargs={"nonlinearity": "tanh"})  # fmt: skip
    assert nn.Tanh in _activation_kinds(custom.estimator)


def test_adaptor_default_nonlinearity_is_relu():
    from st_rl.modules import PrivilegeStateAcRecurrent

    segs = OrderedDict([("a", (3,)), ("b", (2,)), ("c", (1,))])
    ac = PrivilegeStateAcRecurrent(6, 6, 2, [8], [8], "elu", obs_segments=segs,
                                   estimator_obs_components=["a"], estimator_target_components=["b"],
                                   adaptor_obs_components=["a"], adaptor_target_components=["c"])  # fmt: skip
    kinds = _activation_kinds(ac.adaptor)
    assert nn.ReLU in kinds and nn.ELU not in kinds


# ---------------------------------------------------------------------------------------------- item 8
N, T = 6, 5
EST_SEGMENTS, EST_CRITIC = legged_segments([("base_lin_vel", (3,)), ("dof_pos", (4,))], (1, 3, 3))
NUM_OBS, NUM_CRITIC = flat_size(EST_SEGMENTS), flat_size(EST_CRITIC)  # 16, 17


def _estimator_alg(recurrent: bool) -> EstimatorPPO:
    from st_rl.modules import StateAc, StateAcRecurrent

    torch.manual_seed(0)
    cls: Any = StateAcRecurrent if recurrent else StateAc
    kwargs = part_kwargs(recurrent=recurrent)
    policy = cls(NUM_OBS, NUM_CRITIC, 2, [16], [16], obs_segments=EST_SEGMENTS,
                 privileged_obs_segments=EST_CRITIC, estimator_obs_components=["dof_pos", "height_measurements"],
                 estimator_target_components=["base_lin_vel"], replace_state_prob=0.5, **kwargs)  # fmt: skip
    alg = EstimatorPPO(policy, num_learning_epochs=2, num_mini_batches=2, estimator_loss_func="l1_loss")
    alg.init_storage(N, T, [NUM_OBS], [NUM_CRITIC], [2])
    return alg


def _rollout(alg: PPO) -> None:
    rollout(alg, N, T, NUM_OBS, NUM_CRITIC, done_steps=(1, 3), seed=1)


@pytest.mark.parametrize("recurrent", [False, True])
def test_update_results_work_as_reference_tensors_and_as_floats(recurrent):
    alg = _estimator_alg(recurrent)
    _rollout(alg)
    losses, stats = alg.update(0)
    assert {"surrogate_loss", "value_loss", "entropy", "estimator_loss", "total_loss"} <= set(losses)
    for value in [*losses.values(), *stats.values()]:
        assert isinstance(value, torch.Tensor) and value.dim() == 0 and value.device.type == "cpu"
        assert isinstance(value.item(), float) and math.isfinite(value.item())
        assert float(value) == value.item()
        assert f"{value:.4f}" == f"{value.item():.4f}"
        assert not value.requires_grad
    # custom runners written for the reference: mean_value_loss = losses["value_loss"].item()
    assert losses["value_loss"].item() >= 0.0


def test_estimator_algorithm_has_the_reference_attributes():
    alg = _estimator_alg(recurrent=True)
    policy: Any = alg.actor_critic
    assert (
        alg.estimator_obs_components == ["dof_pos", "height_measurements"] == policy.estimator_obs_components
    )
    assert alg.estimator_target_obs_components == ["base_lin_vel"] == policy.estimator_target_components
    assert alg.estimator_loss_func == "l1_loss" and alg.estimator_loss_kwargs == {}
    ext: Any = alg.extensions["estimator"]
    assert ext.estimator_obs_components == alg.estimator_obs_components
    assert ext.estimator_target_obs_components == alg.estimator_target_obs_components


def test_estimator_tppo_has_the_reference_attributes(tmp_path):
    from st_rl.algorithms import EstimatorTPPO
    from st_rl.modules import ActorCritic, StateAc
    from st_rl.utils.checkpoint import save_checkpoint

    teacher = ActorCritic(NUM_CRITIC, NUM_CRITIC, 2, [8], [8])
    path = str(tmp_path / "model_1.pt")
    save_checkpoint(path, {"model_state_dict": teacher.state_dict(),
                           "config": {"policy": {"class_name": "ActorCritic", "actor_hidden_dims": [8],
                                                 "critic_hidden_dims": [8]}}})  # fmt: skip
    policy = StateAc(NUM_OBS, NUM_CRITIC, 2, [8], [8], obs_segments=EST_SEGMENTS, privileged_obs_segments=EST_CRITIC,
                     estimator_obs_components=["dof_pos"], estimator_target_components=["base_lin_vel"])  # fmt: skip
    alg = EstimatorTPPO(policy, teacher_policy={"class_name": "ActorCritic", "teacher_ac_path": path,
                                                "actor_hidden_dims": [8], "critic_hidden_dims": [8]})  # fmt: skip
    assert alg.estimator_obs_components == ["dof_pos"]
    assert alg.estimator_target_obs_components == ["base_lin_vel"]


class _HookedStorage(RolloutStorage):
    """A reference-style storage subclass: adds a field to every minibatch through the hook."""

    calls: list[tuple[Any, ...]]

    def get_minibatch_from_indices(self, T_slice, B_slice, padded_B_slice=None, prev_done_mask=None):  # noqa: N803
        self.calls.append((T_slice, B_slice, padded_B_slice, prev_done_mask))
        minibatch = super().get_minibatch_from_indices(T_slice, B_slice, padded_B_slice, prev_done_mask)
        return minibatch._replace(
            env_index=torch.arange(self.num_envs).expand(self.max_length, -1)[T_slice, B_slice]
        )


def test_minibatch_hook_has_the_reference_signature():
    params = list(inspect.signature(RolloutStorage.get_minibatch_from_indices).parameters.values())
    assert [p.name for p in params] == ["self", "T_slice", "B_slice", "padded_B_slice", "prev_done_mask"]
    assert params[3].default is None and params[4].default is None


@pytest.mark.parametrize("recurrent", [False, True])
def test_minibatch_hook_builds_every_minibatch(recurrent):
    alg = _estimator_alg(recurrent)
    storage: Any = alg.storage
    storage.__class__ = _HookedStorage
    storage.calls = []
    _rollout(alg)
    seen = []
    compute_losses = alg.compute_losses

    def recording(minibatch):
        seen.append(minibatch.env_index)
        return compute_losses(minibatch)

    alg.compute_losses = recording  # type: ignore[method-assign]
    alg.update(0)
    assert len(storage.calls) == len(seen) == 4  # 2 epochs x 2 minibatches
    for T_slice, B_slice, padded, prev_done in storage.calls:  # noqa: N806
        if recurrent:
            assert T_slice == slice(None) and isinstance(B_slice, slice) and isinstance(padded, slice)
            assert prev_done.shape == (T, N) and prev_done.dtype == torch.bool and prev_done[0].all()
        else:
            assert padded is None and prev_done is None and T_slice.shape == B_slice.shape == (N * T // 2,)
    if recurrent:  # (T, n_envs) per minibatch, env slices
        assert sorted(tuple(e[0].tolist()) for e in seen[:2]) == [(0, 1, 2), (3, 4, 5)]
    else:  # every sample once per epoch
        assert sorted(torch.cat(seen[:2]).tolist()) == sorted(list(range(N)) * T)


def test_minibatch_hook_outside_a_generator():
    alg = _estimator_alg(recurrent=False)
    _rollout(alg)
    assert alg.storage is not None
    mb = alg.storage.get_minibatch_from_indices(torch.tensor([0, 4]), torch.tensor([1, 2]))
    torch.testing.assert_close(mb.obs, alg.storage.observations[[0, 4], [1, 2]])
    with pytest.raises(RuntimeError, match="recurrent"):
        alg.storage.get_minibatch_from_indices(slice(None), slice(0, 2), slice(0, 2), None)


def test_checkpoints_from_before_the_relu_default_keep_their_activations():
    from st_rl.modules import EncoderStateAc
    from st_rl.modules.actor_critic import DEFAULT_NONLINEARITY_KEY

    segs: Any = OrderedDict([("a", (3,)), ("b", (2,)), ("h", (1, 2, 2))])

    def build(**kw: Any) -> Any:
        torch.manual_seed(0)
        return EncoderStateAc(9, 9, 2, [8], [8], "tanh", obs_segments=segs, estimator_obs_components=["a"],
                              estimator_target_components=["b"], encoder_component_names=["h"], **kw)  # fmt: skip

    new = build()
    state = new.state_dict()
    assert DEFAULT_NONLINEARITY_KEY in state
    fresh = build()
    fresh.load_state_dict(state)  # a current checkpoint: ReLU stays
    assert nn.ReLU in _activation_kinds(fresh.estimator) and nn.ReLU in _activation_kinds(fresh.encoders)
    legacy = {k: v for k, v in state.items() if k != DEFAULT_NONLINEARITY_KEY}
    old = build()
    with pytest.warns(UserWarning, match="predates the ReLU default"):
        old.load_state_dict(legacy)
    assert nn.Tanh in _activation_kinds(old.estimator) and nn.ReLU not in _activation_kinds(old.estimator)
    assert nn.ELU in _activation_kinds(old.encoders) and nn.ReLU not in _activation_kinds(old.encoders)
    # explicit nonlinearities are the user's: nothing to restore and no marker
    explicit = build(estimator_kwargs={"nonlinearity": "relu"}, encoder_kwargs={"nonlinearity": "relu"})
    assert DEFAULT_NONLINEARITY_KEY not in explicit.state_dict()
