"""Never lose a run: one writer per run directory, no training over an earlier run, clean stops on signals,
checkpoints that survive ``kill -9``."""

from __future__ import annotations

import copy
import glob
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from st_rl.cli import main
from st_rl.runners import (
    OnPolicyRunner,
    RunDirectoryError,
    RunDirectoryLocked,
    TrainingInterrupted,
)
from st_rl.runners.interrupt import InterruptGuard
from st_rl.runners.run_dir import LOCK_NAME, RunDirLock, check_run_dir, read_lock
from st_rl.tasks import PointMass
from st_rl.utils.checkpoint import load_checkpoint
from st_rl.utils.logger import NullWriter

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 300.0  # generous: the machine may be busy; nothing below depends on speed

CFG: dict[str, Any] = {
    "seed": 1,
    "num_steps_per_env": 4,
    "save_interval": 1,
    "logger": "tensorboard",
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
}


def _cfg(**runner: Any) -> dict[str, Any]:
    return {**copy.deepcopy(CFG), **runner}


def _runner(log_dir: Path, env: Any = None, **runner: Any) -> OnPolicyRunner:
    env = env if env is not None else PointMass(num_envs=4, seed=0)
    return OnPolicyRunner(env, _cfg(**runner), log_dir=str(log_dir), device="cpu")


def _listing(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time."""
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(directory))] = (st.st_size, st.st_mtime_ns)
    return out


def _dead_pid() -> int:
    """The pid of a process of this host that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _write_lock(directory: Path, pid: int, host: str | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host or socket.gethostname()}))


def _finished_run(directory: Path, iterations: int = 2) -> None:
    with _runner(directory) as runner:
        runner.learn(iterations)


# ---------------------------------------------------------------------- one writer


def test_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom st_rl.runners.run_dir import RunDirLock\n"
            f"lock = RunDirLock({str(run)!r}); lock.acquire(); print('locked', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryLocked) as info:
            _runner(run)
        message = str(info.value)
        assert str(run) in message and f"process {holder.pid}" in message
        assert info.value.pid == holder.pid
        with pytest.raises(RunDirectoryLocked, match=f"process {holder.pid}"):
            check_run_dir(str(run))
        assert os.listdir(run) == [LOCK_NAME]  # the refused runner wrote nothing
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=DEADLINE_S)
    # The holder released the lock when it ended: the directory is free again.
    assert not (run / LOCK_NAME).exists()
    with _runner(run) as runner:
        runner.learn(1)
        assert (run / "config.json").exists()
        assert read_lock(str(run)).pid == os.getpid()  # type: ignore[union-attr]


def test_lock_naming_a_live_process_is_respected(tmp_path):
    run = tmp_path / "run"
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        _write_lock(run, sleeper.pid)  # no flock: an owner that cannot be checked better than by its pid
        with pytest.raises(RunDirectoryLocked, match=f"process {sleeper.pid}"):
            _runner(run)
        # A lock of another host is never taken over.
        _write_lock(run, _dead_pid(), host="some-other-host")
        with pytest.raises(RunDirectoryLocked, match="on host some-other-host"):
            _runner(run)
        assert sorted(os.listdir(run)) == [LOCK_NAME]
    finally:
        assert sleeper.stdin is not None
        sleeper.stdin.close()
        sleeper.wait(timeout=DEADLINE_S)


def test_cli_refuses_a_directory_another_process_writes(tmp_path, capsys):
    run = tmp_path / "run"
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        _write_lock(run, sleeper.pid)
        code = main(
            ["train", "--task", "point_mass", "--num-envs", "4", "--iterations", "1", "--log-dir", str(run)]
        )
    finally:
        assert sleeper.stdin is not None
        sleeper.stdin.close()
        sleeper.wait(timeout=DEADLINE_S)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("st-rl: error: run directory") and str(run) in err[0]
    assert f"process {sleeper.pid}" in err[0]


