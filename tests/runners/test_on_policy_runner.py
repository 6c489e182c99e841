"""OnPolicyRunner against the built-in tasks: configs, learn, checkpoints, resume, errors."""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch
from conftest import NESTED_CFG

from st_rl.config import ConfigError
from st_rl.env import NonFiniteError
from st_rl.runners import OnPolicyRunner, build_runner
from st_rl.tasks import PointMass, VelocityTracking
from st_rl.tasks.api_shims import LeggedGymStyle, TensorDictStyle


def _params(runner: OnPolicyRunner) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in runner.alg.actor_critic.named_parameters()}


def test_flat_config_builds_and_is_not_mutated(small_cfg, tmp_path):
    before = copy.deepcopy(small_cfg)
    runner = OnPolicyRunner(
        VelocityTracking(num_envs=8, seed=0), small_cfg, log_dir=str(tmp_path), device="cpu"
    )
    assert small_cfg == before
    ac = runner.alg.actor_critic
    assert ac.num_actor_obs == 6 and ac.num_critic_obs == 8 and ac.num_actions == 2
    assert list(ac.obs_segments) == ["base_lin_vel", "commands", "last_actions"]
    assert runner.alg.num_learning_epochs == 2 and runner.num_steps_per_env == 16
    # Normalisation comes from the runner-level key of the flat form.
    assert runner.alg.empirical_normalization
    assert not (tmp_path / "config.json").exists()  # written when training starts, not before
    runner.learn(1)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["policy"]["class_name"] == "ActorCritic" and saved["runner"]["num_steps_per_env"] == 16


def test_nested_config_builds_and_is_not_mutated(tmp_path):
    cfg = copy.deepcopy(NESTED_CFG)
    runner = build_runner("OnPolicyRunner", LeggedGymStyle(PointMass(num_envs=8, seed=0)), cfg, str(tmp_path))
    assert cfg == NESTED_CFG
    assert runner.num_steps_per_env == 8 and runner.save_interval == 5
    assert runner.alg.actor_critic.critic_hidden_dims == [32]
    assert float(runner.alg.actor_critic.std[0].detach()) == pytest.approx(0.8)
    assert not runner.alg.empirical_normalization


def test_none_dimensions_are_filled_from_env(small_cfg):
    small_cfg["policy"].update(num_actor_obs=None, num_critic_obs=None, num_actions=None)
    runner = OnPolicyRunner(VelocityTracking(num_envs=4, seed=0), small_cfg)
    assert runner.alg.actor_critic.num_critic_obs == 8


def test_unknown_class_names_list_the_available_ones(small_cfg):
    env = PointMass(num_envs=4, seed=0)
    bad_policy = copy.deepcopy(small_cfg)
    bad_policy["policy"]["class_name"] = "ActorCriticc"
    with pytest.raises(ValueError, match=r"Unknown policy class_name 'ActorCriticc'.*ActorCritic"):
        OnPolicyRunner(env, bad_policy)
    bad_alg = copy.deepcopy(small_cfg)
    bad_alg["algorithm"]["class_name"] = "PPOO"
    with pytest.raises(ValueError, match=r"Unknown algorithm class_name 'PPOO'.*PPO"):
        OnPolicyRunner(env, bad_alg)
    with pytest.raises(ValueError, match="Unknown runner class_name"):
        build_runner("NoSuchRunner", env, small_cfg)


def test_unknown_runner_key_is_reported(small_cfg):
    small_cfg["num_step_per_env"] = 10
    with pytest.raises(ConfigError, match="num_step_per_env.*num_steps_per_env"):
        OnPolicyRunner(PointMass(num_envs=4, seed=0), small_cfg)


@pytest.mark.parametrize("wrap", [None, LeggedGymStyle, TensorDictStyle])
def test_learn_runs_on_every_api_and_returns_metrics(small_cfg, wrap):
    base = VelocityTracking(num_envs=16, seed=0)
    env = base if wrap is None else wrap(base)
    runner = OnPolicyRunner(env, small_cfg, device="cpu")
    before = _params(runner)
    velrmsd, cot = runner.learn(2, init_at_random_ep_len=True)
    assert isinstance(velrmsd, torch.Tensor) and isinstance(cot, torch.Tensor)
    assert float(velrmsd) > 0 and float(cot) > 0  # the task reports both metrics
    assert runner.current_learning_iteration == 2
    after = _params(runner)
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_metrics_are_zero_without_env_metrics(small_cfg):
    runner = OnPolicyRunner(PointMass(num_envs=8, seed=0), small_cfg)
    velrmsd, cot = runner.learn(1)
    assert float(velrmsd) == 0.0 and float(cot) == 0.0


def test_log_dir_contents_and_checkpoint_keys(small_cfg, tmp_path):
    runner = OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.learn(3)
    files = sorted(os.listdir(tmp_path))
    assert "config.json" in files and "model_2.pt" in files and "model_3.pt" in files
    assert any(f.startswith("events.out.tfevents") for f in files)
    assert not any(f.startswith(".tmp") for f in files)
    state = torch.load(tmp_path / "model_3.pt", weights_only=True)
    for key in (
        "model_state_dict",
        "optimizer_state_dict",
        "iter",
        "infos",
        "format_version",
        "rng_state",
        "config",
        "env_state",
    ):
        assert key in state, key
    assert state["iter"] == 3 and state["format_version"] == 2
    assert state["config"]["algorithm"]["class_name"] == "PPO"
    assert {"actor_obs_normalizer.count", "critic_obs_normalizer.count"} <= set(state["model_state_dict"])


