"""Checkpoints never carry a broken policy, and loading one is all or nothing.

NaN/Inf weights or statistics are refused on save (the last good file stays), on load, by play and export;
NaN outputs of an exported file are refused by export's self-check and by ``st-rl play --policy``; the
observation normaliser never merges a non-finite batch; a bad checkpoint leaves the runner exactly as it was;
a checkpoint without optimizer or normaliser state is loaded with a warning.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest
import torch

from st_rl.cli import main
from st_rl.env import NonFiniteError
from st_rl.modules.normalizer import EmpiricalNormalization, NonFiniteObservationError
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import PointMass, VelocityTracking
from st_rl.utils.checkpoint import (
    CheckpointError,
    NonFiniteCheckpointError,
    capture_rng_state,
    check_rng_state,
    load_checkpoint,
)


def _cfg(policy: str = "ActorCritic") -> dict[str, Any]:
    extra = {"rnn_type": "gru", "rnn_hidden_size": 8} if policy != "ActorCritic" else {}
    return {
        "seed": 1,
        "task": "velocity_tracking",
        "num_steps_per_env": 8,
        "save_interval": 100,
        "empirical_normalization": True,
        "logger": "none",
        "policy": {"class_name": policy, "actor_hidden_dims": [16], "critic_hidden_dims": [16], **extra},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
    }


def _runner(log_dir: str | None = None, policy: str = "ActorCritic", seed: int = 0) -> OnPolicyRunner:
    return OnPolicyRunner(VelocityTracking(num_envs=8, seed=seed), _cfg(policy), log_dir=log_dir)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> str:
    """A 2-iteration recurrent run's checkpoint (optimizer, RNG, env and memory state)."""
    torch.set_num_threads(2)
    log_dir = str(tmp_path_factory.mktemp("good") / "run")
    _runner(log_dir, "ActorCriticRecurrent").learn(2)
    return os.path.join(log_dir, "model_2.pt")


def _variant(good: str, tmp_path, change: Callable[[dict[str, Any]], None], name: str = "bad.pt") -> str:
    state = torch.load(good, weights_only=True)
    change(state)
    path = str(tmp_path / name)
    torch.save(state, path)
    return path


def _poison(state: dict[str, Any]) -> None:
    state["model_state_dict"]["actor.0.weight"][0, 0] = float("nan")
    state["model_state_dict"]["actor_obs_normalizer._var"][0, 1] = float("inf")


# ---------------------------------------------------------------------------------------------------- save
def test_save_refuses_nonfinite_weights_and_keeps_the_last_good_file(tmp_path):
    runner = _runner(str(tmp_path))
    runner.learn(2)
    good = tmp_path / "model_2.pt"
    data = good.read_bytes()
    with torch.no_grad():
        runner.alg.actor_critic.actor[0].weight[1, 2] = float("nan")
    with pytest.raises(NonFiniteCheckpointError) as info:
        runner.save(str(good))
    message = str(info.value)
    assert "model_state_dict['actor.0.weight']" in message and "iteration 2" in message
    assert f"last good checkpoint is {os.path.abspath(good)}" in message and "left unchanged" in message
    assert good.read_bytes() == data
    with pytest.raises(NonFiniteCheckpointError, match="Nothing was written"):
        runner.save(str(tmp_path / "model_3.pt"))
    assert not any(f.startswith(".tmp") or f == "model_3.pt" for f in os.listdir(tmp_path))
    assert load_checkpoint(str(good))["iter"] == 2


def test_save_refuses_nonfinite_normaliser_statistics(tmp_path):
    runner = _runner()
    runner.alg.actor_critic.actor_obs_normalizer._mean[0, 0] = float("inf")
    with pytest.raises(
        NonFiniteCheckpointError, match=r"actor_obs_normalizer\._mean.*has not written or loaded"
    ):
        runner.save(str(tmp_path / "model_0.pt"))
    assert not (tmp_path / "model_0.pt").exists()


