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
import math
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

from st_rl import commands
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
    with pytest.raises(commands.CommandError, match="boom"):
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

    monkeypatch.setattr(commands.datetime, "datetime", Frozen)
    stamp = "2030-01-02_03-04-05"
    root = tmp_path / "logs" / "point_mass"
    made: list[str] = []
    threads = [
        threading.Thread(target=lambda: made.append(commands._new_run_dir(str(root)))) for _ in range(8)
    ]
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
    from st_rl.storage.rollout_files.trajectory_files import (
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
        (["tune", "--trials", "0"], "--trials"),  # used to run no trial and exit 0
        (["tune", "--num-envs", "0"], "--num-envs"),  # used to train the preset's number instead
        (["tune", "--timeout", "nan"], "--timeout"),
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

    monkeypatch.setattr(commands, "cmd_tasks", broken)
    line = fails(
        capsys, ["tasks"], "unexpected RuntimeError: something st_rl did not foresee", "--debug", code=1
    )
    assert "second line" not in line


# ------------------------------------------------------------------------------------- subprocesses
def run_st_rl(
    args: list[str], cwd: Path, code: str | None = None, **extra_env: str
) -> subprocess.CompletedProcess:
    """``python -m st_rl ARGS`` (or ``python -c CODE ARGS``) in ``cwd``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(cwd), **extra_env}
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


SIGNAL_ENV = """
import os, signal, time

def make_env(**kwargs):  # `timeout` (SIGTERM) or a closed terminal (SIGHUP) while the environment is built
    os.kill(os.getpid(), getattr(signal, os.environ["TEST_SIGNAL"]))
    time.sleep(30)
"""


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_or_sighup_during_start_up_is_one_line(tmp_path, name, code):
    """They used to kill st-rl without a word (the handlers of learn() were not installed yet)."""
    import signal

    if not hasattr(signal, name):
        pytest.skip(f"no {name} on this platform")
    (tmp_path / "signal_env.py").write_text(SIGNAL_ENV)
    result = run_st_rl(
        ["train", "--env", "signal_env:make_env", "--iterations", "1"], tmp_path, TEST_SIGNAL=name
    )
    assert result.returncode == code, result.stderr
    assert f"interrupted ({name}) before training started" in one_error_line(result.stderr)
    assert not (tmp_path / "logs").exists()  # the default run directory made for it is removed again


def test_warnings_are_one_line_too(tmp_path, vt_run):
    """A warning before the error is one ``st-rl: warning:`` line, not Python's two (file, source line)."""
    result = run_st_rl(["play", "--checkpoint", str(vt_run), "--task", "point_mass", *PLAY], tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[0] == "st-rl: warning: using task 'point_mass'; the run was trained on 'velocity_tracking'"
    assert lines[1].startswith("st-rl: error: ") and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------- found by the adversarial pass
# tools/adversarial_pass.py (docs/security.md, "Adversarial pass"): each of these used to be a traceback, an
# "unexpected" error, a message that did not name the culprit, or a silent wrong result.
RAISING_ENV = """
from st_rl.tasks import PointMass


class Env(PointMass):
    def step(self, actions):
        raise RuntimeError("boom in step")


def make_env(num_envs=8, **kwargs):
    return Env(num_envs=num_envs, **kwargs)
"""


def test_env_that_raises_while_training_is_named_with_its_file(tmp_path, capsys):
    file = tmp_path / "raising_env.py"
    file.write_text(RAISING_ENV)
    line = fails(
        capsys,
        [*TRAIN, "--env", f"{file}:make_env", "--log-dir", str(tmp_path / "run")],
        "--env",
        "RuntimeError: boom in step",
        f"{file}:",
    )
    assert "unexpected" not in line


def test_train_with_a_motion_of_other_fields_names_the_file(tmp_path, capsys):
    from st_rl.tasks.motion_recorder import save_motion_file

    path = tmp_path / "other.motion"
    save_motion_file(_motion(GOOD), str(path))  # fields 'a' and 'b': not the quadruped's
    argv = [*TRAIN, "--task", "quadruped_flat", "--motion", str(path), "--log-dir", str(tmp_path / "run")]
    fails(capsys, argv, f"--motion {path}", "'quadruped_flat'", "'a'")
    assert not (tmp_path / "run").exists()


def test_play_and_export_with_the_task_of_another_run(vt_run, tmp_path, capsys):
    for argv in (
        ["play", "--checkpoint", str(vt_run), "--task", "point_mass", *PLAY],
        ["export", "--checkpoint", str(vt_run), "--task", "point_mass", "--out", str(tmp_path / "out")],
    ):
        fails(capsys, argv, "a run of task 'velocity_tracking'", "task 'point_mass' (--task)")
    assert not (tmp_path / "out").exists()


def test_a_run_config_that_is_not_a_mapping_is_not_ignored(vt_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(vt_run, run)
    (run / "config.json").write_text("[]")  # used to be ignored: the checkpoint's config was used instead
    fails(capsys, ["play", "--checkpoint", str(run), *PLAY], str(run / "config.json"), "list")


def test_plot_into_a_folder_writes_the_file_it_names(pm_run, tmp_path, capsys):
    folder = tmp_path / "plots"
    folder.mkdir()
    assert main(["plot", str(pm_run), "--out", str(folder)]) == 0
    assert f"training curves: {folder / 'training_curves.png'}" in capsys.readouterr().out
    assert (folder / "training_curves.png").is_file()  # matplotlib used to write plots.png beside the folder
    assert main(["plot", str(pm_run), "--out", str(tmp_path / "curves")]) == 0
    assert (tmp_path / "curves.png").is_file() and "curves.png" in capsys.readouterr().out


def test_tune_mistakes_are_one_line_before_any_trial(tmp_path, capsys):
    pytest.importorskip("optuna")
    root = tmp_path / "tune"
    base = ["tune", "--task", "point_mass", "--log-root", str(root), "--iterations", "1", "--num-envs", "8"]
    # a key the config does not take: every trial used to fail with a traceback in the log
    fails(capsys, [*base, "--space", '{"algorithm.gama": [0.9, 0.99]}'], "algorithm.gama", "'gamma'")
    assert not root.exists()
    fails(capsys, [*base, "--storage", "nonsense://x"], "'nonsense://x' (--storage)")
    fails(capsys, [*base, "--summary"], "no study storage", str(root))
    fails(capsys, [*base, "--space", "{"], "search space")


def _point_mass(**kwargs):
    from st_rl.tasks import PointMass

    return PointMass(num_envs=kwargs.pop("num_envs", 4), seed=0, **kwargs)


class _NoEpisodeLength:
    """An environment without episode_length_buf / max_episode_length."""

    def __init__(self):
        self.env = _point_mass()
        self.num_envs, self.num_actions, self.device = 4, self.env.num_actions, "cpu"

    def get_observations(self):
        return self.env.get_observations()

    def step(self, actions):
        return self.env.step(actions)


def _demonstration_saver(tmp_path, policy, **kwargs):
    from st_rl.runners import DemonstrationSaver

    env = _point_mass()
    saver = DemonstrationSaver(env, policy, str(tmp_path / "demos"), rollout_storage_length=8, min_episodes=0,
                               min_timesteps=kwargs.pop("min_timesteps", 32), **kwargs)  # fmt: skip
    saver.collect_and_save()


def _motion_file(tmp_path):
    from st_rl.tasks.motion_recorder import save_motion_file

    save_motion_file(_motion(GOOD), str(tmp_path / "m.motion"))
    return str(tmp_path / "m.motion")


def _dataset(tmp_path, **kwargs):
    from st_rl.storage.rollout_files.rollout_dataset import RolloutDataset

    (tmp_path / "demos").mkdir(exist_ok=True)
    return RolloutDataset(str(tmp_path / "demos"), kwargs.pop("num_envs", 2), device="cpu", **kwargs)


def _metadata_list(tmp_path):
    from st_rl.storage.rollout_files.trajectory_files import read_metadata

    (tmp_path / "metadata.json").write_text("[]")  # used to be read as "no metadata"
    return read_metadata(str(tmp_path))


def _runner_with_obs_groups(tmp_path):
    from st_rl.runners import OnPolicyRunner

    cfg = {"logger": "none", "obs_groups": {"policy": 3}, "policy": {"actor_hidden_dims": [8]},
           "algorithm": {"num_mini_batches": 1}}  # fmt: skip
    return OnPolicyRunner(_point_mass(), cfg, None)


def _export_named(tmp_path, pm_run, name):
    from st_rl.export import export_policy

    return export_policy(str(pm_run / "model_1.pt"), str(tmp_path / "out"), name=name, check=False)


@pytest.mark.parametrize(
    ("call", "error", "culprits"),
    [
        (
            lambda t, r: __import__("st_rl.datasets").datasets.MotionLoader(
                _motion_file(t), amp_obs_frame_num="2"
            ),
            ValueError,
            ("amp_obs_frame_num", "'2'"),
        ),
        (
            lambda t, r: __import__("st_rl.datasets").datasets.MotionLoader(
                _motion_file(t), amp_obs_frame_num=2.5
            ),
            ValueError,
            ("amp_obs_frame_num", "2.5"),
        ),
        (
            lambda t, r: __import__("st_rl.datasets").datasets.MotionLoader(
                _motion_file(t), time_between_frames=math.nan
            ),
            ValueError,
            ("time_between_frames", "nan"),
        ),
        (
            lambda t, r: __import__("st_rl.datasets").datasets.MotionLoader(str(t)),
            FileNotFoundError,
            ("holds no motion files",),
        ),
        (lambda t, r: _dataset(t, num_envs="2"), ValueError, ("num_envs", "'2'")),
        (lambda t, r: _dataset(t, dataset_loops="x"), ValueError, ("dataset_loops", "'x'")),
        (lambda t, r: _metadata_list(t), ValueError, ("metadata.json", "list")),
        (
            lambda t, r: _demonstration_saver(t, lambda obs: obs[:, :2], min_timesteps=math.nan),
            ValueError,
            ("min_timesteps",),
        ),
        (
            lambda t, r: _demonstration_saver(t, lambda obs: torch.full((obs.shape[0], 2), math.nan)),
            ValueError,
            ("NaN/Inf actions", "nothing of this round was written"),
        ),
        (lambda t, r: _export_named(t, r, "../evil"), ValueError, ("name", "'../evil'")),
        (lambda t, r: _runner_with_obs_groups(t), ValueError, ("obs_groups['policy']", "3")),
        (
            lambda t, r: __import__("st_rl.env").env.EnvAdapter(__import__("st_rl.tasks").tasks.PointMass),
            TypeError,
            ("the class PointMass", "PointMass(...)"),
        ),
    ],
    ids=[
        "frames_text",
        "frames_float",
        "time_nan",
        "motion_folder_empty",
        "dataset_num_envs_text",
        "dataset_loops_text",
        "metadata_list",
        "saver_min_timesteps_nan",
        "saver_nan_actions",
        "export_name_folder",
        "obs_groups_number",
        "env_class",
    ],  # fmt: skip
)
def test_python_api_mistakes_name_the_culprit(tmp_path, pm_run, call, error, culprits):
    with pytest.raises(error) as info:
        call(tmp_path, pm_run)
    message = str(info.value)
    for culprit in culprits:
        assert culprit in message, (culprit, message)
    assert not list(tmp_path.rglob("traj_*")) and not (tmp_path / "evil.onnx").exists()


def test_an_env_without_episode_lengths_trains_with_a_warning():
    """learn(init_at_random_ep_len=True), as st-rl train calls it, used to fail with an AttributeError."""
    from st_rl.runners import OnPolicyRunner

    cfg = {"logger": "none", "num_steps_per_env": 4, "policy": {"actor_hidden_dims": [8]},
           "algorithm": {"num_mini_batches": 1}}  # fmt: skip
    runner = OnPolicyRunner(_NoEpisodeLength(), cfg, None)
    with pytest.warns(UserWarning, match="_NoEpisodeLength has no episode_length_buf or max_episode_length"):
        runner.learn(1, init_at_random_ep_len=True)
    assert runner.current_learning_iteration == 1


@pytest.mark.parametrize(
    "argv",
    [
        [*PM, "--resume", ""],  # used to train from scratch
        [*PM, "--motion", ""],  # used to train without AMP
        ["play", "--checkpoint", "", *PLAY],
        ["export", "--checkpoint", ""],
        ["plot", ""],
    ],
    ids=["resume", "motion", "play", "export", "plot"],
)
def test_an_empty_path_is_an_error_not_the_option_left_out(capsys, argv):
    """``--resume "$RUN"`` with ``RUN`` unset."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "an empty path" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("source", "culprit"),
    [
        ("import sys\nsys.exit(2)\n", "sys.exit(2)"),  # a training script's argparse, run on import
        ("import sys\n\ndef make_env(**kwargs):\n    sys.exit('no GPU found')\n", "no GPU found"),
    ],
    ids=["on_import", "in_the_factory"],
)
def test_env_code_that_calls_sys_exit(tmp_path, capsys, source, culprit):
    """It used to end st-rl with the script's exit code and no message."""
    file = tmp_path / "script_env.py"
    file.write_text(source)
    argv = [*TRAIN, "--env", f"{file}:make_env", "--log-dir", str(tmp_path / "run")]
    fails(capsys, argv, f"--env {file}:make_env", "SystemExit", culprit, f"{file}:")


def test_more_environments_than_memory_is_one_line(tmp_path, capsys, monkeypatch):
    """torch's CPU allocator fails with a RuntimeError (reported as 'unexpected' before)."""
    import st_rl.tasks

    def no_memory(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
            "to allocate 8000000000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(st_rl.tasks, "make_env", no_memory)
    argv = [*PM, "--num-envs", str(10**12), "--log-dir", str(tmp_path / "run")]
    fails(capsys, argv, "out of memory on the CPU (7,450.6 GiB asked for)", "--num-envs")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_writes_never_replace_what_is_not_a_regular_file(tmp_path, pm_run, capsys):
    """Files are written to a temporary file that replaces the target: run as root, ``--out /dev/null`` replaced
    the device. A FIFO stands in for it here."""
    import stat

    from st_rl.tasks.motion_recorder import save_motion_file
    from st_rl.utils.checkpoint import CheckpointWriteError, save_checkpoint

    fifo = tmp_path / "fifo.pkl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        save_motion_file(_motion(GOOD), str(fifo))
    with pytest.raises(CheckpointWriteError, match="not a regular file"):
        save_checkpoint(str(fifo), {"model_state_dict": {"w": torch.zeros(1)}})
    fails(capsys, ["plot", str(pm_run), "--out", str(fifo)], str(fifo), "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not [p for p in os.listdir(tmp_path) if "tmp" in p]
