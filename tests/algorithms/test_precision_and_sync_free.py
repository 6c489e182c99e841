"""PPO's ``precision`` option (bfloat16 autocast of the policy's forward passes) and its sync-free update
(device-side non-finite checks and adaptive learning rate, forced on here on the CPU)."""

import pytest
import torch

import st_rl.utils.precision as precision_module
from st_rl.algorithms import PPO, NonFiniteLossError
from st_rl.algorithms import functional as F
from st_rl.modules import ActorCritic, ActorCriticRecurrent
from st_rl.modules.memory import Memory
from st_rl.utils.precision import (
    CPU_BF16_MIN_MACS,
    autocast,
    autocast_enabled,
    full_precision,
    has_fast_bf16,
    linear_macs,
    measure_precision,
    resolve_precision,
)

NUM_OBS, NUM_CRITIC, NUM_ACT, N, T = 6, 7, 3, 8, 6


def make_ppo(seed=0, recurrent=False, **kwargs):
    torch.manual_seed(seed)
    if recurrent:
        ac = ActorCriticRecurrent(
            NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[16], critic_hidden_dims=[16], rnn_type="lstm",
            rnn_hidden_size=8,
        )  # fmt: skip
    else:
        ac = ActorCritic(
            NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[16, 16], critic_hidden_dims=[16, 16]
        )
    kwargs = {"num_learning_epochs": 2, "num_mini_batches": 2, "schedule": "adaptive", **kwargs}
    ppo = PPO(ac, **kwargs)
    ppo.init_storage(N, T, [NUM_OBS], [NUM_CRITIC], [NUM_ACT])
    return ppo


def collect(ppo, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        for _ in range(T):
            ppo.act(torch.randn(N, NUM_OBS, generator=g), torch.randn(N, NUM_CRITIC, generator=g))
            dones = torch.rand(N, generator=g) < 0.2
            ppo.process_env_step(torch.randn(N, generator=g), dones, {"time_outs": dones})
        ppo.compute_returns(torch.randn(N, NUM_CRITIC, generator=g))


def snapshot(ppo):
    params = [p.detach().clone() for p in ppo.actor_critic.parameters()]
    opt = {id(p): {k: v.clone() for k, v in st.items()} for p, st in ppo.optimizer.state.items()}
    return params, opt


# ------------------------------------------------------------------ precision
def test_resolve_precision():
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("auto", "cpu") == ("bf16" if has_fast_bf16("cpu") else "fp32")
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ValueError, match="precision must be one of"):
        make_ppo(precision="half")


def test_no_bf16_where_torch_runs_without_avx512_kernels(monkeypatch):
    # ATEN_CPU_CAPABILITY=avx2 on an AVX512-BF16 CPU: the flags are there, the kernels are not
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    precision_module._cpu_has_fast_bf16.cache_clear()
    try:
        assert not has_fast_bf16("cpu")
        assert resolve_precision("auto", "cpu") == "fp32"
    finally:
        precision_module._cpu_has_fast_bf16.cache_clear()


def test_linear_macs_counts_every_linear_layer():
    ac = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[16, 16], critic_hidden_dims=[16, 16])
    actor = NUM_OBS * 16 + 16 * 16 + 16 * NUM_ACT
    critic = NUM_CRITIC * 16 + 16 * 16 + 16 * 1
    assert linear_macs(ac) == actor + critic == 784