def test_a_loaded_checkpoint_is_the_last_good_one(good, tmp_path):
    runner = _runner(policy="ActorCriticRecurrent")
    runner.load(good)
    with torch.no_grad():
        runner.alg.actor_critic.critic[0].bias[0] = float("nan")
    with pytest.raises(NonFiniteCheckpointError, match=f"last good checkpoint is {os.path.abspath(good)}"):
        runner.save(str(tmp_path / "model_3.pt"))


# ---------------------------------------------------------------------------------------------------- load
def test_load_refuses_a_nonfinite_checkpoint(good, tmp_path):
    bad = _variant(good, tmp_path, _poison)
    runner = _runner(policy="ActorCriticRecurrent", seed=4)
    before = _runner_state(runner)
    with pytest.raises(NonFiniteCheckpointError) as info:
        runner.load(bad)
    message = str(info.value)
    assert bad in message and "model_state_dict['actor.0.weight']" in message
    assert "model_state_dict['actor_obs_normalizer._var']" in message
    _assert_unchanged(before, _runner_state(runner))
    with pytest.raises(NonFiniteCheckpointError):  # also when only the weights are wanted (play, export)
        runner.load(bad, load_optimizer=False)
    _assert_unchanged(before, _runner_state(runner))


def test_play_and_export_refuse_a_nonfinite_checkpoint(good, tmp_path, capsys):
    from st_rl.export import ExportError, export_policy
    from st_rl.play import play

    run = tmp_path / "run"
    run.mkdir()
    bad = _variant(good, run, _poison, "model_2.pt")
    with pytest.raises(NonFiniteCheckpointError, match="NaN/Inf"):
        play(bad, num_envs=2, duration_s=0.2, verbose=False)
    assert main(["play", "--checkpoint", bad, "--num-envs", "2", "--duration", "0.2", "--no-video",
                 "--no-plot"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert bad in err and "NaN/Inf" in err
    with pytest.raises(ExportError, match="broken policy.*NaN/Inf"):
        export_policy(bad, str(tmp_path / "out"), ["torchscript"])
    assert (
        main(["export", "--checkpoint", bad, "--format", "torchscript", "--out", str(tmp_path / "out")]) == 2
    )
    assert "NaN/Inf" in capsys.readouterr().err
    assert not (tmp_path / "out" / "policy.pt").exists()


def test_export_refuses_a_nonfinite_runner_policy(tmp_path):
    from st_rl.export import ExportError, export_policy

    runner = _runner()
    runner.alg.actor_critic.actor_obs_normalizer._std[0, 0] = float("nan")
    with pytest.raises(ExportError, match=r"actor_obs_normalizer\._std"):
        export_policy(runner, str(tmp_path), ["torchscript"])


def _explosive_runner() -> OnPolicyRunner:
    """Finite parameters whose actions overflow to Inf/NaN."""
    runner = _runner()
    with torch.no_grad():
        for layer in runner.alg.actor_critic.actor:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.fill_(3e37)
    return runner


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_self_check_fails_on_nonfinite_outputs(fmt, tmp_path):
    pytest.importorskip("onnxruntime")
    from st_rl.export import ExportError, export_policy

    with pytest.raises(ExportError, match="NaN/Inf in actions"):
        export_policy(_explosive_runner(), str(tmp_path), [fmt])


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_play_refuses_an_exported_policy_with_nonfinite_outputs(fmt, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from st_rl.export import export_policy
    from st_rl.play import NonFiniteActionsError, play_exported

    result = export_policy(_explosive_runner(), str(tmp_path), [fmt], check=False, task="velocity_tracking")
    path = result.files[fmt]
    with pytest.raises(NonFiniteActionsError, match="on the first step"):
        play_exported(path, num_envs=2, duration_s=0.2, verbose=False)
    assert main(["play", "--policy", path, "--num-envs", "2", "--duration", "0.2", "--no-video",
                 "--no-plot"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert path in err and "NaN/Inf actions on the first step" in err


# ---------------------------------------------------------------------------------------------------- normaliser
def test_normaliser_refuses_nonfinite_batches():
    norm = EmpiricalNormalization(3, name="actor_obs_normalizer")
    norm.update(torch.randn(10, 3))
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    for bad in (float("nan"), float("inf"), float("-inf")):
        batch = torch.randn(4, 3)
        batch[2, 1] = bad
        with pytest.raises(NonFiniteObservationError, match="'actor_obs_normalizer'.*not updated"):
            norm.update(batch)
        for key, value in norm.state_dict().items():
            assert torch.equal(value, before[key]), key
    norm.update(torch.randn(5, 3))  # and it goes on with finite batches
    assert int(norm.count) == 15 and torch.isfinite(norm._var).all()


def test_normaliser_device_path_skips_nonfinite_batches_without_a_sync():
    """The accelerator path (exercised here on CPU tensors): same statistics as the CPU path for finite
    batches, bitwise; a non-finite batch is skipped and reported by raise_if_nonfinite."""
    torch.manual_seed(0)
    batches = [torch.randn(6, 3) * 3 + 1 for _ in range(3)]
    plain, guarded = EmpiricalNormalization(3), EmpiricalNormalization(3, name="n")

    def guarded_update(x: torch.Tensor) -> None:
        var_x, mean_x = torch.var_mean(x, dim=0, keepdim=True, correction=0)
        finite = torch.isfinite(mean_x).all() & torch.isfinite(var_x).all()
        guarded._guarded_update(x.shape[0], mean_x, var_x, finite)

    for x in batches:
        plain.update(x)
        guarded_update(x)
    for key, value in plain.state_dict().items():
        assert torch.equal(value, guarded.state_dict()[key]), key
    guarded.raise_if_nonfinite()  # nothing skipped
    poisoned = batches[0].clone()
    poisoned[0, 0] = float("nan")
    guarded_update(poisoned)
    for key, value in plain.state_dict().items():
        assert torch.equal(value, guarded.state_dict()[key]), key
    with pytest.raises(NonFiniteObservationError, match="'n' skipped 1 batch"):
        guarded.raise_if_nonfinite()
    guarded.raise_if_nonfinite()  # reported once


def _nan_at_step(env: Any, step: int) -> None:
    original, calls = env.step, [0]

    def bad_step(actions):
        obs, rew, dones, extras = original(actions)
        calls[0] += 1
        if calls[0] == step:
            obs = obs.clone()
            obs[1, 0] = float("nan")
        return obs, rew, dones, extras

    env.step = bad_step


@pytest.mark.parametrize("check_finite", ["rollout", "off"])
def test_nan_observations_never_reach_the_normaliser(check_finite):
    env = PointMass(num_envs=4, seed=0)
    cfg = {**_cfg(), "check_finite": check_finite, "task": "point_mass"}
    runner = OnPolicyRunner(env, cfg)
    _nan_at_step(env, 3)
    norm = runner.alg.actor_critic.actor_obs_normalizer
    if check_finite == "rollout":  # the environment adapter reports it, once, naming the group
        with pytest.raises(NonFiniteError, match="observation group 'policy'"):
            runner.learn(1)
    else:  # nobody else checks: the normaliser does
        with pytest.raises(NonFiniteObservationError, match="'actor_obs_normalizer'"):
            runner.learn(1)
    assert int(norm.count) == 2 * env.num_envs  # the two finite steps only
    assert all(torch.isfinite(v).all() for v in norm.state_dict().values())


# ---------------------------------------------------------------------------------------------------- all or nothing
def _runner_state(runner: OnPolicyRunner) -> dict[str, Any]:
    return {
        "alg": copy.deepcopy(runner.alg.state_dict()),
        "rollout": copy.deepcopy(runner.alg.actor_critic.rollout_state_dict()),
        "env": runner.env.state_dict(),
        "rng": capture_rng_state(),
        "iter": runner.current_learning_iteration,
        "lr": runner.alg.learning_rate,
    }


def _assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    def equal(a: Any, b: Any, where: str) -> None:
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), f"{where} changed"
        elif isinstance(a, dict):
            assert a.keys() == b.keys(), f"{where}: keys changed"
            for k in a:
                equal(a[k], b[k], f"{where}[{k!r}]")
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                equal(x, y, f"{where}[{i}]")
        else:
            assert a == b, f"{where}: {a!r} -> {b!r}"

    equal(before, after, "runner")


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value

    return change


def _extra_group(state: dict[str, Any]) -> None:
    groups = state["optimizer_state_dict"]["param_groups"]
    groups.append({**groups[0], "params": [max(groups[0]["params"]) + 1]})


def _drop_param(state: dict[str, Any]) -> None:
    state["optimizer_state_dict"]["param_groups"][0]["params"].pop()


def _wrong_moment(state: dict[str, Any]) -> None:
    entry = next(iter(state["optimizer_state_dict"]["state"].values()))
    entry["exp_avg"] = torch.zeros(3, 3, 3)


def _missing_key(state: dict[str, Any]) -> None:
    del state["model_state_dict"]["critic.0.bias"]


def _unexpected_key(state: dict[str, Any]) -> None:
    state["model_state_dict"]["actor.9.weight"] = torch.zeros(2)


BAD_CHECKPOINTS = {
    "negative iter": (_set(["iter"], -1), r"'iter' is -1"),
    "float iter": (_set(["iter"], 2.5), r"'iter' is 2\.5"),
    "string iter": (_set(["iter"], "2"), r"'iter' is '2'"),
    "torch RNG": (_set(["rng_state", "torch"], torch.zeros(7, dtype=torch.uint8)), r"rng_state\['torch'\]"),
    "numpy RNG": (_set(["rng_state", "numpy", "keys"], torch.zeros(5, dtype=torch.int64)), r"rng_state\['numpy'\]"),
    "python RNG": (_set(["rng_state", "python"], [1, 2, 3]), r"rng_state\['python'\]"),
    "RNG not a dict": (_set(["rng_state"], [1, 2]), r"rng_state is a list"),
    "optimizer groups": (_extra_group, r"optimizer_state_dict has 2 parameter group\(s\), this runner's optimizer 1"),
    "optimizer params": (_drop_param, r"optimizer_state_dict\['param_groups'\]\[0\] has \d+ parameters"),
    "optimizer moment shape": (_wrong_moment, r"optimizer_state_dict\['state'\]\[\d+\]\['exp_avg'\] has shape"),
    "weight shape": (_set(["model_state_dict", "actor.0.weight"], torch.zeros(16, 99)),
                     r"does not fit this policy.*'actor\.0\.weight' is \(16, 99\) in the file"),
    "missing weight": (_missing_key, r"does not fit this policy.*lacks critic\.0\.bias"),
    "unexpected weight": (_unexpected_key, r"does not fit this policy.*unexpected actor\.9\.weight"),
    "nan weight": (_poison, r"NaN/Inf in model_state_dict\['actor\.0\.weight'\]"),
    "nan memory": (_set(["policy_rollout_state", "memory_a", "hidden"], lambda t: t * float("nan")),
                   r"NaN/Inf in policy_rollout_state\['memory_a'\]\['hidden'\]"),
}  # fmt: skip


@pytest.fixture(scope="module")
def used_runner(tmp_path_factory) -> OnPolicyRunner:
    """A runner that has trained (optimizer moments, memories, moved RNG) and then loaded nothing."""
    torch.set_num_threads(2)
    runner = _runner(policy="ActorCriticRecurrent", seed=3)
    runner.learn(1)
    return runner


@pytest.mark.parametrize("case", list(BAD_CHECKPOINTS))
def test_a_bad_checkpoint_leaves_the_runner_as_it_was(case, good, used_runner, tmp_path):
    change, match = BAD_CHECKPOINTS[case]
    bad = _variant(good, tmp_path, change)
    torch.manual_seed(11)
    before = _runner_state(used_runner)
    with pytest.raises(CheckpointError, match=match) as info:
        used_runner.load(bad)
    assert bad in str(info.value)
    _assert_unchanged(before, _runner_state(used_runner))
    used_runner.load(good)  # and the runner still loads a good one


def test_a_failure_while_applying_is_rolled_back(good, used_runner, tmp_path, monkeypatch):
    """A problem only found while restoring (here: the RNG) puts back what was already loaded."""
    import st_rl.utils.checkpoint as ckpt

    original, calls = ckpt.restore_rng_state, []

    def failing_once(state):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("device mismatch")
        original(state)

    monkeypatch.setattr(ckpt, "restore_rng_state", failing_once)
    before = _runner_state(used_runner)
    with pytest.raises(CheckpointError, match="could not be loaded.*device mismatch.*left as it was"):
        used_runner.load(good)
    _assert_unchanged(before, _runner_state(used_runner))


def test_an_environment_state_that_does_not_fit_is_not_half_restored(good, used_runner, tmp_path):
    """The environment state is optional (another number of envs is a valid resume): a warning, and the
    environment keeps its whole current state rather than part of the file's."""

    def wrong_buffer(state: dict[str, Any]) -> None:
        state["env_state"]["mass"] = torch.ones(3, 1)  # loaded after buffers that do fit

    bad = _variant(good, tmp_path, wrong_buffer)
    env_before = used_runner.env.state_dict()
    with pytest.warns(UserWarning, match="not restored.*the environment's episodes"):
        used_runner.load(bad)
    _assert_unchanged(env_before, used_runner.env.state_dict())
    assert used_runner.current_learning_iteration == 2


def test_check_rng_state_accepts_a_real_state_and_touches_no_generator():
    state = capture_rng_state()
    check_rng_state(state)
    assert torch.equal(torch.get_rng_state(), state["torch"])


# ---------------------------------------------------------------------------------------------------- warnings
def _no_optimizer(state: dict[str, Any]) -> None:
    del state["optimizer_state_dict"]


def _no_normaliser(state: dict[str, Any]) -> None:
    model = state["model_state_dict"]
    for key in [k for k in model if k.startswith("actor_obs_normalizer.")]:
        del model[key]
    del state["obs_norm_state_dict"]  # the reference's copy, else the statistics would be loaded from it


def test_missing_optimizer_state_is_reported(good, tmp_path):
    path = _variant(good, tmp_path, _no_optimizer)
    runner = _runner(policy="ActorCriticRecurrent")
    with pytest.warns(UserWarning, match="no optimizer state.*the optimizer starts fresh") as record:
        runner.load(path)
    assert any(path in str(w.message) for w in record)
    assert runner.alg.optimizer.state_dict()["state"] == {}
    assert runner.current_learning_iteration == 2


def test_missing_normaliser_state_is_reported(good, tmp_path):
    path = _variant(good, tmp_path, _no_normaliser)
    runner = _runner(policy="ActorCriticRecurrent")
    fresh_mean = runner.alg.actor_critic.actor_obs_normalizer._mean.clone()
    with pytest.warns(UserWarning) as record:
        runner.load(path, load_optimizer=False)
    messages = [str(w.message) for w in record]
    assert any(
        path in m and "actor_obs_normalizer" in m and "keeps its current statistics" in m for m in messages
    )
    assert sum("actor_obs_normalizer" in m for m in messages) == 1, messages  # reported once
    assert torch.equal(runner.alg.actor_critic.actor_obs_normalizer._mean, fresh_mean)
    saved = load_checkpoint(good)["model_state_dict"]["critic_obs_normalizer._mean"]
    assert torch.equal(runner.alg.actor_critic.critic_obs_normalizer._mean, saved)


def test_a_complete_checkpoint_loads_without_warnings(good, recwarn):
    runner = _runner(policy="ActorCriticRecurrent")
    runner.load(good)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)], [str(w.message) for w in recwarn]
