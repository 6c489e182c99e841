"""An adversarial pass over st_rl: hundreds of bad inputs and faults, as a new user would make them.

Run by hand from the repository root (it is not part of the test suite; ~15-25 minutes on 2 CPU cores)::

    python tools/adversarial_pass.py [--out results.json] [--only SUBSTRING] [--keep]

Every case declares what a correct answer is, and the outcome is classified:

* **clear error** (an error case): the CLI exits non-zero with exactly one stderr line starting
  ``st-rl: error:`` (``interrupted:`` for signals; a config error's other problems indented below it), no
  ``Traceback``, naming the culprit (the words the case gives: key path, file, value). In Python: an exception
  of a documented type (``ValueError`` with its subclasses ``ConfigError``, ``CheckpointError``, ...,
  ``TypeError`` for wrong types, ``OSError`` such as ``FileNotFoundError``, ``ImportError``; the user's own
  exception where the user's code raised it) whose message names the culprit;
* **works** (legitimate input): it succeeds (and, where the case says so, with the right result);
* **traceback/unclear**: an error, but with a traceback, an undocumented exception type (``RuntimeError``,
  ``AttributeError``, ``IndexError``, ...), an "unexpected" error, or a message that does not name the culprit;
* **silent wrong**: accepted where it must be refused, or a wrong result;
* **wrongly refused**: legitimate input refused;
* **hang**: the case did not end within its (generous) time limit;
* **data loss**: a file that existed before the case was changed or removed where it must not be (file hashes
  of the protected folders before and after every case).

CLI cases run ``python -m st_rl ...`` in a subprocess (tiny runs: ``--task point_mass --num-envs 8
--iterations 1``); Python cases run in this process under an alarm (a hang is reported, not waited for).
The script prints a table of counts per category and outcome and every case that is not a clear error or
works, and writes all results as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fnmatch
import gc
import hashlib
import io
import json
import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO  # the folder whose st_rl package is tested (--source)
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

# ------------------------------------------------------------------------------------------------ outcomes
CLEAR, WORKS, UNCLEAR, SILENT, REFUSED, HANG, LOSS = (
    "clear error",
    "works",
    "traceback/unclear",
    "silent wrong",
    "wrongly refused",
    "hang",
    "data loss",
)
OUTCOMES = (CLEAR, WORKS, UNCLEAR, SILENT, REFUSED, HANG, LOSS)
GOOD_OUTCOMES = (CLEAR, WORKS)

CATEGORIES = (
    "config",
    "cli",
    "env",
    "checkpoint",
    "data",
    "rundir",
    "signal",
    "export",
)

DOCUMENTED: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, ImportError)
"""Exception types a Python API may raise for a bad input (with their subclasses: ConfigError,
CheckpointError, EnvOutputError, MotionFileError, TrajectoryFileError, ExportedPolicyError, RunDirectoryError,
FileNotFoundError, UntrustedConfigError, ...)."""

W = Path(".")  # the work folder (set in main)
FX: dict[str, Path] = {}  # fixtures: name -> path
MARKER_NAME = "PWNED"  # a malicious pickle would create W/PWNED


class CaseTimeout(BaseException):
    """Raised by the alarm in an in-process case that ran past its time limit."""


class SilentWrong(Exception):
    """Raised by a case's own code when st_rl accepted something and got a wrong result."""


@dataclass
class Case:
    """One adversarial case.

    Exactly one of ``argv`` (the ``st-rl`` arguments; ``{W}`` is the work folder, ``{C}`` the case folder,
    ``{FX:name}`` a fixture path) and ``fn`` (a Python callable taking the case folder) is given.
    """

    id: str
    category: str
    expect: str  # "error", "works" or "signal"
    culprits: tuple[str, ...] = ()
    argv: list[str] | None = None
    fn: Callable[[Path], Any] | None = None
    raises: tuple[type[BaseException], ...] = DOCUMENTED
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, Any], str | None] | None = None
    protect: tuple[str, ...] = ()
    may_change: tuple[str, ...] = ()
    fresh: tuple[str, ...] = ()
    signal: tuple[int, str] | None = None  # (signal, stdout text to wait for before sending it)
    second_signal: bool = False
    codes: tuple[int, ...] = (2,)
    timeout: float = 120.0
    cwd: str = "{C}"
    env: dict[str, str] = field(default_factory=dict)
    nohup: bool = False  # the CLI starts with SIGHUP ignored, as under ``nohup``


@dataclass
class Result:
    id: str
    category: str
    kind: str
    expect: str
    outcome: str
    detail: str = ""
    seconds: float = 0.0


CASES: list[Case] = []


def add(case: Case) -> None:
    CASES.append(case)


def sub(text: str, cdir: Path) -> str:
    """``text`` with ``{W}``, ``{C}`` and ``{FX:name}`` replaced."""
    out = text.replace("{W}", str(W)).replace("{C}", str(cdir))
    while "{FX:" in out:
        start = out.index("{FX:")
        end = out.index("}", start)
        out = out[:start] + str(FX[out[start + 4 : end]]) + out[end + 1 :]
    return out


# ------------------------------------------------------------------------------------------------ snapshots
def snapshot(paths: Sequence[Path]) -> dict[str, str]:
    """sha256 of every file under ``paths`` (files or folders; FIFOs and other special files by their type)."""
    import stat

    def digest(p: Path) -> str:
        mode = os.lstat(p).st_mode
        if stat.S_ISREG(mode):
            return hashlib.sha256(p.read_bytes()).hexdigest()
        return f"special file {stat.S_IFMT(mode):o}"

    out: dict[str, str] = {}
    for root in paths:
        if root.is_dir():
            for p in sorted(root.rglob("*")):
                if not p.is_dir() and not p.name.startswith(".st_rl.lock"):
                    out[str(p)] = digest(p)
        elif os.path.lexists(root):
            out[str(root)] = digest(root)
    return out


def lost_files(before: dict[str, str], after: dict[str, str], may_change: Sequence[str]) -> list[str]:
    lost = []
    for path, digest in before.items():
        if any(fnmatch.fnmatch(path, pattern) for pattern in may_change):
            continue
        if path not in after:
            lost.append(f"{path} removed")
        elif after[path] != digest:
            lost.append(f"{path} changed")
    return lost


# ------------------------------------------------------------------------------------------------ runners
def _stderr_block(stderr: str) -> tuple[list[str], list[str]]:
    """(the error lines with their indented continuation lines, the other non-indented lines)."""
    block: list[str] = []
    other: list[str] = []
    in_block = False
    for line in stderr.splitlines():
        if not line.strip():
            continue
        if line.startswith(("st-rl: error:", "interrupted:")):
            block.append(line)
            in_block = True
        elif line.startswith("st-rl: warning:"):  # a one-line warning before the error is fine
            in_block = False
        elif in_block and line[:1].isspace():
            block.append(line)
        else:
            in_block = False
            other.append(line)
    return block, other


def run_cli(case: Case, cdir: Path) -> tuple[str, str]:
    argv = [sub(a, cdir) for a in case.argv or []]
    environ = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(cdir), str(SOURCE)]),
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        **{k: sub(v, cdir) for k, v in case.env.items()},
    }
    environ.pop("PYTHONWARNINGS", None)
    cwd = sub(case.cwd, cdir)
    out_path, err_path = cdir / "_stdout.txt", cdir / "_stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "st_rl", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=environ,
            start_new_session=True,
            preexec_fn=_nohup_child if case.nohup else _default_child,
        )
        timed_out = False
        try:
            if case.signal is not None:
                sig, text = case.signal
                deadline = time.monotonic() + (float(text[1:]) if text.startswith("@") else case.timeout)
                while proc.poll() is None and time.monotonic() < deadline:
                    if not text.startswith("@") and text in out_path.read_text(errors="replace"):
                        break
                    time.sleep(0.05)
                if proc.poll() is None:
                    proc.send_signal(sig)
                    if case.second_signal:
                        time.sleep(0.2)
                        if proc.poll() is None:
                            proc.send_signal(sig)
            proc.wait(timeout=max(1.0, case.timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    rc = proc.returncode
    run = {"rc": rc, "stdout": stdout, "stderr": stderr}
    if timed_out:
        return HANG, f"no end within {case.timeout:.0f} s; stderr: {stderr.strip()[-300:]!r}"
    tail = (stderr.strip().splitlines() or [""])[-1][:300]
    if case.expect == "works":
        if rc != 0:
            return REFUSED, f"exit code {rc}: {tail}"
        if case.check is not None:
            wrong = case.check(cdir, run)
            if wrong:
                return SILENT, wrong
        return WORKS, ""
    if rc == 0:
        return SILENT, "exit code 0 (accepted)" + (f"; stderr: {tail}" if tail else "")
    if "Traceback" in stderr or "Traceback" in stdout:
        return UNCLEAR, f"traceback (exit code {rc}): {tail}"
    block, other = _stderr_block(stderr)
    heads = [line for line in block if not line[:1].isspace()]
    if case.expect == "signal":
        if rc < 0:
            return UNCLEAR, f"killed by signal {-rc} without a message"
        if not heads or not (heads[-1].startswith("interrupted:") or "interrupted" in heads[-1]):
            return UNCLEAR, f"exit code {rc}, no 'interrupted' line: {tail}"
        if rc not in case.codes:
            return UNCLEAR, f"exit code {rc}, expected {case.codes}: {tail}"
    else:
        if len(heads) != 1:
            return UNCLEAR, f"{len(heads)} error lines (exit code {rc}): {stderr.strip()[-400:]!r}"
        if other:
            return UNCLEAR, f"extra stderr lines {other[:3]!r}; error: {heads[0][:200]}"
        if "st-rl: error: unexpected " in heads[0]:
            return UNCLEAR, f"an unexpected error: {heads[0][:300]}"
        if rc not in case.codes:
            return UNCLEAR, f"exit code {rc}, expected {case.codes}: {heads[0][:300]}"
    text = "\n".join(block)
    missing = [c for c in (sub(c, cdir) for c in case.culprits) if c not in text]
    if missing:
        return UNCLEAR, f"does not name {missing}: {text[:400]}"
    if case.check is not None:
        wrong = case.check(cdir, run)
        if wrong:
            return SILENT, wrong
    return CLEAR, ""


CHILD_MEMORY_LIMIT = 8 * 2**30
"""Address-space limit of every CLI subprocess: a case that reads a device to its end or allocates without bound
fails with MemoryError instead of taking the machine down."""


def _default_child() -> None:
    """A CLI process as a user's terminal starts it, whatever this script inherited (a shell's background job
    ignores SIGINT; ``nohup`` ignores SIGHUP), under a memory cap."""
    import resource

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_LIMIT, CHILD_MEMORY_LIMIT))


def _nohup_child() -> None:
    _default_child()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def run_py(case: Case, cdir: Path) -> tuple[str, str]:
    assert case.fn is not None
    out, err = io.StringIO(), io.StringIO()
    value: Any = None
    error: BaseException | None = None
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, case.timeout)
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(record=True),
        ):
            warnings.simplefilter("always")
            value = case.fn(cdir)
    except CaseTimeout:
        return HANG, f"no end within {case.timeout:.0f} s"
    except BaseException as e:  # noqa: BLE001 - every outcome is classified
        if isinstance(e, KeyboardInterrupt) and type(e) is KeyboardInterrupt:
            raise  # the user's Ctrl-C of this script
        error = e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if isinstance(error, SilentWrong):
        return SILENT, str(error)
    if case.expect == "works":
        if error is not None:
            return REFUSED, f"{type(error).__name__}: {_first(error)}"
        if case.check is not None:
            wrong = case.check(cdir, value)
            if wrong:
                return SILENT, wrong
        return WORKS, ""
    if error is None:
        return SILENT, f"accepted (returned {_short(value)})"
    message = str(error)
    if not isinstance(error, case.raises):
        where = traceback.extract_tb(error.__traceback__)
        at = f" at {Path(where[-1].filename).name}:{where[-1].lineno}" if where else ""
        return UNCLEAR, f"{type(error).__name__}{at}: {_first(error)}"
    missing = [c for c in (sub(c, cdir) for c in case.culprits) if c not in message]
    if missing:
        return UNCLEAR, f"{type(error).__name__} does not name {missing}: {message[:400]}"
    if case.check is not None:
        wrong = case.check(cdir, error)
        if wrong:
            return SILENT, wrong
    return CLEAR, ""


def _first(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:400]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."


def run_case(case: Case) -> Result:
    cdir = W / "cases" / case.id
    if cdir.exists():
        shutil.rmtree(cdir)
    cdir.mkdir(parents=True)
    kind = "cli" if case.argv is not None else "python"
    start = time.monotonic()
    try:
        if case.setup is not None:
            case.setup(cdir)
        protect = [Path(sub(p, cdir)) for p in case.protect]
        before = snapshot(protect)
        outcome, detail = run_cli(case, cdir) if kind == "cli" else run_py(case, cdir)
        after = snapshot(protect)
        lost = lost_files(before, after, [sub(p, cdir) for p in case.may_change])
        if lost:
            outcome, detail = LOSS, "; ".join(lost[:4]) + (f" (was: {outcome} {detail})" if detail else "")
        if (W / MARKER_NAME).exists():
            (W / MARKER_NAME).unlink()
            outcome, detail = SILENT, f"a malicious file ran code (was: {outcome} {detail})"
        if case.expect != "works" and outcome == CLEAR:
            left = [p for p in (Path(sub(f, cdir)) for f in case.fresh) if p.exists() and any(_files(p))]
            if left:
                outcome, detail = UNCLEAR, f"refused but left files behind: {[str(p) for p in left]}"
    except Exception as e:  # noqa: BLE001 - a broken case must not stop the pass
        outcome, detail = UNCLEAR, f"harness error in the case: {type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        gc.collect()
    return Result(case.id, case.category, kind, case.expect, outcome, detail, time.monotonic() - start)


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [p for p in path.rglob("*") if p.is_file() and p.name != ".st_rl.lock"]


# ================================================================================================ fixtures
def quiet(fn: Callable[[], Any]) -> Any:
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        return fn()


def cli_main(argv: list[str]) -> int:
    from st_rl.cli import main

    return quiet(lambda: main(argv))


TRAIN = ["train", "--num-envs", "8", "--iterations", "1", "--device", "cpu"]
PM = [*TRAIN, "--task", "point_mass"]
PLAY = ["--num-envs", "2", "--duration", "0.2", "--no-video", "--no-plot"]


def motion_dict(frames: list[list[float]] | None = None, **traj: Any) -> dict[str, Any]:
    frames = frames if frames is not None else [[0.1 * i, -0.1 * i, 0.05 * i] for i in range(30)]
    base = {"Fields": ["a", "b", "c"], "Frames": frames, "FrameDuration": 0.02, "MotionWeight": 1.0}
    base.update(traj)
    return {"walk": base}