@pytest.mark.parametrize(("envs", "expected"), [(8, "fp32"), (80_000, "bf16")])
def test_auto_on_a_bf16_cpu_picks_bf16_from_the_measured_size(monkeypatch, capsys, envs, expected):
    monkeypatch.setattr(precision_module, "_cpu_has_fast_bf16", lambda: True)
    torch.manual_seed(0)
    ac = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[16, 16], critic_hidden_dims=[16, 16])
    ppo = PPO(ac, num_learning_epochs=1, num_mini_batches=2)
    assert ppo.precision == "bf16"  # the hardware's candidate, before the minibatch size is known
    ppo.init_storage(envs, 6, [NUM_OBS], [NUM_CRITIC], [NUM_ACT])
    # 784 multiply-adds per sample; minibatches of 24 and 240,000 samples around CPU_BF16_MIN_MACS
    assert (envs * 6 // 2 * 784 >= CPU_BF16_MIN_MACS) == (expected == "bf16")
    assert ppo.precision == expected
    assert f"[st_rl] precision auto: {expected} (" in capsys.readouterr().out


def test_explicit_precision_is_kept(monkeypatch):
    monkeypatch.setattr(precision_module, "_cpu_has_fast_bf16", lambda: True)
    assert make_ppo(precision="bf16").precision == "bf16"  # a tiny policy: auto would pick fp32
    assert make_ppo(precision="auto").precision == "fp32"


def test_measure_precision_picks_bf16_only_when_clearly_faster(monkeypatch):
    for fp32_s, bf16_s, expected in [
        (1.0, 0.5, "bf16"),
        (1.0, 0.8, "bf16"),
        (1.0, 0.85, "fp32"),
        (1.0, 2.0, "fp32"),
    ]:
        calls = []

        def timed(step, device, fp32_s=fp32_s, bf16_s=bf16_s, calls=calls):
            calls.append(autocast_enabled("cpu"))
            return bf16_s if autocast_enabled("cpu") else fp32_s

        monkeypatch.setattr(precision_module, "_timed", timed)
        assert measure_precision(lambda: None, "cpu", repeats=3) == (expected, fp32_s, bf16_s)
        assert calls == [False, True] * 4  # one warm-up each, then alternating


def test_gpu_style_timing_runs_on_a_copy_of_the_policy(monkeypatch):
    ppo = make_ppo(precision="fp32")
    before = [p.detach().clone() for p in ppo.actor_critic.parameters()]
    monkeypatch.setattr(
        precision_module, "_timed", lambda step, device: (step(), 0.4 if autocast_enabled("cpu") else 1.0)[1]
    )
    choice, found = ppo._time_precisions(32, (NUM_OBS,), (NUM_CRITIC,))
    assert choice == "bf16" and "fp32 1000.0 ms, bf16 400.0 ms" in found
    assert all(torch.equal(a, b) for a, b in zip(before, ppo.actor_critic.parameters()))
    assert all(p.grad is None for p in ppo.actor_critic.parameters())


def test_bf16_runs_the_matrix_products_in_bfloat16_and_returns_float32():
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    with autocast("cpu", "bf16"):
        y = lin(x)
    assert y.dtype == torch.bfloat16
    assert full_precision(y).dtype == torch.float32
    with autocast("cpu", "fp32"):
        assert lin(x).dtype == torch.float32
    # the bf16 result is the fp32 one rounded to bfloat16's 8 significant bits (accumulation in fp32)
    torch.testing.assert_close(y.float(), lin(x), rtol=2**-7, atol=1e-3)


@pytest.mark.parametrize(
    "recurrent, bf16_units",
    [(False, True), (True, True), (True, False)],
    ids=["mlp", "lstm", "lstm-cpu-without-bf16-units"],
)
def test_bf16_update_keeps_fp32_state_and_follows_fp32(recurrent, bf16_units, monkeypatch):
    if not bf16_units:  # an older CPU: oneDNN has no bfloat16 LSTM there, the memory must run in float32
        monkeypatch.setattr("st_rl.modules.memory.has_fast_bf16", lambda device: False)
    runs = {}
    for precision in ("fp32", "bf16"):
        ppo = make_ppo(recurrent=recurrent, precision=precision)
        assert ppo.precision == precision
        collect(ppo)
        st = ppo.storage
        assert st is not None
        for field in ("values", "actions_log_prob", "mu", "sigma", "returns", "advantages"):
            assert getattr(st, field).dtype == torch.float32, field
        if recurrent:
            leaves = ppo.actor_critic.get_hidden_states()
            assert all(h.dtype == torch.float32 for pair in leaves for h in pair)
        values = st.values.clone()
        losses, _ = ppo.update()
        assert all(p.dtype == torch.float32 for p in ppo.actor_critic.parameters())
        assert all(
            v.dtype == torch.float32 for s in ppo.optimizer.state.values() for v in s.values() if v.dim() > 0
        )
        assert all(torch.isfinite(v) for v in losses.values())
        runs[precision] = (values, losses, [p.detach().clone() for p in ppo.actor_critic.parameters()])
    # same seed, same data: bf16's rollout values and the updated parameters stay close to fp32's
    torch.testing.assert_close(runs["bf16"][0], runs["fp32"][0], rtol=0.02, atol=0.02)
    for a, b in zip(runs["bf16"][2], runs["fp32"][2]):
        torch.testing.assert_close(a, b, rtol=0.0, atol=1e-2)
    assert runs["bf16"][2][0].ne(runs["fp32"][2][0]).any()  # bf16 did compute differently


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_memory_runs_in_float32_under_bf16_autocast_on_a_cpu_without_bf16_units(kind, monkeypatch):
    torch.manual_seed(0)
    memory = Memory(5, kind, num_layers=1, hidden_size=4)
    x = torch.randn(3, 5)
    expected = memory(x)  # float32, no autocast
    memory.reset()
    monkeypatch.setattr("st_rl.modules.memory.has_fast_bf16", lambda device: False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = memory(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=0)  # the same float32 computation


# ------------------------------------------------------------------ sync-free update
def test_adaptive_learning_rate_tensor_matches_the_float_rule():
    for lr in (1e-5, 3e-4, 1e-2):
        for kl in (0.0, 0.001, 0.0049, 0.005, 0.01, 0.02, 0.0201, 1.0):
            got = F.adaptive_learning_rate_tensor(torch.tensor(lr), torch.tensor(kl), 0.01)
            assert float(got) == pytest.approx(F.adaptive_learning_rate(lr, kl, 0.01), rel=1e-6), (lr, kl)


def test_sync_free_update_matches_the_checked_update():
    runs = []
    for sync_free in (False, True):
        ppo = make_ppo(precision="fp32")
        ppo.set_sync_free(sync_free)
        assert (ppo.guard.lr_tensor is not None) == sync_free  # fused Adam takes a device learning rate
        lrs = []
        for it in range(3):
            collect(ppo, seed=it)
            losses, stats = ppo.update()
            lrs.append(ppo.learning_rate)
        assert isinstance(ppo.learning_rate, float)
        runs.append((lrs, losses, [p.detach().clone() for p in ppo.actor_critic.parameters()]))
    assert runs[0][0] == pytest.approx(runs[1][0], rel=1e-6)
    assert len(set(runs[0][0])) > 1  # the adaptive schedule did move the rate
    for k in runs[0][1]:
        torch.testing.assert_close(runs[0][1][k], runs[1][1][k], rtol=1e-5, atol=1e-6)
    for a, b in zip(runs[0][2], runs[1][2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("first_update", [True, False])
def test_sync_free_non_finite_loss_restores_the_start_of_the_update(monkeypatch, first_update):
    ppo = make_ppo(precision="fp32")
    ppo.set_sync_free(True)
    if not first_update:
        collect(ppo, seed=5)
        ppo.update()
    collect(ppo, seed=6)
    params_before, opt_before = snapshot(ppo)
    lr_before = ppo.learning_rate
    real = ppo.compute_losses
    calls = []

    def poisoned(minibatch):
        losses, inter, stats = real(minibatch)
        calls.append(1)
        if len(calls) == 3:  # the third of four minibatches: two optimizer steps already happened
            losses["value_loss"] = losses["value_loss"] * float("nan")
        return losses, inter, stats

    monkeypatch.setattr(ppo, "compute_losses", poisoned)
    with pytest.raises(
        NonFiniteLossError, match=r"\['value_loss', 'total_loss'\] \(minibatch 3 of 4\).*restored"
    ):
        ppo.update()
    assert len(calls) == 4  # no wait for the device inside the loop: the check comes after it
    params_after, opt_after = snapshot(ppo)
    assert all(torch.equal(a, b) for a, b in zip(params_before, params_after))
    assert opt_after.keys() == opt_before.keys()
    for key, st in opt_before.items():
        assert all(torch.equal(v, opt_after[key][k]) for k, v in st.items())
    assert ppo.learning_rate == lr_before and float(ppo.optimizer.param_groups[0]["lr"]) == pytest.approx(
        lr_before
    )


def test_sync_free_learning_rate_saves_as_float_and_relinks_on_load():
    ppo = make_ppo(precision="fp32")
    ppo.set_sync_free(True)
    collect(ppo)
    ppo.update()
    state = ppo.state_dict()
    saved_lr = state["optimizer_state_dict"]["param_groups"][0]["lr"]
    assert isinstance(saved_lr, float) and saved_lr == ppo.learning_rate
    other = make_ppo(precision="fp32", learning_rate=0.005)
    other.set_sync_free(True)
    other.load_state_dict(state)
    assert other.learning_rate == saved_lr
    assert other.optimizer.param_groups[0]["lr"] is other.guard.lr_tensor and float(
        other.guard.lr_tensor
    ) == pytest.approx(saved_lr)
    plain = make_ppo(precision="fp32")
    plain.load_state_dict(state)
    assert plain.optimizer.param_groups[0]["lr"] == saved_lr


# ------------------------------------------------------------------ compile
def test_compiled_update_matches_eager_and_does_not_recompile(capsys):
    import torch._dynamo

    torch._dynamo.reset()
    runs = []
    for compiled in (False, True):
        ppo = make_ppo(precision="fp32", compile=compiled)
        assert ppo.compiled == compiled
        for it in range(3):
            collect(ppo, seed=it)
            ppo.update()
            if compiled and it == 0:
                frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        runs.append([p.detach().clone() for p in ppo.actor_critic.parameters()])
        assert set(ppo.actor_critic.state_dict()) == set(make_ppo().actor_critic.state_dict())
    # iterations 2 and 3 reuse what the first compiled (rollout batch and minibatch shapes, both grad modes)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames
    assert "torch.compile: the first rollout and update" in capsys.readouterr().out
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
