"""Nothing waits forever, and a signal always ends training: SIGHUP saves like SIGTERM, a signal while training
starts or while it waits for data stops at once, every wait for data has a time limit, and a dataset nobody
writes is an error at once (TwoStageRunner's pretrain dataset, DaggerSaver's training run).

Deterministic: subprocesses are signalled only after they printed that they reached the phase under test,
waits are ended by monkeypatched time limits (a microsecond) or by ``RolloutDataset.wake()``, and every
subprocess has a timeout as a safety net (no assertion depends on how long anything takes).
"""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

import st_rl.runners.dagger_saver as dagger_saver
import st_rl.storage.rollout_files.rollout_dataset as rollout_dataset
from st_rl.runners import OnPolicyRunner, TrainingInterrupted, build_runner
from st_rl.runners.dagger_saver import DaggerSaver
from st_rl.runners.interrupt import STOP_SIGNALS, InterruptGuard, stop_at_once
from st_rl.runners.run_dir import LOCK_NAME
from st_rl.tasks import PointMass, make_env

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 300.0  # safety net for subprocesses; nothing below depends on speed
LONG = 3600.0  # a wait or poll that never ends within a test by itself
HAS_SIGHUP = hasattr(signal, "SIGHUP")

TINY: dict[str, Any] = {
    "seed": 1,
    "num_steps_per_env": 4,
    "save_interval": 50,
    "logger": "none",
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
}


# ---------------------------------------------------------------------- the guard, in process


def test_sighup_is_a_stop_signal_where_the_platform_has_it():
    names = {signal.Signals(s).name for s in STOP_SIGNALS}
    assert {"SIGINT", "SIGTERM"} <= names and ("SIGHUP" in names) == HAS_SIGHUP
    assert TrainingInterrupted(None, signal.SIGTERM).exit_code == 143
    if HAS_SIGHUP:
        assert TrainingInterrupted("m.pt", signal.SIGHUP).exit_code == 129


def test_a_signal_inside_immediate_raises_at_once_and_restores_the_handlers():
    previous = signal.getsignal(signal.SIGTERM)
    with InterruptGuard(announce=False) as guard:
        with pytest.raises(TrainingInterrupted) as info, guard.immediate("during start-up"):
            guard.handle(signal.SIGTERM)
        assert not guard.active  # the handlers are back: a further signal acts as before
    stop = info.value
    assert stop.aborted and stop.checkpoint is None and stop.during == "during start-up"
    assert str(stop) == "training stopped by SIGTERM during start-up; nothing saved"
    assert stop.exit_code == 143 and signal.getsignal(signal.SIGTERM) is previous


def test_a_stop_asked_for_before_a_wait_ends_it_at_once():
    with InterruptGuard(announce=False) as guard:
        guard.handle(signal.SIGINT)  # the first signal only asks for a stop ...
        assert guard.requested
        with pytest.raises(TrainingInterrupted) as info, stop_at_once("while waiting for data in d"):
            pytest.fail("the block must not run: nothing would end the wait")  # ... a wait stops at once
    assert info.value.during == "while waiting for data in d" and info.value.exit_code == 130


def test_stop_at_once_outside_learn_changes_nothing():
    with stop_at_once("while waiting"):
        pass  # no guard: the process's own signal handling applies


def test_immediate_phases_nest_and_end():
    with InterruptGuard(announce=False) as guard:
        with guard.immediate("outer"), guard.immediate("inner"):
            pass
        guard.handle(signal.SIGTERM)  # after the phases: a clean stop request again
        assert guard.requested and guard.active


