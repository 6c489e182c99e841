"""``st-rl tune``: search-space handling, the runner's trial hook, and a tiny study end to end (resume,
pruning, summary)."""

from __future__ import annotations

import json
import os

import pytest

optuna = pytest.importorskip("optuna")

from st_rl.cli import main  # noqa: E402
from st_rl.configs import get_preset  # noqa: E402
from st_rl.runners import OnPolicyRunner  # noqa: E402
from st_rl.tasks import VelocityTracking  # noqa: E402
from st_rl.tune import (  # noqa: E402
    DEFAULT_SPACE,
    apply_params,
    load_space,
    parse_space,
    run_study,
    suggest,
)

# Tiny networks and one PPO epoch: each trial trains in a few seconds on a busy CPU.
TINY_SPACE = {
    "algorithm.learning_rate": ["log", 1e-4, 1e-2],
    "algorithm.gamma": ["float", 0.95, 0.99],
    "algorithm.num_learning_epochs": 1,
    "algorithm.num_mini_batches": 1,
    "policy.hidden_width": ["categorical", 16, 32],
}


def test_default_space_draws_and_applies_every_key():
    space = parse_space(DEFAULT_SPACE)
    fixed = {
        "algorithm.learning_rate": 3e-4,
        "algorithm.entropy_coef": 0.005,
        "algorithm.gamma": 0.98,
        "algorithm.lam": 0.93,
        "algorithm.num_learning_epochs": 3,
        "algorithm.num_mini_batches": 4,
        "algorithm.clip_param": 0.15,
        "policy.hidden_width": 64,
    }
    params = suggest(optuna.trial.FixedTrial(fixed), space)
    assert params == fixed
    preset = get_preset("velocity_tracking")
    cfg, env_kwargs = apply_params(preset.train.to_dict(), {}, {**params, "env.episode_length_s": 4.0})
    assert cfg["algorithm"]["learning_rate"] == 3e-4 and cfg["algorithm"]["num_mini_batches"] == 4
    assert cfg["policy"]["actor_hidden_dims"] == [64, 64] == cfg["policy"]["critic_hidden_dims"]
    assert env_kwargs == {"episode_length_s": 4.0}
    assert preset.train.policy.actor_hidden_dims == [128, 64]  # the preset itself is untouched


def test_space_files_and_errors(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps({"algorithm.learning_rate": ["log", 1e-4, 1e-2], "num_steps_per_env": 16}))
    assert load_space(str(path)) == {"algorithm.learning_rate": ["log", 1e-4, 1e-2], "num_steps_per_env": 16}
    assert load_space('{"algorithm.lam": ["float", 0.9, 0.99]}') == {"algorithm.lam": ["float", 0.9, 0.99]}
    yaml_path = tmp_path / "space.yaml"
    yaml_path.write_text("algorithm.gamma: [categorical, 0.98, 0.99]\n")
    assert load_space(str(yaml_path)) == {"algorithm.gamma": ["categorical", 0.98, 0.99]}
    with pytest.raises(ValueError, match="unknown kind 'uniform'"):
        parse_space({"algorithm.gamma": ["uniform", 0.9, 0.99]})
    with pytest.raises(ValueError, match="low < high"):
        parse_space({"algorithm.gamma": ["float", 0.99, 0.9]})
    with pytest.raises(ValueError, match="low > 0"):
        parse_space({"algorithm.learning_rate": ["log", 0.0, 0.1]})
    with pytest.raises(ValueError, match="no section 'algoritm'"):
        apply_params({"algorithm": {}}, {}, {"algoritm.gamma": 0.9})
    with pytest.raises(ValueError, match="cannot read the search space"):
        load_space(str(tmp_path / "missing.json"))


class _RecordingTrial:
    def __init__(self) -> None:
        self.reports: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return False


def test_runner_trial_metric_is_configurable(small_cfg):
    runner = OnPolicyRunner(VelocityTracking(num_envs=16, seed=0), small_cfg)
    default, custom = _RecordingTrial(), _RecordingTrial()
    runner.learn(1, trial=default)  # backward compatible: reports velrmsd
    velrmsd, _ = runner.evaluation()
    assert len(default.reports) == 1 and default.reports[0][0] == pytest.approx(float(velrmsd))
    runner.learn(1, trial=custom, trial_metric=lambda m: m["CoT"] + 1.0)
    assert custom.reports == [(pytest.approx(float(runner.task_metrics["CoT"]) + 1.0), 1)]
    with pytest.raises(ValueError, match="Unknown trial_metric 'reward'"):
        runner.learn(1, trial=_RecordingTrial(), trial_metric="reward")


class _PruneAfterFirstStep(optuna.pruners.BasePruner):
    """Prunes every trial once it has reported a value at step 1 or later."""

    def prune(self, study, trial) -> bool:
        return trial.last_step is not None and trial.last_step >= 1


