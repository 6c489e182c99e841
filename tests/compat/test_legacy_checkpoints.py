"""Checkpoints written before the policy owned its observation normaliser still load and act the same, and
the attributes st_gym's own export code reads keep their meaning."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from st_rl.datasets import AmpObservationWrapper, MotionLoader
from st_rl.modules.memory import Memory
from st_rl.runners import build_runner
from st_rl.tasks import make_env
from st_rl.utils.checkpoint import load_checkpoint, migrate_checkpoint

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "legacy_main_a558efc")
CASES = ("ppo_mlp", "ppo_gru", "estimator_lstm", "appo_mlp")


def _amp_env(n: int):
    loader = MotionLoader.__new__(MotionLoader)  # constant reference windows, as when the fixture was made
    loader.amp_obs_frame_num, loader.style_fields = 2, ["vx", "vy"]
    loader.sample_windows = lambda k: torch.full((k, 4), 0.5)  # type: ignore[method-assign]
    return AmpObservationWrapper(
        make_env("velocity_tracking", num_envs=n, seed=0), loader, lambda e: e.base_lin_vel
    )


def _env(name: str, n: int = 16):
    if name == "appo_mlp":
        return _amp_env(n)
    slots = {"actor_dynamics_slots": True} if name == "estimator_lstm" else {}
    return make_env("velocity_tracking", num_envs=n, seed=0, **slots)


def _runner(name: str):
    path = os.path.join(DATA, f"{name}.pt")
    config = torch.load(path, weights_only=True)["config"]
    runner_cls = "AmpPolicyRunner" if name == "appo_mlp" else "OnPolicyRunner"
    runner = build_runner(runner_cls, _env(name), copy.deepcopy(config), log_dir=None)
    return runner, path


def _fresh_memories(policy: torch.nn.Module) -> None:
    for module in policy.modules():
        if isinstance(module, Memory):
            module.hidden_states = None


@pytest.mark.parametrize("name", CASES)
def test_old_checkpoint_loads_and_acts_as_before(name):
    runner, path = _runner(name)
    runner.load(path)  # resume path: optimizer, RNG and normaliser statistics
    expected = torch.load(os.path.join(DATA, f"{name}_expected.pt"), weights_only=True)
    policy = runner.get_inference_policy()
    _fresh_memories(runner.alg.actor_critic)
    with torch.no_grad():
        actions = torch.stack([policy(o) for o in expected["obs"]])
    torch.testing.assert_close(actions, expected["actions"], rtol=1e-5, atol=1e-6)
    old = torch.load(path, weights_only=True)
    torch.testing.assert_close(runner.alg.obs_normalizer._mean, old["obs_norm_state_dict"]["_mean"])
    assert int(runner.alg.obs_normalizer.count) == int(old["obs_norm_state_dict"]["count"])


def test_migration_moves_normalisers_into_the_model_and_fills_an_unused_critic_normaliser():
    state = load_checkpoint(os.path.join(DATA, "ppo_mlp.pt"))
    assert "obs_norm_state_dict" not in state and "critic_obs_norm_state_dict" not in state
    model = state["model_state_dict"]
    assert {"actor_obs_normalizer._mean", "critic_obs_normalizer._mean"} <= set(model)
    # A format-1 run without a critic group never updated its critic normaliser: it takes the actor's.
    actor = {"_mean": torch.ones(1, 3), "count": torch.tensor(5)}
    unused = {"_mean": torch.zeros(1, 3), "count": torch.tensor(0)}
    migrated = migrate_checkpoint({"model_state_dict": {}, "obs_norm_state_dict": actor,
                                   "critic_obs_norm_state_dict": unused})  # fmt: skip
    assert torch.equal(migrated["model_state_dict"]["critic_obs_normalizer._mean"], torch.ones(1, 3))
    assert migrate_checkpoint(migrated) is migrated  # current format: unchanged


def _st_gym_actor(actor_critic, normalizer, x, h=None):
    """What st_gym's exporter computes: ``actor(normalizer(x))``, through ``memory_a.rnn`` when recurrent."""
    x = normalizer(x)
    if actor_critic.is_recurrent:
        out, h = actor_critic.memory_a.rnn(x.unsqueeze(0), h)
        x = out.squeeze(0)
    return actor_critic.actor(x), h


@pytest.mark.parametrize("name", ["ppo_mlp", "ppo_gru"])
def test_st_gym_export_path_matches_act_inference(name):
    runner, path = _runner(name)
    runner.load(path, load_optimizer=False)
    runner.eval_mode()
    ac, normalizer = runner.alg.actor_critic, runner.alg.obs_normalizer
    assert not hasattr(ac, "encoders")  # st_gym's exporter takes the encoder path only when this exists
    assert ac.rnn_type == ("gru" if name == "ppo_gru" else None)
    _fresh_memories(ac)
    obs = torch.randn(4, 5, runner.env_adapter.num_obs) * 2
    h = None
    with torch.no_grad():
        for o in obs:
            ours = ac.act_inference(o)
            theirs, h = _st_gym_actor(ac, normalizer, o, h)
            torch.testing.assert_close(theirs, ours)
    count = int(normalizer.count)
    assert count > 0 and int(runner.alg.obs_normalizer.count) == count  # eval mode: no statistics update
