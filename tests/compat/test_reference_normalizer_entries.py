"""The reference checkpoint's separate normaliser entries (``obs_norm_state_dict``,
``critic_obs_norm_state_dict``): written beside ``model_state_dict`` for the reference's tools, read from a
checkpoint whose statistics live only there, and never preferred over ``model_state_dict``."""

from __future__ import annotations

import copy
import warnings

import torch
from conftest import SMALL_CFG

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking

ENTRIES = {
    "obs_norm_state_dict": "actor_obs_normalizer",
    "critic_obs_norm_state_dict": "critic_obs_normalizer",
}
EPS = 1e-2  # EmpiricalNormalization's default eps: (x - mean) / (std + eps)


def _runner(empirical_normalization: bool = True, log_dir: str | None = None) -> OnPolicyRunner:
    cfg = copy.deepcopy(SMALL_CFG)
    cfg["empirical_normalization"] = empirical_normalization
    return OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), cfg, log_dir=log_dir, device="cpu")


def test_saved_checkpoint_has_both_entries_equal_to_the_policy_normalisers(tmp_path):
    runner = _runner(log_dir=str(tmp_path))
    runner.learn(2)
    path = str(tmp_path / "model_2.pt")
    state = torch.load(path, weights_only=True)
    policy = runner.alg.actor_critic
    for entry, name in ENTRIES.items():
        buffers = dict(getattr(policy, name).named_buffers())
        assert set(state[entry]) == {"_mean", "_var", "_std", "count"} == set(buffers)
        for key, value in buffers.items():
            assert torch.equal(state[entry][key], value), (entry, key)
            assert torch.equal(state["model_state_dict"][f"{name}.{key}"], value)
        assert int(state[entry]["count"]) > 0
    # Loading it is unchanged: the statistics come back, nothing is warned about.
    fresh = _runner()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.load(path)
    for name in ENTRIES.values():
        for key, value in getattr(policy, name).named_buffers():
            assert torch.equal(dict(getattr(fresh.alg.actor_critic, name).named_buffers())[key], value)


def test_without_empirical_normalization_the_entries_are_left_out(tmp_path):
    runner = _runner(empirical_normalization=False)
    runner.save(str(tmp_path / "model_0.pt"))
    state = torch.load(str(tmp_path / "model_0.pt"), weights_only=True)
    assert not set(ENTRIES) & set(state)
    assert not any("obs_normalizer" in k for k in state["model_state_dict"])


def _reference_layout(runner: OnPolicyRunner, mean: torch.Tensor, std: torch.Tensor) -> dict:
    """A checkpoint as the reference writes it: the statistics only in the separate entries."""
    alg_state = runner.alg.state_dict()
    model = {k: v for k, v in alg_state["model_state_dict"].items() if "obs_normalizer." not in k}
    stats = {"_mean": mean.view(1, -1), "_var": (std**2).view(1, -1), "_std": std.view(1, -1),
             "count": torch.tensor(1000)}  # fmt: skip
    n_critic = runner.alg.actor_critic.num_critic_obs
    critic = {"_mean": torch.zeros(1, n_critic), "_var": torch.full((1, n_critic), 4.0),
              "_std": torch.full((1, n_critic), 2.0), "count": torch.tensor(1000)}  # fmt: skip
    return {"model_state_dict": model, "optimizer_state_dict": alg_state["optimizer_state_dict"], "iter": 7,
            "infos": None, "obs_norm_state_dict": stats, "critic_obs_norm_state_dict": critic}  # fmt: skip


def test_reference_layout_checkpoint_loads_its_statistics_into_the_policy(tmp_path):
    source = _runner()
    # Six actor observations (base_lin_vel 2, commands 2, last_actions 2): hand-chosen statistics.
    mean = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0, -1.0])
    std = torch.tensor([0.99, 1.99, 0.49, 3.99, 0.09, 1.0 - EPS])  # std + eps: 1, 2, 0.5, 4, 0.1, 1
    path = str(tmp_path / "model_7.pt")
    torch.save(_reference_layout(source, mean, std), path)

    runner = _runner()
    runner.load(path)
    assert runner.current_learning_iteration == 7
    normalizer = runner.alg.actor_critic.actor_obs_normalizer
    assert torch.equal(normalizer._mean, mean.view(1, -1)) and int(normalizer.count) == 1000
    critic = runner.alg.actor_critic.critic_obs_normalizer
    assert torch.equal(critic._std, torch.full_like(critic._std, 2.0))

    policy = runner.get_inference_policy()
    obs = torch.tensor([[2.0, 0.0, 0.5, -4.0, 3.05, 0.0]])
    normalized = torch.tensor([[1.0, 1.0, 0.0, -1.0, 0.5, 1.0]])  # (obs - mean) / (std + eps), by hand
    with torch.no_grad():
        expected = runner.alg.actor_critic.actor(normalized)
        torch.testing.assert_close(policy(obs), expected)
        # A policy that ignored the statistics would act differently.
        assert not torch.allclose(runner.alg.actor_critic.actor(obs), expected)


def test_model_state_dict_wins_over_the_separate_entries(tmp_path):
    runner = _runner()
    runner.learn(1)
    state = runner.alg.state_dict()
    state["iter"] = 1
    state["obs_norm_state_dict"] = {k: v + 100.0 if v.is_floating_point() else v
                                    for k, v in state["obs_norm_state_dict"].items()}  # fmt: skip
    path = str(tmp_path / "model_1.pt")
    torch.save(state, path)
    fresh = _runner()
    fresh.load(path)
    torch.testing.assert_close(
        fresh.alg.actor_critic.actor_obs_normalizer._mean,
        state["model_state_dict"]["actor_obs_normalizer._mean"],
    )
