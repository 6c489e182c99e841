"""PPO: reference defaults, kwargs handling, rollout bookkeeping, update loop and persistence."""

import copy
import inspect
import math
import warnings

import pytest
import torch
import torch.nn as nn

from st_rl.algorithms import PPO, NonFiniteLossError
from st_rl.modules import ActorCritic, EmpiricalNormalization
from st_rl.utils.checkpoint import load_checkpoint, save_checkpoint

NUM_OBS, NUM_CRITIC, NUM_ACT = 4, 5, 2


def make_ppo(num_envs=4, steps=3, seed=0, **kwargs):
    torch.manual_seed(seed)
    ac = ActorCritic(NUM_OBS, NUM_CRITIC, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    ppo = PPO(ac, **kwargs)
    ppo.init_obs_norm(NUM_OBS, NUM_CRITIC)
    ppo.init_storage(num_envs, steps, [NUM_OBS], [NUM_CRITIC], [NUM_ACT])
    return ppo


def collect(ppo, num_envs=4, steps=3, inference=False, id_obs=False):
    """Fill the storage with random data; with ``id_obs`` obs[:, 0] is the sample id t*N+n."""
    ctx = torch.inference_mode() if inference else torch.no_grad()
    with ctx:
        for t in range(steps):
            obs = torch.randn(num_envs, NUM_OBS)
            if id_obs:
                obs[:, 0] = torch.arange(num_envs) + t * num_envs
            critic_obs = torch.randn(num_envs, NUM_CRITIC)
            ppo.act(obs, critic_obs)
            rewards = torch.randn(num_envs)
            dones = torch.rand(num_envs) < 0.3
            ppo.process_env_step(rewards, dones, {"time_outs": dones & (torch.rand(num_envs) < 0.5)})
        ppo.compute_returns(torch.randn(num_envs, NUM_CRITIC))


def params(module):
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def assert_params_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


# ------------------------------------------------------------------ construction
REFERENCE_DEFAULTS = {
    "num_learning_epochs": 1,
    "num_mini_batches": 1,
    "clip_param": 0.2,
    "gamma": 0.998,
    "lam": 0.95,
    "value_loss_coef": 1.0,
    "entropy_coef": 0.0,
    "learning_rate": 1e-3,
    "max_grad_norm": 1.0,
    "use_clipped_value_loss": True,
    "clip_min_std": 1e-15,
    "optimizer_class_name": "Adam",
    "schedule": "fixed",
    "desired_kl": 0.01,
    "device": "cpu",
    "empirical_normalization": False,
}


def test_signature_defaults_match_reference():
    sig = inspect.signature(PPO.__init__)
    for name, value in REFERENCE_DEFAULTS.items():
        assert sig.parameters[name].default == value, name


def test_instance_defaults_match_reference():
    ppo = PPO(ActorCritic(3, 3, 1, [4], [4]))
    for name, value in REFERENCE_DEFAULTS.items():
        if name == "device":
            assert ppo.device == torch.device("cpu")
        else:
            assert getattr(ppo, name) == value, name
    assert type(ppo.optimizer) is torch.optim.Adam
    assert ppo.optimizer.param_groups[0]["lr"] == 1e-3
    opt_params = {id(p) for g in ppo.optimizer.param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in ppo.actor_critic.parameters()}


def test_empirical_normalization_false_uses_identity():
    ppo = make_ppo(empirical_normalization=False)
    assert isinstance(ppo.obs_normalizer, nn.Identity)
    assert isinstance(ppo.critic_obs_normalizer, nn.Identity)
    assert "obs_norm_state_dict" not in ppo.state_dict()


def test_empirical_normalization_true_builds_normalizers():
    ppo = make_ppo(empirical_normalization=True)
    assert isinstance(ppo.obs_normalizer, EmpiricalNormalization)
    assert isinstance(ppo.critic_obs_normalizer, EmpiricalNormalization)
    assert ppo.obs_normalizer.mean.shape == (NUM_OBS,)
    assert ppo.critic_obs_normalizer.mean.shape == (NUM_CRITIC,)
    assert ppo.obs_normalizer.until == 1e8


def test_unknown_optimizer_lists_names():
    with pytest.raises(ValueError, match="NoSuchOpt") as info:
        PPO(ActorCritic(3, 3, 1, [4], [4]), optimizer_class_name="NoSuchOpt")
    assert "Adam" in str(info.value) and "SGD" in str(info.value)


def test_sgd_optimizer():
    ppo = PPO(ActorCritic(3, 3, 1, [4], [4]), optimizer_class_name="SGD", learning_rate=0.05)
    assert type(ppo.optimizer) is torch.optim.SGD
    assert ppo.optimizer.param_groups[0]["lr"] == 0.05


def test_unknown_kwargs_warn():
    with pytest.warns(UserWarning, match="foo_bar"):
        PPO(ActorCritic(3, 3, 1, [4], [4]), foo_bar=3)


def test_tolerated_kwargs_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppo = PPO(
            ActorCritic(3, 3, 1, [4], [4]),
            class_name="PPO",
            amp_obs_dim=2,
            bc_loss_coef=0.001,
            discriminator_loss_coef=0.7,
        )
    assert ppo.loss_weight("discriminator_loss") == 0.7  # a `<name>_coef` weighs the loss `<name>`


def test_invalid_schedule_raises():
    with pytest.raises(ValueError, match="schedule"):
        PPO(ActorCritic(3, 3, 1, [4], [4]), schedule="cosine")


# ------------------------------------------------------------------ rollout bookkeeping
def test_process_env_step_bootstraps_time_outs():
    ppo = make_ppo(num_envs=3, steps=2, gamma=0.5)
    ppo.act(torch.randn(3, NUM_OBS), torch.randn(3, NUM_CRITIC))
    ppo.transition.values = torch.tensor([[2.0], [4.0], [6.0]])  # stub critic output
    rewards = torch.tensor([1.0, 1.0, 1.0])
    dones = torch.tensor([True, False, True])
    ppo.process_env_step(rewards, dones, {"time_outs": torch.tensor([1.0, 0.0, 1.0])})
    # 1 + 0.5*2*1 = 2 ; 1 + 0.5*4*0 = 1 ; 1 + 0.5*6*1 = 4
    torch.testing.assert_close(ppo.storage.rewards[0, :, 0], torch.tensor([2.0, 1.0, 4.0]))
    torch.testing.assert_close(rewards, torch.tensor([1.0, 1.0, 1.0]))  # caller's tensor untouched
    torch.testing.assert_close(ppo.storage.values[0, :, 0], torch.tensor([2.0, 4.0, 6.0]))
    assert ppo.storage.dones[0, :, 0].tolist() == [1, 0, 1]
    assert ppo.storage.step == 1
    # without time_outs the reward is stored as is
    ppo.act(torch.randn(3, NUM_OBS), torch.randn(3, NUM_CRITIC))
    ppo.transition.values = torch.tensor([[2.0], [4.0], [6.0]])
    ppo.process_env_step(rewards, dones, {})
    torch.testing.assert_close(ppo.storage.rewards[1, :, 0], torch.tensor([1.0, 1.0, 1.0]))


def test_act_records_transition():
    ppo = make_ppo()
    obs, critic_obs = torch.randn(4, NUM_OBS), torch.randn(4, NUM_CRITIC)
    actions = ppo.act(obs, critic_obs)
    tr = ppo.transition
    assert actions.shape == (4, NUM_ACT)
    assert tr.values.shape == (4, 1)
    assert tr.actions_log_prob.shape == (4,)
    assert torch.equal(tr.observations, obs) and torch.equal(tr.critic_observations, critic_obs)
    expected_lp = torch.distributions.Normal(tr.action_mean, tr.action_sigma).log_prob(actions).sum(-1)
    torch.testing.assert_close(tr.actions_log_prob, expected_lp)


# ------------------------------------------------------------------ update
def test_full_cycle_updates_parameters_and_clears_storage():
    ppo = make_ppo(num_learning_epochs=2, num_mini_batches=2)
    collect(ppo, inference=True)
    before = params(ppo.actor_critic)
    losses, stats = ppo.update()
    assert {"surrogate_loss", "value_loss", "entropy", "total_loss"} <= set(losses)
    assert all(math.isfinite(v) for v in losses.values())
    assert all(math.isfinite(v) for v in stats.values())
    assert ppo.storage.step == 0
    after = params(ppo.actor_critic)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    # a second rollout fits in the storage again
    collect(ppo)
    ppo.update()


def test_total_loss_is_coefficient_weighted_sum():
    ppo = make_ppo(value_loss_coef=0.5, entropy_coef=0.01, surrogate_loss_coef=2.0)
    collect(ppo)
    losses, _ = ppo.update()
    value = {k: float(v) for k, v in losses.items()}  # update() returns 0-d tensors (the reference's form)
    expected = 2.0 * value["surrogate_loss"] + 0.5 * value["value_loss"] + 0.01 * value["entropy"]
    assert value["total_loss"] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    # entropy loss = -sum over 2 actions of (0.5 + 0.5 ln(2 pi)) at std 1 = -2 * 1.4189385
    assert value["entropy"] == pytest.approx(-2.837877, abs=1e-5)


def test_all_zero_coefficients_leave_parameters_unchanged():
    ppo = make_ppo(value_loss_coef=0.0, entropy_coef=0.0, surrogate_loss_coef=0.0)
    collect(ppo)
    before = params(ppo.actor_critic)
    losses, _ = ppo.update()
    assert losses["value_loss"] > 0  # the losses exist, only their weights are zero
    assert losses["total_loss"] == 0.0
    assert_params_equal(before, params(ppo.actor_critic))


def test_value_loss_only_moves_critic_only():
    ppo = make_ppo(value_loss_coef=1.0, entropy_coef=0.0, surrogate_loss_coef=0.0)
    collect(ppo)
    before = params(ppo.actor_critic)
    ppo.update()
    after = params(ppo.actor_critic)
    for k in before:
        if k.startswith("critic."):
            assert not torch.equal(before[k], after[k]), k
        else:
            assert torch.equal(before[k], after[k]), k


def test_minibatches_reshuffled_each_epoch_and_cover_all_samples(monkeypatch):
    torch.manual_seed(1)
    ppo = make_ppo(num_envs=4, steps=3, num_learning_epochs=3, num_mini_batches=2)
    collect(ppo, id_obs=True)
    seen, calls = [], []
    original = ppo.storage.mini_batch_generator

    def recording(num_mini_batches, num_epochs):
        calls.append((num_mini_batches, num_epochs))
        for mb in original(num_mini_batches, num_epochs):
            seen.append(mb.obs[:, 0].tolist())
            yield mb

    monkeypatch.setattr(ppo.storage, "mini_batch_generator", recording)
    ppo.update()
    assert calls == [(2, 3)]
    assert len(seen) == 6 and all(len(b) == 6 for b in seen)
    epochs = [seen[0] + seen[1], seen[2] + seen[3], seen[4] + seen[5]]
    for order in epochs:
        assert sorted(order) == [float(i) for i in range(12)]  # every sample exactly once
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]