def test_checkpoint_round_trip_restores_everything(small_cfg, tmp_path):
    runner = OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.learn(2)
    path = str(tmp_path / "model_2.pt")
    other = OnPolicyRunner(VelocityTracking(num_envs=8, seed=5), {**small_cfg, "seed": 9})
    other.load(path)
    assert other.current_learning_iteration == 2
    for k, v in runner.alg.actor_critic.state_dict().items():
        assert torch.equal(v, other.alg.actor_critic.state_dict()[k]), k
    for a, b in (
        (runner.alg.obs_normalizer, other.alg.obs_normalizer),
        (runner.alg.critic_obs_normalizer, other.alg.critic_obs_normalizer),
    ):
        assert (
            torch.equal(a._mean, b._mean) and torch.equal(a._var, b._var) and int(a.count) == int(b.count) > 0
        )
    sa, sb = runner.alg.optimizer.state_dict(), other.alg.optimizer.state_dict()
    assert sa["param_groups"][0]["lr"] == sb["param_groups"][0]["lr"] == other.alg.learning_rate
    for idx, st in sa["state"].items():
        assert torch.equal(st["exp_avg"], sb["state"][idx]["exp_avg"])


def test_resumed_run_matches_uninterrupted_run(small_cfg, tmp_path):
    def make(log):
        return OnPolicyRunner(
            VelocityTracking(num_envs=16, seed=0), small_cfg, log_dir=str(log), device="cpu"
        )

    straight = make(tmp_path / "a")
    straight.learn(4)
    resumed = make(tmp_path / "b")
    resumed.load(str(tmp_path / "a" / "model_2.pt"))
    resumed.learn(2)
    assert resumed.current_learning_iteration == 4
    pa, pb = _params(straight), _params(resumed)
    for k in pa:
        assert torch.equal(pa[k], pb[k]), f"{k} differs after resume"
    assert straight.alg.learning_rate == resumed.alg.learning_rate


def test_load_without_optimizer_and_map_location(small_cfg, tmp_path):
    runner = OnPolicyRunner(PointMass(num_envs=8, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.learn(2)
    fresh = OnPolicyRunner(PointMass(num_envs=8, seed=0), small_cfg)
    opt_before = copy.deepcopy(fresh.alg.optimizer.state_dict())
    fresh.load(str(tmp_path / "model_2.pt"), load_optimizer=False, map_location={"cuda:1": "cpu"})
    assert fresh.alg.optimizer.state_dict()["state"] == opt_before["state"] == {}
    assert torch.equal(fresh.alg.actor_critic.std, runner.alg.actor_critic.std)


def test_inference_policy_normalises_inside(small_cfg, tmp_path):
    runner = OnPolicyRunner(VelocityTracking(num_envs=8, seed=0), small_cfg)
    runner.learn(1)
    policy = runner.get_inference_policy(device="cpu")
    obs, _ = runner.env.get_observations()
    # the raw observations go through the policy's normaliser, then the actor MLP
    expected = runner.alg.actor_critic.actor(runner.alg.obs_normalizer(obs))
    count = int(runner.alg.obs_normalizer.count)
    out = policy(obs)
    assert torch.equal(out, expected)
    assert int(runner.alg.obs_normalizer.count) == count, "inference must not update statistics"
    assert not runner.alg.actor_critic.training


def test_nonfinite_observation_stops_training_before_update(small_cfg):
    env = VelocityTracking(num_envs=8, seed=0)
    runner = OnPolicyRunner(env, small_cfg)
    before = _params(runner)
    original_step = env.step

    def bad_step(actions):
        obs, rew, dones, extras = original_step(actions)
        obs = obs.clone()
        obs[0, 0] = float("nan")
        return obs, rew, dones, extras

    env.step = bad_step
    with pytest.raises(NonFiniteError, match="observation group 'policy'"):
        runner.learn(1)
    after = _params(runner)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_corrupt_checkpoint_is_rejected_and_existing_file_kept(small_cfg, tmp_path):
    from st_rl.utils.checkpoint import CheckpointError

    runner = OnPolicyRunner(PointMass(num_envs=8, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.learn(2)
    good = tmp_path / "model_2.pt"
    data = good.read_bytes()
    bad = tmp_path / "model_9.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        runner.load(str(bad))
    assert good.read_bytes() == data
    mismatched = copy.deepcopy(small_cfg)
    mismatched["policy"]["actor_hidden_dims"] = [16]
    other = OnPolicyRunner(PointMass(num_envs=8, seed=0), mismatched)
    with pytest.raises(CheckpointError, match="does not fit this policy"):
        other.load(str(good))


def test_git_state_is_stored(small_cfg, tmp_path):
    runner = OnPolicyRunner(PointMass(num_envs=4, seed=0), small_cfg, log_dir=str(tmp_path))
    runner.add_git_repo_to_log(os.path.dirname(__file__))
    runner.learn(1)
    diffs = os.listdir(tmp_path / "git")
    assert diffs and all(d.endswith(".diff") for d in diffs)


def test_linear_schedule_length_comes_from_max_iterations(small_cfg):
    small_cfg["algorithm"].update(schedule="linear", learning_rate=2e-3)
    small_cfg["max_iterations"] = 4
    before = copy.deepcopy(small_cfg)
    runner = OnPolicyRunner(PointMass(num_envs=4, seed=0), small_cfg)
    assert small_cfg == before  # the user's config is not touched
    assert runner.alg.lr_anneal_iterations == 4
    runner.learn(3)
    # update(it) of the last iteration (it = 2) used 2e-3 * (1 - 2 / 4)
    assert runner.alg.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