def test_stale_lock_is_taken_over_with_a_note(tmp_path, capsys):
    run = tmp_path / "run"
    dead = _dead_pid()
    _write_lock(run, dead)
    runner = _runner(run)
    runner.learn(1)
    assert f"took over the stale lock of process {dead}" in capsys.readouterr().err
    owner = read_lock(str(run))
    assert owner is not None and owner.pid == os.getpid() and owner.host == socket.gethostname()
    assert (run / "model_1.pt").exists()
    runner.close()
    assert not (run / LOCK_NAME).exists()


def test_a_second_runner_of_the_same_process_takes_the_lock_over(tmp_path):
    run = tmp_path / "run"
    first = _runner(run)
    first.learn(1)  # not closed
    second = _runner(run)
    second.load(str(run / "model_1.pt"))
    second.learn(1)
    assert (run / "model_2.pt").exists()
    first.close()  # no longer the holder: the lock stays with the second runner
    assert read_lock(str(run)).pid == os.getpid()  # type: ignore[union-attr]
    second.close()
    assert not (run / LOCK_NAME).exists()


def test_lock_objects_hand_over_and_release(tmp_path):
    a, b = RunDirLock(str(tmp_path)), RunDirLock(str(tmp_path))
    a.acquire()
    b.acquire()
    assert b.held and not a.held
    a.release()  # not the holder: nothing happens
    assert (tmp_path / LOCK_NAME).exists()
    b.release()
    b.release()
    assert not (tmp_path / LOCK_NAME).exists()


# ---------------------------------------------------------------------- earlier runs


def test_training_over_an_earlier_run_is_refused_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    _finished_run(run)
    before = _listing(run)
    assert {"model_1.pt", "model_2.pt", "config.json"} <= set(before)
    assert any(name.startswith("events.out.tfevents") for name in before)

    runner = _runner(run)  # building writes nothing: load() may still come
    assert _listing(run) == before
    with pytest.raises(RunDirectoryError) as info:
        runner.learn(1)
    message = str(info.value)
    assert not isinstance(info.value, RunDirectoryLocked)
    assert str(run) in message and "--resume" in message and "--overwrite" in message
    assert "runner.load" in message and "overwrite=True" in message
    assert _listing(run) == before  # no config.json, checkpoint, TensorBoard file or lock left

    # A config.json alone marks an earlier run too.
    only_config = tmp_path / "only_config"
    only_config.mkdir()
    (only_config / "config.json").write_text("{}")
    with pytest.raises(RunDirectoryError, match="config.json"):
        _runner(only_config).learn(1)
    assert os.listdir(only_config) == ["config.json"]


