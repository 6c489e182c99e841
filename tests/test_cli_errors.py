"""`st-rl` with a new user's bad inputs: every failure is one line, ``st-rl: error: <culprit and fix>``, exit code
2 (130 for a Ctrl-C before training started), no traceback without ``--debug``, and no file lost or half-written.

Most cases run ``st_rl.cli.main([...])`` in-process (the same code path as the console script, a tenth of a
second each); a few run the command as a subprocess: signals, Ctrl-C while Python imports torch, and end-to-end
checks of the console entry point.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from st_rl import cli
from st_rl.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

TRAIN = ["train", "--num-envs", "8", "--iterations", "1", "--device", "cpu"]
PM = [*TRAIN, "--task", "point_mass"]
PLAY = ["--num-envs", "2", "--duration", "0.2", "--no-video", "--no-plot"]


def one_error_line(err: str) -> str:
    """The single stderr line of a failed command (asserted to be exactly one ``st-rl: error:`` line)."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("st-rl: error: "), err
    return lines[0]


def fails(capsys, argv: list[str], *culprits: str, code: int = 2) -> str:
    """Run ``main(argv)`` in-process; assert exit ``code``, one error line naming every culprit, no traceback."""
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == code, (rc, out[-2000:], err)
    line = one_error_line(err)
    assert "Traceback" not in out
    for culprit in culprits:
        assert culprit in line, (culprit, line)
    return line


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256): to check that nothing changed, byte for byte."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def vt_run(tmp_path_factory) -> Path:
    """A 1-iteration velocity_tracking run (a task st-rl play evaluates) with its exported policy files."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("cli_errors") / "vt"
    assert main([*TRAIN, "--task", "velocity_tracking", "--log-dir", str(run)]) == 0
    assert main(["export", "--checkpoint", str(run), "--no-check"]) == 0
    torch.set_num_threads(before)
    return run


@pytest.fixture
def pm_run(tmp_path, capsys) -> Path:
    """A fresh 1-iteration point_mass run of this test (model_1.pt)."""
    run = tmp_path / "A"
    assert main([*PM, "--log-dir", str(run)]) == 0
    capsys.readouterr()
    return run


# ------------------------------------------------------------------------------------- --env factories
ENV_MODULE = """
class Env:
    pass

def none(**kw):
    return None

def a_dict(**kw):
    return {"num_envs": 8}

def an_int(**kw):
    return 3

def a_class(**kw):
    return Env

def raises(**kw):
    raise RuntimeError("boom in the factory")
