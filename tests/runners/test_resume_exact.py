"""Exact resume on CPU: N iterations straight equal N/2, save, a fresh runner loading the file, N/2 more, bitwise
(policy parameters and normaliser statistics, optimizer state, learning rate, returned metrics, environment),
for a feed-forward and a recurrent policy, through the Python API and through ``st-rl train --resume``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import torch

from st_rl.cli import main
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import VelocityTracking
from st_rl.utils.checkpoint import load_checkpoint

POLICIES = {
    "ActorCritic": {},
    "ActorCriticRecurrent": {"rnn_type": "lstm", "rnn_hidden_size": 16},
}


def _cfg(policy: str, seed: int = 1) -> dict[str, Any]:
    return {
        "seed": seed,
        "num_steps_per_env": 8,
        "save_interval": 100,  # the only checkpoint is the one learn() writes at its end
        "empirical_normalization": True,
        "logger": "none",
        "policy": {
            "class_name": policy,
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
            "init_noise_std": 1.0,
            **POLICIES[policy],
        },
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 2,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "desired_kl": 0.001,  # the adaptive learning rate moves every iteration
        },
    }


def _assert_equal(a: Any, b: Any, where: str) -> None:
    """Bitwise equality of nested checkpoint-like structures (tensors with torch.equal)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a, key=str) == sorted(b, key=str), f"{where}: keys differ"
        for key in a:
            _assert_equal(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _assert_runners_equal(a: OnPolicyRunner, b: OnPolicyRunner) -> None:
    _assert_equal(a.alg.actor_critic.state_dict(), b.alg.actor_critic.state_dict(), "model_state_dict")
    _assert_equal(a.alg.optimizer.state_dict(), b.alg.optimizer.state_dict(), "optimizer_state_dict")
    assert a.alg.learning_rate == b.alg.learning_rate
    assert a.current_learning_iteration == b.current_learning_iteration
    _assert_equal(a.env.state_dict(), b.env.state_dict(), "env_state")
    _assert_equal(
        a.alg.actor_critic.rollout_state_dict(), b.alg.actor_critic.rollout_state_dict(), "memories"
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_api_resume_is_bitwise_exact(policy, tmp_path):
    def runner(log_dir: str | None, env_seed: int = 0, seed: int = 1) -> OnPolicyRunner:
        env = VelocityTracking(num_envs=8, seed=env_seed)
        return OnPolicyRunner(env, _cfg(policy, seed), log_dir=log_dir, device="cpu")

    straight = runner(str(tmp_path / "straight"))
    metrics_straight = straight.learn(4, init_at_random_ep_len=True)

    first = runner(str(tmp_path / "first"))
    first.learn(2, init_at_random_ep_len=True)
    checkpoint = str(tmp_path / "first" / "model_2.pt")
    if policy == "ActorCriticRecurrent":
        assert "policy_rollout_state" in load_checkpoint(checkpoint)
    del first
    # Everything must come from the file: another environment seed and another config seed.
    resumed = runner(str(tmp_path / "resumed"), env_seed=99, seed=7)
    resumed.load(checkpoint)
    metrics_resumed = resumed.learn(2, init_at_random_ep_len=True)  # must not re-randomise the episodes

    assert resumed.current_learning_iteration == 4
    for x, y in zip(metrics_straight, metrics_resumed):
        assert torch.equal(x, y), (metrics_straight, metrics_resumed)
    _assert_runners_equal(straight, resumed)
    a = load_checkpoint(str(tmp_path / "straight" / "model_4.pt"))
    b = load_checkpoint(str(tmp_path / "resumed" / "model_4.pt"))
    for key in ("model_state_dict", "optimizer_state_dict", "iter", "rng_state", "env_state"):
        _assert_equal(a[key], b[key], key)
    if policy == "ActorCriticRecurrent":
        _assert_equal(a["policy_rollout_state"], b["policy_rollout_state"], "policy_rollout_state")


def test_load_keeps_restored_episode_lengths(tmp_path):
    first = OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), _cfg("ActorCritic"), log_dir=str(tmp_path))
    first.learn(1, init_at_random_ep_len=True)
    saved = first.env.episode_length_buf.clone()
    fresh = OnPolicyRunner(VelocityTracking(num_envs=8, seed=5), _cfg("ActorCritic"))
    fresh.load(str(tmp_path / "model_1.pt"))
    fresh.init_writer(init_at_random_ep_len=True)
    assert torch.equal(fresh.env.episode_length_buf, saved)
    # Only the first learn() after a load skips the randomisation it is asked for.
    fresh.init_writer(init_at_random_ep_len=True)
    assert not torch.equal(fresh.env.episode_length_buf, saved)
    # A policy-only load (play, export) restores no episodes: randomising stays as asked.
    other = OnPolicyRunner(VelocityTracking(num_envs=8, seed=5), _cfg("ActorCritic"))
    other.load(str(tmp_path / "model_1.pt"), load_optimizer=False)
    assert other.env.episode_length_buf.eq(0).all()
    other.init_writer(init_at_random_ep_len=True)
    assert not other.env.episode_length_buf.eq(0).all()


