"""PPO with CUDA graphs (``cuda_graph``): the option and the static minibatch order the update replays on any
machine; where a GPU is lent, the replayed update learns as the eager one (and restores on a non-finite loss,
with at most two host syncs), the replayed rollout step samples and scores as the eager policy, and the
replayed normaliser update keeps the eager statistics."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from graph_emulator import emulate_cuda_graphs

from st_rl.algorithms import PPO
from st_rl.algorithms.cuda_graph import GraphedRollout
from st_rl.algorithms.guard import NonFiniteLossError
from st_rl.modules import ActorCritic
from st_rl.modules.normalizer import NonFiniteObservationError
from st_rl.runners import OnPolicyRunner
from st_rl.storage.rollout_storage import RolloutStorage
from st_rl.tasks import VelocityTracking
from st_rl.utils.config import resolve_train_cfg

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _filled_storage(num_envs: int = 6, steps: int = 4) -> RolloutStorage:
    storage = RolloutStorage(num_envs, steps, [3], [None], [2])
    for buf in storage.buffers.values():
        buf.copy_(torch.randn_like(buf.float()).to(buf.dtype) if buf.is_floating_point() else buf)
    return storage


def test_permutations_give_the_minibatches_of_the_drawn_order():
    storage = _filled_storage()
    torch.manual_seed(0)
    drawn = list(storage.mini_batch_generator(3, 2))
    torch.manual_seed(0)
    perms = torch.stack([torch.randperm(24) for _ in range(2)])
    replayed = list(storage.mini_batch_generator(3, 2, permutations=perms))
    assert len(drawn) == len(replayed) == 6
    for a, b in zip(drawn, replayed):
        assert a.keys() == b.keys()
        for key in sorted(a.keys()):
            if torch.is_tensor(a.get(key)):
                assert torch.equal(a.get(key), b.get(key)), key
    first = perms[0, :8]
    assert torch.equal(replayed[0].obs, storage.observations[first // 6, first % 6])


def test_option_is_checked_and_cpu_runs_eagerly():
    policy = ActorCritic(3, 3, 2, actor_hidden_dims=[8], critic_hidden_dims=[8])
    with pytest.raises(ValueError, match="cuda_graph must be true, false or 'auto'"):
        PPO(copy.deepcopy(policy), cuda_graph="yes")
    alg = PPO(copy.deepcopy(policy), cuda_graph="auto")
    assert alg.graphed_update.unsupported(alg) == "the device is not a GPU"
    assert not alg.graphed_update.enabled(alg)
    forced = PPO(copy.deepcopy(policy), cuda_graph=True)
    with pytest.warns(
        UserWarning, match="cuda_graph=true: the update runs eagerly because the device is not"
    ):
        assert not forced.graphed_update.enabled(forced)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not forced.graphed_update.enabled(forced)  # the same reason is said once


class _CountingPPO(PPO):
    def compute_losses(self, minibatch):
        self.calls = getattr(self, "calls", 0) + 1  # Python state that a replay would not update
        return super().compute_losses(minibatch)


class _NoisyPolicy(ActorCritic):
    def act(self, observations, **kwargs):
        return super().act(observations, **kwargs) * 1.0


def _emulated_alg(alg_cls: type[PPO], policy: ActorCritic, mode: bool | str) -> PPO:
    alg = alg_cls(policy, cuda_graph=mode)
    alg.init_storage(4, 2, [3], [3], [2])
    alg.set_sync_free(True)
    return alg


def test_auto_captures_only_st_rl_code_and_true_captures_overrides(monkeypatch):
    emulate_cuda_graphs(monkeypatch)
    policy = ActorCritic(3, 3, 2, actor_hidden_dims=[8], critic_hidden_dims=[8])
    plain = _emulated_alg(PPO, copy.deepcopy(policy), "auto")
    assert plain.graphed_update.unsupported(plain) is None
    subclass = _emulated_alg(_CountingPPO, copy.deepcopy(policy), "auto")
    assert subclass.graphed_update.unsupported(subclass) == (
        "_CountingPPO.compute_losses is not st_rl's (cuda_graph=true captures it)"
    )
    noisy = _emulated_alg(PPO, _NoisyPolicy(3, 3, 2, actor_hidden_dims=[8], critic_hidden_dims=[8]), "auto")
    assert (
        noisy.graphed_update.unsupported(noisy)
        == "_NoisyPolicy.act is not st_rl's (cuda_graph=true captures it)"
    )
    forced = _emulated_alg(_CountingPPO, copy.deepcopy(policy), True)
    assert forced.graphed_update.unsupported(forced) is None


def test_config_takes_the_option(small_cfg):
    for value in (True, False, "auto"):  # refused values: tests/config/test_bad_configs.py
        small_cfg["algorithm"]["cuda_graph"] = value
        assert resolve_train_cfg(small_cfg).algorithm["cuda_graph"] == value


def _cpu_run(cfg: dict, cuda_graph: bool | str, iterations: int) -> OnPolicyRunner:
    cfg = copy.deepcopy(cfg)
    cfg["logger"] = "none"
    cfg["algorithm"]["cuda_graph"] = cuda_graph
    runner = OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), cfg, None, device="cpu")
    runner.alg.set_sync_free(True)  # the GPU's update checks and device learning rate
    runner.learn(iterations)
    return runner


@pytest.mark.parametrize(
    ("schedule", "precision"), [("adaptive", "fp32"), ("linear", "fp32"), ("adaptive", "bf16")]
)
def test_emulated_graphs_learn_exactly_as_the_eager_code(small_cfg, monkeypatch, schedule, precision):
    """Replays that run only the captured ops (no Python) give the eager run's parameters, statistics and
    learning rate: no host number baked into a capture goes stale (bf16: autocast without its cast cache)."""
    small_cfg["algorithm"].update(schedule=schedule, precision=precision)
    small_cfg["algorithm"]["lr_anneal_iterations"] = 10
    eager = _cpu_run(small_cfg, False, 4)
    emulate_cuda_graphs(monkeypatch)
    graphed = _cpu_run(small_cfg, "auto", 4)
    parts = (
        graphed.alg.graphed_update.captured,
        graphed.alg.graphed_rollout.act,
        graphed.alg.graphed_rollout.normalize,
    )
    assert all(part.graph is not None and part.graph.replays > 1 for part in parts), [p.last for p in parts]
    # a linear schedule's rate is a float32 device tensor in the graphed run, a float in the eager one
    assert graphed.alg.learning_rate == pytest.approx(eager.alg.learning_rate, rel=1e-7)
    expected = eager.alg.actor_critic.state_dict()
    for key, value in graphed.alg.actor_critic.state_dict().items():
        torch.testing.assert_close(
            value, expected[key], rtol=1e-5, atol=1e-7, msg=lambda m, key=key: f"{key}: {m}"
        )


def test_emulated_graphs_capture_again_after_a_checkpoint_is_loaded(small_cfg, monkeypatch):
    """Loading a checkpoint replaces the optimizer state (new tensors): the update warms up and captures again,
    and the resumed run learns as the eager one resumed from the same checkpoint."""
    small_cfg["algorithm"]["schedule"] = "adaptive"
    eager = _cpu_run(small_cfg, False, 3)
    checkpoint = eager.alg.state_dict()
    emulate_cuda_graphs(monkeypatch)
    graphed = _cpu_run(small_cfg, "auto", 3)
    for runner in (
        eager,
        graphed,
    ):  # each its own copy, as read from a file (state_dict() holds live tensors)
        runner.alg.load_state_dict(copy.deepcopy(checkpoint))
    captured = graphed.alg.graphed_update.captured
    stale = captured.key
    torch.manual_seed(7)  # the runs share torch's generator: the same draws for both continuations
    graphed.learn(1)
    assert captured.last == "warm-up"  # the optimizer state's addresses changed: no stale replay
    graphed.learn(2)
    assert captured.last == "replay" and captured.key != stale
    torch.manual_seed(7)
    eager.learn(3)
    assert graphed.alg.learning_rate == pytest.approx(eager.alg.learning_rate, rel=1e-6)
    expected = eager.alg.actor_critic.state_dict()
    for key, value in graphed.alg.actor_critic.state_dict().items():
        torch.testing.assert_close(
            value, expected[key], rtol=1e-5, atol=1e-7, msg=lambda m, key=key: f"{key}: {m}"
        )


def _assert_restores_on_a_non_finite_loss(alg: PPO) -> None:
    """A NaN advantage makes the replayed update raise, with the parameters of its start restored."""
    assert alg.graphed_update.captured.last == "replay"
    before = {k: v.clone() for k, v in alg.actor_critic.state_dict().items()}
    alg.storage.advantages[0, 0] = float("nan")
    with pytest.raises(NonFiniteLossError, match="surrogate_loss"):
        alg.update()
    for key, value in alg.actor_critic.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_emulated_graphed_update_restores_on_a_non_finite_loss(small_cfg, monkeypatch):
    emulate_cuda_graphs(monkeypatch)
    _assert_restores_on_a_non_finite_loss(_cpu_run(small_cfg, "auto", 3).alg)


def _runner(cfg: dict, cuda_graph: bool | str) -> OnPolicyRunner:
    cfg = copy.deepcopy(cfg)
    cfg["logger"] = "none"
    cfg["algorithm"]["cuda_graph"] = cuda_graph
    env = VelocityTracking(num_envs=64, device="cuda", seed=0)
    return OnPolicyRunner(env, cfg, None, device="cuda")


@needs_cuda
@pytest.mark.parametrize("schedule", ["adaptive", "linear", "fixed"])
def test_graphed_update_learns_as_the_eager_update(small_cfg, schedule):
    small_cfg["algorithm"]["schedule"] = schedule
    if schedule == "linear":
        small_cfg["algorithm"]["lr_anneal_iterations"] = 10
    if schedule == "adaptive":  # far from the KL thresholds: other GEMM kernels' rounding decides nothing
        small_cfg["algorithm"].update(desired_kl=1e-7)
    results = []
    for mode in (False, "auto"):
        runner = _runner(small_cfg, mode)
        runner.alg.graphed_rollout = GraphedRollout(False)  # the same samples in both runs
        runner.learn(5)
        assert (runner.alg.graphed_update.captured.graph is not None) == (mode == "auto")
        results.append((runner.alg.actor_critic.state_dict(), runner.alg.learning_rate))
    (eager, eager_lr), (graphed, graphed_lr) = results
    assert graphed_lr == pytest.approx(eager_lr, rel=1e-6)
    for key in eager:
        torch.testing.assert_close(
            graphed[key], eager[key], rtol=1e-4, atol=1e-5, msg=lambda m, key=key: f"{key}: {m}"
        )


@needs_cuda
def test_graphed_update_restores_on_a_non_finite_loss(small_cfg):
    runner = _runner(small_cfg, "auto")
    runner.learn(3)  # warm-up, capture, replay
    _assert_restores_on_a_non_finite_loss(runner.alg)


@needs_cuda
def test_graphed_update_waits_for_the_device_at_most_twice(small_cfg):
    runner = _runner(small_cfg, "auto")
    runner.learn(3)
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    with torch.inference_mode():
        for _ in range(runner.num_steps_per_env):
            obs, critic_obs, _, _, _ = runner.rollout_step(obs, critic_obs)
        runner.alg.compute_returns(critic_obs)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            runner.alg.update()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    syncs = [w for w in caught if "called a synchronizing" in str(w.message)]
    assert len(syncs) <= 2, [str(w.message) for w in syncs]


@needs_cuda
def test_replayed_rollout_step_samples_and_scores_as_the_eager_policy(small_cfg):
    runner = _runner(small_cfg, "auto")
    runner.learn(2)
    alg, policy = runner.alg, runner.alg.actor_critic
    assert alg.graphed_rollout.act.graph is not None and alg.graphed_rollout.normalize.graph is not None
    obs, critic_obs, _ = runner.env_adapter.get_observations()
    with torch.inference_mode():
        first = alg.act(obs, critic_obs)
        t = alg.transition
        assert alg.graphed_rollout.act.last == "replay"
        mean, values, log_prob, std = (
            t.action_mean.clone(),
            t.values.clone(),
            t.actions_log_prob.clone(),
            t.action_sigma,
        )
        second = alg.act(obs, critic_obs)  # fresh noise; the first actions are a copy, not overwritten
        eager_mean = policy.act_inference(obs)
        eager_values = policy.evaluate(critic_obs)
    assert not torch.equal(first, second)
    torch.testing.assert_close(mean, eager_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values, eager_values, rtol=1e-5, atol=1e-5)
    expected = torch.distributions.Normal(mean, std).log_prob(first).sum(-1)
    torch.testing.assert_close(log_prob.reshape(-1), expected.reshape(-1), rtol=1e-4, atol=1e-4)
    z = (first - mean) / std
    assert abs(float(z.mean())) < 0.25 and abs(float(z.std()) - 1.0) < 0.2  # N(mean, std) samples


@needs_cuda
def test_replayed_normaliser_update_keeps_the_eager_statistics(small_cfg):
    runner = _runner(small_cfg, "auto")
    runner.learn(2)
    alg, policy = runner.alg, runner.alg.actor_critic
    norm, critic_dim = policy.actor_obs_normalizer, policy.critic_obs_normalizer.mean.shape[-1]
    reference = copy.deepcopy(norm)
    batches = [torch.randn(64, norm.mean.shape[-1], device="cuda") * 3 + 1 for _ in range(3)]
    with torch.inference_mode():
        for batch in batches:
            alg.graphed_rollout.update_normalization(alg, batch, torch.randn(64, critic_dim, device="cuda"))
            assert alg.graphed_rollout.normalize.last == "replay"
            reference.update(batch)
    torch.testing.assert_close(norm.mean, reference.mean)
    torch.testing.assert_close(norm._var, reference._var)
    assert int(norm.count) == int(reference.count)
    bad = batches[0].clone()
    bad[0, 0] = float("nan")
    with torch.inference_mode():
        alg.graphed_rollout.update_normalization(alg, bad, torch.zeros(64, critic_dim, device="cuda"))
    torch.testing.assert_close(norm.mean, reference.mean)  # a non-finite batch moves nothing...
    with pytest.raises(NonFiniteObservationError, match="skipped 1 batch"):
        norm.raise_if_nonfinite()  # ...and is reported
    before = int(norm.count)
    for module in (norm, policy.critic_obs_normalizer):
        module.until = module._count_host + 100  # frozen after two more batches of 64
    with torch.inference_mode():
        for _ in range(4):
            alg.graphed_rollout.update_normalization(
                alg, batches[1], torch.ones(64, critic_dim, device="cuda")
            )
    assert norm.frozen and int(norm.count) == before + 128