def test_sighup_ignored_by_nohup_stays_ignored():
    """Under ``nohup`` SIGHUP is ignored: closing the terminal must not stop training."""
    if not HAS_SIGHUP:
        pytest.skip("no SIGHUP on this platform")
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with InterruptGuard(announce=False) as guard:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == guard.handle  # the others still stop training
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_after_sighup_a_hung_up_terminal_cannot_stop_the_save(monkeypatch):
    class DeadTerminal(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

        def flush(self) -> None:
            raise OSError(5, "Input/output error")

    if not HAS_SIGHUP:
        pytest.skip("no SIGHUP on this platform")
    monkeypatch.setattr(sys, "stdout", DeadTerminal())
    monkeypatch.setattr(sys, "stderr", DeadTerminal())
    with InterruptGuard() as guard:
        guard.handle(signal.SIGHUP)  # announces on the dead stderr: dropped
        assert guard.signum == signal.SIGHUP
        print("iteration log", flush=True)  # dropped instead of raising EIO
        sys.stderr.write("interrupted: saved model.pt\n")


class _SignalAtStart(PointMass):
    """PointMass that calls the installed stop handler when learn() reads its first observation."""

    def __init__(self, sig: int, **kwargs: Any) -> None:
        self.sig, self.steps = sig, 0
        super().__init__(**kwargs)

    def get_observations(self):
        handler = signal.getsignal(self.sig)
        if isinstance(getattr(handler, "__self__", None), InterruptGuard):  # inside learn(), not at set-up
            handler(self.sig, None)  # type: ignore[operator]
        return super().get_observations()

    def step(self, actions: torch.Tensor):
        self.steps += 1
        return super().step(actions)


def test_a_signal_during_start_up_stops_at_once(tmp_path):
    env = _SignalAtStart(signal.SIGTERM, num_envs=4, seed=0)
    runner = OnPolicyRunner(env, copy.deepcopy(TINY), log_dir=str(tmp_path / "run"), device="cpu")
    with pytest.raises(TrainingInterrupted) as info:
        runner.learn(100)
    assert info.value.during == "during start-up" and info.value.exit_code == 143
    assert env.steps == 0 and runner.current_learning_iteration == 0  # no iteration was started
    assert not list((tmp_path / "run").glob("model_*.pt"))
    runner.close()
    assert not (tmp_path / "run" / LOCK_NAME).exists()


# ---------------------------------------------------------------------- TwoStageRunner's pretrain dataset


@pytest.fixture(scope="module")
def teacher_checkpoint(tmp_path_factory) -> str:
    """A privileged velocity-tracking teacher (untrained) for the TPPO students below."""
    from st_rl.configs import get_preset

    cfg = get_preset("velocity_tracking").train.to_dict()
    cfg.update(logger="none", num_steps_per_env=4)
    cfg["obs_groups"] = {"policy": ["critic"], "critic": ["critic"]}
    teacher = OnPolicyRunner(make_env("velocity_tracking", num_envs=4, seed=1), cfg)
    path = str(tmp_path_factory.mktemp("teacher") / "teacher.pt")
    teacher.save(path)
    return path


def two_stage_cfg(teacher: str, **dataset: Any) -> dict[str, Any]:
    """A TwoStageRunner (TPPO student on velocity_tracking) pretraining from ``pretrain_dataset``."""
    from st_rl.configs import get_preset

    cfg = get_preset("velocity_tracking").train.to_dict()
    ppo = dict(cfg["algorithm"], num_mini_batches=1, num_learning_epochs=1)
    ppo.pop("class_name", None)
    cfg.update(logger="none", log_interval=1000, num_steps_per_env=4, save_interval=1000, max_iterations=2)
    cfg["runner_class_name"] = "TwoStageRunner"
    cfg["policy"] = {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]}
    cfg["algorithm"] = {
        "class_name": "TPPO",
        "ppo": ppo,
        "teacher_policy": {"teacher_ac_path": teacher},
        "teacher_act_prob": 0.0,
        "using_ppo": True,
    }
    cfg["pretrain_iterations"] = 1
    cfg["pretrain_dataset"] = {"dataset_loops": -1, "poll_interval_s": LONG, **dataset}
    return cfg