@pytest.mark.parametrize(
    ("clip", "expected"),
    [(0.3, [0.3, 0.5]), ([0.2, 0.6], [0.2, 0.6]), ((0.005, 0.1), [0.01, 0.5])],
)
def test_clip_min_std_applied_after_update(clip, expected):
    ppo = make_ppo(clip_min_std=clip, learning_rate=0.0)  # lr 0: only the clip moves std
    with torch.no_grad():
        ppo.actor_critic.std.copy_(torch.tensor([0.01, 0.5]))
    collect(ppo)
    ppo.update()
    torch.testing.assert_close(ppo.actor_critic.std.detach(), torch.tensor(expected))


def test_adaptive_schedule_raises_lr_when_kl_small():
    ppo = make_ppo(schedule="adaptive", desired_kl=0.01, learning_rate=1e-3)
    collect(ppo)
    losses, stats = ppo.update()
    # first minibatch: same policy as in the rollout -> KL = 2*log(1+1e-5) ~ 2e-5 < 0.005 -> lr * 1.5
    assert ppo.learning_rate == pytest.approx(1.5e-3)
    assert all(g["lr"] == pytest.approx(1.5e-3) for g in ppo.optimizer.param_groups)
    assert stats["kl"] == pytest.approx(2 * math.log(1 + 1e-5), abs=1e-6)