"""


@pytest.mark.parametrize(
    ("factory", "culprits"),
    [
        ("none", ("returned None",)),
        ("a_dict", ("returned a dict", "num_envs")),
        ("an_int", ("returned an int",)),
        ("a_class", ("returned the class Env", "Env(...)")),
        ("raises", ("RuntimeError: boom in the factory", "user_envs.py:")),
    ],
)
def test_env_factories_that_fail_or_return_no_environment(tmp_path, monkeypatch, capsys, factory, culprits):
    monkeypatch.chdir(tmp_path)  # the default run directory: made under ./logs, removed again
    (tmp_path / "user_envs.py").write_text(ENV_MODULE)
    spec = f"{tmp_path / 'user_envs.py'}:{factory}"
    line = fails(capsys, ["train", "--env", spec, "--iterations", "1"], "--env", *culprits)
    assert spec in line
    assert not (tmp_path / "logs").exists()  # nothing left behind


def test_env_module_with_a_syntax_error(tmp_path, capsys):
    bad = tmp_path / "broken_env.py"
    bad.write_text("def make_env(:\n    pass\n")
    fails(
        capsys, ["train", "--env", f"{bad}:make_env", "--log-dir", str(tmp_path / "run")], str(bad), "line 1"
    )
    assert not (tmp_path / "run").exists()


def test_debug_shows_the_traceback(tmp_path, capsys):
    (tmp_path / "user_envs_debug.py").write_text(ENV_MODULE)
    with pytest.raises(cli.CommandError, match="boom"):
        main(["train", "--env", f"{tmp_path / 'user_envs_debug.py'}:raises", "--debug"])


# ------------------------------------------------------------------------------------- devices
MISSING_CUDA = "cuda:0" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"


@pytest.mark.parametrize("device", ["foo", MISSING_CUDA, "meta"])
@pytest.mark.parametrize("command", ["train", "play"])
def test_unusable_devices(tmp_path, capsys, device, command, vt_run):
    if command == "train":
        argv = ["train", "--task", "point_mass", "--device", device, "--log-dir", str(tmp_path / "run")]
    else:
        argv = ["play", "--checkpoint", str(vt_run), "--device", device, *PLAY]
    fails(capsys, argv, "--device", repr(device))
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------- disk full
def test_disk_full_while_saving_names_the_file_and_keeps_the_previous_checkpoint(pm_run, capsys, monkeypatch):
    before = (pm_run / "model_1.pt").read_bytes()

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    target = pm_run / "model_2.pt"
    fails(capsys, [*PM, "--resume", str(pm_run), "--log-dir", str(pm_run)], str(target), "disk full")
    monkeypatch.undo()
    assert (pm_run / "model_1.pt").read_bytes() == before
    assert not target.exists()
    assert not [p.name for p in pm_run.iterdir() if p.name.startswith(".tmp")]  # no half-written file left


# ------------------------------------------------------------------------------------- optimizer change on resume
def test_resume_with_another_optimizer_starts_it_fresh_with_a_note(pm_run, capsys):
    with pytest.warns(UserWarning, match=r"another optimizer than this run's SGD .*starts fresh"):
        rc = main(
            [*PM, "--resume", str(pm_run), "--log-dir", str(pm_run), "algorithm.optimizer_class_name=SGD"]
        )
    assert rc == 0
    assert (pm_run / "model_2.pt").exists()
    state = torch.load(pm_run / "model_2.pt", weights_only=True)
    assert "momentum" in state["optimizer_state_dict"]["param_groups"][0]  # an SGD state now


# ------------------------------------------------------------------------------------- resume into another run
def test_resume_into_a_directory_of_another_run_is_refused_and_changes_nothing(pm_run, tmp_path, capsys):
    other = tmp_path / "B"
    assert main([*PM, "--log-dir", str(other), "--seed", "5"]) == 0
    before = snapshot(other)
    checkpoint = pm_run / "model_1.pt"
    argv = [
        "train",
        "--task",
        "point_mass",
        "--iterations",
        "4",
        "--resume",
        str(checkpoint),
        "--log-dir",
        str(other),
    ]
    line = fails(
        capsys, argv, str(other), str(checkpoint), "--overwrite", f"--resume {other} --log-dir {other}"
    )
    assert "new --log-dir" in line
    assert snapshot(other) == before  # byte for byte

    # Replacing B's run with the run continued from A: explicit, with --overwrite.
    assert main([*PM, "--resume", str(checkpoint), "--log-dir", str(other), "--overwrite"]) == 0
    assert sorted(p.name for p in other.glob("model_*.pt")) == ["model_2.pt"]
    assert torch.load(other / "model_2.pt", weights_only=True)["iter"] == 2
    assert not {p for p in before if p.startswith("events.")} & set(snapshot(other))
    # --overwrite with --resume of a checkpoint of that very directory would delete it: refused.
    fails(
        capsys,
        [*PM, "--resume", str(other), "--log-dir", str(other), "--overwrite"],
        "--overwrite",
        str(other),
    )


def test_default_run_directories_never_collide(tmp_path, monkeypatch, capsys):
    fixed = datetime.datetime(2030, 1, 2, 3, 4, 5)

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):  # noqa: ARG003 - the signature of datetime.now
            return fixed

    monkeypatch.setattr(cli.datetime, "datetime", Frozen)
    stamp = "2030-01-02_03-04-05"
    root = tmp_path / "logs" / "point_mass"
    made: list[str] = []
    threads = [threading.Thread(target=lambda: made.append(cli._new_run_dir(str(root)))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = sorted(os.path.basename(p) for p in made)
    assert names == sorted([stamp] + [f"{stamp}_{n}" for n in range(2, 9)])  # all distinct
    # A run started in the same second as those: its own directory, theirs untouched.
    monkeypatch.chdir(tmp_path)
    assert main(PM) == 0
    assert '"log_dir": "' + str(root / f"{stamp}_9") + '"' in capsys.readouterr().out
    assert (root / f"{stamp}_9" / "model_1.pt").exists()
    assert all(not any((root / n).iterdir()) for n in names)


# ------------------------------------------------------------------------------------- record-motion
def test_record_motion_of_a_run_of_another_task(vt_run, tmp_path, capsys):
    out = tmp_path / "motion.pkl"
    base = ["record-motion", "--checkpoint", str(vt_run), "--out", str(out), "--duration", "0.2"]
    fails(capsys, base, "'velocity_tracking'", "quadruped_flat")
    fails(capsys, [*base, "--task", "quadruped_flat"], "'velocity_tracking'", "'quadruped_flat' (--task)")
    fails(capsys, [*base, "--task", "point_mass"], "--task point_mass", "quadruped_flat")
    assert not out.exists()


# ------------------------------------------------------------------------------------- checkpoint manipulators
def test_trusted_checkpoint_manipulator_returning_none(vt_run, tmp_path, capsys, monkeypatch):
    (tmp_path / "my_manipulators.py").write_text("def forget(state, current):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "manipulated"
    run.mkdir()
    shutil.copy(vt_run / "model_1.pt", run / "model_1.pt")
    cfg = json.loads((vt_run / "config.json").read_text())
    cfg["runner"]["ckpt_manipulator"] = "my_manipulators:forget"
    (run / "config.json").write_text(json.dumps(cfg))
    fails(
        capsys,
        ["play", "--checkpoint", str(run), "--trust-config", *PLAY],
        "'my_manipulators:forget'",
        "None",
    )


# ------------------------------------------------------------------------------------- checkpoint files
class _Thing:
    pass


@pytest.mark.parametrize("kind", ["numpy", "object", "plain_pickle", "truncated", "empty"])
def test_unreadable_checkpoints_say_what_the_file_is_without_weights_only_advice(
    vt_run, tmp_path, capsys, kind
):
    path = tmp_path / "model_7.pt"
    if kind == "numpy":
        torch.save({"model_state_dict": {}, "obs_mean": np.zeros(3)}, path)
    elif kind == "object":
        torch.save({"model_state_dict": {}, "thing": _Thing()}, path)
    elif kind == "plain_pickle":
        path.write_bytes(pickle.dumps({"model_state_dict": {}}))
    elif kind == "truncated":
        data = (vt_run / "model_1.pt").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(b"")
    for argv in (["play", "--checkpoint", str(path), *PLAY], ["export", "--checkpoint", str(path)]):
        line = fails(capsys, argv, str(path))
        assert "weights_only" not in line and "add_safe_globals" not in line and "\x1b" not in line
        if kind in ("numpy", "object", "plain_pickle"):
            assert "dict of tensors" in line and "docs/security.md" in line
        else:
            assert "truncated or corrupt" in line


# ------------------------------------------------------------------------------------- exported policies
def _tampered_onnx(src: Path, dst: Path) -> None:
    import onnx

    model = onnx.load(str(src))
    old = model.graph.input[0].name
    model.graph.input[0].name = "renamed_obs"
    for node in model.graph.node:
        node.input[:] = ["renamed_obs" if name == old else name for name in node.input]
    onnx.save(model, str(dst))


@pytest.mark.parametrize(
    ("kind", "culprit"),
    [
        ("onnx_truncated", "not a loadable ONNX policy"),
        ("onnx_garbage", "not a loadable ONNX policy"),
        ("onnx_tampered", "running it failed"),
        ("pt_truncated", "not a loadable TorchScript policy"),
        ("pt_garbage", "not a loadable TorchScript policy"),
        ("json_tampered", "metadata"),
    ],
)
def test_broken_exported_policies(vt_run, tmp_path, capsys, kind, culprit):
    exported = vt_run / "exported"
    ext = "pt" if kind.startswith("pt") else "onnx"
    path = tmp_path / f"policy.{ext}"
    shutil.copy(exported / "policy.json", tmp_path / "policy.json")
    data = (exported / f"policy.{ext}").read_bytes()
    if kind.endswith("truncated"):
        path.write_bytes(data[: len(data) // 2])
    elif kind.endswith("garbage"):
        path.write_bytes(b"this is not a policy file")
    elif kind == "onnx_tampered":
        _tampered_onnx(exported / "policy.onnx", path)
    else:
        path.write_bytes(data)
        meta = json.loads((exported / "policy.json").read_text())
        del meta["num_obs"]
        (tmp_path / "policy.json").write_text(json.dumps(meta))
    fails(capsys, ["play", "--policy", str(path), *PLAY], str(path), culprit)


# ------------------------------------------------------------------------------------- data files
def _motion(frames: list[list[float]], duration: float = 0.02) -> dict:
    return {"walk": {"Fields": ["a", "b"], "Frames": frames, "FrameDuration": duration, "MotionWeight": 1.0}}


GOOD = [[0.1 * i, -0.1 * i] for i in range(20)]


@pytest.mark.parametrize(
    ("motion", "culprits"),
    [
        (_motion([*GOOD[:7], [0.0, float("nan")], *GOOD[8:]]), ("frame 7", "nan", "field 'b'")),
        (_motion([*GOOD[:3], [float("inf"), 0.0], *GOOD[4:]]), ("frame 3", "inf", "field 'a'")),
        (_motion(GOOD, float("nan")), ("FrameDuration", "nan")),
        (_motion(GOOD, 0.0), ("FrameDuration", "> 0")),
        (_motion(GOOD, -0.02), ("FrameDuration", "-0.02")),
        (_motion(GOOD, float("inf")), ("FrameDuration", "inf")),
    ],
    ids=["nan_frame", "inf_frame", "duration_nan", "duration_zero", "duration_negative", "duration_inf"],
)
def test_motion_files_with_nonfinite_frames_or_bad_frame_duration(tmp_path, capsys, motion, culprits):
    from st_rl.datasets import MotionLoader
    from st_rl.tasks.motion_recorder import MotionFileError, save_motion_file

    path = tmp_path / "bad.motion"
    save_motion_file(motion, str(path))
    with pytest.raises(MotionFileError) as info:
        MotionLoader(str(path), time_between_frames=0.02)
    message = str(info.value)
    assert str(path) in message and "'walk'" in message
    for culprit in culprits:
        assert culprit in message, (culprit, message)


def test_train_with_a_nan_motion_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "nan.motion"
    from st_rl.tasks.motion_recorder import save_motion_file

    save_motion_file(_motion([*GOOD[:5], [float("nan"), 0.0], *GOOD[6:]]), str(path))
    argv = [*TRAIN, "--task", "quadruped_flat", "--motion", str(path), "--log-dir", str(tmp_path / "run")]
    fails(capsys, argv, str(path), "frame 5", "field 'a'")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("ext", ["npz", "pickle"])
def test_dataset_files_with_nan_name_the_file_key_and_frame(tmp_path, ext):
    from st_rl.storage.rollout_files.rollout_dataset import (
        TrajectoryFileError,
        read_trajectory_file,
        write_trajectory_file,
    )

    obs = np.zeros((10, 3), dtype=np.float32)
    obs[6, 1] = np.inf
    arrays = {"observations": obs, "actions": np.zeros((10, 2), np.float32), "rewards": np.zeros(10, np.float32),
              "dones": np.zeros(10, bool)}  # fmt: skip
    path = tmp_path / f"traj_000000_000010.{ext}"
    write_trajectory_file(str(path), arrays)
    with pytest.raises(TrajectoryFileError) as info:
        read_trajectory_file(str(path))
    message = str(info.value)
    assert str(path) in message and "'observations'" in message and "frame 6" in message
    arrays["observations"][6, 1] = 0.0
    write_trajectory_file(str(path), arrays)
    assert read_trajectory_file(str(path))["observations"].shape == (10, 3)


# ------------------------------------------------------------------------------------- other mistakes
@pytest.mark.parametrize(
    ("argv", "culprit"),
    [
        (["play", "--checkpoint", "x", "--num-envs", "0"], "--num-envs"),
        (["play", "--checkpoint", "x", "--duration", "nan"], "--duration"),
        (
            ["record-motion", "--scripted-trot", "--out", "m.pkl", "--num-trajectories", "-1"],
            "--num-trajectories",
        ),
    ],
)
def test_bad_option_values(capsys, argv, culprit):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert culprit in one_error_line(capsys.readouterr().err)


def test_play_command_with_a_wrong_number_of_values(vt_run, capsys):
    fails(capsys, ["play", "--checkpoint", str(vt_run), "--command", "1", *PLAY], "--command")


def test_an_unexpected_error_is_one_line_with_exit_code_1(capsys, monkeypatch):
    def broken() -> int:
        raise RuntimeError("something st_rl did not foresee\nsecond line")

    monkeypatch.setattr(cli, "cmd_tasks", broken)
    line = fails(
        capsys, ["tasks"], "unexpected RuntimeError: something st_rl did not foresee", "--debug", code=1
    )
    assert "second line" not in line


# ------------------------------------------------------------------------------------- subprocesses
def run_st_rl(args: list[str], cwd: Path, code: str | None = None) -> subprocess.CompletedProcess:
    """``python -m st_rl ARGS`` (or ``python -c CODE ARGS``) in ``cwd``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(cwd)}
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "st_rl", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


