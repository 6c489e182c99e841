"""Configs read back from a run directory or checkpoint import nothing without the opt-in (docs/security.md).

The end-to-end checks run in one subprocess (``import this`` cannot be undone in the test process): an untrusted
``config.json`` with ``policy.class_name="this:Zen"`` and ``runner.ckpt_manipulator="builtins:print"`` is
refused by ``st_rl.play.play``, ``st_rl.export.export_policy``, ``st-rl play`` and ``st-rl export`` before
anything is imported or called, and accepted with ``trust_config=True`` / ``--trust-config``; a user's own
policy class and manipulator (a module written here) work with the opt-in; short names need none.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env
from st_rl.utils.config import (
    TRUST_OPT_IN,
    UntrustedConfigError,
    imports_allowed,
    resolve_class,
    untrusted_config,
)

RUN_CFG = {
    "seed": 1,
    "task": "velocity_tracking",
    "num_steps_per_env": 4,
    "logger": "none",
    "empirical_normalization": True,
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [8], "critic_hidden_dims": [8]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 1},
}

# A user's own module: it leaves a marker file when imported and when its manipulator is called.
PROBE_MODULE = '''
import pathlib

pathlib.Path(__file__).with_suffix(".imported").touch()

from st_rl.modules import ActorCritic


class ProbeActorCritic(ActorCritic):
    """ActorCritic under a user's class name."""


def passthrough(state, alg_state):
    pathlib.Path(__file__).with_suffix(".called").touch()
    return state