def test_adaptive_schedule_lowers_lr_when_kl_large():
    ppo = make_ppo(schedule="adaptive", desired_kl=0.01, learning_rate=1e-3)
    collect(ppo)
    ppo.storage.mu += 5.0  # rollout means far from the current policy -> KL >> 0.02
    ppo.update()
    assert ppo.learning_rate == pytest.approx(1e-3 / 1.5)
    assert all(g["lr"] == pytest.approx(1e-3 / 1.5) for g in ppo.optimizer.param_groups)


def test_fixed_schedule_keeps_lr():
    ppo = make_ppo(schedule="fixed", learning_rate=1e-3)
    collect(ppo)
    ppo.storage.mu += 5.0
    ppo.update()
    assert ppo.learning_rate == 1e-3 and ppo.optimizer.param_groups[0]["lr"] == 1e-3


def test_linear_schedule_anneals_to_zero_by_hand():
    ppo = make_ppo(schedule="linear", learning_rate=4e-3, lr_anneal_iterations=8)
    for it, expected in ((0, 4e-3), (2, 3e-3), (6, 1e-3), (8, 0.0), (9, 0.0)):
        collect(ppo)
        ppo.update(it)
        assert ppo.learning_rate == pytest.approx(expected), it
        assert all(g["lr"] == pytest.approx(expected) for g in ppo.optimizer.param_groups)


def test_linear_schedule_needs_its_length():
    with pytest.raises(ValueError, match="lr_anneal_iterations"):
        PPO(ActorCritic(3, 3, 1, [4], [4]), schedule="linear")