class _Malicious:
    """Unpickling it would create the marker file: proof that a reader ran code from a file."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(W / MARKER_NAME), "w"))


def malicious_pickle() -> bytes:
    return pickle.dumps({"walk": _Malicious()}, protocol=4)


class Expert:
    def __init__(self, env: Any) -> None:
        self.env = env

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        return self.env.expert_action(obs)


def build_fixtures() -> None:
    from st_rl.runners import DemonstrationSaver
    from st_rl.tasks import make_env
    from st_rl.tasks.motion_recorder import save_motion_file

    fx = W / "fx"
    fx.mkdir(parents=True, exist_ok=True)
    FX["pm"] = fx / "pm"
    assert cli_main([*PM, "--log-dir", str(FX["pm"])]) == 0, "fixture pm"
    FX["pm_ckpt"] = FX["pm"] / "model_1.pt"
    FX["pm_b"] = fx / "pm_b"
    assert cli_main([*PM, "--log-dir", str(FX["pm_b"]), "--seed", "5"]) == 0, "fixture pm_b"
    FX["pm_rnn"] = fx / "pm_rnn"
    assert (
        cli_main(
            [
                *PM,
                "--log-dir",
                str(FX["pm_rnn"]),
                "--policy",
                "ActorCriticRecurrent",
                "policy.rnn_hidden_size=8",
            ]
        )
        == 0
    ), "fixture pm_rnn"
    FX["pm_big"] = fx / "pm_big"
    assert cli_main([*PM, "--log-dir", str(FX["pm_big"]), "policy.actor_hidden_dims=[32]"]) == 0
    FX["vt"] = fx / "vt"
    assert cli_main([*TRAIN, "--task", "velocity_tracking", "--log-dir", str(FX["vt"])]) == 0, "fixture vt"
    assert cli_main(["export", "--checkpoint", str(FX["vt"]), "--no-check"]) == 0, "fixture vt export"
    FX["vt_ckpt"] = FX["vt"] / "model_1.pt"
    FX["vt_exported"] = FX["vt"] / "exported"
    FX["motion"] = fx / "walk.motion"
    save_motion_file(motion_dict(), str(FX["motion"]))
    FX["data"] = fx / "demos"
    env = make_env("point_mass", num_envs=4, seed=0)
    saver = DemonstrationSaver(
        env, Expert(env), str(FX["data"]), rollout_storage_length=16, min_timesteps=160, min_episodes=0
    )
    quiet(lambda: saver.collect_and_save(config={"task": "point_mass"}))
    FX["data_file"] = sorted(FX["data"].rglob("traj_*.npz"))[0]
    FX["env_module"] = fx / "user_envs.py"
    FX["env_module"].write_text(ENV_MODULE)


# ================================================================================================ helpers
def point_mass(num_envs: int = 8, **cfg: Any) -> Any:
    from st_rl.tasks import make_env

    return make_env("point_mass", num_envs=num_envs, seed=0, **cfg)


def small_cfg(form: str = "flat") -> dict[str, Any]:
    """A small, valid point_mass training config in the st_gym flat or the legged_gym nested form."""
    policy = {"class_name": "ActorCritic", "actor_hidden_dims": [16], "critic_hidden_dims": [16]}
    algorithm = {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2, "gamma": 0.99}
    runner = {"seed": 1, "num_steps_per_env": 8, "save_interval": 50, "max_iterations": 1, "logger": "none"}
    if form == "flat":
        return {**runner, "policy": policy, "algorithm": algorithm}
    policy.pop("class_name")
    algorithm.pop("class_name")
    runner = {**runner, "policy_class_name": "ActorCritic", "algorithm_class_name": "PPO"}
    return {"runner": runner, "policy": policy, "algorithm": algorithm}


def set_path(cfg: dict[str, Any], form: str, path: str, value: Any) -> None:
    """Set ``path`` (nested spelling: ``runner.x``, ``policy.x``, ``algorithm.x.y``, ``top.x``) in ``cfg``."""
    section, _, rest = path.partition(".")
    if section == "top" or (section == "runner" and form == "flat"):
        node = cfg
    elif section == "class":
        # class.policy / class.algorithm / class.runner: the class name in either form
        if rest == "runner":
            node, rest = (cfg if form == "flat" else cfg["runner"]), "runner_class_name"
        elif form == "nested":
            node, rest = cfg["runner"], f"{rest}_class_name"
        else:
            node, rest = cfg[rest], "class_name"
    else:
        node = cfg.setdefault(section, {})
    *parents, last = rest.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


DELETE = object()


def train_with(cfg: Any, env: Any = None, log_dir: str | None = None, iterations: int = 1) -> Any:
    """Build the runner of ``cfg`` (its runner class) on point_mass and learn; check that ``cfg`` is not
    changed."""
    from st_rl.runners import build_runner

    before = copy.deepcopy(cfg)
    env = env if env is not None else point_mass()
    name = "OnPolicyRunner"
    if isinstance(cfg, dict):
        runner = cfg.get("runner") if isinstance(cfg.get("runner"), dict) else cfg
        name = runner.get("runner_class_name") or cfg.get("runner_class_name") or name
    runner = build_runner(name, env, cfg, log_dir=log_dir, device="cpu")
    try:
        runner.learn(iterations)
    finally:
        runner.close()
    if isinstance(cfg, dict) and cfg != before:
        raise SilentWrong("the user's config dict was changed")
    return runner


def cfg_case(
    case_id: str,
    path: str,
    value: Any,
    culprit: str | None = None,
    form: str = "flat",
    setup: Sequence[tuple[str, Any]] = (),
    fix: str = "",
    expect: str = "error",
    raises: tuple[type[BaseException], ...] = DOCUMENTED,
) -> None:
    """A config case: the small config with ``setup`` edits, then ``path = value``; build and learn."""

    def fn(cdir: Path) -> Any:
        cfg = small_cfg(form)
        for p, v in setup:
            set_path(cfg, form, p, v)
        set_path(cfg, form, path, value)
        return train_with(cfg)

    if culprit is None:
        culprit = path.split(".", 1)[1] if path.startswith(("runner.", "top.")) else path
        if path.startswith("class."):
            culprit = "class_name"
    culprits = tuple(c for c in (culprit, fix) if c)
    add(Case(f"config-{form}-{case_id}", "config", expect, culprits, fn=fn, raises=raises))


# The user's environment module for --env cases (CLI) and the wrappers for Python env cases.
ENV_MODULE = '''
import math, os, signal, sys, time
import torch
from st_rl.tasks import PointMass


class Broken(PointMass):
    """PointMass with one thing wrong, chosen by the factory."""

    def __init__(self, what="", at=1, **kwargs):
        self.what, self.at, self.calls = what, at, 0
        super().__init__(**kwargs)

    def step(self, actions):
        obs, rew, dones, extras = super().step(actions)
        self.calls += 1
        if self.calls < self.at:
            return obs, rew, dones, extras
        w = self.what
        if w == "nan_obs":
            obs = obs.clone(); obs[0, 0] = math.nan
        elif w == "inf_rew":
            rew = rew.clone(); rew[1] = math.inf
        elif w == "wide_obs":
            obs = torch.cat([obs, obs], dim=1)
        elif w == "rows_obs":
            obs = obs[:-1]
        elif w == "int_obs":
            obs = obs.long()
        elif w == "rew_2d":
            rew = rew[:, None]
        elif w == "dones_list":
            dones = dones.tolist()
        elif w == "three":
            return obs, rew, dones
        elif w == "raise":
            raise RuntimeError("boom in step")
        elif w == "none":
            return None
        return obs, rew, dones, extras


def nan_obs(num_envs=8, **kw):
    return Broken("nan_obs", num_envs=num_envs, **kw)

def inf_rew(num_envs=8, **kw):
    return Broken("inf_rew", num_envs=num_envs, **kw)

def wide_obs(num_envs=8, **kw):
    return Broken("wide_obs", num_envs=num_envs, **kw)

def rows_obs(num_envs=8, **kw):
    return Broken("rows_obs", num_envs=num_envs, **kw)

def int_obs(num_envs=8, **kw):
    return Broken("int_obs", num_envs=num_envs, **kw)

def rew_2d(num_envs=8, **kw):
    return Broken("rew_2d", num_envs=num_envs, **kw)

def dones_list(num_envs=8, **kw):
    return Broken("dones_list", num_envs=num_envs, **kw)

def three(num_envs=8, **kw):
    return Broken("three", num_envs=num_envs, **kw)

def raises_in_step(num_envs=8, **kw):
    return Broken("raise", num_envs=num_envs, **kw)

def step_none(num_envs=8, **kw):
    return Broken("none", num_envs=num_envs, **kw)

def good(num_envs=8, **kw):
    return PointMass(num_envs=num_envs, **kw)

def no_num_actions(num_envs=8, **kw):
    env = PointMass(num_envs=num_envs, **kw)
    class Env:
        num_envs = env.num_envs
        def get_observations(self):
            return env.get_observations()
        def step(self, a):
            return env.step(a)
        def reset(self):
            return env.reset()
    return Env()

def needs_arg(path, num_envs=8):
    return PointMass(num_envs=num_envs)

def no_num_envs_param():
    return PointMass(num_envs=8)

def slow(num_envs=8, **kw):
    print("building the environment", flush=True)
    time.sleep(60)
    return PointMass(num_envs=num_envs, **kw)

class NotCallable:
    pass


def exits(num_envs=8, **kw):
    sys.exit("no GPU found")

not_callable = 3

def raises_in_reset_obs(num_envs=8, **kw):
    class E(PointMass):
        def get_observations(self):
            raise ValueError("observation sensor offline")
    return E(num_envs=num_envs, **kw)

def prints_and_sleeps_in_step(num_envs=8, **kw):
    class E(PointMass):
        n = 0
        def step(self, a):
            E.n += 1
            if E.n == 3:
                print("stepping slowly", flush=True)
            if E.n >= 3:
                time.sleep(0.2)
            return super().step(a)
    return E(num_envs=num_envs, **kw)
'''


# ================================================================================================ cases
NAN, INF = math.nan, math.inf
REC = (("class.policy", "ActorCriticRecurrent"), ("policy.rnn_hidden_size", 8))
TPPO = (("class.algorithm", "TPPO"),)
APPO = (("class.algorithm", "APPO"),)
AMP_POLICY = (("class.policy", "AmpActorCritic"),)
ESTIMATOR = (("class.algorithm", "EstimatorPPO"),)
MISSING_MODULE = "no_such_module_xyz"


def config_cases() -> None:
    """Bad config values, unknown and misspelt keys in every section, conflicting forms, bad class names."""
    bad: list[tuple[Any, ...]] = [
        # (id, path, value[, culprit[, setup[, fix]]])
        ("gamma_string", "algorithm.gamma", "0.99"),
        ("gamma_inf", "algorithm.gamma", INF),
        ("gamma_none", "algorithm.gamma", None),
        ("gamma_list", "algorithm.gamma", [0.99]),
        ("gamma_dict", "algorithm.gamma", {}),
        ("lam_nan", "algorithm.lam", NAN),
        ("lam_empty", "algorithm.lam", ""),
        ("lam_none", "algorithm.lam", None),
        ("clip_param_inf", "algorithm.clip_param", INF),
        ("clip_param_string", "algorithm.clip_param", "0.2"),
        ("learning_rate_empty", "algorithm.learning_rate", ""),
        ("learning_rate_bool", "algorithm.learning_rate", True),
        ("learning_rate_neg_inf", "algorithm.learning_rate", -INF),
        ("learning_rate_list", "algorithm.learning_rate", [1e-3]),
        ("epochs_negative", "algorithm.num_learning_epochs", -1),
        ("epochs_string", "algorithm.num_learning_epochs", "5"),
        ("epochs_none", "algorithm.num_learning_epochs", None),
        ("epochs_inf", "algorithm.num_learning_epochs", INF),
        ("minibatches_negative", "algorithm.num_mini_batches", -4),
        ("minibatches_none", "algorithm.num_mini_batches", None),
        ("minibatches_string", "algorithm.num_mini_batches", "4"),
        ("entropy_nan", "algorithm.entropy_coef", NAN),
        ("entropy_inf", "algorithm.entropy_coef", INF),
        ("entropy_string", "algorithm.entropy_coef", "0.01"),
        ("entropy_none", "algorithm.entropy_coef", None),
        ("value_loss_nan", "algorithm.value_loss_coef", NAN),
        ("value_loss_none", "algorithm.value_loss_coef", None),
        ("max_grad_norm_nan", "algorithm.max_grad_norm", NAN),
        ("max_grad_norm_inf", "algorithm.max_grad_norm", INF),
        ("max_grad_norm_text_none", "algorithm.max_grad_norm", "none"),
        ("desired_kl_zero", "algorithm.desired_kl", 0.0, None, (("algorithm.schedule", "adaptive"),)),
        ("desired_kl_inf", "algorithm.desired_kl", INF, None, (("algorithm.schedule", "adaptive"),)),
        ("desired_kl_string", "algorithm.desired_kl", "0.01"),
        ("schedule_empty", "algorithm.schedule", ""),
        ("schedule_int", "algorithm.schedule", 1),
        ("schedule_list", "algorithm.schedule", ["adaptive"]),
        ("optimizer_empty", "algorithm.optimizer_class_name", ""),
        ("optimizer_module", "algorithm.optimizer_class_name", "lr_scheduler"),
        ("optimizer_base", "algorithm.optimizer_class_name", "Optimizer"),
        ("precision_empty", "algorithm.precision", ""),
        ("precision_fp16", "algorithm.precision", "fp16"),
        ("precision_none", "algorithm.precision", None),
        ("compile_yes", "algorithm.compile", "yes"),
        ("clip_min_std_nan", "algorithm.clip_min_std", NAN),
        ("clip_min_std_text", "algorithm.clip_min_std", "x"),
        ("clip_min_std_inf", "algorithm.clip_min_std", INF),
        ("lr_anneal_negative", "algorithm.lr_anneal_iterations", -5),
        ("lr_anneal_float", "algorithm.lr_anneal_iterations", 1.5),
        ("dilation_nan", "algorithm.buffer_dilation_ratio", NAN),
        ("dilation_huge", "algorithm.buffer_dilation_ratio", 1e9),
        ("dilation_zero", "algorithm.buffer_dilation_ratio", 0),
        ("use_ppo_loss_none", "algorithm.use_ppo_loss", None),
        ("use_ppo_loss_int", "algorithm.use_ppo_loss", 0),
        ("clipped_value_none", "algorithm.use_clipped_value_loss", None),
        ("algo_normalization_int", "algorithm.empirical_normalization", 1),
        ("lr_scheduler_unknown", "algorithm.lr_scheduler_class_name", "NoSuchLR"),
        (
            "lr_scheduler_typo",
            "algorithm.lr_scheduler",
            {"step_sze": 10},
            "step_sze",
            (("algorithm.lr_scheduler_class_name", "StepLR"),),
        ),
        ("lr_scheduler_text", "algorithm.lr_scheduler", "x"),
        ("num_learning_epoch", "algorithm.num_learning_epoch", 5, None, (), "num_learning_epochs"),
        ("lerning_rate", "algorithm.lerning_rate", 1e-3, None, (), "learning_rate"),
        ("clip_parm", "algorithm.clip_parm", 0.2, None, (), "clip_param"),
        ("max_grad_nrom", "algorithm.max_grad_nrom", 1.0, None, (), "max_grad_norm"),
        ("desired_KL", "algorithm.desired_KL", 0.01, None, (), "desired_kl"),
        ("unknown_algorithm_key", "algorithm.foo_bar", 1),
        # extensions
        ("extensions_text", "algorithm.extensions", "rnd"),
        ("extension_empty_class", "algorithm.extensions", [{"class_name": ""}], "algorithm.extensions[0]"),
        (
            "extension_missing_module",
            "algorithm.extensions",
            [{"class_name": f"{MISSING_MODULE}:Ext"}],
            MISSING_MODULE,
        ),
        (
            "extension_key_typo",
            "algorithm.extensions",
            [{"class_name": "RandomNetworkDistillation", "wieght": 1.0}],
            "wieght",
        ),
        ("extension_int", "algorithm.extensions", [3], "algorithm.extensions[0]"),
        (
            "extension_no_such_class",
            "algorithm.extensions",
            [{"class_name": "st_rl.algorithms.extensions:NoSuch"}],
            "NoSuch",
        ),
        ("extension_not_a_class", "algorithm.extensions", [{"class_name": "math:pi"}], "math:pi"),
        # rnd_cfg
        ("rnd_lr_zero", "algorithm.rnd_cfg", {"learning_rate": 0}, "algorithm.rnd_cfg.learning_rate"),
        ("rnd_lr_inf", "algorithm.rnd_cfg", {"learning_rate": INF}, "algorithm.rnd_cfg.learning_rate"),
        ("rnd_outputs_float", "algorithm.rnd_cfg", {"num_outputs": 1e6}, "algorithm.rnd_cfg.num_outputs"),
        ("rnd_outputs_huge", "algorithm.rnd_cfg", {"num_outputs": 100_000}, "algorithm.rnd_cfg.num_outputs"),
        ("rnd_activation", "algorithm.rnd_cfg", {"activation": "relu6x"}, "algorithm.rnd_cfg.activation"),
        (
            "rnd_dims_text",
            "algorithm.rnd_cfg",
            {"target_hidden_dims": "64"},
            "algorithm.rnd_cfg.target_hidden_dims",
        ),
        ("rnd_weight_nan", "algorithm.rnd_cfg", {"weight": NAN}, "algorithm.rnd_cfg.weight"),
        (
            "rnd_schedule_incomplete",
            "algorithm.rnd_cfg",
            {"weight_schedule": {"mode": "linear"}},
            "algorithm.rnd_cfg.weight_schedule",
        ),
        (
            "rnd_schedule_text",
            "algorithm.rnd_cfg",
            {"weight_schedule": "linear"},
            "algorithm.rnd_cfg.weight_schedule",
        ),
        ("rnd_components_unknown", "algorithm.rnd_cfg", {"obs_components": ["nope"]}, "nope"),
        ("rnd_text", "algorithm.rnd_cfg", "yes", "algorithm.rnd_cfg"),
        ("rnd_list", "algorithm.rnd_cfg", [], "algorithm.rnd_cfg"),
        (
            "rnd_normalization_text",
            "algorithm.rnd_cfg",
            {"state_normalization": "no"},
            "algorithm.rnd_cfg.state_normalization",
        ),
        # symmetry_cfg
        (
            "symmetry_missing_module",
            "algorithm.symmetry_cfg",
            {"mirror_obs": f"{MISSING_MODULE}:f"},
            MISSING_MODULE,
        ),
        (
            "symmetry_coef_nan",
            "algorithm.symmetry_cfg",
            {"mirror_loss_coef": NAN},
            "algorithm.symmetry_cfg.mirror_loss_coef",
        ),
        (
            "symmetry_augmentation_text",
            "algorithm.symmetry_cfg",
            {"use_data_augmentation": "yes"},
            "algorithm.symmetry_cfg.use_data_augmentation",
        ),
        ("symmetry_list", "algorithm.symmetry_cfg", [], "algorithm.symmetry_cfg"),
        (
            "symmetry_function_int",
            "algorithm.symmetry_cfg",
            {"mirror_actions": 3},
            "algorithm.symmetry_cfg.mirror_actions",
        ),
        # storage
        ("storage_fields_int", "top.storage", {"fields": 3}, "storage.fields"),
        ("storage_next_obs_text", "top.storage", {"next_observations": "yes"}, "storage.next_observations"),
        ("storage_amp_shape_negative", "top.storage", {"amp_obs_shape": -1}, "storage.amp_obs_shape"),
        ("storage_amp_shape_text", "top.storage", {"amp_obs_shape": "x"}, "storage.amp_obs_shape"),
        ("storage_typo", "top.storage", {"next_observation": True}, "storage.next_observation"),
        ("storage_list", "top.storage", [], "storage"),
        # TPPO: nested ppo and teacher_policy
        ("tppo_ppo_lam_nan", "algorithm.ppo", {"lam": NAN}, "algorithm.ppo.lam", TPPO),
        ("tppo_ppo_unknown", "algorithm.ppo", {"foo": 1}, "algorithm.ppo.foo", TPPO),
        ("tppo_ppo_text", "algorithm.ppo", "x", "algorithm.ppo", TPPO),
        (
            "tppo_teacher_class",
            "algorithm.teacher_policy",
            {"class_name": "NoSuchPolicy"},
            "NoSuchPolicy",
            TPPO,
        ),
        (
            "tppo_teacher_typo",
            "algorithm.teacher_policy",
            {"actor_hiden_dims": [8]},
            "algorithm.teacher_policy.actor_hiden_dims",
            TPPO,
        ),
        (
            "tppo_teacher_path_int",
            "algorithm.teacher_policy",
            {"teacher_ac_path": 5},
            "algorithm.teacher_policy.teacher_ac_path",
            TPPO,
        ),
        (
            "tppo_teacher_missing_file",
            "algorithm.teacher_policy",
            {"teacher_ac_path": "missing_teacher.pt"},
            "missing_teacher.pt",
            TPPO,
        ),
        ("tppo_teacher_text", "algorithm.teacher_policy", "x", "algorithm.teacher_policy", TPPO),
        ("tppo_act_prob_nan", "algorithm.teacher_act_prob", NAN, None, TPPO),
        ("tppo_act_prob_negative", "algorithm.teacher_act_prob", -0.1, None, TPPO),
        ("tppo_distill_coef_text", "algorithm.distillation_loss_coef", "lin", None, TPPO),
        ("tppo_latent_target", "algorithm.distill_latent_target", "x", None, TPPO),
        ("tppo_update_scale_negative", "algorithm.update_times_scale", -1, None, TPPO),
        ("tppo_update_scale_nan", "algorithm.update_times_scale", NAN, None, TPPO),
        ("tppo_resample_nan", "algorithm.hidden_state_resample_prob", NAN, None, TPPO),
        ("tppo_dagger_negative", "algorithm.dagger_loss_coef", -1.0, None, TPPO),
        ("tppo_label_text", "algorithm.label_action_with_critic_obs", "yes", None, TPPO),
        # APPO
        ("appo_preset", "algorithm.amp_preset", "x", None, APPO),
        ("appo_ramp_reversed", "algorithm.style_reward_ramp", [10, 5], None, APPO),
        ("appo_ramp_negative", "algorithm.style_reward_ramp", [-1, 5], None, APPO),
        ("appo_ramp_text", "algorithm.style_reward_ramp", "x", None, APPO),
        ("appo_discriminator_coef_nan", "algorithm.discriminator_loss_coef", NAN, None, APPO),
        ("appo_obs_dim_zero", "algorithm.amp_obs_dim", 0, None, APPO),
        ("appo_bc_negative", "algorithm.bc_loss_coef", -1.0, None, APPO),
        ("appo_replay_text", "algorithm.amp_replay_buffer_size", "big", None, APPO),
        ("appo_clipping_text", "algorithm.amp_separate_clipping", "yes", None, APPO),
        # EstimatorPPO
        ("estimator_kwargs_text", "algorithm.estimator_loss_kwargs", "x", None, ESTIMATOR),
        ("estimator_func_empty", "algorithm.estimator_loss_func", "", None, ESTIMATOR),
        ("estimator_coef_inf", "algorithm.estimator_loss_coef", INF, None, ESTIMATOR),
        # policy.amp_discriminator
        (
            "discriminator_coef_negative",
            "policy.amp_discriminator",
            {"style_reward_coef": -1.0},
            "policy.amp_discriminator.style_reward_coef",
            AMP_POLICY,
        ),
        (
            "discriminator_pen_nan",
            "policy.amp_discriminator",
            {"discriminator_grad_pen": NAN},
            "policy.amp_discriminator.discriminator_grad_pen",
            AMP_POLICY,
        ),
        (
            "discriminator_input_zero",
            "policy.amp_discriminator",
            {"input_dim": 0},
            "policy.amp_discriminator.input_dim",
            AMP_POLICY,
        ),
        (
            "discriminator_dims_text",
            "policy.amp_discriminator",
            {"hidden_dims": "32"},
            "policy.amp_discriminator.hidden_dims",
            AMP_POLICY,
        ),
        ("discriminator_text", "policy.amp_discriminator", "x", "policy.amp_discriminator", AMP_POLICY),
        # policy
        ("actor_dims_mixed", "policy.actor_hidden_dims", [64, "64"]),
        ("actor_dims_huge", "policy.actor_hidden_dims", [100_000]),
        ("actor_dims_none", "policy.actor_hidden_dims", None),
        ("actor_dims_bool", "policy.actor_hidden_dims", [True]),
        ("critic_dims_nan", "policy.critic_hidden_dims", [NAN]),
        ("activation_empty", "policy.activation", ""),
        ("activation_int", "policy.activation", 3),
        ("activation_none", "policy.activation", None),
        ("init_noise_inf", "policy.init_noise_std", INF),
        ("init_noise_text", "policy.init_noise_std", "1"),
        ("init_noise_none", "policy.init_noise_std", None),
        ("mu_activation_empty", "policy.mu_activation", ""),
        ("policy_class_empty", "class.policy", "", "policy"),
        ("policy_class_missing_module", "class.policy", f"{MISSING_MODULE}:Policy", MISSING_MODULE),
        ("policy_class_no_such_attr", "class.policy", "st_rl.modules:NoSuchPolicy", "NoSuchPolicy"),
        ("policy_class_not_a_class", "class.policy", "math:pi", "math:pi"),
        ("policy_class_trailing_space", "class.policy", "ActorCritic ", "ActorCritic "),
        ("policy_class_lower_case", "class.policy", "actorcritic", "actorcritic"),
        ("algorithm_class_missing_module", "class.algorithm", f"{MISSING_MODULE}:Algo", MISSING_MODULE),
        ("algorithm_class_not_algorithm", "class.algorithm", "ActorCritic", "ActorCritic"),
        ("policy_class_is_algorithm", "class.policy", "PPO", "PPO"),
        ("rnn_type_transformer", "policy.rnn_type", "transformer", None, REC),
        ("rnn_hidden_huge", "policy.rnn_hidden_size", 100_000, None, REC),
        ("rnn_layers_huge", "policy.rnn_num_layers", 100, None, REC),
        ("rnn_type_none_recurrent", "policy.rnn_type", None, None, REC),
        ("obs_segments_negative", "policy.obs_segments", {"a": [-1]}),
        ("obs_segments_text", "policy.obs_segments", "x"),
        ("obs_segments_text_size", "policy.obs_segments", {"a": "3"}),
        ("num_actions_float", "policy.num_actions", 2.5),
        ("num_actions_negative", "policy.num_actions", -1),
        ("num_actor_obs_zero", "policy.num_actor_obs", 0),
        ("critic_normalization_text", "policy.critic_obs_normalization", "yes"),
        ("actor_normalization_text", "policy.actor_obs_normalization", "yes"),
        ("unknown_policy_key", "policy.foo", 1),
        ("activaton", "policy.activaton", "elu", None, (), "activation"),
        ("critic_hiden_dims", "policy.critic_hiden_dims", [16], None, (), "critic_hidden_dims"),
        ("init_noise", "policy.init_noise", 1.0, None, (), "init_noise_std"),
        ("policy_text", "top.policy", "ActorCritic", "policy"),
        ("algorithm_text", "top.algorithm", "PPO", "algorithm"),
        # runner
        ("steps_nan", "runner.num_steps_per_env", NAN),
        ("steps_float_huge", "runner.num_steps_per_env", 1e6),
        ("steps_huge", "runner.num_steps_per_env", 200_000),
        ("steps_none", "runner.num_steps_per_env", None),
        ("steps_list", "runner.num_steps_per_env", [24]),
        ("save_interval_negative", "runner.save_interval", -1),
        ("save_interval_text", "runner.save_interval", "50"),
        ("save_interval_nan", "runner.save_interval", NAN),
        ("log_interval_float", "runner.log_interval", 1.5),
        ("max_iterations_negative", "runner.max_iterations", -5),
        ("max_iterations_text", "runner.max_iterations", "100"),
        ("max_iterations_nan", "runner.max_iterations", NAN),
        ("seed_nan", "runner.seed", NAN),
        ("seed_list", "runner.seed", [1]),
        ("seed_huge", "runner.seed", 2**70),
        ("experiment_name_int", "runner.experiment_name", 3),
        ("logger_empty", "runner.logger", ""),
        ("logger_trailing_space", "runner.logger", "none "),
        ("logger_int", "runner.logger", 3),
        ("check_finite_bool", "runner.check_finite", True),
        ("check_finite_empty", "runner.check_finite", ""),
        ("distributed_timeout_nan", "runner.distributed_timeout_s", NAN),
        ("distributed_timeout_negative", "runner.distributed_timeout_s", -1),
        ("obs_groups_unknown", "runner.obs_groups", {"policy": ["nope"]}, "nope"),
        ("obs_groups_text", "runner.obs_groups", "x"),
        ("obs_groups_group_text", "runner.obs_groups", {"policy": 3}, "obs_groups"),
        ("runner_class_unknown", "class.runner", "NoSuchRunner", "NoSuchRunner"),
        ("runner_class_missing_module", "class.runner", f"{MISSING_MODULE}:Runner", MISSING_MODULE),
        ("runner_normalization_text", "runner.empirical_normalization", "true"),
        ("overwrite_text", "runner.overwrite", "yes"),
        ("pretrain_data_dir_int", "runner.pretrain_dataset", {"data_dir": 3}, "pretrain_dataset.data_dir"),
        (
            "pretrain_loops_text",
            "runner.pretrain_dataset",
            {"data_dir": "d", "dataset_loops": "x"},
            "pretrain_dataset.dataset_loops",
        ),
        (
            "pretrain_poll_text",
            "runner.pretrain_dataset",
            {"data_dir": "d", "poll_interval_s": "x"},
            "pretrain_dataset.poll_interval_s",
        ),
        ("pretrain_unknown", "runner.pretrain_dataset", {"data_dir": "d", "foo": 1}, "pretrain_dataset.foo"),
        ("pretrain_text", "runner.pretrain_dataset", "x", "pretrain_dataset"),
        ("pretrain_iterations_text", "runner.pretrain_iterations", "x"),
        ("pretrain_iterations_float", "runner.pretrain_iterations", 1.5),
        ("inference_mode_none", "runner.inference_mode_rollout", None),
        ("num_step_per_env", "runner.num_step_per_env", 8, None, (), "num_steps_per_env"),
        ("max_iteration", "runner.max_iteration", 8, None, (), "max_iterations"),
        ("unknown_runner_key", "runner.foo_bar", 1),
    ]
    for i, row in enumerate(bad):
        case_id, path, value, *rest = row
        culprit = rest[0] if len(rest) > 0 else None
        setup = rest[1] if len(rest) > 1 else ()
        fix = rest[2] if len(rest) > 2 else ""
        form = "flat" if i % 2 == 0 else "nested"
        if culprit is not None and form == "flat" and culprit.startswith("runner."):
            culprit = culprit.removeprefix("runner.")
        if path.startswith("runner.") and form == "nested" and culprit is None:
            culprit = path
        cfg_case(case_id, path, value, culprit, form, setup, fix)

    # Conflicts between the two forms and top-level types.
    def conflict(case_id: str, build: Callable[[], Any], culprits: tuple[str, ...]) -> None:
        add(Case(f"config-{case_id}", "config", "error", culprits, fn=lambda c: train_with(build())))

    def flat_with(**top: Any) -> dict[str, Any]:
        return {**small_cfg("flat"), **top}

    def nested_with(**top: Any) -> dict[str, Any]:
        return {**small_cfg("nested"), **top}

    conflict(
        "flat-policy_class_conflict",
        lambda: flat_with(policy_class_name="ActorCriticRecurrent"),
        ("policy_class_name",),
    )
    conflict("nested-save_interval_conflict", lambda: nested_with(save_interval=7), ("save_interval",))
    conflict("nested-seed_conflict", lambda: nested_with(seed=9), ("seed",))
    conflict(
        "mixed-runner_section_and_flat_keys",
        lambda: {**small_cfg("flat"), "runner": {"num_steps_per_env": 16}},
        ("num_steps_per_env",),
    )
    conflict(
        "nested-runner_class_conflict",
        lambda: {
            **nested_with(runner_class_name="TwoStageRunner"),
            "runner": {**small_cfg("nested")["runner"], "runner_class_name": "OnPolicyRunner"},
        },
        ("runner_class_name",),
    )
    conflict(
        "nested-algorithm_class_conflict",
        lambda: {
            **small_cfg("nested"),
            "algorithm": {**small_cfg("nested")["algorithm"], "class_name": "APPO"},
        },
        ("class_name",),
    )
    conflict("nested-runner_text", lambda: nested_with(runner="x"), ("runner",))
    for name, value, word in (
        ("none", None, "NoneType"),
        ("list", [], "list"),
        ("text", "train.yaml", "str"),
        ("int", 3, "int"),
    ):
        conflict(f"top_level_{name}", lambda v=value: v, ("train_cfg", word))

    # Legitimate configs: must train.
    works: list[tuple[str, str, tuple[tuple[str, Any], ...]]] = [
        (
            "st_gym_zero_loss_weights",
            "flat",
            (("algorithm.mimic_loss_coef", 0.0), ("algorithm.discriminator_loss_coef", 0.0)),
        ),
        (
            "st_gym_zero_loss_weights",
            "nested",
            (
                ("algorithm.mimic_loss_coef", 0.0),
                ("algorithm.discriminator_loss_coef", 0.0),
                ("algorithm.bc_loss_coef", 0.0),
            ),
        ),
        ("rnn_type_none_feed_forward", "flat", (("policy.rnn_type", None),)),
        (
            "rnn_type_none_feed_forward",
            "nested",
            (("policy.rnn_type", None), ("policy.rnn_hidden_size", 256)),
        ),
        ("gru_upper_case", "flat", (*REC, ("policy.rnn_type", "GRU"))),
        ("discount_edges", "nested", (("algorithm.gamma", 1.0), ("algorithm.lam", 0.0))),
        ("no_grad_clipping", "flat", (("algorithm.max_grad_norm", None),)),
        ("seed_none", "nested", (("runner.seed", None),)),
        ("seed_negative", "flat", (("runner.seed", -1),)),
        ("linear_policy", "flat", (("policy.actor_hidden_dims", []),)),
        ("numpy_float", "flat", (("algorithm.gamma", np.float64(0.98)),)),
        ("amp_storage_on_ppo", "flat", (("top.storage", {"amp_obs_shape": [4]}),)),
        ("fixed_schedule_no_kl", "nested", (("algorithm.schedule", "fixed"), ("algorithm.desired_kl", None))),
        (
            "step_lr",
            "flat",
            (("algorithm.lr_scheduler_class_name", "StepLR"), ("algorithm.lr_scheduler", {"step_size": 10})),
        ),
        ("check_finite_step", "nested", (("runner.check_finite", "step"),)),
        ("sizes_given", "flat", (("policy.num_actor_obs", 4), ("policy.num_actions", 2))),
        (
            "rnd_on",
            "nested",
            (
                (
                    "algorithm.rnd_cfg",
                    {
                        "weight": 0.5,
                        "predictor_hidden_dims": [8],
                        "target_hidden_dims": [8],
                        "num_outputs": 4,
                    },
                ),
            ),
        ),
        (
            "extension_as_dict",
            "flat",
            (("algorithm.extensions", [{"class_name": "RandomNetworkDistillation", "weight": 0.1}]),),
        ),
        (
            "same_class_twice",
            "nested",
            (("algorithm.class_name", "PPO"), ("policy.class_name", "ActorCritic")),
        ),
        ("empirical_normalization", "flat", (("runner.empirical_normalization", True),)),
        ("class_names_none", "nested", (("class.policy", None), ("class.algorithm", None))),
    ]
    for case_id, form, edits in works:

        def fn(cdir: Path, form: str = form, edits: tuple[tuple[str, Any], ...] = edits) -> Any:
            cfg = small_cfg(form)
            for p, v in edits:
                set_path(cfg, form, p, v)
            return train_with(cfg)

        add(Case(f"config-{form}-works-{case_id}", "config", "works", fn=fn))

    def with_log_dir(cdir: Path) -> Any:
        cfg = small_cfg("flat")
        cfg["logger"] = f"{MISSING_MODULE}:Writer"
        return train_with(cfg, log_dir=str(cdir / "run"))

    add(Case("config-flat-logger_missing_module", "config", "error", (MISSING_MODULE,), fn=with_log_dir))

    def manipulated_load(name: str) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.runners import OnPolicyRunner

            cfg = pm_preset_cfg()
            cfg["ckpt_manipulator"] = name
            return OnPolicyRunner(point_mass(), cfg, log_dir=None, device="cpu").load(str(FX["pm_ckpt"]))

        return fn

    for case_id, name in (
        ("unknown", "nope"),
        ("missing_module", f"{MISSING_MODULE}:f"),
        ("not_a_function", "math:pi"),
    ):
        add(
            Case(
                f"config-ckpt_manipulator_{case_id}",
                "config",
                "error",
                (name,),
                fn=manipulated_load(name),
                protect=("{FX:pm}",),
            )
        )

    def tppo_with_teacher(cdir: Path) -> Any:
        cfg = small_cfg("flat")
        cfg["algorithm"] = {
            "class_name": "TPPO",
            "teacher_policy": {"teacher_ac_path": str(FX["pm_ckpt"])},
            "ppo": {"num_learning_epochs": 1, "num_mini_batches": 2},
        }
        return train_with(cfg)

    add(Case("config-flat-works-tppo_with_teacher", "config", "works", fn=tppo_with_teacher))

    def tppo_teacher(ckpt: str) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            cfg = small_cfg("flat")
            cfg["algorithm"] = {"class_name": "TPPO", "teacher_policy": {"teacher_ac_path": str(FX[ckpt])}}
            return train_with(cfg)

        return fn

    add(
        Case(
            "config-tppo_teacher_of_another_task",
            "config",
            "error",
            ("{FX:vt_ckpt}",),
            fn=tppo_teacher("vt_ckpt"),
        )
    )

    def dataclass_cfg(cdir: Path) -> Any:
        from st_rl.configs import get_preset

        cfg = get_preset("point_mass").train
        cfg.logger = "none"
        cfg.num_steps_per_env = 8
        return train_with(cfg)

    add(Case("config-works-preset_config_object", "config", "works", fn=dataclass_cfg))


# ---------------------------------------------------------------------------------------------- file set-ups
class Fixture:
    """A fixture to copy in a set-up: ``Fixture("pm")`` is the whole folder (or file) ``FX["pm"]``."""

    def __init__(self, name: str) -> None:
        self.name = name


def put(spec: dict[str, Any]) -> Callable[[Path], None]:
    """A set-up writing files into the case folder: text, bytes, a Fixture (copied), a callable(path)."""

    def setup(cdir: Path) -> None:
        for name, content in spec.items():
            path = cdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Fixture):
                src = FX[content.name]
                if src.is_dir():
                    shutil.copytree(src, path)
                else:
                    shutil.copy(src, path)
            elif isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(content)
            elif content is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                content(path)

    return setup


def torch_file(obj: Any) -> Callable[[Path], None]:
    return lambda path: torch.save(obj, path)


def edited_checkpoint(
    edit: Callable[[dict[str, Any]], None], source: str = "pm_ckpt"
) -> Callable[[Path], None]:
    """A copy of a fixture checkpoint with ``edit`` applied to its dict."""

    def write(path: Path) -> None:
        state = torch.load(FX[source], weights_only=True)
        edit(state)
        torch.save(state, path)

    return write


def nan_weights(state: dict[str, Any]) -> None:
    key = next(k for k, v in state["model_state_dict"].items() if v.is_floating_point() and v.ndim == 2)
    state["model_state_dict"][key][0, 0] = math.nan


def truncated(name: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        data = FX[name].read_bytes()
        path.write_bytes(data[: len(data) // 2])

    return write


RANDOM_BYTES = bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8))
SMALL_YAML = """\
seed: 1
num_steps_per_env: 8
max_iterations: 1
logger: none
policy: {class_name: ActorCritic, actor_hidden_dims: [16], critic_hidden_dims: [16]}
algorithm: {class_name: PPO, num_learning_epochs: 1, num_mini_batches: 2, gamma: 0.99}
"""


def checkpoint_setups() -> dict[str, Any]:
    """Bad checkpoint files by name (the same set for the CLI and for Python)."""
    return {
        "empty": b"",
        "random_bytes": RANDOM_BYTES,
        "truncated": truncated("pm_ckpt"),
        "malicious_pickle": lambda p: p.write_bytes(malicious_pickle()),
        "torch_malicious": torch_file({"model_state_dict": {}, "x": _Malicious()}),
        "numpy": torch_file({"model_state_dict": {}, "obs_mean": np.zeros(3)}),
        "json_text": '{"model_state_dict": {}}',
        "zip_of_text": lambda p: zipfile.ZipFile(p, "w").writestr("a.txt", "hello"),
        "tensor_only": torch_file(torch.zeros(3)),
        "list_only": torch_file([1, 2, 3]),
        "no_model_state": torch_file({"iter": 3}),
        "model_state_text": torch_file({"model_state_dict": "weights", "iter": 1}),
        "nan_weights": edited_checkpoint(nan_weights),
        "inf_optimizer": edited_checkpoint(
            lambda s: next(v for v in s["optimizer_state_dict"]["state"].values() if "exp_avg" in v)[
                "exp_avg"
            ].fill_(math.inf)
        ),
        "iter_negative": edited_checkpoint(lambda s: s.update(iter=-3)),
        "iter_text": edited_checkpoint(lambda s: s.update(iter="three")),
        "wrong_shapes": lambda p: shutil.copy(FX["pm_big"] / "model_1.pt", p),
        "other_policy": lambda p: shutil.copy(FX["pm_rnn"] / "model_1.pt", p),
        "other_task": lambda p: shutil.copy(FX["vt_ckpt"], p),
        "missing_key": edited_checkpoint(
            lambda s: s["model_state_dict"].pop(next(iter(s["model_state_dict"])))
        ),
        "extra_key": edited_checkpoint(lambda s: s["model_state_dict"].update(foo=torch.zeros(2))),
    }


# ================================================================================================ CLI cases
def cli(
    case_id: str,
    argv: list[str],
    culprits: Sequence[str] = (),
    *,
    expect: str = "error",
    setup: dict[str, Any] | None = None,
    protect: Sequence[str] = (),
    fresh: Sequence[str] = (),
    check: Callable[[Path, Any], str | None] | None = None,
    codes: tuple[int, ...] = (2,),
    category: str = "cli",
    **kw: Any,
) -> None:
    add(
        Case(
            f"{category}-{case_id}" if not case_id.startswith(category) else case_id,
            category,
            expect,
            tuple(culprits),
            argv=argv,
            setup=put(setup) if setup else None,
            protect=tuple(protect),
            fresh=tuple(fresh),
            check=check,
            codes=codes,
            **kw,
        )
    )


def still_fifo(name: str) -> Callable[[Path, Any], str | None]:
    """The FIFO the case made is still there (a write must not replace what is not a regular file)."""
    import stat

    def check(cdir: Path, run: Any) -> str | None:
        path = cdir / name
        if not path.exists() or not stat.S_ISFIFO(os.lstat(path).st_mode):
            return f"{name} (a FIFO) was replaced"
        return None

    return check


def exists(*names: str) -> Callable[[Path, Any], str | None]:
    def check(cdir: Path, run: Any) -> str | None:
        missing = [n for n in names if not list(cdir.glob(n))]
        return f"missing {missing}" if missing else None

    return check


FIXTURES = ("{FX:pm}", "{FX:pm_b}", "{FX:pm_rnn}", "{FX:vt}")


def cli_cases() -> None:
    run = ["--log-dir", "{C}/run"]
    fresh = ("{C}/run",)
    # ------------------------------------------------------------------ train: options
    for case_id, argv, culprits in [
        ("task_unknown", [*TRAIN, "--task", "nope", *run], ("nope",)),
        ("task_empty", [*TRAIN, "--task", "", *run], ("task",)),
        ("num_envs_zero", ["train", "--task", "point_mass", "--num-envs", "0", *run], ("--num-envs", "0")),
        (
            "num_envs_text",
            ["train", "--task", "point_mass", "--num-envs", "abc", *run],
            ("--num-envs", "abc"),
        ),
        (
            "num_envs_float",
            ["train", "--task", "point_mass", "--num-envs", "1.5", *run],
            ("--num-envs", "1.5"),
        ),
        ("iterations_zero", [*PM[:-4], "--iterations", "0", *run], ("--iterations",)),
        ("iterations_nan", ["train", "--task", "point_mass", "--iterations", "nan", *run], ("--iterations",)),
        (
            "iterations_negative",
            ["train", "--task", "point_mass", "--iterations", "-1", *run],
            ("--iterations",),
        ),
        ("seed_text", [*PM, "--seed", "abc", *run], ("--seed", "abc")),
        ("seed_float", [*PM, "--seed", "1.5", *run], ("--seed", "1.5")),
        ("seed_huge", [*PM, "--seed", "99999999999999999999999", *run], ("seed",)),
        ("threads_zero", [*PM, "--threads", "0", *run], ("--threads",)),
        ("log_interval_zero", [*PM, "--log-interval", "0", *run], ("--log-interval",)),
        ("device_empty", [*PM[:-4], "--task", "point_mass", "--device", "", *run], ("--device",)),
        ("device_bad_index", [*PM[:-4], "--task", "point_mass", "--device", "cuda:x", *run], ("--device",)),
        ("policy_unknown", [*PM, "--policy", "Nope", *run], ("Nope",)),
        ("algorithm_unknown", [*PM, "--algorithm", "Nope", *run], ("Nope",)),
        ("policy_empty", [*PM, "--policy", "", *run], ("policy.class_name",)),
        ("unknown_flag", [*PM, "--foo", *run], ("--foo",)),
        ("iterations_missing_value", [*PM[:-2], *run, "--iterations"], ("--iterations",)),
        ("command_unknown", ["trian", "--task", "point_mass"], ("trian",)),
        ("style_ramp_without_motion", [*PM, "--style-ramp", "1", "5", *run], ("--style-ramp",)),
        ("style_coef_without_motion", [*PM, "--style-reward-coef", "0.1", *run], ("--style-reward-coef",)),
        (
            "style_coef_nan",
            [*TRAIN, "--motion", "m.pkl", "--style-reward-coef", "nan", *run],
            ("--style-reward-coef",),
        ),
        (
            "style_coef_negative",
            [*TRAIN, "--motion", "m.pkl", "--style-reward-coef", "-1", *run],
            ("--style-reward-coef",),
        ),
        ("tasks_extra_argument", ["tasks", "extra"], ("extra",)),
    ]:
        cli(
            f"train-{case_id}" if not case_id.startswith(("command", "tasks")) else case_id,
            argv,
            culprits,
            fresh=fresh,
        )

    # ------------------------------------------------------------------ train: --config files
    for case_id, name, content, culprits in [
        ("missing", "missing.yaml", None, ("missing.yaml",)),
        ("yaml_syntax", "broken.yaml", "seed: 1\npolicy: [1, 2\nalgorithm: {}\n", ("broken.yaml", "line")),
        ("json_syntax", "broken.json", '{"seed": 1,,}', ("broken.json",)),
        ("top_level_list", "list.yaml", "- 1\n- 2\n", ("list.yaml",)),
        ("empty_file", "empty.yaml", "", ("empty.yaml",)),
        ("text_extension", "cfg.txt", SMALL_YAML, ("cfg.txt",)),
        ("duplicate_key", "dup.yaml", SMALL_YAML + "seed: 2\n", ("seed",)),
        ("nan_value", "nan.yaml", SMALL_YAML.replace("gamma: 0.99", "gamma: .nan"), ("algorithm.gamma",)),
        (
            "misspelt_key",
            "typo.yaml",
            SMALL_YAML.replace("num_steps_per_env", "num_step_per_env"),
            ("num_step_per_env", "num_steps_per_env"),
        ),
        ("binary_garbage", "garbage.yaml", RANDOM_BYTES, ("garbage.yaml",)),
        ("json_string", "string.json", '"hello"', ("string.json",)),
        (
            "no_sections",
            "runner_only.yaml",
            "seed: 1\nnum_steps_per_env: 8\nmax_iterations: 1\n",
            ("policy",),
        ),
        ("tab_indented", "tabs.yaml", "seed: 1\npolicy:\n\tclass_name: ActorCritic\n", ("tabs.yaml",)),
        (
            "yaml_python_tag",
            "tag.yaml",
            "seed: !!python/object/apply:os.system ['touch PWNED']\n",
            ("tag.yaml",),
        ),
    ]:
        spec = {} if content is None else {name: content}
        cli(
            f"train-config_{case_id}",
            [*PM, "--config", f"{{C}}/{name}", *run],
            culprits,
            setup=spec or None,
            fresh=fresh,
        )
    for option in ("--resume", "--motion", "--config", "--log-dir", "--env"):
        cli(f"train-empty{option.replace('-', '_')}", [*PM, option, ""], (option, "empty"))
    for command in (
        ["play", *PLAY, "--checkpoint"],
        ["export", "--checkpoint"],
        ["play", *PLAY, "--policy"],
        ["record-motion", "--scripted-trot", "--out"],
    ):
        cli(f"{command[0]}-empty{command[-1].replace('-', '_')}", [*command, ""], (command[-1], "empty"))
    cli("plot-empty_path", ["plot", ""], ("log_dir", "empty"))
    cli(
        "train-num_envs_beyond_memory",
        ["train", "--task", "point_mass", "--num-envs", "1000000000000", "--iterations", "1", *run],
        ("out of memory", "--num-envs"),
        fresh=fresh,
    )
    cli(
        "train-config_fifo",
        [*PM, "--config", "{C}/fifo.yaml", *run],
        ("fifo.yaml",),
        fresh=fresh,
        setup={"fifo.yaml": lambda p: os.mkfifo(p)},
        timeout=60,
    )
    cli(
        "data-cli_record_motion_into_a_fifo",
        [
            "record-motion",
            "--scripted-trot",
            "--duration",
            "0.2",
            "--num-trajectories",
            "1",
            "--out",
            "{C}/fifo.pkl",
        ],
        ("fifo.pkl",),
        category="data",
        setup={"fifo.pkl": lambda p: os.mkfifo(p)},
        check=still_fifo("fifo.pkl"),
        protect=("{C}/fifo.pkl",),
        timeout=60,
    )
    cli(
        "plot-into_a_fifo",
        ["plot", "{C}/A", "--out", "{C}/fifo.png"],
        ("fifo.png",),
        setup={"A": Fixture("pm"), "fifo.png": lambda p: os.mkfifo(p)},
        check=still_fifo("fifo.png"),
        protect=("{C}/fifo.png",),
        timeout=60,
    )
    cli(
        "tune-space_fifo",
        ["tune", "--task", "point_mass", "--log-root", "{C}/tune", "--space", "{C}/s.json"],
        ("s.json",),
        setup={"s.json": lambda p: os.mkfifo(p)},
        timeout=60,
    )
    cli(
        "train-config_directory",
        [*PM, "--config", "{C}/folder", *run],
        ("folder",),
        setup={"folder": None},
        fresh=fresh,
    )
    cli(
        "train-config_without_max_iterations",
        ["train", "--task", "point_mass", "--num-envs", "8", "--config", "{C}/c.yaml", *run],
        ("max_iterations",),
        setup={"c.yaml": SMALL_YAML.replace("max_iterations: 1\n", "")},
        fresh=fresh,
    )

    # ------------------------------------------------------------------ train: overrides
    for case_id, item, culprits in [
        ("no_equals", "algorithm.gamma", ("algorithm.gamma",)),
        ("empty_key", "=3", ("=3",)),
        ("leading_dot", ".gamma=1", (".gamma=1",)),
        ("double_dot", "algorithm..gamma=1", ("algorithm..gamma",)),
        ("empty_value", "algorithm.gamma=", ("algorithm.gamma",)),
        ("unclosed_list", "policy.actor_hidden_dims=[64,", ("policy.actor_hidden_dims",)),
        ("delete_missing", "~policy.nope", ("~policy.nope",)),
        ("unknown_section", "foo.bar=1", ("foo",)),
        ("section_to_int", "algorithm=3", ("algorithm",)),
        ("policy_to_list", "policy=[]", ("policy",)),
        ("learning_rate_inf", "algorithm.learning_rate=inf", ("algorithm.learning_rate",)),
        ("policy_missing_module", f"policy.class_name={MISSING_MODULE}:P", (MISSING_MODULE,)),
        ("seed_overflow", "seed=1e400", ("seed",)),
        ("unicode_key", "algorithm.gämma=0.9", ("gämma",)),
        ("check_finite_text", "runner.check_finite=maybe", ("check_finite",)),
        ("hidden_dims_text", "policy.actor_hidden_dims=big", ("policy.actor_hidden_dims",)),
        ("nested_dict_bad", 'algorithm.rnd_cfg={"weight": -2}', ("algorithm.rnd_cfg.weight",)),
    ]:
        cli(f"train-override_{case_id}", [*PM, item, *run], culprits, fresh=fresh)
    cli(
        "train-override_max_iterations_text",
        ["train", "--task", "point_mass", "--num-envs", "8", "runner.max_iterations=abc", *run],
        ("max_iterations",),
        fresh=fresh,
    )
    cli(
        "train-override_with_print_config",
        ["train", "--task", "point_mass", "algorithm.gamma=2", "--print-config"],
        ("algorithm.gamma",),
    )

    # ------------------------------------------------------------------ train: --env
    mod = "{FX:env_module}"
    for case_id, spec, culprits in [
        ("no_colon", "user_envs", ("--env",)),
        ("empty_factory", f"{mod}:", ("--env",)),
        ("missing_module", f"{MISSING_MODULE}:make", (MISSING_MODULE,)),
        ("missing_attr", f"{mod}:nope", ("nope",)),
        ("not_callable", f"{mod}:not_callable", ("not_callable",)),
        ("directory", "{C}:make", ("--env",)),
        ("missing_file", "{C}/missing.py:make", ("missing.py",)),
        ("needs_argument", f"{mod}:needs_arg", ("path",)),
        ("no_num_envs_param", f"{mod}:no_num_envs_param", ("--num-envs",)),
        ("no_num_actions", f"{mod}:no_num_actions", ("num_actions",)),
        ("nan_observations", f"{mod}:nan_obs", ("NaN", "observation")),
        ("inf_rewards", f"{mod}:inf_rew", ("rewards",)),
        ("wider_observations", f"{mod}:wide_obs", ("obs", "width")),
        ("fewer_rows", f"{mod}:rows_obs", ("obs", "rows")),
        ("integer_observations", f"{mod}:int_obs", ("obs", "floating point")),
        ("rewards_2d", f"{mod}:rew_2d", ("rewards",)),
        ("dones_list", f"{mod}:dones_list", ("dones",)),
        ("step_three_values", f"{mod}:three", ("step()", "3 values")),
        ("step_raises", f"{mod}:raises_in_step", ("boom in step", "user_envs.py")),
        ("step_returns_none", f"{mod}:step_none", ("step()", "None")),
        ("observations_raise", f"{mod}:raises_in_reset_obs", ("observation sensor offline",)),
    ]:
        at_build = case_id in (
            "no_colon",
            "empty_factory",
            "missing_module",
            "missing_attr",
            "not_callable",
            "directory",
            "missing_file",
            "needs_argument",
            "no_num_envs_param",
            "no_num_actions",
            "observations_raise",
        )
        cli(
            f"env-cli_{case_id}",
            [*TRAIN, "--env", spec, *run],
            culprits,
            category="env",
            fresh=fresh if at_build else (),
        )
    cli(
        "env-cli_module_exits",
        [*TRAIN, "--env", "{C}/script.py:make_env", *run],
        ("script.py", "sys.exit(2)"),
        category="env",
        fresh=fresh,
        setup={"script.py": "import sys\nsys.exit(2)\n"},
    )
    cli(
        "env-cli_factory_exits",
        [*TRAIN, "--env", f"{mod}:exits", *run],
        ("no GPU found", "user_envs.py"),
        category="env",
        fresh=fresh,
    )
    cli(
        "env-cli_with_motion",
        [*TRAIN, "--env", f"{mod}:good", "--motion", "{FX:motion}", *run],
        ("--motion",),
        category="env",
        fresh=fresh,
    )
    cli(
        "env-cli_good_factory",
        [*TRAIN, "--env", f"{mod}:good", *run],
        expect="works",
        category="env",
        check=exists("run/model_1.pt"),
    )

    # ------------------------------------------------------------------ train: --resume and --log-dir
    bad_ckpts = checkpoint_setups()
    for name in (
        "empty",
        "random_bytes",
        "malicious_pickle",
        "other_policy",
        "other_task",
        "nan_weights",
        "wrong_shapes",
        "no_model_state",
    ):
        cli(
            f"checkpoint-cli_resume_{name}",
            [*PM, "--resume", "{C}/model_5.pt", *run],
            ("model_5.pt",),
            category="checkpoint",
            setup={"model_5.pt": bad_ckpts[name]},
            fresh=fresh,
            protect=FIXTURES,
        )
    cli(
        "checkpoint-cli_resume_missing",
        [*PM, "--resume", "{C}/missing.pt", *run],
        ("missing.pt",),
        category="checkpoint",
        fresh=fresh,
    )
    cli(
        "checkpoint-cli_resume_dir_without_checkpoints",
        [*PM, "--resume", "{C}/empty_run", *run],
        ("empty_run",),
        category="checkpoint",
        setup={"empty_run": None},
        fresh=fresh,
    )
    cli(
        "rundir-cli_log_dir_is_a_file",
        [*PM, "--log-dir", "{C}/file.txt"],
        ("file.txt",),
        category="rundir",
        setup={"file.txt": "keep me"},
        protect=("{C}/file.txt",),
    )
    cli(
        "rundir-cli_log_dir_through_a_file",
        [*PM, "--log-dir", "{C}/file.txt/run"],
        ("file.txt",),
        category="rundir",
        setup={"file.txt": "keep me"},
        protect=("{C}/file.txt",),
    )
    cli(
        "rundir-cli_earlier_run",
        [*PM, "--log-dir", "{C}/A"],
        ("{C}/A", "--overwrite"),
        category="rundir",
        setup={"A": Fixture("pm")},
        protect=("{C}/A",),
    )
    cli(
        "rundir-cli_earlier_run_config_only",
        [*PM, "--log-dir", "{C}/A"],
        ("{C}/A",),
        category="rundir",
        setup={"A/config.json": "{}"},
        protect=("{C}/A",),
    )
    cli(
        "rundir-cli_resume_into_another_run",
        [*PM, "--resume", "{C}/A", "--log-dir", "{C}/B"],
        ("{C}/B", "--overwrite"),
        category="rundir",
        setup={"A": Fixture("pm"), "B": Fixture("pm_b")},
        protect=("{C}/A", "{C}/B"),
    )
    cli(
        "rundir-cli_locked_by_a_live_process",
        [*PM, "--log-dir", "{C}/A"],
        ("{C}/A", f"process {os.getpid()}"),
        category="rundir",
        setup={"A/.st_rl.lock": json.dumps({"pid": os.getpid(), "host": os.uname().nodename})},
        protect=("{C}/A",),
    )
    cli(
        "rundir-cli_overwrite_with_resume_of_itself",
        [*PM, "--resume", "{C}/A", "--log-dir", "{C}/A", "--overwrite"],
        ("--overwrite",),
        category="rundir",
        setup={"A": Fixture("pm")},
        protect=("{C}/A",),
    )
    cli(
        "rundir-cli_resume_own_folder",
        [*PM, "--resume", "{C}/A", "--log-dir", "{C}/A"],
        expect="works",
        category="rundir",
        setup={"A": Fixture("pm")},
        protect=("{C}/A",),
        may_change=("*/config.json",),
        check=exists("A/model_1.pt", "A/model_2.pt"),
    )
    cli(
        "rundir-cli_overwrite",
        [*PM, "--log-dir", "{C}/A", "--overwrite"],
        expect="works",
        category="rundir",
        setup={"A": Fixture("pm")},
        check=exists("A/model_1.pt"),
    )
    cli(
        "rundir-cli_default_log_dir",
        PM,
        expect="works",
        category="rundir",
        check=exists("logs/point_mass/*/model_1.pt"),
    )

    # ------------------------------------------------------------------ train: --motion
    cli(
        "data-cli_motion_missing",
        [*TRAIN, "--motion", "{C}/missing.pkl", *run],
        ("missing.pkl",),
        category="data",
        fresh=fresh,
    )
    cli(
        "data-cli_motion_directory",
        [*TRAIN, "--motion", "{C}/folder", *run],
        ("folder",),
        category="data",
        setup={"folder": None},
        fresh=fresh,
    )
    cli(
        "data-cli_motion_malicious",
        [*TRAIN, "--motion", "{C}/evil.pkl", *run],
        ("evil.pkl",),
        category="data",
        setup={"evil.pkl": lambda p: p.write_bytes(malicious_pickle())},
        fresh=fresh,
    )
    cli(
        "data-cli_motion_wrong_fields",
        [*TRAIN, "--motion", "{FX:motion}", *run],
        ("{FX:motion}",),
        category="data",
        fresh=fresh,
    )
    cli(
        "data-cli_motion_style_ramp_reversed",
        [*TRAIN, "--motion", "{FX:motion}", "--style-ramp", "5", "1", *run],
        ("--style-ramp",),
        category="data",
        fresh=fresh,
    )

    # ------------------------------------------------------------------ play
    vt = "{FX:vt}"
    for case_id, argv, culprits, spec in [
        ("no_source", ["play", *PLAY], ("--checkpoint",), None),
        ("both_sources", ["play", "--checkpoint", vt, "--policy", "p.onnx", *PLAY], ("--policy",), None),
        ("missing_checkpoint", ["play", "--checkpoint", "{C}/missing.pt", *PLAY], ("missing.pt",), None),
        ("dir_without_checkpoint", ["play", "--checkpoint", "{C}/d", *PLAY], ("{C}/d",), {"d": None}),
        ("task_unknown", ["play", "--checkpoint", vt, "--task", "nope", *PLAY], ("nope",), None),
        ("other_task", ["play", "--checkpoint", vt, "--task", "point_mass", *PLAY], ("point_mass",), None),
        ("duration_zero", ["play", "--checkpoint", vt, *PLAY, "--duration", "0"], ("--duration",), None),
        ("fps_zero", ["play", "--checkpoint", vt, *PLAY, "--fps", "0"], ("--fps",), None),
        ("command_text", ["play", "--checkpoint", vt, *PLAY, "--command", "a", "b"], ("--command",), None),
        (
            "command_four_values",
            ["play", "--checkpoint", vt, *PLAY, "--command", "1", "0", "0", "0"],
            ("--command",),
            None,
        ),
        ("seed_text", ["play", "--checkpoint", vt, *PLAY, "--seed", "x"], ("--seed",), None),
        ("threads_zero", ["play", "--checkpoint", vt, *PLAY, "--threads", "0"], ("--threads",), None),
        (
            "video_quality_bad",
            ["play", "--checkpoint", vt, *PLAY, "--video-quality", "ultra"],
            ("--video-quality",),
            None,
        ),
        (
            "plot_through_file",
            [
                "play",
                "--checkpoint",
                vt,
                "--num-envs",
                "2",
                "--duration",
                "2",
                "--no-video",
                "--plot",
                "{C}/f.txt/x.png",
            ],
            ("f.txt",),
            {"f.txt": "x"},
        ),
        ("policy_missing", ["play", "--policy", "{C}/missing.onnx", *PLAY], ("missing.onnx",), None),
        (
            "policy_text_file",
            ["play", "--policy", "{C}/policy.txt", *PLAY],
            ("policy.txt",),
            {"policy.txt": "not a policy"},
        ),
        (
            "policy_directory",
            ["play", "--policy", "{C}/exported", *PLAY],
            ("exported",),
            {"exported": Fixture("vt_exported")},
        ),
        (
            "policy_json_broken",
            ["play", "--policy", "{C}/e/policy.onnx", *PLAY],
            ("policy.json",),
            {"e": Fixture("vt_exported"), "e/policy.json": lambda p: p.write_text("{")},
        ),
        (
            "policy_json_wrong_num_obs",
            ["play", "--policy", "{C}/e/policy.pt", *PLAY],
            ("num_obs",),
            {
                "e": Fixture("vt_exported"),
                "e/policy.json": lambda p: p.write_text(
                    json.dumps({**json.loads((FX["vt_exported"] / "policy.json").read_text()), "num_obs": 5})
                ),
            },
        ),
        (
            "untrusted_config",
            ["play", "--checkpoint", "{C}/run", *PLAY],
            ("this:Zen", "--trust-config"),
            {
                "run": Fixture("vt"),
                "run/config.json": lambda p: p.write_text(
                    json.dumps(
                        _with_policy_class(json.loads((FX["vt"] / "config.json").read_text()), "this:Zen")
                    )
                ),
            },
        ),
        (
            "config_json_broken",
            ["play", "--checkpoint", "{C}/run", *PLAY],
            ("config.json",),
            {"run": Fixture("vt"), "run/config.json": lambda p: p.write_text("{")},
        ),
        (
            "config_json_list",
            ["play", "--checkpoint", "{C}/run", *PLAY],
            ("config.json",),
            {"run": Fixture("vt"), "run/config.json": lambda p: p.write_text("[]")},
        ),
    ]:
        cli(
            f"play-{case_id}",
            argv,
            culprits,
            setup=spec,
            protect=(vt,),
            category="export" if case_id.startswith("policy") else "cli",
        )
    for name in ("empty", "random_bytes", "malicious_pickle", "nan_weights", "numpy", "missing_key"):
        cli(
            f"checkpoint-cli_play_{name}",
            ["play", "--checkpoint", "{C}/model_3.pt", *PLAY],
            ("model_3.pt",),
            category="checkpoint",
            setup={"model_3.pt": bad_ckpts[name]},
        )
    cli(
        "play-works_plot_into_directory",
        [
            "play",
            "--checkpoint",
            "{FX:vt}",
            "--num-envs",
            "2",
            "--duration",
            "2",
            "--no-video",
            "--plot",
            "{C}/out",
        ],
        expect="works",
        setup={"out": None},
        protect=("{FX:vt}",),
        check=lambda c, r: (
            None if list((c / "out").glob("*.png")) else f"no PNG in {c / 'out'}: {r['stdout'][-300:]}"
        ),
    )
    cli(
        "play-works_policy_without_json",
        ["play", "--policy", "{C}/p/policy.onnx", *PLAY],
        expect="works",
        category="export",
        setup={"p/policy.onnx": lambda p: shutil.copy(FX["vt_exported"] / "policy.onnx", p)},
    )
    cli(
        "play-works_exported_onnx",
        ["play", "--policy", "{C}/e/policy.onnx", *PLAY],
        expect="works",
        category="export",
        setup={"e": Fixture("vt_exported")},
    )

    # ------------------------------------------------------------------ plot
    cli("plot-missing_dir", ["plot", "{C}/nope"], ("nope",))
    cli("plot-a_file", ["plot", "{C}/f.txt"], ("f.txt",), setup={"f.txt": "x"})
    cli("plot-empty_dir", ["plot", "{C}/d"], ("{C}/d",), setup={"d": None})
    cli(
        "plot-out_through_file",
        ["plot", "{C}/A", "--out", "{C}/f.txt/x.png"],
        ("f.txt",),
        setup={"A": Fixture("pm"), "f.txt": "x"},
        protect=("{C}/f.txt",),
    )
    cli(
        "plot-works_out_is_a_directory",
        ["plot", "{C}/A", "--out", "{C}/d"],
        expect="works",
        setup={"A": Fixture("pm"), "d": None},
        check=exists("d/training_curves.png"),
    )
    cli(
        "plot-works",
        ["plot", "{C}/A"],
        expect="works",
        setup={"A": Fixture("pm")},
        check=exists("A/training_curves.png"),
        protect=("{C}/A/model_1.pt",),
    )

    # ------------------------------------------------------------------ export
    cli("export-missing", ["export", "--checkpoint", "{C}/missing.pt"], ("missing.pt",), category="export")
    cli(
        "export-format_bad",
        ["export", "--checkpoint", "{C}/A", "--format", "tflite"],
        ("tflite",),
        category="export",
        setup={"A": Fixture("pm")},
    )
    cli(
        "export-out_is_a_file",
        ["export", "--checkpoint", "{C}/A", "--out", "{C}/f.txt", "--no-check"],
        ("f.txt",),
        category="export",
        setup={"A": Fixture("pm"), "f.txt": "keep"},
        protect=("{C}/f.txt",),
    )
    cli(
        "export-task_unknown",
        ["export", "--checkpoint", "{C}/A", "--task", "nope"],
        ("nope",),
        category="export",
        setup={"A": Fixture("pm")},
    )
    cli(
        "export-checkpoint_not_fitting_its_config",
        ["export", "--checkpoint", "{C}/A/model_4.pt"],
        ("model_4.pt",),
        category="export",
        setup={"A": Fixture("pm"), "A/model_4.pt": lambda p: shutil.copy(FX["pm_big"] / "model_1.pt", p)},
    )
    for name in ("nan_weights", "no_model_state", "truncated"):
        cli(
            f"export-checkpoint_{name}",
            ["export", "--checkpoint", "{C}/model_4.pt"],
            ("model_4.pt",),
            category="export",
            setup={"model_4.pt": bad_ckpts[name]},
        )
    cli(
        "export-untrusted_config",
        ["export", "--checkpoint", "{C}/A"],
        ("this:Zen", "--trust-config"),
        category="export",
        setup={
            "A": Fixture("pm"),
            "A/config.json": lambda p: p.write_text(
                json.dumps(_with_policy_class(json.loads((FX["pm"] / "config.json").read_text()), "this:Zen"))
            ),
        },
    )
    cli(
        "export-works",
        ["export", "--checkpoint", "{C}/A"],
        expect="works",
        category="export",
        setup={"A": Fixture("pm")},
        check=exists("A/exported/policy.onnx", "A/exported/policy.json"),
        protect=("{C}/A/model_1.pt",),
    )

    # ------------------------------------------------------------------ tune
    tune = ["tune", "--task", "point_mass", "--log-root", "{C}/tune", "--iterations", "1", "--num-envs", "8"]
    for case_id, extra, culprits in [
        ("trials_negative", ["--trials", "-1"], ("--trials",)),
        ("trials_zero", ["--trials", "0"], ("--trials",)),
        ("trials_text", ["--trials", "x"], ("--trials",)),
        ("num_envs_zero", ["--num-envs", "0"], ("--num-envs",)),
        ("iterations_zero", ["--iterations", "0"], ("--iterations",)),
        ("eval_envs_zero", ["--eval-envs", "0"], ("--eval-envs",)),
        ("timeout_nan", ["--timeout", "nan"], ("--timeout",)),
        ("timeout_negative", ["--timeout", "-5"], ("--timeout",)),
        ("space_bad_json", ["--space", '{"algorithm.gamma": [0.9,'], ("search space",)),
        ("space_missing_file", ["--space", "{C}/space.yaml"], ("space.yaml",)),
        ("space_unknown_key", ["--space", '{"algorithm.gama": [0.9, 0.99]}'], ("algorithm.gama",)),
        ("objective_bad", ["--objective", "speed"], ("--objective",)),
        ("summary_without_study", ["--summary"], ("point_mass",)),
        ("task_unknown", ["--task", "nope"], ("nope",)),
        ("threads_zero", ["--threads", "0"], ("--threads",)),
        ("storage_bad_url", ["--storage", "nonsense://x"], ("nonsense://x",)),
    ]:
        cli(f"tune-{case_id}", [*tune, *extra], culprits, fresh=("{C}/tune",) if case_id != "summary" else ())

    # ------------------------------------------------------------------ record-motion
    rec = ["record-motion", "--scripted-trot", "--duration", "0.2", "--num-trajectories", "1"]
    for case_id, argv, culprits, spec in [
        ("no_out", [*rec], ("--out",), None),
        ("out_is_a_directory", [*rec, "--out", "{C}/d"], ("{C}/d",), {"d": None}),
        ("out_through_a_file", [*rec, "--out", "{C}/f.txt/m.pkl"], ("f.txt",), {"f.txt": "x"}),
        (
            "checkpoint_missing",
            ["record-motion", "--checkpoint", "{C}/missing.pt", "--out", "{C}/m.pkl"],
            ("missing.pt",),
            None,
        ),
        ("duration_zero", [*rec, "--out", "{C}/m.pkl", "--duration", "0"], ("--duration",), None),
        (
            "trajectories_zero",
            [*rec, "--out", "{C}/m.pkl", "--num-trajectories", "0"],
            ("--num-trajectories",),
            None,
        ),
        ("fields_unknown", [*rec, "--out", "{C}/m.pkl", "--fields", "nope,also_nope"], ("nope",), None),
        ("task_point_mass", [*rec, "--out", "{C}/m.pkl", "--task", "point_mass"], ("point_mass",), None),
        ("task_unknown", [*rec, "--out", "{C}/m.pkl", "--task", "nope"], ("nope",), None),
        ("command_two_values", [*rec, "--out", "{C}/m.pkl", "--command", "1", "0"], ("--command",), None),
        ("grid_text", [*rec, "--out", "{C}/m.pkl", "--grid-vx", "fast"], ("--grid-vx",), None),
        (
            "command_and_grid",
            [*rec, "--out", "{C}/m.pkl", "--command", "1", "0", "0", "--grid-vx", "0.5"],
            ("--grid-vx",),
            None,
        ),
        (
            "checkpoint_of_point_mass",
            ["record-motion", "--checkpoint", "{FX:pm}", "--out", "{C}/m.pkl"],
            ("point_mass",),
            None,
        ),
    ]:
        cli(f"record-{case_id}", argv, culprits, setup=spec, fresh=("{C}/m.pkl",), protect=("{FX:pm}",))


def _with_policy_class(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    cfg = copy.deepcopy(cfg)
    if isinstance(cfg.get("runner"), dict) and "policy_class_name" in cfg["runner"]:
        cfg["runner"]["policy_class_name"] = name
    cfg.setdefault("policy", {})["class_name"] = name
    return cfg


# ================================================================================================ Python cases
def user_envs() -> Any:
    """The module of ENV_MODULE, imported in this process (for the Python environment cases)."""
    import types

    module = sys.modules.get("adversarial_user_envs")
    if module is None:
        module = types.ModuleType("adversarial_user_envs")
        exec(compile(ENV_MODULE, "adversarial_user_envs.py", "exec"), module.__dict__)
        exec(compile(PY_ENV_EXTRA, "adversarial_user_envs_extra.py", "exec"), module.__dict__)
        sys.modules["adversarial_user_envs"] = module
    return module


PY_ENV_EXTRA = '''
import numpy as np


class Odd(PointMass):
    """More ways an environment's outputs can be wrong (Python cases)."""

    def __init__(self, what="", at=1, **kwargs):
        self.what, self.at, self.calls = what, at, 0
        super().__init__(**kwargs)

    def get_observations(self):
        obs, extras = super().get_observations()
        w = self.what
        if w == "nan_first_obs":
            obs = obs.clone(); obs[2, 1] = math.nan
        elif w == "first_obs_none":
            return None
        elif w == "first_obs_transposed":
            obs = obs.T
        elif w == "first_obs_1d":
            obs = obs[:, 0]
        return obs, extras

    def step(self, actions):
        obs, rew, dones, extras = super().step(actions)
        self.calls += 1
        if self.calls < self.at:
            return obs, rew, dones, extras
        w = self.what
        if w == "obs_list":
            obs = obs.tolist()
        elif w == "obs_float64":
            obs = obs.double()
        elif w == "obs_numpy":
            obs = obs.numpy()
        elif w == "rew_int":
            rew = rew.long()
        elif w == "rew_nan_later":
            rew = rew.clone(); rew[0] = math.nan
        elif w == "rew_numpy_object":
            rew = np.array([None] * len(rew), dtype=object)
        elif w == "dones_float":
            dones = dones.float()
        elif w == "dones_none":
            dones = None
        elif w == "dones_wrong_len":
            dones = dones[:3]
        elif w == "extras_list":
            extras = [extras]
        elif w == "time_outs_shape":
            extras = dict(extras); extras["time_outs"] = torch.zeros(3, dtype=torch.bool)
        elif w == "obs_meta":
            obs = torch.empty(obs.shape, device="meta")
        elif w == "obs_requires_grad":
            obs = obs.clone().requires_grad_(True)
        elif w == "rew_complex":
            rew = rew.to(torch.complex64)
        return obs, rew, dones, extras