@pytest.mark.slow
def test_tune_study_resumes_prunes_and_summarises(tmp_path, capsys):
    root = tmp_path / "tune"
    space = tmp_path / "space.json"
    space.write_text(json.dumps(TINY_SPACE))
    common = ["tune", "--task", "velocity_tracking", "--iterations", "3", "--num-envs", "32"]
    common += ["--eval-envs", "16", "--log-root", str(root), "--study-name", "tiny", "--space", str(space)]
    assert main([*common, "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "trial 0 complete" in out and "trial 1 complete" in out
    assert "2 trials (2 complete" in out and "Best trial" in out
    storage = f"sqlite:///{root}/tiny.db"
    assert os.path.isfile(root / "tiny.db")
    assert os.path.isfile(root / "tiny" / "trial_0" / "model_3.pt")

    # A second invocation loads the same study and adds trials.
    assert main([*common, "--trials", "1"]) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="tiny", storage=storage)
    assert len(study.trials) == 3 and study.user_attrs == {"task": "velocity_tracking", "objective": "return"}
    assert f"Best trial {study.best_trial.number}: value {study.best_value:.6g}" in out
    assert os.path.isdir(root / "tiny" / "trial_2")

    # Pruning through the runner's trial hook (it reports the training episode return).
    run_study(
        "velocity_tracking",
        1,
        3,
        32,
        study_name="tiny",
        storage=storage,
        log_root=str(root),
        space=TINY_SPACE,
        eval_envs=16,
        pruner=_PruneAfterFirstStep(),
    )
    study = optuna.load_study(study_name="tiny", storage=storage)
    pruned = study.trials[-1]
    assert pruned.state == optuna.trial.TrialState.PRUNED
    assert pruned.user_attrs["iterations"] < 3 and 1 in pruned.intermediate_values
    assert "trial 3 pruned" in capsys.readouterr().out

    # --summary prints the table without training.
    assert main(["tune", "--summary", "--log-root", str(root), "--study-name", "tiny", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "4 trials (3 complete, 1 pruned, 0 failed" in out
    table = out[out.index("rank") :].splitlines()
    assert len(table) == 3 and "learning_rate" in table[0] and "hidden_width" in table[0]
    assert len(optuna.load_study(study_name="tiny", storage=storage).trials) == 4

    # Another objective on the same study is refused.
    assert main([*common, "--trials", "1", "--objective", "velrmsd"]) == 2
    assert "was created with objective='return'" in capsys.readouterr().err


def test_summary_of_a_missing_study_is_a_clear_error(tmp_path, capsys):
    assert main(["tune", "--summary", "--log-root", str(tmp_path), "--study-name", "nope"]) == 2
    assert "no study storage" in capsys.readouterr().err


def test_trials_of_a_killed_tune_are_marked_failed_on_restart(tmp_path):
    import socket
    import subprocess
    import sys

    from st_rl.tune import fail_interrupted_trials, open_study

    storage = f"sqlite:///{tmp_path}/s.db"
    study = open_study("s", storage, "return", "velocity_tracking", None, None)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    for pid in (int(dead.stdout), os.getpid()):  # a process that has exited, and this live one
        trial = study.ask()
        trial.set_user_attr("pid", pid)
        trial.set_user_attr("host", socket.gethostname())
    other_host = study.ask()
    other_host.set_user_attr("pid", int(dead.stdout))
    other_host.set_user_attr("host", "another-machine")

    assert fail_interrupted_trials(study) == [0]
    states = [t.state for t in optuna.load_study(study_name="s", storage=storage).trials]
    running = optuna.trial.TrialState.RUNNING
    assert states == [optuna.trial.TrialState.FAIL, running, running]


def test_tune_with_a_motion_file_trains_amp_and_records_the_gait_distance(tmp_path, capsys):
    """``st-rl tune --motion``: trials train APPO (a discriminator in the checkpoint), draw the AMP space's
    keys, and report the gait distance to the reference next to the objective."""
    pytest.importorskip("mujoco")
    import torch

    from st_rl.tasks.motion_recorder import record_scripted_trot
    from st_rl.tune import AMP_SPACE

    motion = tmp_path / "trot.motion"
    record_scripted_trot("quadruped_flat", str(motion), num_robots=2, duration_s=1.0)
    root = tmp_path / "tune"
    space = {**AMP_SPACE, "algorithm.num_learning_epochs": 1, "algorithm.num_mini_batches": 1}
    args = [
        "tune",
        "--task",
        "quadruped_flat",
        "--motion",
        str(motion),
        "--iterations",
        "1",
        "--num-envs",
        "16",
    ]
    args += ["--eval-envs", "8", "--eval-steps", "2", "--objective", "velrmsd", "--log-root", str(root)]
    args += ["--study-name", "amp", "--trials", "1", "--space", json.dumps(space), "--threads", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "trial 0 complete" in out and "gait_distance=" in out
    study = optuna.load_study(study_name="amp", storage=f"sqlite:///{root}/amp.db")
    trial = study.trials[0]
    assert set(AMP_SPACE) <= set(trial.params)
    assert trial.user_attrs["gait_distance"] > 0
    state = torch.load(root / "amp" / "trial_0" / "model_1.pt", weights_only=True)
    assert "amp_discriminator_state_dict" in state
    assert "gait_distance" in out[out.index("rank") :].splitlines()[0]