def _two_stage(teacher: str, log_dir: Path | None = None, **dataset: Any) -> OnPolicyRunner:
    env = make_env("velocity_tracking", num_envs=4, seed=2)
    return build_runner(
        "TwoStageRunner",
        env,
        two_stage_cfg(teacher, **dataset),
        log_dir=None if log_dir is None else str(log_dir),
    )


@pytest.mark.parametrize("exists", [False, True], ids=["missing-dir", "empty-dir"])
def test_two_stage_runner_with_no_dataset_fails_at_once(tmp_path, teacher_checkpoint, exists):
    data = tmp_path / "demos"
    if exists:
        data.mkdir()
    runner = _two_stage(teacher_checkpoint, tmp_path / "run", data_dir=str(data))
    with pytest.raises(FileNotFoundError) as info:
        runner.learn(2)
    message = str(info.value)
    assert str(data) in message and "trajectory_<k>/traj_<a>_<b>.npz" in message
    assert "no collector has started writing there" in message and "nothing will arrive" in message
    assert "pretrain_dataset.wait_for_data_s" in message
    assert runner.current_learning_iteration == 0 and data.exists() == exists
    runner.close()
    assert not (tmp_path / "run" / LOCK_NAME).exists()


def test_two_stage_runner_wait_has_a_time_limit(tmp_path, teacher_checkpoint, monkeypatch):
    data = tmp_path / "demos"
    (data / "trajectory_0").mkdir(parents=True)  # a collector started writing, then nothing came
    monkeypatch.setattr(rollout_dataset, "DEFAULT_WAIT_FOR_DATA_S", 1e-6)
    runner = _two_stage(teacher_checkpoint, data_dir=str(data))
    with pytest.raises(FileNotFoundError, match=r"no trajectory in .*demos.* after waiting 1e-06 s"):
        runner.learn(1)
    # An explicit wait ends the same way.
    explicit = _two_stage(teacher_checkpoint, data_dir=str(tmp_path / "later"), wait_for_data_s=1e-6)
    with pytest.raises(FileNotFoundError, match=r"later.* after waiting 1e-06 s"):
        explicit.learn(1)
    assert (tmp_path / "later").is_dir()  # created for the collector while waiting


def test_a_signal_while_the_two_stage_runner_waits_stops_at_once(tmp_path, teacher_checkpoint):
    """In process: the collector 'thread' sends the signal once the dataset waits (instead of writing)."""
    data = tmp_path / "demos"
    runner = _two_stage(teacher_checkpoint, tmp_path / "run", data_dir=str(data), wait_for_data_s=LONG)
    dataset = runner.rollout_dataset  # type: ignore[attr-defined]
    main = threading.main_thread().ident

    def interrupt() -> None:
        if dataset.waiting_for_data.wait(timeout=DEADLINE_S):
            assert main is not None
            signal.pthread_kill(main, signal.SIGTERM)  # handled by the runner's guard in the main thread

    if not hasattr(signal, "pthread_kill"):
        pytest.skip("no pthread_kill on this platform")
    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    with pytest.raises(TrainingInterrupted) as info:
        runner.learn(2)
    thread.join(timeout=DEADLINE_S)
    stop = info.value
    assert stop.during == f"while waiting for the pretrain dataset in {data}" and stop.exit_code == 143
    assert (
        str(stop)
        == f"training stopped by SIGTERM while waiting for the pretrain dataset in {data}; nothing saved"
    )
    assert runner.current_learning_iteration == 0 and not list((tmp_path / "run").glob("model_*.pt"))
    runner.close()


# ---------------------------------------------------------------------- real processes


def _spawn(cmd: list[str], out: Path, **env: str) -> subprocess.Popen:
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
        return subprocess.Popen(cmd, stdout=stdout, stderr=stderr, cwd=REPO, env=environ)


def _output(out: Path) -> str:
    return out.with_suffix(".out").read_text() + out.with_suffix(".err").read_text()