# The console script's code (`from st_rl.cli import main; sys.exit(main())`) with a Ctrl-C arriving while
# Python imports torch: before st-rl has started anything.
CTRL_C_DURING_IMPORT = """
import builtins, sys
real_import = builtins.__import__
def interrupted_import(name, *args, **kwargs):
    if name == "torch" or name.startswith("torch."):
        builtins.__import__ = real_import
        raise KeyboardInterrupt
    return real_import(name, *args, **kwargs)
builtins.__import__ = interrupted_import
from st_rl.cli import main
sys.exit(main())
"""

CTRL_C_ENV = """
import os, signal, time

def make_env(**kwargs):  # the user presses Ctrl-C while the environment is built
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
"""


@pytest.mark.parametrize("when", ["importing torch", "building the environment"])
def test_ctrl_c_during_start_up_is_one_line_and_exit_code_130(tmp_path, when):
    (tmp_path / "slow_env.py").write_text(CTRL_C_ENV)
    if when == "importing torch":
        result = run_st_rl([*PM, "--log-dir", "run"], tmp_path, CTRL_C_DURING_IMPORT)
    else:
        result = run_st_rl(["train", "--env", "slow_env:make_env", "--iterations", "1"], tmp_path)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stdout
    assert "interrupted (Ctrl-C)" in one_error_line(result.stderr)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "run").exists()  # nothing written


def test_console_errors_end_to_end(tmp_path):
    """The installed command, as a new user runs it: one line, exit code 2, nothing written."""
    (tmp_path / "user_envs.py").write_text(ENV_MODULE)
    result = run_st_rl(["train", "--env", "user_envs:none", "--device", "cpu"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "returned None" in one_error_line(result.stderr) and "Traceback" not in result.stdout
    assert not (tmp_path / "logs").exists()