def test_cli_refuses_an_earlier_run_before_building_anything(tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(run)
    before = _listing(run)
    base = ["train", "--task", "point_mass", "--num-envs", "4", "--iterations", "1", "--log-dir", str(run)]
    assert main(base) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(run) in err[0] and "--resume" in err[0] and "--overwrite" in err[0]
    assert main([*base, "--overwrite", "--resume", str(run)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert _listing(run) == before


def test_resuming_continues_the_earlier_run(tmp_path):
    run = tmp_path / "run"
    _finished_run(run)
    with _runner(run) as runner:
        runner.load(str(run / "model_2.pt"))
        runner.learn(1)
    assert load_checkpoint(str(run / "model_3.pt"))["iter"] == 3
    assert (run / "model_1.pt").exists()  # the earlier checkpoints stay


def test_cli_resume_continues_in_the_same_directory(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--task", "point_mass", "--num-envs", "4", "--log-dir", str(run), "num_steps_per_env=4"]
    assert main([*args, "--iterations", "2"]) == 0
    assert main([*args, "--iterations", "1"]) == 2  # neither --resume nor --overwrite
    assert main([*args, "--iterations", "1", "--resume", str(run)]) == 0
    assert load_checkpoint(str(run / "model_3.pt"))["iter"] == 3
    assert not (run / LOCK_NAME).exists()


def test_overwrite_replaces_the_earlier_run(tmp_path, capsys):
    run = tmp_path / "run"
    _finished_run(run, iterations=3)
    old_events = {p.name for p in run.glob("events.out.tfevents*")}
    with _runner(run, overwrite=True) as runner:
        runner.learn(1)
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt"]
    assert load_checkpoint(str(run / "model_1.pt"))["iter"] == 1
    assert not old_events & {p.name for p in run.glob("events.out.tfevents*")}
    assert "overwrite" not in json.loads((run / "config.json").read_text())["runner"]
    assert "overwrite: deleted" in capsys.readouterr().err

    # The CLI's --overwrite does the same.
    args = ["train", "--task", "point_mass", "--num-envs", "4", "--iterations", "2", "--log-dir", str(run)]
    assert main([*args, "--overwrite", "num_steps_per_env=4", "save_interval=1"]) == 0
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt", "model_2.pt"]
    assert json.loads((run / "config.json").read_text())["runner"]["task"] == "point_mass"


def test_a_loaded_checkpoint_wins_over_overwrite(tmp_path):
    run = tmp_path / "run"
    _finished_run(run)
    with _runner(run, overwrite=True) as runner:
        runner.load(str(run / "model_2.pt"))
        runner.learn(1)
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_1.pt", "model_2.pt", "model_3.pt"]


# ---------------------------------------------------------------------- close, context manager, temporaries


def test_close_and_context_manager(tmp_path):
    run = tmp_path / "run"
    with _runner(run) as runner:
        # Nothing is written before learn(): Isaac Lab / st_gym scripts look up the checkpoint to resume as the
        # newest run directory after building the runner.
        assert not run.exists()
        runner.learn(1)
        assert (run / LOCK_NAME).exists() and (run / "config.json").exists()
        assert not isinstance(runner.writer, NullWriter)
    assert not (run / LOCK_NAME).exists() and isinstance(runner.writer, NullWriter)
    runner.close()  # idempotent
    # A closed runner may train on: its own directory is not an earlier run to it.
    runner.learn(1)
    assert (run / "model_2.pt").exists() and (run / LOCK_NAME).exists()
    runner.close()
    assert not (run / LOCK_NAME).exists()
    # Without a log directory there is nothing to lock.
    with OnPolicyRunner(PointMass(num_envs=4, seed=0), _cfg(), log_dir=None) as quiet:
        quiet.learn(1)


def test_context_manager_releases_on_errors(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="boom"), _runner(run) as runner:
        runner.learn(1)
        assert (run / LOCK_NAME).exists()
        raise RuntimeError("boom")
    assert not (run / LOCK_NAME).exists()


def test_stale_temporary_files_are_removed(tmp_path, capsys):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in (".tmp_model_7.ptab12", ".config.jsonq1w2.tmp", "notes.txt"):
        (fresh / name).write_text("x")
    with _runner(fresh) as runner:
        assert len(os.listdir(fresh)) == 3  # nothing touched before the runner writes
        runner.save(str(fresh / "model_0.pt"))
        assert sorted(os.listdir(fresh)) == [LOCK_NAME, "config.json", "model_0.pt", "notes.txt"]
    assert "removed 2 temporary files" in capsys.readouterr().err

    run = tmp_path / "run"
    _finished_run(run)
    (run / ".tmp_model_3.ptxyz").write_bytes(b"partial")
    runner = _runner(run)
    assert (run / ".tmp_model_3.ptxyz").exists()  # not before the runner may write here
    runner.load(str(run / "model_2.pt"))
    runner.learn(1)
    runner.close()
    assert not glob.glob(str(run / ".tmp_*"))


# ---------------------------------------------------------------------- interrupts, in process


class _SignalAt(PointMass):
    """PointMass that calls the installed handlers of ``signals`` from inside its ``at``-th step."""

    def __init__(self, at: int, signals: tuple[int, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.at, self.signals, self.steps = at, signals, 0

    def step(self, actions: torch.Tensor):
        self.steps += 1
        if self.steps == self.at:
            for sig in self.signals:
                handler = signal.getsignal(sig)
                assert callable(handler)
                handler(sig, None)
        return super().step(actions)


# SIGHUP (terminal closed, ssh dropped) stops like SIGTERM where the platform has it.
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, getattr(signal, "SIGHUP", -1): 129}


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_signal_finishes_the_iteration_saves_and_raises(tmp_path, sig, monkeypatch):
    # SIGHUP makes sys.stdout / sys.stderr drop failing writes (a hung-up terminal): undone after the test.
    for name in ("stdout", "stderr"):
        monkeypatch.setattr(sys, name, getattr(sys, name))
    run = tmp_path / "run"
    env = _SignalAt(at=6, signals=(sig,), num_envs=4, seed=0)  # step 6 is in iteration 2 (4 steps each)
    previous = signal.getsignal(sig)
    runner = _runner(run, env=env, save_interval=50)
    with pytest.raises(TrainingInterrupted) as info:
        runner.learn(100)
    stop = info.value
    assert isinstance(stop, KeyboardInterrupt)
    assert stop.signum == sig and not stop.aborted
    assert stop.exit_code == EXIT_CODES[sig]
    # The iteration in progress was finished (all its steps and its update), then nothing more.
    assert env.steps == 8 and runner.current_learning_iteration == 2
    assert stop.checkpoint == os.path.join(str(run), "model_2.pt")
    state = load_checkpoint(os.path.join(str(run), "model_2.pt"))
    assert state["iter"] == 2
    for name, value in runner.alg.actor_critic.state_dict().items():
        torch.testing.assert_close(state["model_state_dict"][name], value)
    assert isinstance(runner.writer, NullWriter)  # writers closed
    assert signal.getsignal(sig) is previous  # handlers restored
    runner.close()


def test_signal_at_a_save_iteration_keeps_that_checkpoint(tmp_path):
    env = _SignalAt(at=3, signals=(signal.SIGINT,), num_envs=4, seed=0)
    runner = _runner(tmp_path / "run", env=env, save_interval=1)
    with pytest.raises(TrainingInterrupted) as info:
        runner.learn(100)
    assert info.value.checkpoint == os.path.join(str(tmp_path / "run"), "model_1.pt")
    assert sorted(os.listdir(tmp_path / "run")).count("model_1.pt") == 1
    assert not glob.glob(str(tmp_path / "run" / "model_2.pt"))
    runner.close()


def test_second_signal_aborts_at_once(tmp_path):
    env = _SignalAt(at=6, signals=(signal.SIGINT, signal.SIGINT), num_envs=4, seed=0)
    previous = signal.getsignal(signal.SIGINT)
    runner = _runner(tmp_path / "run", env=env, save_interval=50)
    with pytest.raises(TrainingInterrupted) as info:
        runner.learn(100)
    assert info.value.aborted and info.value.checkpoint is None and info.value.exit_code == 130
    assert env.steps == 6 and runner.current_learning_iteration == 1  # stopped inside iteration 2
    assert not glob.glob(str(tmp_path / "run" / "model_*.pt"))
    assert signal.getsignal(signal.SIGINT) is previous
    runner.close()


def test_guard_restores_handlers_and_does_nothing_outside_the_main_thread():
    seen: list[int] = []

    def mine(signum: int, frame: Any) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with InterruptGuard(announce=False) as guard:
            assert guard.active and signal.getsignal(signal.SIGTERM) == guard.handle
            guard.handle(signal.SIGTERM)
            assert guard.requested and guard.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is mine and not seen

        result: dict[str, Any] = {}

        def in_thread() -> None:
            with InterruptGuard() as g:
                result["active"] = g.active
                result["handler"] = signal.getsignal(signal.SIGTERM)

        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join()
        assert result == {"active": False, "handler": mine}
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_learn_in_a_thread_installs_no_handlers(tmp_path):
    previous = signal.getsignal(signal.SIGINT)
    errors: list[BaseException] = []
    handlers: list[Any] = []

    class Probe(PointMass):
        def step(self, actions: torch.Tensor):
            handlers.append(signal.getsignal(signal.SIGINT))
            return super().step(actions)

    def train() -> None:
        try:
            with _runner(tmp_path / "run", env=Probe(num_envs=4, seed=0)) as runner:
                runner.learn(1)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert not errors and handlers and all(h is previous for h in handlers)


# ---------------------------------------------------------------------- interrupts and kills, real processes


def _train_cmd(log_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "st_rl",
        "train",
        "--task",
        "point_mass",
        "--num-envs",
        "8",
        "--iterations",
        "100000",
        "--threads",
        "1",
        "--log-dir",
        str(log_dir),
        *extra,
        "num_steps_per_env=8",
        "algorithm.num_learning_epochs=1",
    ]


def _spawn(cmd: list[str], out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
        return subprocess.Popen(cmd, stdout=stdout, stderr=stderr, cwd=REPO, env=env)


def _output(out: Path) -> str:
    return out.with_suffix(".out").read_text() + out.with_suffix(".err").read_text()


def _wait_until(proc: subprocess.Popen, out: Path, ready: Any) -> None:
    """Poll until ``ready()``; fail with the process output if it ends first or the deadline passes."""
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"training ended early (exit code {proc.returncode}):\n{_output(out)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"training made no progress within {DEADLINE_S} s:\n{_output(out)}")
        time.sleep(0.05)


def _models(run: Path) -> dict[int, Path]:
    found = {}
    for path in run.glob("model_*.pt"):
        match = re.fullmatch(r"model_(\d+)\.pt", path.name)
        if match:
            found[int(match.group(1))] = path
    return found


@pytest.mark.parametrize(("sig", "code"), [(sig, EXIT_CODES[sig]) for sig in STOP_SIGNALS])
def test_cli_signal_saves_a_checkpoint_and_exits(tmp_path, sig, code):
    run, out = tmp_path / "run", tmp_path / "log"
    proc = _spawn(_train_cmd(run, "save_interval=1000"), out)
    _wait_until(proc, out, lambda: "Learning iteration" in out.with_suffix(".out").read_text())
    proc.send_signal(sig)
    assert proc.wait(timeout=DEADLINE_S) == code, _output(out)
    lines = [ln for ln in out.with_suffix(".err").read_text().splitlines() if ln.startswith("interrupted:")]
    assert len(lines) == 1, _output(out)
    path = lines[0].removeprefix("interrupted: saved ")
    assert os.path.isfile(path) and os.path.dirname(path) == str(run)
    state = load_checkpoint(path)
    assert path.endswith(f"model_{state['iter']}.pt") and state["iter"] >= 1
    assert not glob.glob(str(run / ".tmp_*"))
    assert not (run / LOCK_NAME).exists()


@pytest.mark.slow
def test_kill_9_loop_never_leaves_a_broken_checkpoint(tmp_path):
    """Kill training with SIGKILL at seeded random moments, many times; every visible checkpoint loads and
    the run resumes. Whether a kill lands inside a save or not, the assertions hold."""
    rng = random.Random(15)
    run = tmp_path / "run"
    for round_ in range(10):
        known = max(_models(run), default=0)
        extra = ["save_interval=1"] + (["--resume", str(run)] if known else [])
        out = tmp_path / f"round{round_}"
        proc = _spawn(_train_cmd(run, *extra), out)
        _wait_until(proc, out, lambda known=known: max(_models(run), default=0) > known)
        time.sleep(rng.uniform(0.0, 0.5))
        proc.kill()
        proc.wait(timeout=DEADLINE_S)
        models = _models(run)
        assert models, _output(out)
        for it, path in sorted(models.items()):
            assert load_checkpoint(str(path))["iter"] == it
        assert all(name.startswith(".tmp_model_") for name in (p.name for p in run.glob(".tmp_*")))

    last = max(_models(run))
    cmd = _train_cmd(run, "--resume", str(run), "save_interval=1")
    cmd[cmd.index("100000")] = "2"
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "took over the stale lock" in proc.stderr
    assert load_checkpoint(str(run / f"model_{last + 2}.pt"))["iter"] == last + 2
    assert not glob.glob(str(run / ".tmp_*"))
    assert not (run / LOCK_NAME).exists()