class Lying:
    """Says it has 16 environments; returns the 8 rows of its PointMass."""

    def __init__(self, **kwargs):
        self.env = PointMass(**kwargs)
        self.num_envs, self.num_actions, self.device = 16, self.env.num_actions, "cpu"
        self.max_episode_length = self.env.max_episode_length
        self.episode_length_buf = torch.zeros(16, dtype=torch.long)

    def get_observations(self):
        return self.env.get_observations()

    def step(self, actions):
        return self.env.step(actions[:8])

    def reset(self):
        return self.env.reset()


class NoEpisodeLength:
    def __init__(self):
        self.env = PointMass(num_envs=8, seed=0)
        self.num_envs, self.num_actions, self.num_obs = 8, self.env.num_actions, self.env.num_obs
        self.device = "cpu"

    def get_observations(self):
        return self.env.get_observations()

    def step(self, actions):
        return self.env.step(actions)

    def reset(self):
        return self.env.reset()
'''


def env_py_cases() -> None:
    def trains(make: Callable[[Any], Any], iterations: int = 2, **learn: Any) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.runners import OnPolicyRunner

            env = make(user_envs())
            runner = OnPolicyRunner(env, small_cfg("flat"), log_dir=None, device="cpu")
            try:
                return runner.learn(iterations, **learn)
            finally:
                runner.close()

        return fn

    def env(
        case_id: str,
        make: Callable[[Any], Any],
        culprits: Sequence[str],
        expect: str = "error",
        raises: tuple[type[BaseException], ...] = DOCUMENTED,
        **learn: Any,
    ) -> None:
        add(
            Case(f"env-py_{case_id}", "env", expect, tuple(culprits), fn=trains(make, **learn), raises=raises)
        )

    for what, culprits in [
        ("nan_obs", ("NaN", "observation")),
        ("inf_rew", ("NaN or Inf", "rewards")),
        ("wide_obs", ("obs", "width")),
        ("rows_obs", ("obs", "rows")),
        ("int_obs", ("floating point",)),
        ("rew_2d", ("rewards", "(8,)")),
        ("dones_list", ("dones",)),
        ("three", ("step()", "3 values")),
        ("none", ("step()", "None")),
    ]:
        env(f"step_{what}", lambda m, w=what: m.Broken(w, num_envs=8, seed=0), culprits)
    env(
        "step_raises",
        lambda m: m.Broken("raise", num_envs=8, seed=0),
        ("boom in step",),
        raises=(RuntimeError,),
    )
    env(
        "get_observations_raises",
        lambda m: m.raises_in_reset_obs(num_envs=8, seed=0),
        ("observation sensor offline",),
    )
    for what, culprits in [
        ("nan_first_obs", ("NaN", "observation")),
        ("first_obs_none", ("get_observations",)),
        ("first_obs_transposed", ("transposed",)),
        ("first_obs_1d", ("obs",)),
        ("obs_list", ("obs", "list")),
        ("rew_int", ("rewards", "floating point")),
        ("rew_nan_later", ("rewards",)),
        ("rew_numpy_object", ("rewards",)),
        ("dones_none", ("dones",)),
        ("dones_wrong_len", ("dones", "(8,)")),
        ("extras_list", ("extras",)),
        ("time_outs_shape", ("time_outs",)),
        ("obs_meta", ("obs", "device")),
        ("rew_complex", ("rewards",)),
    ]:
        env(f"step_{what}", lambda m, w=what: m.Odd(w, at=2, num_envs=8, seed=0), culprits)
    for what in ("obs_float64", "obs_numpy", "dones_float", "obs_requires_grad"):
        env(f"works_{what}", lambda m, w=what: m.Odd(w, at=2, num_envs=8, seed=0), (), expect="works")
    env("lying_num_envs", lambda m: m.Lying(num_envs=8, seed=0), ("16",))
    env("no_num_actions", lambda m: m.no_num_actions(num_envs=8, seed=0), ("num_actions",))
    env(
        "works_no_episode_length_random_start",
        lambda m: m.NoEpisodeLength(),
        (),
        expect="works",
        init_at_random_ep_len=True,
    )
    env("works_no_episode_length", lambda m: m.NoEpisodeLength(), (), expect="works")
    env("not_an_environment", lambda m: object(), ("object",))
    env("a_class_not_an_instance", lambda m: m.PointMass, ("PointMass",))


def pm_preset_cfg() -> dict[str, Any]:
    from st_rl.configs import get_preset

    cfg = get_preset("point_mass").train.to_dict()
    cfg.update(logger="none", num_steps_per_env=8, save_interval=1000)
    return cfg


def pm_runner(log_dir: str | None = None) -> Any:
    from st_rl.runners import OnPolicyRunner

    return OnPolicyRunner(point_mass(), pm_preset_cfg(), log_dir=log_dir, device="cpu")


def state_of(runner: Any) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in runner.alg.policy.state_dict().items()}


def checkpoint_py_cases() -> None:
    setups = checkpoint_setups()

    def loads(name: str, load_optimizer: bool = True) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            path = cdir / "model_7.pt"
            put({"model_7.pt": setups[name]})(cdir)
            runner = pm_runner()
            before = state_of(runner)
            try:
                runner.load(str(path), load_optimizer=load_optimizer)
            except BaseException:
                after = state_of(runner)
                if any(not torch.equal(before[k], after[k]) for k in before):
                    raise SilentWrong("a failed load changed the runner's policy") from None
                raise
            return runner

        return fn

    for name in setups:
        culprits = ("model_7.pt",)
        if name in ("nan_weights", "inf_optimizer"):
            culprits = ("model_7.pt", "NaN" if name == "nan_weights" else "Inf")
        add(
            Case(
                f"checkpoint-py_load_{name}",
                "checkpoint",
                "error",
                culprits,
                fn=loads(name),
                protect=FIXTURES,
            )
        )
    add(
        Case(
            "checkpoint-py_load_wrong_shapes_without_optimizer",
            "checkpoint",
            "error",
            ("model_7.pt",),
            fn=loads("wrong_shapes", load_optimizer=False),
        )
    )
    add(
        Case(
            "checkpoint-py_load_inf_optimizer_without_optimizer",
            "checkpoint",
            "works",
            fn=loads("inf_optimizer", load_optimizer=False),
        )
    )

    def load_path(path: str) -> Callable[[Path], Any]:
        return lambda cdir: pm_runner().load(sub(path, cdir))

    add(
        Case(
            "checkpoint-py_load_missing",
            "checkpoint",
            "error",
            ("missing.pt",),
            fn=load_path("{C}/missing.pt"),
        )
    )
    add(Case("checkpoint-py_load_directory", "checkpoint", "error", ("{C}",), fn=load_path("{C}")))
    add(Case("checkpoint-py_load_empty_path", "checkpoint", "error", ("empty path",), fn=load_path("")))

    def load_checkpoint_of(name: str) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.utils.checkpoint import load_checkpoint

            put({"model_9.pt": setups[name]})(cdir)
            return load_checkpoint(str(cdir / "model_9.pt"))

        return fn

    for name in ("malicious_pickle", "torch_malicious", "numpy", "random_bytes", "empty", "json_text"):
        add(
            Case(
                f"checkpoint-py_load_checkpoint_{name}",
                "checkpoint",
                "error",
                ("model_9.pt",),
                fn=load_checkpoint_of(name),
            )
        )

    def resume_and_learn(cdir: Path) -> Any:
        shutil.copytree(FX["pm"], cdir / "A")
        runner = pm_runner(str(cdir / "A"))
        runner.load(str(cdir / "A" / "model_1.pt"))
        runner.learn(1)
        runner.close()
        if not (cdir / "A" / "model_2.pt").exists():
            raise SilentWrong("no model_2.pt after resuming")
        return runner

    add(
        Case(
            "checkpoint-py_works_resume_own_run",
            "checkpoint",
            "works",
            fn=resume_and_learn,
            protect=("{C}/A/model_1.pt",),
        )
    )

    def save_nan(cdir: Path) -> Any:
        runner = pm_runner()
        with torch.no_grad():
            next(runner.alg.policy.parameters()).fill_(math.nan)
        runner.save(str(cdir / "model_1.pt"))
        return (cdir / "model_1.pt").exists()

    add(
        Case(
            "checkpoint-py_save_nan_weights",
            "checkpoint",
            "error",
            ("NaN",),
            fn=save_nan,
            fresh=("{C}/model_1.pt",),
        )
    )

    def save_into(target: str) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            (cdir / "f.txt").write_text("keep")
            return pm_runner().save(sub(target, cdir))

        return fn

    add(
        Case(
            "checkpoint-py_save_to_a_directory",
            "checkpoint",
            "error",
            ("{C}",),
            fn=save_into("{C}"),
            protect=("{C}/f.txt",),
        )
    )
    add(
        Case(
            "checkpoint-py_save_through_a_file",
            "checkpoint",
            "error",
            ("f.txt",),
            fn=save_into("{C}/f.txt/model.pt"),
            protect=("{C}/f.txt",),
        )
    )

    def save_into_fifo(cdir: Path) -> Any:
        os.mkfifo(cdir / "model_1.pt")
        return pm_runner().save(str(cdir / "model_1.pt"))

    add(
        Case(
            "checkpoint-py_save_onto_a_fifo",
            "checkpoint",
            "error",
            ("model_1.pt",),
            fn=save_into_fifo,
            protect=("{C}/model_1.pt",),
        )
    )

    def motion_onto_fifo(cdir: Path) -> Any:
        from st_rl.tasks.motion_recorder import save_motion_file

        os.mkfifo(cdir / "walk.motion")
        return save_motion_file(motion_dict(), str(cdir / "walk.motion"))

    add(
        Case(
            "data-py_save_motion_onto_a_fifo",
            "data",
            "error",
            ("walk.motion",),
            fn=motion_onto_fifo,
            protect=("{C}/walk.motion",),
        )
    )
    add(
        Case(
            "checkpoint-py_save_over_a_file_kept_on_error",
            "checkpoint",
            "error",
            ("f.txt",),
            fn=lambda c: _save_with_full_disk(c),
            protect=("{C}/f.txt",),
        )
    )


def _save_with_full_disk(cdir: Path) -> Any:
    """torch.save fails half-way (a full disk): the earlier file at that path stays as it was."""
    (cdir / "f.txt").write_text("an earlier checkpoint")
    runner = pm_runner()
    real = torch.save

    def full(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        f.write(b"PK partial")
        raise OSError(28, "No space left on device")

    torch.save = full  # type: ignore[assignment]
    try:
        runner.save(str(cdir / "f.txt"))
    finally:
        torch.save = real  # type: ignore[assignment]


def data_py_cases() -> None:
    from st_rl.tasks.motion_recorder import save_motion_file

    def loader(**kwargs: Any) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.datasets import MotionLoader

            files = kwargs.pop("files", [str(cdir / "m.motion")])
            return MotionLoader(files, **kwargs)

        return fn

    def motion_file(content: Any) -> Callable[[Path], None]:
        def setup(cdir: Path) -> None:
            path = cdir / "m.motion"
            if isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(content)
            elif callable(content):
                content(path)
            else:
                path.write_bytes(pickle.dumps(content, protocol=4))

        return setup

    good = motion_dict()
    for case_id, content, culprits, kwargs in [
        ("empty_file", b"", ("m.motion",), {}),
        ("truncated", pickle.dumps(good)[:100], ("m.motion",), {}),
        ("random_bytes", RANDOM_BYTES, ("m.motion",), {}),
        ("malicious", malicious_pickle(), ("m.motion",), {}),
        ("json_text", json.dumps(good), ("m.motion",), {}),
        ("top_level_list", [good["walk"]], ("m.motion", "list"), {}),
        ("empty_dict", {}, ("m.motion",), {}),
        ("trajectory_list", {"walk": [1, 2]}, ("m.motion", "walk"), {}),
        ("no_fields", {"walk": {k: v for k, v in good["walk"].items() if k != "Fields"}}, ("Fields",), {}),
        ("no_frames", {"walk": {k: v for k, v in good["walk"].items() if k != "Frames"}}, ("Frames",), {}),
        ("ragged_frames", motion_dict([[0.0, 1.0, 2.0], [0.0, 1.0]]), ("frame 1",), {}),
        ("empty_frames", motion_dict([]), ("Frames",), {}),
        ("fields_not_text", motion_dict(Fields=[1, 2, 3]), ("Fields",), {}),
        ("frames_text", motion_dict([["a", "b", "c"]] * 5), ("Frames",), {}),
        ("duration_text", motion_dict(FrameDuration="0.02"), ("FrameDuration",), {}),
        ("duration_none", motion_dict(FrameDuration=None), ("FrameDuration",), {}),
        ("weight_negative", motion_dict(MotionWeight=-1.0), ("MotionWeight",), {}),
        ("weight_nan", motion_dict(MotionWeight=math.nan), ("MotionWeight",), {}),
        ("weight_text", motion_dict(MotionWeight="1"), ("MotionWeight",), {}),
        ("weight_zero", motion_dict(MotionWeight=0.0), ("MotionWeight",), {}),
        (
            "inf_frame",
            motion_dict([[0.0, 1.0, 2.0]] * 3 + [[0.0, math.inf, 0.0]]),
            ("frame 3", "field 'b'"),
            {},
        ),
        ("style_field_missing", good, ("zzz",), {"style_fields": ["a", "zzz"]}),
        ("frame_num_zero", good, ("amp_obs_frame_num",), {"amp_obs_frame_num": 0}),
        ("frame_num_text", good, ("amp_obs_frame_num",), {"amp_obs_frame_num": "2"}),
        ("frame_num_float", good, ("amp_obs_frame_num",), {"amp_obs_frame_num": 2.5}),
        ("time_between_nan", good, ("time_between_frames",), {"time_between_frames": math.nan}),
        ("time_between_zero", good, ("time_between_frames",), {"time_between_frames": 0.0}),
        ("one_frame", motion_dict([[0.0, 1.0, 2.0]]), ("walk",), {}),
        ("frame_range_empty", good, ("walk",), {"frame_begin": 20, "frame_end": 10}),
        (
            "window_longer_than_motion",
            motion_dict([[0.0, 0.0, 0.0]] * 3),
            ("walk",),
            {"amp_obs_frame_num": 10},
        ),
    ]:
        add(
            Case(
                f"data-py_motion_{case_id}",
                "data",
                "error",
                culprits,
                fn=loader(**kwargs),
                setup=motion_file(content),
            )
        )
    add(
        Case(
            "data-py_motion_missing",
            "data",
            "error",
            ("nope.motion",),
            fn=lambda c: loader(files=[str(c / "nope.motion")])(c),
        )
    )
    add(Case("data-py_motion_directory", "data", "error", ("{C}",), fn=lambda c: loader(files=[str(c)])(c)))
    add(
        Case(
            "data-py_motion_one_of_two_missing",
            "data",
            "error",
            ("nope.motion",),
            fn=lambda c: loader(files=[str(FX["motion"]), str(c / "nope.motion")])(c),
        )
    )
    add(Case("data-py_motion_works", "data", "works", fn=loader(), setup=motion_file(good)))
    add(
        Case(
            "data-py_motion_works_saved",
            "data",
            "works",
            fn=lambda c: (save_motion_file(good, str(c / "m.motion")), loader()(c)),
        )
    )

    # ------------------------------------------------------------------ RolloutDataset
    def dataset(num_envs: Any = 2, sub_dir: str = "demos", **kwargs: Any) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.storage.rollout_files.rollout_dataset import RolloutDataset

            kwargs.setdefault("wait_for_data_s", 0)
            ds = RolloutDataset(str(cdir / sub_dir), num_envs, device="cpu", seed=0, **kwargs)
            n = 0
            for _ in range(200):
                if ds.get_batch() is None:
                    break
                n += 1
            return n

        return fn

    def demos(edit: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
        def setup(cdir: Path) -> None:
            shutil.copytree(FX["data"], cdir / "demos")
            if edit is not None:
                edit(cdir / "demos")

        return setup

    def first_file(root: Path) -> Path:
        return sorted(root.rglob("traj_*.npz"))[0]

    def rewrite(edit: Callable[[dict[str, np.ndarray]], None]) -> Callable[[Path], None]:
        def apply(root: Path) -> None:
            path = first_file(root)
            arrays = dict(np.load(path))
            edit(arrays)
            path.unlink()
            np.savez(path, **arrays)

        return apply

    def set_nan(arrays: dict[str, np.ndarray]) -> None:
        arrays["observations"] = arrays["observations"].copy()
        arrays["observations"][3, 1] = np.nan

    def truncate(root: Path) -> None:
        path = first_file(root)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    def garbage(root: Path) -> None:
        first_file(root).write_bytes(RANDOM_BYTES)

    def evil_pickle(root: Path) -> None:
        path = first_file(root)
        path.with_suffix(".pickle").write_bytes(pickle.dumps({"observations": _Malicious()}))
        path.unlink()

    def object_array(root: Path) -> None:
        path = first_file(root)
        arrays = dict(np.load(path))
        arrays["actions"] = np.array([None] * len(arrays["actions"]), dtype=object)
        path.unlink()
        np.savez(path, **arrays)

    def metadata(text: str) -> Callable[[Path], None]:
        return lambda root: (root / "metadata.json").write_text(text)

    def metadata_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        def apply(root: Path) -> None:
            meta = json.loads((root / "metadata.json").read_text())
            edit(meta)
            (root / "metadata.json").write_text(json.dumps(meta))

        return apply

    def gap(root: Path) -> None:
        traj = next(d for d in sorted(root.glob("trajectory_*")) if len(list(d.glob("traj_*"))) >= 2)
        sorted(traj.glob("traj_*"))[0].unlink()

    def bad_name(root: Path) -> None:
        (sorted(root.glob("trajectory_*"))[0] / "traj_abc.npz").write_bytes(b"")

    def drop_key(key: str) -> Callable[[dict[str, np.ndarray]], None]:
        return lambda arrays: arrays.pop(key)

    for case_id, edit, culprits, kwargs in [
        ("nan_observations", rewrite(set_nan), ("traj_", "observations", "frame 3"), {}),
        ("truncated_file", truncate, ("traj_",), {}),
        ("garbage_file", garbage, ("traj_",), {}),
        ("malicious_pickle", evil_pickle, ("traj_",), {}),
        ("object_array", object_array, ("traj_",), {}),
        ("metadata_broken", metadata("{"), ("metadata.json",), {}),
        ("metadata_list", metadata("[]"), ("metadata.json",), {}),
        ("metadata_num_obs_wrong", metadata_edit(lambda m: m.update(num_obs=7)), ("traj_", "7"), {}),
        (
            "metadata_segments_wrong",
            metadata_edit(lambda m: m.update(obs_segments={"x": [9]})),
            ("traj_",),
            {},
        ),
        ("missing_actions", rewrite(drop_key("actions")), ("traj_", "actions"), {}),
        ("missing_observations", rewrite(drop_key("observations")), ("traj_", "observations"), {}),
        ("gap_in_files", gap, ("trajectory_",), {}),
        (
            "actions_wrong_length",
            rewrite(lambda a: a.update(actions=a["actions"][:-2])),
            ("traj_", "actions"),
            {},
        ),
        ("num_envs_zero", None, ("num_envs",), {"num_envs": 0}),
        ("num_envs_negative", None, ("num_envs",), {"num_envs": -1}),
        ("num_envs_text", None, ("num_envs",), {"num_envs": "2"}),
        ("starting_range_reversed", None, ("starting_frame_range",), {"starting_frame_range": [5, 1]}),
        ("poll_zero", None, ("poll_interval_s",), {"poll_interval_s": 0}),
        ("wait_negative", None, ("wait_for_data_s",), {"wait_for_data_s": -1}),
        ("wait_nan", None, ("wait_for_data_s",), {"wait_for_data_s": math.nan}),
        ("loops_text", None, ("dataset_loops",), {"dataset_loops": "x"}),
    ]:
        add(
            Case(
                f"data-py_dataset_{case_id}",
                "data",
                "error",
                culprits,
                fn=dataset(**kwargs),
                setup=demos(edit),
                protect=("{C}/demos",),
            )
        )
    add(Case("data-py_dataset_missing_dir", "data", "error", ("nope",), fn=dataset(sub_dir="nope")))
    add(
        Case(
            "data-py_dataset_empty_dir",
            "data",
            "error",
            ("empty",),
            fn=dataset(sub_dir="empty"),
            setup=put({"empty": None}),
        )
    )
    add(
        Case(
            "data-py_dataset_a_file",
            "data",
            "error",
            ("f.npz",),
            fn=dataset(sub_dir="f.npz"),
            setup=put({"f.npz": b"x"}),
        )
    )
    add(
        Case(
            "data-py_dataset_works_ignores_other_files",
            "data",
            "works",
            fn=dataset(),
            setup=demos(bad_name),
            check=lambda c, n: None if n and n > 0 else f"{n} batches",
            protect=("{C}/demos",),
        )
    )
    add(
        Case(
            "data-py_dataset_works",
            "data",
            "works",
            fn=dataset(),
            setup=demos(),
            check=lambda c, n: None if n and n > 0 else f"{n} batches",
            protect=("{C}/demos",),
        )
    )

    # ------------------------------------------------------------------ DemonstrationSaver
    def saver(save_dir: str = "out", policy: Any = None, **kwargs: Any) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.runners import DemonstrationSaver

            env = point_mass(4)
            p = policy(env) if callable(policy) and not isinstance(policy, type) else policy
            p = Expert(env) if p is None else p
            kwargs.setdefault("min_timesteps", 32)
            kwargs.setdefault("min_episodes", 0)
            kwargs.setdefault("rollout_storage_length", 8)
            s = DemonstrationSaver(env, p, str(cdir / save_dir), **kwargs)
            s.collect_and_save(config={"task": "point_mass"})
            return s

        return fn

    def nan_policy(env: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda obs: torch.full((obs.shape[0], 2), math.nan)

    def wide_policy(env: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda obs: torch.zeros(obs.shape[0], 5)

    for case_id, fn, culprits, spec, protect in [
        ("save_dir_is_a_file", saver("f.txt"), ("f.txt",), {"f.txt": "keep"}, ("{C}/f.txt",)),
        ("rollout_length_zero", saver(rollout_storage_length=0), ("rollout_storage_length",), None, ()),
        ("min_timesteps_nan", saver(min_timesteps=math.nan), ("min_timesteps",), None, ()),
        ("file_format_csv", saver(file_format="csv"), ("csv",), None, ()),
        ("policy_nan_actions", saver(policy=nan_policy), ("NaN",), None, ()),
        ("policy_wrong_width", saver(policy=wide_policy), ("actions",), None, ()),
        ("policy_not_callable", saver(policy=lambda env: 3), ("policy",), None, ()),
        (
            "unknown_component",
            saver(obs_disassemble_mapping={"nope": "normalized_image"}),
            ("nope",),
            None,
            (),
        ),
    ]:
        add(
            Case(
                f"data-py_saver_{case_id}",
                "data",
                "error",
                culprits,
                fn=fn,
                setup=put(spec) if spec else None,
                protect=protect,
            )
        )

    def another_dataset(cdir: Path) -> Any:
        from st_rl.runners import DemonstrationSaver
        from st_rl.tasks import make_env

        shutil.copytree(FX["data"], cdir / "demos")
        env = make_env("velocity_tracking", num_envs=4, seed=0)
        s = DemonstrationSaver(
            env, Expert(env), str(cdir / "demos"), rollout_storage_length=8, min_timesteps=16, min_episodes=0
        )
        s.collect_and_save()
        return s

    add(
        Case(
            "data-py_saver_continue_another_dataset",
            "data",
            "error",
            ("demos",),
            fn=another_dataset,
            protect=("{C}/demos",),
            may_change=(),
        )
    )

    def continue_same(cdir: Path) -> Any:
        shutil.copytree(FX["data"], cdir / "demos")
        before = len(list((cdir / "demos").rglob("traj_*")))
        total = json.loads((cdir / "demos" / "metadata.json").read_text())["total_timesteps"]
        saver("demos", min_timesteps=total + 32)(cdir)
        after = len(list((cdir / "demos").rglob("traj_*")))
        if after <= before:
            raise SilentWrong(f"{before} files before, {after} after continuing")

    add(
        Case(
            "data-py_saver_works_continue_same_dataset",
            "data",
            "works",
            fn=continue_same,
            protect=("{C}/demos/trajectory_0",),
        )
    )


def rundir_py_cases() -> None:
    def learn_into(
        folder: str, setup_fx: str | None = None, overwrite: bool = False, load: bool = False
    ) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            target = Path(sub(folder, cdir))
            if setup_fx is not None:
                shutil.copytree(FX[setup_fx], target)
            cfg = pm_preset_cfg()
            cfg["overwrite"] = overwrite
            cfg["logger"] = "tensorboard"
            from st_rl.runners import OnPolicyRunner

            runner = OnPolicyRunner(point_mass(), cfg, log_dir=str(target), device="cpu")
            try:
                if load:
                    runner.load(str(target / "model_1.pt"))
                runner.learn(1)
            finally:
                runner.close()
            return runner

        return fn

    add(
        Case(
            "rundir-py_earlier_run",
            "rundir",
            "error",
            ("{C}/A", "overwrite"),
            fn=learn_into("{C}/A"),
            setup=put({"A": Fixture("pm")}),
            protect=("{C}/A",),
        )
    )
    add(
        Case(
            "rundir-py_overwrite",
            "rundir",
            "works",
            fn=learn_into("{C}/A", overwrite=True),
            setup=put({"A": Fixture("pm")}),
            check=lambda c, r: None if (c / "A/model_1.pt").exists() else "no model_1.pt",
        )
    )
    add(
        Case(
            "rundir-py_resume_own_folder",
            "rundir",
            "works",
            fn=learn_into("{C}/A", load=True),
            setup=put({"A": Fixture("pm")}),
            protect=("{C}/A",),
            may_change=("*/config.json",),
            check=lambda c, r: None if (c / "A/model_2.pt").exists() else "no model_2.pt",
        )
    )
    add(
        Case(
            "rundir-py_log_dir_is_a_file",
            "rundir",
            "error",
            ("f.txt",),
            fn=learn_into("{C}/f.txt"),
            setup=put({"f.txt": "keep"}),
            protect=("{C}/f.txt",),
        )
    )
    add(
        Case(
            "rundir-py_log_dir_through_a_file",
            "rundir",
            "error",
            ("f.txt",),
            fn=learn_into("{C}/f.txt/run"),
            setup=put({"f.txt": "keep"}),
            protect=("{C}/f.txt",),
        )
    )
    add(
        Case(
            "rundir-py_locked_by_a_live_process",
            "rundir",
            "error",
            ("{C}/A", "process"),
            fn=learn_into("{C}/A"),
            setup=put(
                {
                    "A/.st_rl.lock": lambda p: p.write_text(
                        json.dumps({"pid": FX_PIDS["live"], "host": os.uname().nodename})
                    )
                }
            ),
        )
    )
    add(
        Case(
            "rundir-py_locked_on_another_host",
            "rundir",
            "error",
            ("{C}/A", "other-host"),
            fn=learn_into("{C}/A"),
            setup=put({"A/.st_rl.lock": json.dumps({"pid": 1, "host": "other-host"})}),
        )
    )
    add(
        Case(
            "rundir-py_works_stale_lock",
            "rundir",
            "works",
            fn=learn_into("{C}/A"),
            setup=put(
                {
                    "A/.st_rl.lock": lambda p: p.write_text(
                        json.dumps({"pid": FX_PIDS["dead"], "host": os.uname().nodename})
                    )
                }
            ),
        )
    )

    def unwritable(cdir: Path) -> Any:
        """Saving into a folder that refuses writes (simulated: we run as root, so chmod would not stop us)."""
        shutil.copytree(FX["pm"], cdir / "A")
        cfg = pm_preset_cfg()
        from st_rl.runners import OnPolicyRunner

        runner = OnPolicyRunner(point_mass(), cfg, log_dir=str(cdir / "A"), device="cpu")
        runner.load(str(cdir / "A" / "model_1.pt"))
        real = torch.save

        def denied(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
            raise PermissionError(13, "Permission denied", getattr(f, "name", str(f)))

        torch.save = denied  # type: ignore[assignment]
        try:
            runner.learn(1)
        finally:
            torch.save = real  # type: ignore[assignment]
            runner.close()

    add(
        Case(
            "rundir-py_unwritable_folder",
            "rundir",
            "error",
            ("model_2.pt",),
            fn=unwritable,
            protect=("{C}/A/model_1.pt",),
        )
    )

    def two_runners(cdir: Path) -> Any:
        first = pm_runner(str(cdir / "A"))
        first.learn(1)
        second = pm_runner(str(cdir / "A"))
        second.load(str(cdir / "A" / "model_1.pt"))
        second.learn(1)
        first.close()
        second.close()
        if not (cdir / "A" / "model_2.pt").exists():
            raise SilentWrong("no model_2.pt")

    add(Case("rundir-py_works_two_runners_one_process", "rundir", "works", fn=two_runners))

    def stale_tmp(cdir: Path) -> Any:
        shutil.copytree(FX["pm"], cdir / "A")
        (cdir / "A" / ".tmp_model_2.pt.123").write_bytes(b"partial")
        learn_into("{C}/A", load=True)(cdir)
        if (cdir / "A" / ".tmp_model_2.pt.123").exists():
            raise SilentWrong("the stale temporary file is still there")

    add(Case("rundir-py_works_stale_temporary_file", "rundir", "works", fn=stale_tmp))


FX_PIDS: dict[str, int] = {}


def export_py_cases() -> None:
    def export(source: str, out: str = "{C}/out", **kwargs: Any) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.export import export_policy

            src = sub(source, cdir) if isinstance(source, str) else source
            return export_policy(src, sub(out, cdir), **kwargs)

        return fn

    setups = checkpoint_setups()
    for case_id, fn, culprits, spec in [
        ("missing", export("{C}/missing.pt"), ("missing.pt",), None),
        ("nan_weights", export("{C}/model_3.pt"), ("NaN",), {"model_3.pt": setups["nan_weights"]}),
        (
            "out_is_a_file",
            export("{C}/A", out="{C}/f.txt"),
            ("f.txt",),
            {"A": Fixture("pm"), "f.txt": "keep"},
        ),
        ("format_unknown", export("{C}/A", formats=["xyz"]), ("xyz",), {"A": Fixture("pm")}),
        ("format_none", export("{C}/A", formats=[]), ("format",), {"A": Fixture("pm")}),
        ("opset_too_old", export("{C}/A", opset=3), ("opset",), {"A": Fixture("pm")}),
        ("tolerance_nan", export("{C}/A", tolerance=math.nan), ("tolerance",), {"A": Fixture("pm")}),
        ("name_with_folder", export("{C}/A", name="../evil"), ("name",), {"A": Fixture("pm")}),
        ("name_empty", export("{C}/A", name=""), ("name",), {"A": Fixture("pm")}),
        ("source_int", export(3), ("int",), None),  # type: ignore[arg-type]
        ("task_unknown", export("{C}/A", task="nope"), ("nope",), {"A": Fixture("pm")}),
        (
            "untrusted",
            export("{C}/A"),
            ("this:Zen",),
            {
                "A": Fixture("pm"),
                "A/config.json": lambda p: p.write_text(
                    json.dumps(
                        _with_policy_class(json.loads((FX["pm"] / "config.json").read_text()), "this:Zen")
                    )
                ),
            },
        ),
    ]:
        add(
            Case(
                f"export-py_{case_id}",
                "export",
                "error",
                culprits,
                fn=fn,
                setup=put(spec) if spec else None,
                protect=("{C}/f.txt",) if spec and "f.txt" in spec else (),
                fresh=("{C}/evil.onnx", "{C}/evil.pt", "{C}/evil.json"),
            )
        )
    add(
        Case(
            "export-py_works_one_format_as_text",
            "export",
            "works",
            fn=export("{C}/A", formats="onnx"),
            setup=put({"A": Fixture("pm")}),
        )
    )
    add(
        Case(
            "export-py_works_checkpoint",
            "export",
            "works",
            fn=export("{C}/A"),
            setup=put({"A": Fixture("pm")}),
            check=lambda c, r: None if (c / "out" / "policy.onnx").exists() else "no policy.onnx",
        )
    )

    def export_runner(cdir: Path) -> Any:
        from st_rl.export import export_policy

        runner = pm_runner()
        return export_policy(runner, str(cdir / "out"), env=point_mass())

    add(Case("export-py_works_runner", "export", "works", fn=export_runner))

    def play_exported(
        policy: str, edit: Callable[[Path], None] | None = None, task: str | None = None
    ) -> Callable[[Path], Any]:
        def fn(cdir: Path) -> Any:
            from st_rl.play import play_exported

            shutil.copytree(FX["vt_exported"], cdir / "e")
            if edit is not None:
                edit(cdir / "e")
            return play_exported(
                str(cdir / "e" / policy),
                task=task,
                num_envs=2,
                duration_s=0.2,
                video=None,
                plot=None,
                verbose=False,
            )

        return fn

    def half(name: str) -> Callable[[Path], None]:
        return lambda e: (e / name).write_bytes((e / name).read_bytes()[: (e / name).stat().st_size // 2])

    def meta(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
        def apply(e: Path) -> None:
            m = json.loads((e / "policy.json").read_text())
            edit(m)
            (e / "policy.json").write_text(json.dumps(m))

        return apply

    def swap_metadata(e: Path) -> None:
        from st_rl.export import export_policy

        quiet(lambda: export_policy(str(FX["pm_ckpt"]), str(e / "pm"), check=False))
        shutil.copy(e / "pm" / "policy.json", e / "policy.json")

    add(
        Case(
            "export-py_play_json_of_another_policy",
            "export",
            "error",
            ("policy.onnx",),
            fn=play_exported("policy.onnx", swap_metadata, task="velocity_tracking"),
        )
    )
    for case_id, policy, edit, culprits in [
        ("onnx_truncated", "policy.onnx", half("policy.onnx"), ("policy.onnx",)),
        (
            "onnx_garbage",
            "policy.onnx",
            lambda e: (e / "policy.onnx").write_bytes(RANDOM_BYTES),
            ("policy.onnx",),
        ),
        ("pt_truncated", "policy.pt", half("policy.pt"), ("policy.pt",)),
        ("pt_garbage", "policy.pt", lambda e: (e / "policy.pt").write_bytes(RANDOM_BYTES), ("policy.pt",)),
        ("json_num_actions_missing", "policy.onnx", meta(lambda m: m.pop("num_actions")), ("num_actions",)),
        ("json_num_obs_text", "policy.onnx", meta(lambda m: m.update(num_obs="four")), ("num_obs",)),
        ("json_list", "policy.onnx", lambda e: (e / "policy.json").write_text("[]"), ("policy.json",)),
        ("json_empty", "policy.pt", lambda e: (e / "policy.json").write_text(""), ("policy.json",)),
        ("json_task_unknown", "policy.onnx", meta(lambda m: m.update(task="nope")), ("nope",)),
        (
            "json_states_wrong",
            "policy.pt",
            meta(lambda m: m.update(states=[{"name": "h_in", "shape": [1, 8]}])),
            ("policy.pt",),
        ),
        ("unknown_extension", "policy.json", None, ("policy.json",)),
    ]:
        add(Case(f"export-py_play_{case_id}", "export", "error", culprits, fn=play_exported(policy, edit)))
    add(Case("export-py_play_works_torchscript", "export", "works", fn=play_exported("policy.pt")))


# ================================================================================================ signals
SLOW_WRITER = """
import threading


class Blocking:
    def __init__(self, log_dir=None, cfg=None, **kwargs):
        print("[writer] connecting", flush=True)
        threading.Event().wait()

    def add_scalar(self, *args, **kwargs):
        pass
"""


def signal_cases() -> None:
    long_run = [
        "train",
        "--task",
        "point_mass",
        "--num-envs",
        "8",
        "--iterations",
        "100000",
        "--device",
        "cpu",
        "save_interval=100000",
        "num_steps_per_env=4",
        "--log-dir",
        "{C}/run",
    ]
    names = {signal.SIGINT: "sigint", signal.SIGTERM: "sigterm", signal.SIGHUP: "sighup"}
    codes = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
    for sig, name in names.items():
        cli(
            f"signal-{name}_during_training",
            long_run,
            category="signal",
            expect="signal",
            signal=(sig, "Learning iteration"),
            codes=(codes[sig],),
            check=exists("run/model_*.pt"),
        )
        cli(
            f"signal-{name}_while_building_the_environment",
            [*TRAIN, "--env", "{FX:env_module}:slow", "--log-dir", "{C}/run"],
            category="signal",
            expect="signal",
            signal=(sig, "building the environment"),
            codes=(codes[sig],),
            fresh=("{C}/run",),
        )
        cli(
            f"signal-{name}_while_the_logger_starts",
            [*PM, "--log-dir", "{C}/run", "logger=slow_writer:Blocking"],
            category="signal",
            expect="signal",
            signal=(sig, "[writer] connecting"),
            codes=(codes[sig],),
            setup={"slow_writer.py": SLOW_WRITER},
        )
        cli(
            f"signal-{name}_during_play",
            [
                "play",
                "--checkpoint",
                "{FX:vt}",
                "--num-envs",
                "2",
                "--duration",
                "100000",
                "--no-video",
                "--no-plot",
            ],
            category="signal",
            expect="signal",
            signal=(sig, "@4"),
            codes=(codes[sig],),
            protect=("{FX:vt}",),
        )
    cli(
        "signal-sighup_under_nohup_keeps_training",
        [*PM, "--iterations", "20", "num_steps_per_env=4", "--log-dir", "{C}/run"],
        category="signal",
        expect="works",
        signal=(signal.SIGHUP, "Learning iteration"),
        check=exists("run/model_20.pt"),
        nohup=True,
    )
    cli(
        "signal-sighup_under_nohup_keeps_playing",
        ["play", "--checkpoint", "{FX:vt}", "--num-envs", "2", "--duration", "5", "--no-video", "--no-plot"],
        category="signal",
        expect="works",
        signal=(signal.SIGHUP, "@2"),
        protect=("{FX:vt}",),
        nohup=True,
    )
    slow = [
        *TRAIN,
        "--env",
        "{FX:env_module}:prints_and_sleeps_in_step",
        "num_steps_per_env=20",
        "--log-dir",
        "{C}/run",
    ]
    for sig, name in ((signal.SIGINT, "sigint"), (signal.SIGTERM, "sigterm")):
        cli(
            f"signal-second_{name}_aborts_the_iteration",
            slow,
            category="signal",
            expect="signal",
            signal=(sig, "stepping slowly"),
            second_signal=True,
            codes=(codes[sig],),
        )
    cli(
        "signal-sigterm_in_default_run_dir",
        [*PM[:-4], "--iterations", "100000", "--task", "point_mass", "num_steps_per_env=4"],
        category="signal",
        expect="signal",
        signal=(signal.SIGTERM, "Learning iteration"),
        codes=(143,),
        check=exists("logs/point_mass/*/model_*.pt"),
    )
    for sig in (signal.SIGTERM, signal.SIGHUP):
        cli(
            f"signal-{names[sig]}_while_waiting_for_the_dataset",
            [*PM, "--config", "{C}/two_stage.json", "--log-dir", "{C}/run"],
            category="signal",
            expect="signal",
            signal=(sig, "RolloutDataset: 0 trajectories"),
            codes=(codes[sig],),
            setup={
                "two_stage.json": lambda p: p.write_text(json.dumps(two_stage_cfg(str(p.parent / "demos"))))
            },
        )


def two_stage_cfg(data_dir: str) -> dict[str, Any]:
    cfg = pm_preset_cfg()
    cfg.update(runner_class_name="TwoStageRunner", pretrain_iterations=1, max_iterations=2)
    cfg["algorithm"] = {
        "class_name": "TPPO",
        "teacher_policy": {"teacher_ac_path": str(FX["pm_ckpt"])},
        "teacher_act_prob": 0.0,
        "ppo": {"num_learning_epochs": 1, "num_mini_batches": 1},
    }
    cfg["pretrain_dataset"] = {
        "data_dir": data_dir,
        "wait_for_data_s": 3600,
        "poll_interval_s": 3600,
        "dataset_loops": -1,
    }
    return cfg


# ================================================================================================ main
def register() -> None:
    config_cases()
    env_py_cases()
    checkpoint_py_cases()
    data_py_cases()
    rundir_py_cases()
    export_py_cases()
    cli_cases()
    signal_cases()
    ids = [c.id for c in CASES]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate case ids: {duplicates}"


def table(results: Sequence[Result]) -> str:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        counts[r.category][r.outcome] += 1
    cats = [c for c in CATEGORIES if c in counts]
    header = ["category", *OUTCOMES, "total"]
    rows = [[c, *(str(counts[c][o]) for o in OUTCOMES), str(sum(counts[c].values()))] for c in cats]
    total = Counter(r.outcome for r in results)
    rows.append(["total", *(str(total[o]) for o in OUTCOMES), str(len(results))])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)


def summary(results: Sequence[Result]) -> str:
    errors = [r for r in results if r.expect != "works"]
    clear = sum(r.outcome == CLEAR for r in errors)
    works = [r for r in results if r.expect == "works"]
    ok = sum(r.outcome == WORKS for r in works)
    bad = Counter(r.outcome for r in results)
    pct = 100.0 * clear / max(1, len(errors))
    return (
        f"{len(results)} cases: {len(errors)} error cases, {clear} clear errors ({pct:.1f}%); "
        f"{len(works)} legitimate inputs, {ok} work; {bad[LOSS]} data loss, {bad[HANG]} hangs, "
        f"{bad[SILENT]} silent wrongs, {bad[REFUSED]} wrongly refused, {bad[UNCLEAR]} traceback/unclear"
    )


def main(argv: list[str] | None = None) -> int:
    global W, SOURCE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write every result as JSON to this file")
    parser.add_argument("--only", default=None, help="run only the cases whose id contains this text")
    parser.add_argument("--kind", choices=("cli", "python"), default=None, help="run only these cases")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed at the start)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--source", default=None, help="test the st_rl package in this folder (default: this repository's)"
    )
    args = parser.parse_args(argv)
    if args.source is not None:  # e.g. an earlier version: git archive HEAD st_rl | tar -x -C /tmp/before
        SOURCE = Path(args.source).resolve()
        sys.path.insert(0, str(SOURCE))
    register()
    cases = [c for c in CASES if args.only is None or args.only in c.id]
    if args.kind is not None:
        cases = [c for c in cases if (c.argv is not None) == (args.kind == "cli")]
    if args.list:
        for c in cases:
            print(f"{c.id}  [{c.category}, {'cli' if c.argv is not None else 'python'}, {c.expect}]")
        print(f"{len(cases)} cases")
        return 0
    torch.set_num_threads(1)
    W = Path(tempfile.mkdtemp(prefix="st_rl_adversarial_"))
    import st_rl

    print(f"work folder: {W}; testing {Path(st_rl.__file__).parent}", flush=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(100000)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    FX_PIDS.update(live=live.pid, dead=dead.pid)
    start = time.monotonic()
    results: list[Result] = []
    try:
        print("building fixtures ...", flush=True)
        build_fixtures()
        print(f"fixtures ready ({time.monotonic() - start:.0f} s); {len(cases)} cases", flush=True)
        # in-process cases first (fast), then the subprocesses
        ordered = [c for c in cases if c.argv is None] + [c for c in cases if c.argv is not None]
        for i, case in enumerate(ordered, 1):
            result = run_case(case)
            results.append(result)
            mark = "" if result.outcome in GOOD_OUTCOMES else f"  <-- {result.outcome}: {result.detail[:300]}"
            print(
                f"[{i}/{len(ordered)}] {case.id}: {result.outcome} ({result.seconds:.1f} s){mark}", flush=True
            )
    finally:
        live.kill()
        live.wait()
        if not args.keep:
            shutil.rmtree(W, ignore_errors=True)
    print()
    print(table(results))
    print()
    print(summary(results))
    failing = [r for r in results if r.outcome not in GOOD_OUTCOMES]
    if failing:
        print("\nnot clear / not working:")
        for r in failing:
            print(f"- {r.id} [{r.kind}] {r.outcome}: {r.detail}")
    print(f"\ntotal time {time.monotonic() - start:.0f} s")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "summary": summary(results),
                    "table": table(results),
                    "results": [r.__dict__ for r in results],
                },
                indent=1,
            )
        )
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())