'''


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 1-iteration velocity-tracking run: config.json (short class names) and model_1.pt."""
    torch.set_num_threads(1)
    log_dir = tmp_path_factory.mktemp("trust") / "run"
    runner = OnPolicyRunner(
        make_env("velocity_tracking", num_envs=4, seed=1), copy.deepcopy(RUN_CFG), str(log_dir)
    )
    runner.learn(1)
    assert (log_dir / "config.json").is_file() and (log_dir / "model_1.pt").is_file()
    return log_dir


def tampered_run(
    run_dir: Path, dest: Path, policy: str | None = None, manipulator: str | None = None
) -> Path:
    """A copy of ``run_dir`` whose config.json names ``policy`` as the policy class and/or ``manipulator``."""
    dest.mkdir(parents=True)
    shutil.copy(run_dir / "model_1.pt", dest / "model_1.pt")
    cfg = json.loads((run_dir / "config.json").read_text())
    if policy is not None:
        cfg["policy"]["class_name"] = cfg["runner"]["policy_class_name"] = policy
    if manipulator is not None:
        cfg["runner"]["ckpt_manipulator"] = manipulator
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest / "model_1.pt"


def write_probe(directory: Path, name: str) -> Path:
    """Write the probe module ``name`` into ``directory``; returns the module file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(PROBE_MODULE)
    return path


# ---------------------------------------------------------------------------------------------- end to end
SCRIPT = r"""
import builtins, contextlib, io, json, os, sys

args = json.loads(sys.argv[1])
manipulated = []  # calls of print with a checkpoint (the "builtins:print" manipulator)
_print = builtins.print


def recording_print(*a, **k):
    if a and isinstance(a[0], dict) and "model_state_dict" in a[0]:
        manipulated.append(1)
        return None
    return _print(*a, **k)


builtins.print = recording_print

import torch

torch.set_num_threads(1)
from st_rl.cli import main
from st_rl.export import export_policy
from st_rl.play import play

report = {}
PLAY = dict(num_envs=2, duration_s=0.2, video=None, plot=None, verbose=False)
CLI_PLAY = ["--no-video", "--no-plot", "--duration", "0.2", "--num-envs", "2"]
EXPORT = dict(formats=["torchscript"], check=False)
CLI_EXPORT = ["--format", "torchscript", "--no-check"]


def attempt(name, fn):
    err = io.StringIO()
    entry = {}
    try:
        with contextlib.redirect_stderr(err):
            value = fn()
        entry.update(ok=True, value=value if isinstance(value, int) else None)
    except BaseException as e:  # noqa: BLE001 - recorded for the test
        entry.update(ok=False, type=type(e).__name__, message=str(e))
    entry.update(stderr=err.getvalue(), this_imported="this" in sys.modules, print_calls=len(manipulated))
    probe = os.path.join(args["probe_dir"], "trust_probe_e2e")
    entry.update(probe_imported=os.path.exists(probe + ".imported"), probe_called=os.path.exists(probe + ".called"))
    report[name] = entry


a = args
# Short names need no opt-in.
attempt("clean_play", lambda: play(a["clean"], **PLAY)["iteration"])
attempt("clean_export", lambda: len(export_policy(a["clean"], a["out"] + "/clean", **EXPORT).files))
attempt("clean_cli_play", lambda: main(["play", "--checkpoint", a["clean"], *CLI_PLAY]))
# Refused without the opt-in: nothing imported, nothing called.
attempt("play", lambda: play(a["evil"], **PLAY))
attempt("export", lambda: export_policy(a["evil"], a["out"] + "/evil", **EXPORT))
attempt("cli_play", lambda: main(["play", "--checkpoint", a["evil"], *CLI_PLAY]))
attempt("cli_export", lambda: main(["export", "--checkpoint", a["evil"], "--out", a["out"] + "/e", *CLI_EXPORT]))
attempt("play_manipulator", lambda: play(a["manip"], **PLAY))
attempt("cli_export_manipulator", lambda: main(["export", "--checkpoint", a["manip"], *CLI_EXPORT]))
attempt("play_probe", lambda: play(a["probe"], **PLAY))
attempt("cli_play_probe", lambda: main(["play", "--checkpoint", a["probe"], *CLI_PLAY]))
# Accepted with the opt-in.
attempt("probe_play_trusted", lambda: play(a["probe"], **PLAY, trust_config=True)["iteration"])
attempt("probe_cli_play_trusted", lambda: main(["play", "--checkpoint", a["probe"], *CLI_PLAY, "--trust-config"]))
attempt(
    "probe_cli_export_trusted",
    lambda: main(["export", "--checkpoint", a["probe"], "--out", a["out"] + "/p", *CLI_EXPORT, "--trust-config"]),
)
attempt("play_manipulator_trusted", lambda: play(a["manip"], **PLAY, trust_config=True))
attempt("play_trusted", lambda: play(a["evil"], **PLAY, trust_config=True))
with open(a["report"], "w") as f:
    json.dump(report, f)
"""


@pytest.fixture(scope="module")
def report(run_dir, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("trust_e2e")
    probe_dir = root / "user_code"
    write_probe(probe_dir, "trust_probe_e2e")
    args = {
        "clean": str(run_dir / "model_1.pt"),
        "evil": str(tampered_run(run_dir, root / "evil", "this:Zen", "builtins:print")),
        "manip": str(tampered_run(run_dir, root / "manip", manipulator="builtins:print")),
        "probe": str(
            tampered_run(
                run_dir, root / "probe", "trust_probe_e2e:ProbeActorCritic", "trust_probe_e2e:passthrough"
            )
        ),
        "out": str(root / "exported"),
        "report": str(root / "report.json"),
        "probe_dir": str(probe_dir),
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(probe_dir), os.environ.get("PYTHONPATH", "")])}
    env.update(OMP_NUM_THREADS="1", MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(root),
        timeout=540,  # a hang guard only
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(Path(args["report"]).read_text())
    data["_args"] = args
    data["_stdout"] = proc.stdout
    return data


def test_short_names_load_without_the_opt_in(report):
    assert report["clean_play"]["ok"] and report["clean_play"]["value"] == 1, report["clean_play"]
    assert report["clean_export"]["ok"] and report["clean_export"]["value"] == 1, report["clean_export"]
    assert report["clean_cli_play"]["value"] == 0, report["clean_cli_play"]


@pytest.mark.parametrize("name", ["play", "export", "play_manipulator", "play_probe"])
def test_python_api_refuses_untrusted_imports_naming_file_key_and_opt_in(report, name):
    entry = report[name]
    assert not entry["ok"] and entry["type"] == "UntrustedConfigError", entry
    run = {"play": "evil", "export": "evil", "play_manipulator": "manip", "play_probe": "probe"}[name]
    config_json = os.path.join(os.path.dirname(report["_args"][run]), "config.json")
    key = "runner.ckpt_manipulator" if name == "play_manipulator" else "policy.class_name"
    value = {"play_manipulator": "'builtins:print'", "play_probe": "'trust_probe_e2e:ProbeActorCritic'"}
    for fragment in (config_json, key, value.get(name, "'this:Zen'"), "--trust-config", "trust_config=True"):
        assert fragment in entry["message"], (fragment, entry["message"])


@pytest.mark.parametrize("name", ["cli_play", "cli_export", "cli_export_manipulator", "cli_play_probe"])
def test_cli_refuses_untrusted_imports_with_a_one_line_error(report, name):
    entry = report[name]
    assert entry["value"] == 2, entry
    lines = entry["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("st-rl: error: "), entry["stderr"]
    assert "--trust-config" in lines[0] and "config.json" in lines[0]


def test_nothing_was_imported_or_called_before_the_opt_in(report):
    refused = [
        "clean_play",
        "play",
        "export",
        "cli_play",
        "cli_export",
        "play_manipulator",
        "cli_export_manipulator",
        "play_probe",
        "cli_play_probe",
    ]
    for name in refused:
        entry = report[name]
        assert not entry["this_imported"] and entry["print_calls"] == 0, (name, entry)
        assert not entry["probe_imported"] and not entry["probe_called"], (name, entry)
    trusted = report["probe_play_trusted"]
    assert trusted["probe_imported"] and trusted["probe_called"], trusted
    assert report["_stdout"].count("Beautiful is better than ugly") == 1  # the opt-in's 'import this'
    assert report["play_manipulator_trusted"]["this_imported"] is False


def test_the_opt_in_imports_and_calls_what_the_config_names(report):
    for name in ("probe_play_trusted", "probe_cli_play_trusted", "probe_cli_export_trusted"):
        entry = report[name]
        assert entry["value"] in (0, 1) and entry.get("ok", True), (
            entry
        )  # play returns iteration 1, the CLI 0
    assert report["probe_play_trusted"]["value"] == 1
    assert report["probe_cli_play_trusted"]["value"] == report["probe_cli_export_trusted"]["value"] == 0
    exported = json.loads((Path(report["_args"]["out"]) / "p" / "policy.json").read_text())
    assert exported["policy_class"] == "ProbeActorCritic"
    # builtins:print was called with the checkpoint (then loading failed: print returns None).
    manip = report["play_manipulator_trusted"]
    assert manip["print_calls"] == 1 and not manip["this_imported"], manip
    # 'this' was imported; 'this:Zen' is no class, so the config is then invalid for an ordinary reason.
    evil = report["play_trusted"]
    assert evil["this_imported"] and not evil["ok"] and evil["type"] != "UntrustedConfigError", evil
    assert "Cannot import policy class 'this:Zen'" in evil["message"]


# ---------------------------------------------------------------------------------------------- in process
def test_resolve_class_inside_an_untrusted_config(tmp_path):
    import st_rl.algorithms as algorithms
    import st_rl.modules as modules
    from st_rl.algorithms import PPO
    from st_rl.modules import ActorCritic

    probe = write_probe(tmp_path, "trust_probe_resolve")
    sys.path.insert(0, str(tmp_path))
    try:
        assert imports_allowed()
        with untrusted_config("/runs/a/config.json"):
            assert not imports_allowed()
            assert resolve_class("ActorCritic", modules, "policy") is ActorCritic  # short names resolve
            assert resolve_class("PPO", algorithms, "algorithm") is PPO
            for name in ("trust_probe_resolve:ProbeActorCritic", "trust_probe_resolve.ProbeActorCritic"):
                with pytest.raises(UntrustedConfigError) as info:
                    resolve_class(name, modules, "policy")
                message = str(info.value)
                assert "/runs/a/config.json" in message and "policy.class_name" in message
                assert TRUST_OPT_IN in message and "ActorCritic" in message  # the registered names
            with pytest.raises(UntrustedConfigError, match="runner_class_name"):
                import st_rl.runners as runners

                resolve_class("os:PathLike", runners, "runner")
            with untrusted_config("/elsewhere", trusted=True):  # an opt-in inside does not lift the outer one
                assert not imports_allowed()
        assert imports_allowed() and not probe.with_suffix(".imported").exists()
        # Explicit keyword, without a context.
        with pytest.raises(UntrustedConfigError, match="not allowed here"):
            resolve_class("trust_probe_resolve:ProbeActorCritic", modules, "policy", allow_import=False)
        assert not probe.with_suffix(".imported").exists()
        # Trusted (the default): the user's own config imports their class.
        cls = resolve_class("trust_probe_resolve:ProbeActorCritic", modules, "policy")
        assert cls.__name__ == "ProbeActorCritic" and probe.with_suffix(".imported").exists()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("trust_probe_resolve", None)


def test_manipulators_and_mirror_functions_inside_an_untrusted_config(tmp_path):
    from st_rl.algorithms.extensions.symmetry import Symmetry
    from st_rl.utils.ckpt_manipulator import get_manipulator, replace_encoder0

    probe = write_probe(tmp_path, "trust_probe_manip")
    sys.path.insert(0, str(tmp_path))
    try:
        with untrusted_config("ckpt.pt (its stored 'config')"):
            assert get_manipulator("replace_encoder0") is replace_encoder0
            with pytest.raises(UntrustedConfigError, match=r"runner\.ckpt_manipulator = 'builtins:print'"):
                get_manipulator("builtins:print")
            with pytest.raises(UntrustedConfigError, match=r"symmetry_cfg\.mirror_obs"):
                Symmetry(
                    mirror_obs="trust_probe_manip:passthrough", mirror_actions="trust_probe_manip:passthrough"
                )
        assert not probe.with_suffix(".imported").exists()
        assert get_manipulator("trust_probe_manip:passthrough").__name__ == "passthrough"  # trusted
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("trust_probe_manip", None)


def test_load_run_names_the_checkpoint_when_its_stored_config_is_used(run_dir, tmp_path):
    from st_rl.evaluation.runs import load_run

    state = torch.load(run_dir / "model_1.pt", weights_only=True)
    state["config"]["policy"]["class_name"] = "trust_probe_absent:Policy"
    state["config"]["runner"]["policy_class_name"] = "trust_probe_absent:Policy"
    path = tmp_path / "model_1.pt"  # no config.json beside it
    torch.save(state, path)
    with pytest.raises(
        UntrustedConfigError, match=r"model_1\.pt \(its stored 'config'\) sets policy\.class_name"
    ):
        load_run(str(path), num_envs=2)
    with pytest.raises(ValueError, match="Cannot import policy class 'trust_probe_absent:Policy'"):
        load_run(str(path), num_envs=2, trust_config=True)


def test_gymnasium_task_with_a_module_is_refused(run_dir, tmp_path):
    from st_rl.evaluation.runs import load_run

    path = tampered_run(run_dir, tmp_path / "gym")
    cfg = json.loads((path.parent / "config.json").read_text())
    cfg["runner"]["task"] = "gym:trust_probe_gym:Env-v0"  # Gymnasium would import trust_probe_gym
    (path.parent / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UntrustedConfigError, match="runner.task = 'gym:trust_probe_gym:Env-v0'"):
        load_run(str(path), num_envs=2)


def test_mutex_sub_policy_config_resolves_registered_classes_only(run_dir, tmp_path):
    from st_rl.modules.actor_critic_mutex import load_sub_policy

    probe = write_probe(tmp_path / "code", "trust_probe_mutex")
    tampered_run(run_dir, tmp_path / "skill", "trust_probe_mutex:ProbeActorCritic")
    sys.path.insert(0, str(probe.parent))
    try:
        with pytest.raises(UntrustedConfigError, match="sub_policy_class_name"):
            load_sub_policy(str(tmp_path / "skill"), 6, 8, 2)
        assert not probe.with_suffix(".imported").exists()
        # The caller names the class: its own config is trusted.
        snap = load_sub_policy(
            str(tmp_path / "skill"), 6, 8, 2, class_name="trust_probe_mutex:ProbeActorCritic"
        )
        assert type(snap.policy).__name__ == "ProbeActorCritic"
        assert type(load_sub_policy(str(run_dir), 6, 8, 2).policy).__name__ == "ActorCritic"
    finally:
        sys.path.remove(str(probe.parent))
        sys.modules.pop("trust_probe_mutex", None)


def test_dagger_student_config_needs_the_opt_in(run_dir, tmp_path):
    from st_rl.runners.dagger_saver import DaggerSaver

    probe = write_probe(tmp_path / "code", "trust_probe_dagger")
    tampered_run(run_dir, tmp_path / "student", "trust_probe_dagger:ProbeActorCritic")
    sys.path.insert(0, str(probe.parent))
    try:
        env = make_env("velocity_tracking", num_envs=4, seed=0)

        def saver(trust: bool) -> DaggerSaver:
            return DaggerSaver(
                env,
                lambda obs: torch.zeros(obs.shape[0], 2),
                str(tmp_path / f"data_{trust}"),
                training_policy_logdir=str(tmp_path / "student"),
                trust_config=trust,
            )

        with pytest.raises(UntrustedConfigError, match="trust_config=True to DaggerSaver"):
            saver(False).build_training_policy()
        assert not probe.with_suffix(".imported").exists()
        trusted = saver(True)
        trusted.build_training_policy()
        assert type(trusted.training_policy).__name__ == "ProbeActorCritic"
    finally:
        sys.path.remove(str(probe.parent))
        sys.modules.pop("trust_probe_dagger", None)


def test_teacher_class_from_its_checkpoint_resolves_registered_classes_only(run_dir, tmp_path):
    from st_rl.algorithms.extensions.distillation import build_teacher
    from st_rl.modules import ActorCritic

    state = torch.load(run_dir / "model_1.pt", weights_only=True)
    state["config"]["policy"]["class_name"] = "trust_probe_teacher:Policy"
    teacher_path = tmp_path / "teacher.pt"
    torch.save(state, teacher_path)
    student = ActorCritic(6, 8, 2, actor_hidden_dims=[8], critic_hidden_dims=[8])
    args = (student, False, None, torch.device("cpu"))
    with pytest.raises(
        UntrustedConfigError, match=r"teacher\.pt \(its stored 'config'\) sets policy\.class_name"
    ):
        build_teacher({"teacher_ac_path": str(teacher_path)}, "ActorCritic", *args)
    # Naming the class in one's own config overrides the checkpoint's.
    teacher = build_teacher(
        {"teacher_ac_path": str(teacher_path), "class_name": "ActorCritic"}, "ActorCritic", *args
    )
    assert type(teacher) is ActorCritic


@pytest.mark.filterwarnings("ignore::UserWarning")  # another task than the file's; a 0.1 s run
def test_exported_policy_metadata_naming_a_gymnasium_module_is_refused(run_dir, tmp_path):
    from st_rl.export import export_policy
    from st_rl.play import play_exported

    result = export_policy(str(run_dir / "model_1.pt"), str(tmp_path), formats=["torchscript"], check=False)
    sidecar = Path(result.metadata_path)
    meta = json.loads(sidecar.read_text())
    meta["task"] = "gym:trust_probe_meta:Env-v0"  # Gymnasium would import trust_probe_meta
    sidecar.write_text(json.dumps(meta))
    policy = result.files["torchscript"]
    with pytest.raises(
        UntrustedConfigError, match=r"policy\.pt \(its metadata\) sets task = 'gym:trust_probe_meta"
    ):
        play_exported(policy, num_envs=2, duration_s=0.1, verbose=False)
    # The user naming the task decides: nothing from the file is imported.
    metrics = play_exported(policy, task="velocity_tracking", num_envs=2, duration_s=0.1, verbose=False)
    assert metrics["task"] == "velocity_tracking"


def test_record_motion_refuses_the_checkpoints_config_without_the_opt_in(run_dir, tmp_path, capsys):
    from st_rl.cli import main

    probe = write_probe(tmp_path / "code", "trust_probe_record")
    state = torch.load(run_dir / "model_1.pt", weights_only=True)
    state["config"]["policy"]["class_name"] = "trust_probe_record:ProbeActorCritic"
    state["config"]["runner"]["policy_class_name"] = "trust_probe_record:ProbeActorCritic"
    path = tmp_path / "model_1.pt"
    torch.save(state, path)
    sys.path.insert(0, str(probe.parent))
    try:
        args = ["record-motion", "--out", str(tmp_path / "m.pkl"), "--checkpoint", str(path)]
        assert main([*args, "--num-trajectories", "1", "--duration", "0.1"]) == 2
        err = capsys.readouterr().err
        assert "its stored 'config') sets policy.class_name" in err and "--trust-config" in err, err
        assert not probe.with_suffix(".imported").exists()
    finally:
        sys.path.remove(str(probe.parent))
        sys.modules.pop("trust_probe_record", None)