def test_nan_loss_raises_before_parameters_change():
    ppo = make_ppo()
    collect(ppo)
    ppo.storage.advantages.fill_(float("nan"))
    before = params(ppo.actor_critic)
    opt_before = copy.deepcopy(ppo.optimizer.state_dict())
    with pytest.raises(NonFiniteLossError, match="surrogate_loss"):
        ppo.update()
    assert_params_equal(before, params(ppo.actor_critic))
    assert ppo.optimizer.state_dict()["state"] == opt_before["state"] == {}


# ------------------------------------------------------------------ persistence
def _trained(seed=0, **kwargs):
    ppo = make_ppo(seed=seed, empirical_normalization=True, schedule="adaptive", **kwargs)
    ppo.obs_normalizer.train()
    ppo.obs_normalizer(torch.randn(10, NUM_OBS) * 3 + 1)
    ppo.critic_obs_normalizer(torch.randn(6, NUM_CRITIC) - 2)
    collect(ppo)
    ppo.update()
    return ppo


def test_state_dict_round_trip_through_checkpoint_file(tmp_path):
    src = _trained(seed=0)
    assert src.learning_rate == pytest.approx(1.5e-3)
    sd = src.state_dict()
    assert set(sd) == {
        "model_state_dict",
        "optimizer_state_dict",
        "obs_norm_state_dict",
        "critic_obs_norm_state_dict",
    }
    # the policy owns its normalisers: their statistics are part of the model state (and copied into the
    # reference's separate entries, which loading does not need)
    assert {"actor_obs_normalizer._mean", "critic_obs_normalizer.count"} <= set(sd["model_state_dict"])
    assert torch.equal(
        sd["obs_norm_state_dict"]["_mean"], sd["model_state_dict"]["actor_obs_normalizer._mean"]
    )
    save_checkpoint(str(tmp_path / "model_1.pt"), sd)
    loaded = load_checkpoint(str(tmp_path / "model_1.pt"))

    dst = make_ppo(seed=1, empirical_normalization=True)
    assert dst.learning_rate == 1e-3
    dst.load_state_dict(loaded)
    assert_params_equal(params(src.actor_critic), params(dst.actor_critic))
    assert dst.learning_rate == pytest.approx(1.5e-3)  # restored from the optimizer
    s_state, d_state = src.optimizer.state_dict()["state"], dst.optimizer.state_dict()["state"]
    assert s_state.keys() == d_state.keys() and len(s_state) > 0
    for k in s_state:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(s_state[k][name], d_state[k][name])
    for attr in ("obs_normalizer", "critic_obs_normalizer"):
        s_norm, d_norm = getattr(src, attr), getattr(dst, attr)
        assert torch.equal(s_norm._mean, d_norm._mean) and torch.equal(s_norm._var, d_norm._var)
        assert int(d_norm.count) == int(s_norm.count)
    # acting never updates the statistics (process_env_step with next observations does): the counts are the
    # samples fed above
    assert int(dst.obs_normalizer.count) == 10 and int(dst.critic_obs_normalizer.count) == 6


def test_loaded_normalizer_count_weights_next_update():
    src = make_ppo(empirical_normalization=True)
    a = torch.randn(10, NUM_OBS) * 2 + 3
    src.obs_normalizer(a)
    dst = make_ppo(seed=1, empirical_normalization=True)
    dst.load_state_dict(src.state_dict())
    b = torch.randn(30, NUM_OBS)
    dst.obs_normalizer(b)
    data = torch.cat([a, b])
    # with count restored (10) the merge equals the statistics of all 40 samples
    torch.testing.assert_close(dst.obs_normalizer.mean, data.mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dst.obs_normalizer._var[0], data.var(0, correction=0), atol=1e-5, rtol=1e-5)
    assert int(dst.obs_normalizer.count) == 40


def test_load_optimizer_false_leaves_optimizer_untouched():
    src = _trained(seed=0)
    dst = make_ppo(seed=1, empirical_normalization=True)
    opt_before = copy.deepcopy(dst.optimizer.state_dict())
    dst.load_state_dict(src.state_dict(), load_optimizer=False)
    assert dst.optimizer.state_dict() == opt_before
    assert dst.learning_rate == 1e-3 and dst.optimizer.param_groups[0]["lr"] == 1e-3
    assert_params_equal(params(src.actor_critic), params(dst.actor_critic))


def test_loading_normalizer_state_with_normalization_off_warns():
    src = _trained(seed=0)
    dst = make_ppo(seed=1, empirical_normalization=False)
    with pytest.warns(UserWarning, match="empirical_normalization is off"):
        dst.load_state_dict(src.state_dict())
    assert isinstance(dst.obs_normalizer, nn.Identity)
    assert_params_equal(params(src.actor_critic), params(dst.actor_critic))
