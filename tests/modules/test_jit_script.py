"""``torch.jit.script`` on the policy parts a client exporter copies (st_gym's exporter, emulated in
``tests/clients/st_gym_exporter.py``): the actor MLP of every policy family (fp32 and bf16 runs), the memory's
RNN and the observation normalisers. Scripted and ONNX files of trained policies equal the runner's inference
policy on real observations."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn as nn
from clients.st_gym_exporter import (
    build_exporter,
    export_policy_as_jit,
    export_policy_as_onnx,
    onnx_input_names,
)
from conftest import SMALL_CFG

from st_rl.modules.memory import Memory
from st_rl.modules.normalizer import EmpiricalNormalization, Normalize
from st_rl.runners import OnPolicyRunner, build_runner
from st_rl.tasks import make_env

# torch 2.13 marks TorchScript deprecated; deployments still use it.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
]

JIT_TOL = 1e-6
ONNX_TOL = 1e-6
RNN = {"actor_hidden_dims": [32, 32], "critic_hidden_dims": [32, 32], "rnn_hidden_size": 16}
ENCODER = {
    "encoder_component_names": ["commands"],
    "encoder_kwargs": {"hidden_sizes": [8]},
    "encoder_output_size": 4,
}
# name -> (policy config, precision)
POLICIES: dict[str, tuple[dict[str, Any], str]] = {
    "mlp": ({**SMALL_CFG["policy"]}, "fp32"),
    "mlp_bf16": ({**SMALL_CFG["policy"]}, "bf16"),
    "lstm": ({"class_name": "ActorCriticRecurrent", "rnn_type": "lstm", "rnn_num_layers": 2, **RNN}, "fp32"),
    "gru": ({"class_name": "ActorCriticRecurrent", "rnn_type": "gru", **RNN}, "fp32"),
    "encoder": (
        {
            "class_name": "EncoderActorCritic",
            "actor_hidden_dims": [32],
            "critic_hidden_dims": [32],
            **ENCODER,
        },
        "fp32",
    ),
    "encoder_lstm": (
        {"class_name": "EncoderActorCriticRecurrent", "rnn_type": "lstm", **RNN, **ENCODER},
        "fp32",
    ),
    "encoder_gru_bf16": (
        {"class_name": "EncoderActorCriticRecurrent", "rnn_type": "gru", **RNN, **ENCODER},
        "bf16",
    ),
}
RECURRENT = {"lstm", "gru", "encoder_lstm", "encoder_gru_bf16"}


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _runner(kind: str, precision: str | None = None) -> OnPolicyRunner:
    policy, default_precision = POLICIES[kind]
    cfg = copy.deepcopy(SMALL_CFG)
    cfg.update(task="velocity_tracking", logger="none", policy=copy.deepcopy(policy))
    cfg["algorithm"]["precision"] = precision or default_precision
    env = make_env("velocity_tracking", num_envs=8, seed=0)
    return build_runner("OnPolicyRunner", env, cfg, log_dir=None, device="cpu")


@pytest.fixture(scope="module")
def trained():
    """Runners trained for 2 iterations (non-trivial normaliser statistics), by kind, built on first use."""
    cache: dict[str, OnPolicyRunner] = {}

    def get(kind: str) -> OnPolicyRunner:
        if kind not in cache:
            torch.set_num_threads(1)
            runner = _runner(kind)
            runner.learn(2)
            cache[kind] = runner
        return cache[kind]

    return get


def _forget_memories(runner: OnPolicyRunner) -> None:
    """Drop the rollout hidden states (the next step starts from zeros, for any number of envs)."""
    for module in runner.alg.actor_critic.modules():
        if isinstance(module, Memory):
            module.hidden_states = None


def _max_diff(a: Any, b: Any) -> float:
    a = torch.as_tensor(a, dtype=torch.float32).detach()
    b = torch.as_tensor(b, dtype=torch.float32).detach()
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max())


class _RnnCaller(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


# ---------------------------------------------------------------------------------------------- module level
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("kind", ["mlp", "lstm", "gru", "encoder", "encoder_lstm"])
def test_policy_parts_script(kind, precision):
    """The attributes a client exporter reads exist, and each part it copies scripts and equals its eager
    float32 self (train and eval mode)."""
    runner = _runner(kind, precision)
    assert runner.alg.precision == precision
    policy = runner.alg.actor_critic
    recurrent = kind in RECURRENT
    assert policy.is_recurrent is recurrent
    assert policy.rnn_type == ("lstm" if "lstm" in kind else "gru" if "gru" in kind else None)
    first = policy.actor[0]
    assert isinstance(first, nn.Linear)
    width = first.in_features
    if recurrent:
        assert isinstance(policy.memory_a.rnn, nn.LSTM if policy.rnn_type == "lstm" else nn.GRU)
        assert width == policy.memory_a.rnn.hidden_size
    if kind.startswith("encoder"):
        assert policy.encoders[0].output_size == 4
    x = torch.randn(5, width)
    for train in (True, False):
        policy.train(train)
        scripted = torch.jit.script(policy.actor)
        with torch.no_grad():
            assert _max_diff(scripted(x), policy.actor(x)) <= JIT_TOL
    if precision == "bf16":
        # Eager mode is unchanged: under autocast the hidden layers run in bfloat16, the output in float32.
        with torch.no_grad(), runner.alg.autocast():
            mixed = policy.actor(x)
        assert mixed.dtype == torch.float32
        assert 0 < _max_diff(mixed, policy.actor(x)) < 0.05
    if recurrent:
        # A bare scripted nn.LSTM/GRU has no forward (TorchScript compiles its overloaded forward at a call
        # site), so it is scripted inside a module that calls it, as an exporter does.
        rnn = policy.memory_a.rnn
        scripted_rnn = torch.jit.script(_RnnCaller(rnn))
        seq = torch.randn(3, 2, rnn.input_size)
        with torch.no_grad():
            assert _max_diff(scripted_rnn(seq), rnn(seq)[0]) <= JIT_TOL
    if kind.startswith("encoder"):
        encoder = policy.encoders[0]
        scripted_encoder = torch.jit.script(encoder)
        z = torch.randn(4, 2)
        with torch.no_grad():
            assert _max_diff(scripted_encoder(z), encoder(z)) <= JIT_TOL


def test_scripted_normalizer_applies_frozen_statistics(tmp_path):
    """A scripted EmpiricalNormalization only normalises, in training mode too; eager mode still updates."""
    norm = EmpiricalNormalization(2, eps=0.25, until=100)
    norm.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
    # Population moments of the batch: mean (2, 4), variance (1, 4), so std (1, 2); std + eps = (1.25, 2.25).
    assert torch.equal(norm.mean, torch.tensor([2.0, 4.0]))
    assert torch.equal(norm.std, torch.tensor([1.0, 2.0]))
    x = torch.tensor([[3.25, 8.5], [0.75, -0.5]])
    # (3.25 - 2) / 1.25 = 1, (8.5 - 4) / 2.25 = 2; (0.75 - 2) / 1.25 = -1, (-0.5 - 4) / 2.25 = -2
    expected = torch.tensor([[1.0, 2.0], [-1.0, -2.0]])
    state = {k: v.clone() for k, v in norm.state_dict().items()}
    for training in (True, False):
        norm.train(training)
        path = str(tmp_path / f"norm_{training}.pt")
        torch.jit.script(norm).save(path)
        scripted = torch.jit.load(path)
        assert scripted.training is training
        for _ in range(3):
            assert _max_diff(scripted(x), expected) <= JIT_TOL
            scripted(torch.randn(7, 2) * 10 + 3)  # another batch: still no update
        after = scripted.state_dict()
        assert all(torch.equal(after[k], v) for k, v in state.items()), after
        assert all(torch.equal(norm.state_dict()[k], v) for k, v in state.items())
    # Eager behaviour is unchanged: training mode updates (count 2 -> 4), eval mode does not.
    norm.train()
    norm(x)
    # x has the same mean (2, 4) but a larger spread: the standard deviation grows.
    assert int(norm.count) == 4 and bool((norm.std > state["_std"].squeeze(0)).all())
    norm.eval()
    before = norm.std
    norm(x)
    assert int(norm.count) == 4 and torch.equal(norm.std, before)


def test_normalize_scripts():
    x = torch.tensor([[3.0, 4.0], [0.0, -2.0]])
    scripted = torch.jit.script(Normalize())
    assert _max_diff(scripted(x), torch.tensor([[0.6, 0.8], [0.0, -1.0]])) <= JIT_TOL


# ---------------------------------------------------------------------------------- exported trained policies
def _drive(runner: OnPolicyRunner, num_envs: int, steps: int, step_fn) -> float:
    """Step a fresh environment with the eager inference policy; ``step_fn(obs, ref)`` returns the largest
    difference of the exported policy from ``ref`` at this step. Returns the largest over all steps."""
    policy = runner.get_inference_policy()
    _forget_memories(runner)
    env = make_env("velocity_tracking", num_envs=num_envs, seed=5)
    obs = env.get_observations()[0]
    worst = 0.0
    for _ in range(steps):
        with torch.no_grad():
            ref = policy(obs)
        assert float(ref.abs().max()) > 1e-3  # real actions
        worst = max(worst, step_fn(obs, ref))
        obs = env.step(ref)[0]
    return worst


@pytest.mark.parametrize("kind", list(POLICIES))
def test_jit_export_matches_inference_policy(kind, trained, tmp_path):
    runner = trained(kind)
    runner.train_mode()  # the copied normaliser is in training mode: the scripted one must not update
    policy, normalizer = runner.alg.actor_critic, runner.alg.obs_normalizer
    assert isinstance(normalizer, EmpiricalNormalization) and normalizer.training
    assert int(normalizer.count) > 0
    stats = {k: v.clone() for k, v in normalizer.state_dict().items()}
    path = export_policy_as_jit(policy, normalizer, str(tmp_path / "exported"))
    scripted = torch.jit.load(path)
    assert scripted.normalizer.training
    recurrent = kind in RECURRENT
    assert scripted.is_recurrent is recurrent and scripted.rnn_type == policy.rnn_type

    def step(obs: torch.Tensor, ref: torch.Tensor) -> float:
        with torch.no_grad():
            return _max_diff(scripted(obs), ref)

    # Feed-forward files take any batch; recurrent ones keep one robot's memory in buffers.
    worst = _drive(runner, 1 if recurrent else 8, 8, step)
    assert worst <= JIT_TOL, worst
    print(f"{kind}: TorchScript max |diff| = {worst:.3g}")
    scripted_stats = {
        k[len("normalizer.") :]: v for k, v in scripted.state_dict().items() if "normalizer." in k
    }
    assert scripted_stats.keys() == stats.keys()
    assert all(torch.equal(scripted_stats[k], v) for k, v in stats.items())
    if recurrent:
        # The carried state is the eager memory's, and not trivially zero.
        memory = policy.memory_a.hidden_states
        eager_h = memory.hidden if policy.rnn_type == "lstm" else memory
        assert _max_diff(scripted.hidden_state, eager_h) <= JIT_TOL and float(eager_h.abs().max()) > 1e-3
        if policy.rnn_type == "lstm":
            assert _max_diff(scripted.cell_state, memory.cell) <= JIT_TOL
        # reset_memory starts over: the same actions as a fresh eager memory.
        scripted.reset_memory()
        assert _drive(runner, 1, 3, step) <= JIT_TOL


@pytest.mark.parametrize("kind", list(POLICIES))
def test_onnx_export_matches_inference_policy(kind, trained, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    runner = trained(kind)
    policy, normalizer = runner.alg.actor_critic, runner.alg.obs_normalizer
    path = export_policy_as_onnx(policy, str(tmp_path / "exported"), normalizer=normalizer)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs, outputs = onnx_input_names(policy)
    assert [i.name for i in session.get_inputs()] == inputs
    assert [o.name for o in session.get_outputs()] == outputs
    assert session.get_inputs()[0].shape == [1, policy.num_actor_obs]
    exporter = build_exporter(policy, normalizer)
    states = [
        getattr(exporter, name).numpy().copy() for name in ("hidden_state", "cell_state")[: len(inputs) - 1]
    ]

    def step(obs: torch.Tensor, ref: torch.Tensor) -> float:
        out = session.run(None, dict(zip(inputs, [obs.numpy(), *states])))
        states[:] = out[1:]  # carried to the next step
        return _max_diff(out[0], ref)

    worst = _drive(runner, 1, 8, step)
    assert worst <= ONNX_TOL, worst
    print(f"{kind}: ONNX max |diff| = {worst:.3g}")
    if kind in RECURRENT:
        memory = policy.memory_a.hidden_states
        eager_h = memory.hidden if policy.rnn_type == "lstm" else memory
        assert _max_diff(states[0], eager_h) <= ONNX_TOL and float(np.abs(states[0]).max()) > 1e-3