def _wait_for_text(proc: subprocess.Popen, out: Path, text: str) -> None:
    """Until ``text`` appears in the process's stdout; fail with its output if it ends first. The process's
    own timeout (killed by the safety net below) bounds the loop."""
    import time

    deadline = time.monotonic() + DEADLINE_S
    while text not in out.with_suffix(".out").read_text():
        if proc.poll() is not None:
            pytest.fail(f"the process ended early (exit code {proc.returncode}):\n{_output(out)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"{text!r} did not appear within {DEADLINE_S} s:\n{_output(out)}")
        time.sleep(0.05)


def _ends_with(proc: subprocess.Popen, out: Path, code: int) -> list[str]:
    """The process ends (within the safety net) with ``code``; returns its stderr lines."""
    try:
        assert proc.wait(timeout=DEADLINE_S) == code, _output(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.with_suffix(".err").read_text().splitlines()


def _train(log_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "st_rl", "train", "--task", "velocity_tracking", "--num-envs", "4",
        "--iterations", "2", "--threads", "1", "--log-dir", str(log_dir), *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_cli_signal_while_waiting_for_the_pretrain_dataset_exits_at_once(
    tmp_path, teacher_checkpoint, sig, code
):
    """The issue: after the first SIGTERM ("finishing this iteration...") a TwoStageRunner waiting for its
    dataset never ended, so ``timeout`` could not stop it."""
    data = tmp_path / "demos"
    config = tmp_path / "two_stage.json"
    config.write_text(json.dumps(two_stage_cfg(teacher_checkpoint, data_dir=str(data), wait_for_data_s=LONG)))
    out = tmp_path / "log"
    proc = _spawn(_train(tmp_path / "run", "--config", str(config)), out)
    _wait_for_text(proc, out, "RolloutDataset: 0 trajectories")  # it waits
    proc.send_signal(sig)
    err = _ends_with(proc, out, code)
    name = signal.Signals(sig).name
    assert err[-1] == (
        f"interrupted: training stopped by {name} while waiting for the pretrain dataset in {data}; nothing saved"
    ), _output(out)
    assert not list((tmp_path / "run").glob("model_*.pt")) and not (tmp_path / "run" / LOCK_NAME).exists()


def test_cli_with_an_empty_pretrain_dataset_fails_at_once(tmp_path, teacher_checkpoint):
    data = tmp_path / "demos"
    data.mkdir()
    config = tmp_path / "two_stage.json"
    config.write_text(json.dumps(two_stage_cfg(teacher_checkpoint, data_dir=str(data))))
    proc = subprocess.run(
        _train(tmp_path / "run", "--config", str(config)),
        capture_output=True, text=True, cwd=REPO, timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("st-rl: error: RolloutDataset: no trajectory in"), proc.stderr
    assert str(data) in err[0] and "nothing will arrive" in err[0]


BLOCKING_WRITER = '''
import sys, threading


class BlockingWriter:
    """A logger whose start never ends (a W&B login without network, say)."""

    def __init__(self, log_dir=None, cfg=None, **kwargs):
        print("[blocking_writer] connecting", flush=True)
        threading.Event().wait()

    def add_scalar(self, *args, **kwargs):
        pass
'''


def test_cli_signal_during_start_up_exits_at_once(tmp_path):
    (tmp_path / "blocking_writer.py").write_text(BLOCKING_WRITER)
    out = tmp_path / "log"
    cmd = _train(tmp_path / "run", "logger=blocking_writer:BlockingWriter", "num_steps_per_env=4")
    cmd[cmd.index("velocity_tracking")] = "point_mass"
    proc = _spawn(cmd, out, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    _wait_for_text(proc, out, "[blocking_writer] connecting")
    proc.send_signal(signal.SIGTERM)
    err = _ends_with(proc, out, 143)
    assert err[-1] == "interrupted: training stopped by SIGTERM during start-up; nothing saved", _output(out)
    assert not (tmp_path / "run" / LOCK_NAME).exists()


@pytest.mark.skipif(not HAS_SIGHUP, reason="no SIGHUP on this platform")
def test_cli_sighup_after_the_terminal_hung_up_saves_a_checkpoint(tmp_path):
    """The terminal closes (its pty master goes away: writes fail with EIO), then SIGHUP arrives: training
    finishes the iteration, saves, releases the lock and exits with 129, printing into the void."""
    import pty

    master, slave = pty.openpty()
    run = tmp_path / "run"
    cmd = _train(run, "save_interval=1000", "num_steps_per_env=4")
    cmd[cmd.index("velocity_tracking")] = "point_mass"
    cmd[cmd.index("--iterations") + 1] = "100000"
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, cwd=REPO, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        while b"Learning iteration" not in seen:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                pytest.fail(f"training ended before its first iteration:\n{seen.decode(errors='replace')}")
            seen += chunk
    finally:
        os.close(master)  # the terminal is gone
    proc.send_signal(signal.SIGHUP)
    try:
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 129
    models = sorted(run.glob("model_*.pt"))
    assert models and not (run / LOCK_NAME).exists() and not list(run.glob(".tmp_*"))


# ---------------------------------------------------------------------- DaggerSaver and the training run


def _saver(tmp_path: Path, logdir: Path, **kwargs: Any) -> DaggerSaver:
    env = make_env("velocity_tracking", num_envs=4, seed=0)
    return DaggerSaver(
        env,
        lambda obs: torch.zeros(obs.shape[0], 2),
        str(tmp_path / "data"),
        training_policy_logdir=str(logdir),
        **kwargs,
    )


def test_dagger_saver_without_a_training_run_fails_at_once(tmp_path):
    missing = tmp_path / "student"
    with pytest.raises(FileNotFoundError) as info:
        _saver(tmp_path, missing).build_training_policy()
    message = str(info.value)
    assert str(missing) in message and "does not exist" in message and "wait_for_run_s" in message
    with pytest.raises(FileNotFoundError, match="No config.json"):  # wait_for_run_s=0: never waits
        _saver(tmp_path, tmp_path, wait_for_run_s=0).build_training_policy()


def test_dagger_saver_waits_for_the_training_run_with_a_time_limit(tmp_path, monkeypatch):
    logdir = tmp_path / "student"
    logdir.mkdir()  # a run is starting there: the default waits, up to DEFAULT_WAIT_FOR_RUN_S
    monkeypatch.setattr(dagger_saver, "DEFAULT_WAIT_FOR_RUN_S", 1e-6)
    with pytest.raises(FileNotFoundError) as info:
        _saver(tmp_path, logdir).build_training_policy()
    message = str(info.value)
    assert f"no config.json in {logdir} after waiting 1e-06 s" in message and "learn() starts" in message


def test_dagger_saver_waits_until_the_training_run_writes_its_config(tmp_path, monkeypatch):
    source = tmp_path / "source"
    OnPolicyRunner(make_env("velocity_tracking", num_envs=4, seed=1), copy.deepcopy(TINY), str(source)).learn(
        1
    )
    logdir = tmp_path / "student"
    monkeypatch.setattr(dagger_saver, "RUN_POLL_INTERVAL_S", 0.01)

    def start_the_run() -> None:  # the whole directory appears at once, as a runner's claim writes it
        shutil.copytree(source, tmp_path / "partial")
        os.rename(tmp_path / "partial", logdir)

    writer = threading.Timer(0.0, start_the_run)
    saver = _saver(tmp_path, logdir, wait_for_run_s=DEADLINE_S)  # the run starts after the collector
    writer.start()
    try:
        saver.build_training_policy()
    finally:
        writer.cancel()
        writer.join()
    assert type(saver.training_policy).__name__ == "ActorCritic"