def test_resume_with_another_number_of_envs_warns_and_starts_fresh_memories(tmp_path):
    cfg = _cfg("ActorCriticRecurrent")
    first = OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), cfg, log_dir=str(tmp_path))
    first.learn(1)
    other = OnPolicyRunner(VelocityTracking(num_envs=4, seed=0), cfg)
    with pytest.warns(UserWarning) as record:
        other.load(str(tmp_path / "model_1.pt"))
    notes = [str(w.message) for w in record if "not restored" in str(w.message)]
    assert len(notes) == 1, notes  # one note, naming both
    assert "the environment's episodes" in notes[0] and "rollout memories" in notes[0]
    assert "start from zero" in notes[0] and "model_1.pt" in notes[0]
    assert other.current_learning_iteration == 1
    other.learn(1)  # trains on from the loaded weights


def _train(log_dir: str, iterations: int, policy: str, capsys, resume: str | None = None) -> dict[str, Any]:
    args = ["train", "--task", "velocity_tracking", "--num-envs", "8", "--iterations", str(iterations),
            "--device", "cpu", "--seed", "3", "--log-dir", log_dir, "--policy", policy,
            "num_steps_per_env=8", "save_interval=100", "logger=\"none\"", "algorithm.num_learning_epochs=2",
            "algorithm.num_mini_batches=2", "policy.actor_hidden_dims=[16]", "policy.critic_hidden_dims=[16]",
            *[f"policy.{k}={json.dumps(v)}" for k, v in POLICIES[policy].items()]]  # fmt: skip
    if resume is not None:
        args += ["--resume", resume]
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    done = [line for line in out.splitlines() if line.startswith("[st-rl] done: ")]
    return json.loads(done[-1].removeprefix("[st-rl] done: "))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_cli_resume_is_bitwise_exact(policy, tmp_path, capsys):
    straight = _train(str(tmp_path / "straight"), 4, policy, capsys)
    _train(str(tmp_path / "first"), 2, policy, capsys)
    resumed = _train(str(tmp_path / "resumed"), 2, policy, capsys, resume=str(tmp_path / "first"))
    assert resumed["iterations"] == straight["iterations"] == 4
    assert (resumed["velrmsd"], resumed["CoT"]) == (straight["velrmsd"], straight["CoT"])
    a = load_checkpoint(os.path.join(tmp_path, "straight", "model_4.pt"))
    b = load_checkpoint(os.path.join(tmp_path, "resumed", "model_4.pt"))
    keys = ["model_state_dict", "optimizer_state_dict", "iter", "rng_state", "env_state"]
    if policy == "ActorCriticRecurrent":
        keys.append("policy_rollout_state")
    for key in keys:
        _assert_equal(a[key], b[key], key)
    # the learning rate of the adaptive schedule
    assert (
        a["optimizer_state_dict"]["param_groups"][0]["lr"]
        == b["optimizer_state_dict"]["param_groups"][0]["lr"]
    )
    # sanity: the run did learn between iterations 2 and 4
    mid = load_checkpoint(os.path.join(tmp_path, "first", "model_2.pt"))
    assert not torch.equal(mid["model_state_dict"]["std"], a["model_state_dict"]["std"])
