"""The ``st-rl`` commands (run by :mod:`st_rl.cli`) and their parser, built from one table of options."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import inspect
import json
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, get_args

import torch
import yaml

from st_rl import tune
from st_rl.config import MISSING, ConfigError, Problem, apply_overrides, load_config_file
from st_rl.config.defaults import RUNNER_DEFAULTS
from st_rl.config.presets import AMP_STYLE_REWARD_COEF, DEFAULT_TASK, PRESETS, amp_train_config, get_preset
from st_rl.config.resolve import resolve_train_cfg
from st_rl.config.rules import RUNNER_RULES
from st_rl.config.schema import RUNNER_FIELDS
from st_rl.datasets import MotionLoader
from st_rl.evaluation.rendering import set_default_gl_backend
from st_rl.evaluation.runs import load_run, run_task
from st_rl.export import ExportError, export_policy
from st_rl.modules.checkpoint_compat import discriminator_state
from st_rl.play import play, play_exported
from st_rl.plotting import plot_training
from st_rl.runners import build_runner
from st_rl.runners.run_dir import check_run_dir, previous_run_files
from st_rl.tasks import TASKS, make_env
from st_rl.tasks import motion_recorder as recorder
from st_rl.utils.checkpoint import CheckpointError, first_line, load_checkpoint
from st_rl.utils.distributed import init_distributed
from st_rl.utils.utils import get_checkpoint_path
from st_rl.utils.writers import attach_files_to_run

EXIT_ERROR = 2  # the exit code of a CommandError (st_rl.cli)


class CommandError(ValueError):
    """A mistake the user can fix, reported as one line: ``st-rl: error: <message>``."""


def _cli_error(option: str, value: Any, rule: str, fix: str) -> ConfigError:
    return ConfigError(Problem(option, value, rule, fix), source="command line")


def _check_device(text: str) -> str:
    """``text`` if this machine can compute on that device (under torchrun: any CUDA index), else a ConfigError."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise _cli_error("--device", text, "is not a device", "give cpu, cuda, cuda:N or mps") from None
    torchrun = device.type == "cuda" and int(os.environ.get("WORLD_SIZE", "1")) > 1  # a GPU per rank, later
    try:
        if torchrun and not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU found")
        if not torchrun:
            torch.empty(1, device=device).cpu()  # a meta tensor: "no data"
    except Exception as e:  # noqa: BLE001 - any backend failure means the device is unusable
        rule = f"cannot be used on this machine ({first_line(e).split('. ')[0] or type(e).__name__})"
        raise _cli_error("--device", text, rule, "use --device cpu") from None
    return text


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``st-rl: error: ...``, with exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"st-rl: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def _at_least(kind: type, low: float, strict: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: finite values of ``kind`` (int or float) >= ``low`` (> ``low`` when ``strict``)."""
    rule = f"{'an integer' if kind is int else 'a finite number'} {'>' if strict else '>='} {low:g}"

    def parse(text: str) -> Any:
        with contextlib.suppress(ValueError):
            value = kind(text)
            if math.isfinite(value) and (value > low if strict else value >= low):
                return value
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")

    return parse


def _path(text: str) -> str:
    """An argparse ``type``: an empty path (``--resume "$RUN"``, ``RUN`` unset) is an error, not the option left out."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (unset shell variable?): give a path or leave it out")
    return text


_COUNT, _SECONDS = _at_least(int, 1), _at_least(float, 0.0, strict=True)


def _o(help: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"help": help, **kw}


def _p(help: str | None = None, **kw: Any) -> dict[str, Any]:
    """An option that takes a path (:func:`_path`)."""
    return _o(help, type=_path, **kw)


def _runner_key(key: str, help: str | None = None) -> dict[str, Any]:
    tp, _, meaning = RUNNER_FIELDS[key]
    rule = RUNNER_RULES.get(key)
    integer = int in (tp, *get_args(tp))
    parse = _COUNT if rule is not None and rule.violated(0) else int if integer else str
    return _o(help or f"{meaning} (config key {key})", type=parse)


# Options several commands share: flag -> argparse keywords (a command's entry may change some of them).
COMMON: dict[str, dict[str, Any]] = {
    "--task": _o("task (default: the one the run was trained on)"),
    "--num-envs": _o("parallel environments (preset default)", type=_COUNT),
    "--iterations": _runner_key(
        "max_iterations", help="learning iterations (default: the config's max_iterations)"
    ),
    "--device": _o("device (default: cpu)", default="cpu"),
    "--seed": _runner_key("seed"),
    "--log-interval": _runner_key("log_interval"),
    "--threads": _o("CPU threads for torch (default: all cores)", type=_COUNT),
    "--trust-config": _o(
        "let the run's config import the code it names (docs/security.md)", action="store_true"
    ),
    "--checkpoint": _p("model_<it>.pt, or a run directory (latest checkpoint)"),
    "--debug": _o("show Python tracebacks of errors", action="store_true", default=argparse.SUPPRESS),
}
_COMMAND = {"type": float, "metavar": "V", "dest": "fixed_command"}
_GRID = "command grid: {}; a trajectory per combination of the --grid-* values"

# command -> (help, description, {flag: argparse keywords over COMMON's; group=True: one of a required group})
SPEC: dict[str, tuple[str, str | None, dict[str, dict[str, Any]]]] = {
    "train": (
        "train PPO on a built-in task or your own environment",
        "See docs/configuration.md.",
        {
            "--task": _o(f"built-in task (default: {DEFAULT_TASK})", default=DEFAULT_TASK),
            "--config": _p("training config (.yaml/.yml/.json) instead of the task's preset", metavar="FILE"),
            "--env": _p(
                "your env: FACTORY(num_envs=, device=, seed=) of MODULE or a .py file",
                metavar="MODULE:FACTORY",
            ),
            "--algorithm": _o("algorithm.class_name (e.g. PPO, or pkg.mod:Class)", metavar="NAME"),
            "--policy": _o("policy.class_name (e.g. ActorCriticRecurrent)", metavar="NAME"),
            "--print-config": _o("print the resolved training config as YAML and exit", action="store_true"),
            "overrides": _o(
                "config overrides, e.g. seed=3; ~KEY deletes a key",
                nargs="*",
                default=[],
                metavar="KEY=VALUE",
            ),
            "--num-envs": {},
            "--iterations": {},
            "--seed": {},
            "--threads": {},
            "--log-interval": {},
            "--device": _o("training device (default: cuda:0 if present, else cpu)", default=None),
            "--log-dir": _p("run directory (default: logs/<task>/<date_time>)"),
            "--resume": _p("checkpoint or run directory to continue from (with --motion: AMP added to PPO)"),
            "--overwrite": _o(
                "replace an earlier run in --log-dir (its files are deleted)", action="store_true"
            ),
            "--motion": _p("reference-motion file (st-rl record-motion): train AMP towards that gait"),
            "--style-reward-coef": _o(
                f"AMP style reward weight (default {AMP_STYLE_REWARD_COEF})", type=_at_least(float, 0.0)
            ),
            "--style-ramp": _o(
                "AMP style reward from 0 at iteration START to full at END",
                type=_at_least(int, 0),
                nargs=2,
                metavar=("START", "END"),
            ),
        },
    ),
    "tasks": ("list the built-in tasks", None, {}),
    "tune": (
        "hyperparameter search on a built-in task (Optuna: pip install st-rl[tune])",
        None,
        {
            "--task": _o(f"built-in task (default: {tune.DEFAULT_TASK})", default=tune.DEFAULT_TASK),
            "--trials": _o("trials to add in this call (default 20)", type=_COUNT, default=20),
            "--iterations": {"help": "learning iterations per trial (default: preset / 5)"},
            "--num-envs": {"help": "training envs per trial (preset default)"},
            "--study-name": _o("study name (default: the task name)"),
            "--storage": _p("Optuna storage URL (default: sqlite:///<log-root>/<study>.db)"),
            "--log-root": _p("trial logs in <log-root>/<study>/trial_<n>", default=tune.DEFAULT_LOG_ROOT),
            "--space": _p("search space: a JSON/YAML file or inline JSON (replaces the default)"),
            "--objective": _o(
                "episode return or tracking RMSD", choices=sorted(tune.OBJECTIVES), default="return"
            ),
            "--eval-envs": _o("evaluation environments (default 64)", type=_COUNT, default=64),
            "--eval-steps": _o("evaluation steps (default: one episode)", type=_COUNT),
            "--pruner": _o("(default median)", choices=("median", "none"), default="median"),
            "--seed": {},
            "--device": {},
            "--log-interval": {},
            "--threads": {},
            "--logger": _o("logger of every trial (default tensorboard)", default="tensorboard"),
            "--timeout": _o("stop starting trials after N seconds", type=_SECONDS),
            "--top": _o("rows of the summary table (default 5)", type=_at_least(int, 0), default=5),
            "--motion": _p(
                "reference-motion file: tune AMP towards it (and report each trial's gait distance)"
            ),
            "--summary": _o("print the summary of an existing study and exit", action="store_true"),
        },
    ),
    "play": (
        "evaluate a checkpoint: tracking metrics, video and plot",
        "Rendering uses MUJOCO_GL=egl unless set (MUJOCO_GL=osmesa: software rendering).",
        {
            "--checkpoint": {"group": True},
            "--policy": _p(
                "an exported policy.onnx / policy.pt (st-rl export): a deployment check", group=True
            ),
            "--task": {},
            "--device": {},
            "--threads": {},
            "--trust-config": {},
            "--num-envs": {"help": "parallel environments (default 16)", "default": 16},
            "--duration": _o("simulated seconds (default 20)", type=_SECONDS, default=20.0),
            "--video": _p("MP4 path (default: play_<iter>.mp4 next to the checkpoint)"),
            "--no-video": _o("do not render a video", action="store_true"),
            "--plot": _p("PNG path (default: play_<iter>.png next to the checkpoint)"),
            "--no-plot": _o("do not draw the tracking plot", action="store_true"),
            "--command": {**_COMMAND, "nargs": "+", "help": "fixed command VX VY YAW (VX VY for 2-D tasks)"},
            "--seed": {"help": "environment seed (default: the run's seed)"},
            "--video-quality": _o("fast: no shadows", choices=("fast", "medium", "high"), default="medium"),
            "--fps": _o("video frame rate (default 25)", type=_SECONDS, default=25.0),
            "--upload": _o(
                "attach video and plot to the run's W&B / Neptune run", action=argparse.BooleanOptionalAction
            ),
        },
    ),
    "plot": (
        "plot the training curves of a run (TensorBoard event files)",
        None,
        {
            "log_dir": _p("run directory"),
            "--out": _p("PNG path or folder (default: <log_dir>/training_curves.png)"),
        },
    ),
    "record-motion": (
        "record reference motion (AMP motion-file format)",
        None,
        {
            "--out": _p("motion file to write (.pkl)", required=True),
            "--checkpoint": {"help": "a trained quadruped checkpoint to record from", "group": True},
            "--scripted-trot": _o("record an open-loop trot gait", action="store_true", group=True),
            "--scripted-walk": _o(
                "open-loop trots, strides -0.4 to 0.4 rad", action="store_true", group=True
            ),
            "--task": {
                "help": "a legged task (default: the checkpoint's; quadruped_flat for the scripted gaits)"
            },
            "--duration": _o("seconds recorded per trajectory", type=_SECONDS, default=10.0),
            "--num-trajectories": _o(type=_COUNT, default=4),
            "--command": {**_COMMAND, "nargs": 3, "metavar": ("VX", "VY", "YAW")},
            "--grid-vx": _o(_GRID.format("forward speeds (m/s)"), type=float, nargs="+", metavar="V"),
            "--grid-vy": _o(_GRID.format("lateral speeds (m/s)"), type=float, nargs="+", metavar="V"),
            "--grid-yaw": _o(_GRID.format("turn rates (rad/s)"), type=float, nargs="+", metavar="V"),
            "--fields": _o("style fields: 'default', 'joints' or a comma-separated list", default="default"),
            "--seed": _o(type=int, default=0),
            "--trust-config": {},
        },
    ),
    "export": (
        "export a checkpoint's policy to ONNX / TorchScript (policy.onnx, policy.pt, policy.json)",
        None,
        {
            "--checkpoint": {"required": True},
            "--out": _p("output folder (default: <run dir>/exported)"),
            "--format": _o(
                nargs="+", choices=("onnx", "torchscript"), default=["onnx", "torchscript"], dest="formats"
            ),
            "--task": {},
            "--trust-config": {},
            "--no-check": _o("skip running the files against the eager policy", action="store_true"),
        },
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``st-rl`` parser, built from :data:`SPEC` and :data:`COMMON`."""
    parser = _Parser(prog="st-rl", description="st_rl: RL for legged robots.")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks of errors")
    sub = parser.add_subparsers(dest="command")
    for command, (help_text, description, options) in SPEC.items():
        cmd = sub.add_parser(command, help=help_text, description=description)
        group = None
        for flag, own in [*options.items(), ("--debug", {})]:
            kw = {**COMMON.get(flag, {}), **own}
            if kw.pop("group", False):
                group = group or cmd.add_mutually_exclusive_group(required=True)
                group.add_argument(flag, **kw)
            else:
                cmd.add_argument(flag, **kw)
    return parser


def _validate_train_args(args: argparse.Namespace) -> None:
    problems: list[Problem] = []
    ramp = args.style_ramp
    for flag, value in (("--style-ramp", ramp), ("--style-reward-coef", args.style_reward_coef)):
        if value is not None and not args.motion:
            problems.append(
                Problem(flag, value, "only applies to AMP training", "add --motion FILE or drop it")
            )
    if args.motion and ramp is not None and ramp[0] > ramp[1]:
        fix = f"e.g. --style-ramp {ramp[1]} {ramp[0]}"
        problems.append(Problem("--style-ramp", ramp, "needs 0 <= START <= END", fix))
    if args.env is not None and args.motion:
        rule, fix = "cannot be combined with --env", "give your env's AMP config with --config (docs/amp.md)"
        problems.append(Problem("--motion", args.motion, rule, fix))
    if problems:
        raise ConfigError(problems, source="command line")


def _env_name(spec: str) -> str:
    module = spec.rpartition(":")[0]
    if module.endswith(".py"):
        return os.path.splitext(os.path.basename(module))[0]
    return module.rpartition(".")[2] or "env"


# st-rl train flags that set a config key: option dest -> key
CONFIG_FLAGS = {
    "seed": "seed",
    "log_interval": "log_interval",
    "policy": "policy.class_name",
    "algorithm": "algorithm.class_name",
}


def _train_config(args: argparse.Namespace) -> tuple[dict[str, Any], Any, str | None, bool]:
    """``(config, preset or None, checkpoint to resume or None, whether AMP is added to that PPO checkpoint)``."""
    try:
        preset = get_preset(args.task)
    except ValueError:
        if args.config is None:
            raise
        preset = None
    if args.config is not None:
        cfg = load_config_file(args.config)
    else:
        assert preset is not None
        cfg = preset.train.to_dict()
        if args.env is not None:  # the preset's PPO settings, logged under the environment's name
            cfg["experiment_name"] = _env_name(args.env)
    if args.motion:
        missing = [key for key in ("policy", "algorithm") if not isinstance(cfg.get(key), dict)]
        if missing:
            rule = "--motion needs a policy and an algorithm section"
            problems = [Problem(key, cfg.get(key, MISSING), rule, "add it") for key in missing]
            raise ConfigError(problems, source=f"config file {args.config}")
        nested = isinstance(cfg.get("runner"), dict)
        coef = AMP_STYLE_REWARD_COEF if args.style_reward_coef is None else args.style_reward_coef
        cfg = amp_train_config(cfg, coef, style_reward_ramp=args.style_ramp)
        if nested:  # legged_gym form: the runner's own runner_class_name would win over the top-level one
            cfg["runner"]["runner_class_name"] = cfg.pop("runner_class_name")
    flags = [] if args.env is not None else [f"task={json.dumps(args.task)}"]
    flags += [
        f"{key}={json.dumps(getattr(args, dest))}"
        for dest, key in CONFIG_FLAGS.items()
        if getattr(args, dest) is not None
    ]
    cfg = apply_overrides(apply_overrides(cfg, flags), list(args.overrides))
    if args.env is not None:  # 'task' names a built-in task for st-rl play; a user's env is not one
        cfg.pop("task", None)
        if isinstance(cfg.get("runner"), dict):
            cfg["runner"].pop("task", None)
    resume_path = get_checkpoint_path(args.resume) if args.resume else None
    checkpoint = load_checkpoint(resume_path, map_location="cpu") if resume_path and args.motion else None
    add_amp = checkpoint is not None and discriminator_state(checkpoint) is None
    if add_amp:  # AMP on top of a PPO policy (docs/amp.md): a fresh discriminator and optimizer
        cfg = apply_overrides(cfg, ['ckpt_manipulator="add_amp_discriminator"'])
    return cfg, preset, resume_path, add_amp


class _ConfigDumper(yaml.SafeDumper):
    """Block-style mappings, lists of scalars on one line (``actor_hidden_dims: [128, 64]``)."""

    def represent_list(self, data: list[Any]) -> Any:
        flat = all(not isinstance(item, (dict, list)) for item in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)


_ConfigDumper.add_representer(list, _ConfigDumper.represent_list)


def _import_env_module(module_name: str, spec: str) -> Any:
    """Import ``--env``'s module: a module name (the current directory first on ``sys.path``) or a .py file (its
    folder first on ``sys.path``, so that its sibling modules import)."""
    file = os.path.abspath(module_name) if module_name.endswith(".py") else None
    if file is not None and not os.path.isfile(file):
        raise _cli_error("--env", spec, f"there is no file {file}", "check the path")
    folder = os.getcwd() if file is None else os.path.dirname(file)
    if folder not in sys.path and (file is not None or "" not in sys.path):
        sys.path.insert(0, folder)
    name = module_name if file is None else os.path.splitext(os.path.basename(file))[0]
    if file is not None and name in sys.modules and getattr(sys.modules[name], "__file__", None) != file:
        name = f"st_rl_user_env_{name}"
    try:
        if file is None:
            return importlib.import_module(name)
        loader_spec = importlib.util.spec_from_file_location(name, file)
        assert loader_spec is not None and loader_spec.loader is not None  # a .py file: a SourceFileLoader
        module = sys.modules[name] = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
        return module
    except BaseException as e:
        if file is not None:
            sys.modules.pop(name, None)
        missing = isinstance(e, ModuleNotFoundError) and e.name and f"{name}.".startswith(f"{e.name}.")
        if file is None and missing:
            rule = f"there is no module {name!r} in {folder} or the installed packages"
            fix = "run st-rl from its folder, install its package or give the file: --env FILE.py:FACTORY"
            raise _cli_error("--env", spec, rule, fix) from e
        if not isinstance(e, (Exception, SystemExit)):
            raise
        raise _user_code_error(spec, f"importing {file or repr(name)}", e) from e


def _user_code_error(spec: str, what: str, error: BaseException, where: str | None = None) -> CommandError:
    """The error for an exception of ``--env``'s code, at ``where`` (``file:line``; default: the innermost frame)."""
    if isinstance(error, SyntaxError):
        where = f"{error.filename} line {error.lineno}" if error.filename else "the module"
        return CommandError(f"--env {spec}: {what} failed: a syntax error in {where}: {error.msg}; fix it")
    frames = traceback.extract_tb(error.__traceback__)
    if where is None and frames:
        where = f"{frames[-1].filename}:{frames[-1].lineno}"
    at = f" at {where}" if where else ""
    message = first_line(error)
    raised = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if isinstance(error, SystemExit):  # the module ran a script's main (argparse, sys.exit)
        raised = f"SystemExit (sys.exit({error.code!r}))"
    return CommandError(f"--env {spec}: {what} raised {raised}{at}; fix your code there")


def _user_env_frame(error: BaseException, spec: str, env: Any) -> str | None:
    """``file:line`` of the innermost frame of ``error`` in ``--env``'s code (the factory's or the environment
    class's module), or None when the error is st_rl's or a library's."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    module_name = spec.rpartition(":")[0]
    candidates = [getattr(sys.modules.get(m), "__file__", None) for m in (module_name, type(env).__module__)]
    candidates.append(os.path.abspath(module_name) if module_name.endswith(".py") else None)
    files = {os.path.abspath(f) for f in candidates if f and not os.path.abspath(f).startswith(package)}
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if os.path.abspath(frame.filename) in files:
            return f"{frame.filename}:{frame.lineno}"
    return None


def _make_user_env(spec: str, num_envs: int | None, device: str, seed: int | None) -> Any:
    """Call ``--env MODULE:FACTORY`` with those of ``num_envs``, ``device`` and ``seed`` (when not None) it takes."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name.strip() or not attr.strip():
        fix = "e.g. --env my_robot.envs:make_env, or --env path/to/envs.py:make_env"
        raise _cli_error("--env", spec, "must be MODULE:FACTORY", fix)
    factory: Any = _import_env_module(module_name, spec)
    for part in attr.split("."):
        if not hasattr(factory, part):
            names = [n for n in dir(factory) if not n.startswith("_") and callable(getattr(factory, n, None))]
            raise _cli_error("--env", spec, f"{module_name!r} has no {attr!r}", f"use one of {names[:20]}")
        factory = getattr(factory, part)
    if not callable(factory):
        rule = f"{attr!r} is a {type(factory).__name__}, not callable"
        raise _cli_error("--env", spec, rule, "name a function or class")
    given = {"num_envs": num_envs, "device": device, "seed": seed}
    kwargs = {k: v for k, v in given.items() if v is not None}
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature (a C function): give what we have
        signature = None
    if signature is not None:
        params = signature.parameters
        named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs = {k: v for k, v in kwargs.items() if k in named}
        if num_envs is not None and "num_envs" not in kwargs:
            fix = "drop --num-envs, or give the factory a num_envs parameter"
            raise _cli_error("--num-envs", num_envs, f"{spec} takes no num_envs argument", fix)
        try:
            signature.bind(**kwargs)
        except TypeError as e:
            culprit = ("--env", spec, f"the factory has a parameter st-rl does not give ({e})")
            fix = "give it a default; st-rl passes num_envs, device and seed (those the factory takes)"
            if "'num_envs'" in str(e):
                culprit, fix = ("--num-envs", MISSING, f"{spec} needs num_envs"), "give --num-envs N"
            raise _cli_error(*culprit, fix) from None
    try:
        return factory(**kwargs)  # what it returns is checked when the runner is built (EnvAdapter)
    except (Exception, SystemExit) as e:
        raise _user_code_error(spec, "the factory", e) from e


def cmd_train(args: argparse.Namespace) -> int:
    """``st-rl train`` (docs/configuration.md): a default run directory is removed again if training fails early."""
    _validate_train_args(args)
    if args.device is not None and not args.print_config:
        _check_device(args.device)
    cfg, preset, resume_path, add_amp = _train_config(args)
    with warnings.catch_warnings():  # the config is validated before anything is built
        if not args.print_config:  # the runner reports unknown keys when it resolves the config again
            warnings.simplefilter("ignore")
        resolved = resolve_train_cfg(cfg).to_dict(full=args.print_config)
    if args.print_config:
        print(yaml.dump(resolved, Dumper=_ConfigDumper, sort_keys=False, default_flow_style=False), end="")
        return 0
    runner_cfg = resolved["runner"]
    iterations = args.iterations or runner_cfg.get("max_iterations")
    if iterations is None:
        fix = "give --iterations N, or max_iterations in the config"
        raise ConfigError(Problem("runner.max_iterations", MISSING, "the iterations are not set", fix))
    if args.threads:
        torch.set_num_threads(args.threads)
    timeout = runner_cfg.get("distributed_timeout_s") or RUNNER_DEFAULTS.distributed_timeout_s
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    info, device = init_distributed(device, timeout)
    experiment = runner_cfg.get("experiment_name") or (_env_name(args.env) if args.env else args.task)
    root = os.path.join("logs", experiment)
    if args.log_dir:
        log_dir = args.log_dir
    elif info.is_main:
        log_dir = _new_run_dir(root)
    else:  # rank 0 writes the run directory; the others never write into it
        log_dir = os.path.join(root, datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    try:
        overwrite_other = False
        if info.is_main:  # before the environment is built: refuse early, and write nothing
            overwrite_other = _check_resume_target(log_dir, resume_path, args.overwrite)
            resume = resume_path is not None and not overwrite_other
            check_run_dir(log_dir, resume=resume, overwrite=args.overwrite)
        seed = runner_cfg.get("seed")
        env = _train_env(args, preset, str(device), None if seed is None else seed + info.rank, info)
        runner, (velrmsd, cot) = _learn(
            args,
            env,
            cfg,
            runner_cfg,
            str(device),
            log_dir,
            info,
            iterations,
            (resume_path, add_amp, overwrite_other),
        )
    finally:
        if not args.log_dir and info.is_main:  # removed when empty: training failed before writing anything
            with contextlib.suppress(OSError):
                os.removedirs(log_dir)
    if info.is_main:
        summary = {"task": args.env or args.task, "iterations": runner.current_learning_iteration}
        summary.update(velrmsd=float(velrmsd), CoT=float(cot), log_dir=os.path.abspath(log_dir))
        print("[st-rl] done: " + json.dumps(summary))
    return 0


def _new_run_dir(root: str) -> str:
    """Make a new run directory ``root/<date_time>[_N]`` atomically."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    for n in range(1, 10_000):
        path = os.path.join(root, stamp if n == 1 else f"{stamp}_{n}")
        with contextlib.suppress(FileExistsError):
            os.makedirs(path)  # the last mkdir is atomic: exactly one process gets each name
            return path
    raise CommandError(f"{root} holds 10000 runs started at {stamp}; give --log-dir DIR")


def _check_resume_target(log_dir: str, resume_path: str | None, overwrite: bool) -> bool:
    """Check ``--resume CKPT --log-dir DIR``; returns whether DIR holds another run to replace (``--overwrite``)."""
    if resume_path is None:
        return False
    if os.path.realpath(os.path.dirname(os.path.abspath(resume_path))) == os.path.realpath(log_dir):
        if overwrite:
            fix = "give --resume to continue that run, or --overwrite (without --resume) to replace it"
            raise CommandError(f"--overwrite would delete --resume {resume_path} of {log_dir}: {fix}")
        return False
    names = previous_run_files(log_dir)
    if not names or overwrite:
        return bool(names)
    other = f"--log-dir {log_dir} holds another run than --resume {resume_path}'s"
    fix = f"continue that run with --resume {log_dir} --log-dir {log_dir}, or replace it with --overwrite"
    raise CommandError(f"{other}: train into a new --log-dir, {fix}")


def _train_env(args: argparse.Namespace, preset: Any, device: str, seed: int | None, info: Any) -> Any:
    if args.env is not None:
        return _make_user_env(args.env, args.num_envs, device, seed)
    num_envs = args.num_envs or (preset.num_envs if preset is not None else None)
    if num_envs is None:
        raise _cli_error("--num-envs", MISSING, f"task '{args.task}' has no preset", "give --num-envs N")
    env_kwargs = dict(preset.env_kwargs) if preset is not None else {}
    if not args.motion:
        return make_env(args.task, num_envs=num_envs, device=device, seed=seed, **env_kwargs)
    dt = make_env(args.task, num_envs=1, seed=0).dt
    loader = MotionLoader(args.motion, time_between_frames=dt, device=device)
    env_kwargs.update(amp_obs_frame_num=2, style_fields=loader.style_fields)
    if info.is_main:
        print(f"[st-rl] AMP towards {args.motion}: {len(loader.style_fields)} style fields, 2-frame windows")
    try:
        env = make_env(args.task, num_envs=num_envs, device=device, seed=seed, **env_kwargs)
    except ValueError as e:
        if "style fields" not in str(e):
            raise
        fix = f"record it on this task: st-rl record-motion --task {args.task}"
        raise CommandError(
            f"--motion {args.motion}: not task {args.task!r}'s fields: {first_line(e)}; {fix}"
        ) from e
    env.set_ref_motion_source(loader)
    return env


def _learn(
    args: Any,
    env: Any,
    cfg: dict,
    runner_cfg: dict,
    device: str,
    log_dir: str,
    info: Any,
    iterations: int,
    resume: tuple,
) -> tuple[Any, tuple]:
    """Build the runner, resume (``resume``: checkpoint, AMP added?, replacing log_dir's run?) and train."""
    resume_path, add_amp, overwrite_other = resume
    name, runner = runner_cfg.get("runner_class_name") or "OnPolicyRunner", None
    try:
        runner = build_runner(name, env, cfg, log_dir=log_dir, device=device)
        with runner:  # closes the writer and releases the run directory's lock, also on errors and interrupts
            runner.overwrite = runner.overwrite or args.overwrite
            if resume_path is not None:
                if info.is_main:
                    amp = f"adding AMP to the policy in {resume_path}: a fresh discriminator and optimizer"
                    print(f"[st-rl] {amp if add_amp else f'resuming from {resume_path}'}")
                runner.load(resume_path)
            if overwrite_other:  # not a resumed run of log_dir: learn() replaces the run there (--overwrite)
                runner._resumed = False
            if info.is_main:
                ranks = f" x {info.world_size} ranks" if info.enabled else ""
                what = f"{runner.env.num_envs} envs{ranks} on {runner.device} for {iterations} iterations"
                where = os.path.abspath(log_dir)
                print(f"[st-rl] training '{args.env or args.task}' with {what}; logs in {where}", flush=True)
            args.training_started = True  # a Ctrl-C from here on is the runner's (TrainingInterrupted)
            return runner, runner.learn(iterations, init_at_random_ep_len=True)
    except Exception as e:
        spec: str | None = args.env
        where = _user_env_frame(e, spec, env) if spec is not None else None
        if spec is not None and where is not None:
            raise _user_code_error(spec, "the environment", e, where) from e
        if spec is None or runner is not None or isinstance(e, ValueError):  # a config error: its message
            raise
        kind = type(env).__name__
        what = f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind}" if env is not None else "None"
        what = f"the class {env.__name__}" if inspect.isclass(env) else what
        why = f"which st_rl cannot train: {type(e).__name__}: {first_line(e)} (see docs/environments.md)"
        raise CommandError(f"--env {spec}: the factory returned {what}, {why}") from e
    finally:
        if info.enabled:
            torch.distributed.destroy_process_group()


def cmd_tasks() -> int:
    for name in sorted(PRESETS):
        p, mark = get_preset(name), " (default)" if name == DEFAULT_TASK else ""
        print(f"{name}{mark}: {p.description}; {p.num_envs} envs, {p.train.max_iterations} iterations")
    print("gym:<Gymnasium id> (e.g. gym:HalfCheetah-v5): a Gymnasium task with Box spaces (st-rl[gymnasium])")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    if not args.no_video:
        set_default_gl_backend("egl")  # MuJoCo reads MUJOCO_GL when it is imported
    if args.fixed_command is not None and len(args.fixed_command) not in (2, 3):
        raise CommandError(f"--command takes VX VY YAW (or VX VY), not {len(args.fixed_command)} values")
    _check_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.policy:  # policy_play.mp4 next to policy.onnx; play_<iteration>.mp4 next to model_<iteration>.pt
        path, stem = args.policy, os.path.splitext(os.path.abspath(args.policy))[0] + "_play"
    else:
        path = get_checkpoint_path(args.checkpoint)
        it = load_checkpoint(path, map_location="cpu").get("iter")
        tag = str(it) if it is not None else os.path.basename(os.path.splitext(path)[0]).replace("model_", "")
        stem = os.path.join(os.path.dirname(os.path.abspath(path)), f"play_{tag}")
    video = None if args.no_video else (args.video or f"{stem}.mp4")
    plot = None if args.no_plot else (args.plot or f"{stem}.png")
    same = ("task", "num_envs", "seed", "video_quality", "trust_config")
    kwargs = {"duration_s": args.duration, "command": args.fixed_command, "video_fps": args.fps}
    kwargs.update(video=video, plot=plot, **{name: getattr(args, name) for name in same})
    if args.policy:
        metrics = play_exported(path, **kwargs)
    else:
        with _fitting_task(path, args.task, args.trust_config):
            metrics = play(path, device=args.device, **kwargs)
        if args.upload is not False:
            backend = attach_files_to_run(os.path.dirname(path), [video, plot], required=bool(args.upload))
            if backend:
                print(f"[st-rl] attached the video and plot to the run's {backend} run")
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    print("[st-rl] done: " + json.dumps(scalars))
    return 0


@contextlib.contextmanager
def _fitting_task(path: str, task: str | None, trust: bool, tasks: list[str] | None = None) -> Iterator[None]:
    """Report a checkpoint that does not fit ``task`` (--task) as a run of another task, if it is one
    (``tasks``: those the command can use, default any)."""
    try:
        yield
    except (ExportError, CheckpointError) as e:
        trained_on = None
        with contextlib.suppress(Exception):  # else the original error is reported
            trained_on = run_task(path, trust_config=trust)[1] if task is not None else None
        if trained_on in (None, task):
            raise
        own = f"drop --task to use {trained_on!r}, or " if tasks is None or trained_on in tasks else ""
        raise CommandError(
            f"--checkpoint {path} is a run of task {trained_on!r}, and its policy does not fit task {task!r} "
            f"(--task): {own}give a checkpoint of a {task!r} run"
        ) from e


def cmd_export(args: argparse.Namespace) -> int:
    path = get_checkpoint_path(args.checkpoint)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(path)), "exported")
    with _fitting_task(path, args.task, args.trust_config):
        kwargs = {"task": args.task, "check": not args.no_check, "trust_config": args.trust_config}
        result = export_policy(path, out, args.formats, **kwargs)
    meta = result.metadata
    names = " -> ".join(" ".join(s["name"] for s in meta[key]) for key in ("inputs", "outputs"))
    for fmt, file in result.files.items():
        err = result.max_abs_error.get(fmt, float("nan"))
        print(f"[st-rl] wrote {fmt}: {os.path.abspath(file)} (max |action - eager| {err:.2g})")
    print(f"[st-rl] wrote metadata: {os.path.abspath(result.metadata_path)}")
    sizes = f"{meta['num_obs']} observations, {meta['num_actions']} actions"
    print(f"[st-rl] {meta['policy_class']} from {path} (iteration {meta['iteration']}): {names}; {sizes}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    print(f"[st-rl] training curves: {os.path.abspath(plot_training(args.log_dir, args.out))}")
    return 0


def cmd_record_motion(args: argparse.Namespace) -> int:
    n, command = args.num_trajectories, args.fixed_command  # n >= 1: checked by the parser
    grid = (args.grid_vx, args.grid_vy, args.grid_yaw)
    if any(g is not None for g in grid):
        if command is not None:
            raise ValueError("give either --command or --grid-vx/--grid-vy/--grid-yaw, not both")
        command = recorder.command_grid(*(g or (0.0,) for g in grid))
        n = command.shape[0]
    fixed: dict[str, Any] = {"resampling_time_s": 1e9} if command is not None else {}
    if args.scripted_trot or args.scripted_walk:
        env = _recording_env(args.task or "quadruped_flat", n, args.seed, None, noise_level=0.0, **fixed)
        stride = torch.linspace(-0.4, 0.4, n) if args.scripted_walk and n > 1 else 0.0
        policy = recorder.scripted_trot_policy(env, stride=stride)
    else:
        env, policy = _recorded_policy(args, n, fixed)
    fields = [f.strip() for f in args.fields.split(",") if f.strip()]
    if args.fields in ("joints", "default"):
        fields = recorder.joint_style_fields(env) if args.fields == "joints" else None
    motion = recorder.record_motion(env, policy, args.duration, fields, range(n), command=command)
    if not motion:
        raise CommandError("every trajectory fell before recording: give a walking policy or --scripted-trot")
    recorder.save_motion_file(motion, args.out)
    frames = sum(len(t["Frames"]) for t in motion.values())
    n_fields = len(next(iter(motion.values()))["Fields"])
    print(f"[st-rl] wrote {len(motion)} trajectories ({frames} frames of {n_fields} fields) to {args.out}")
    return 0


def _legged_tasks() -> list[str]:
    return sorted(name for name in TASKS if name.startswith("quadruped"))


def _recording_env(task: str, n: int, seed: int, run: tuple[str, str | None] | None, **cfg: Any) -> Any:
    """``task`` without pushes (``run``: the checkpoint and its run's task, for the error of a task not legged)."""
    try:
        return make_env(task, num_envs=n, seed=seed, max_push_vel_xy=0.0, **cfg)
    except TypeError as e:
        if "unknown config option" not in str(e):
            raise
        legged = ", ".join(_legged_tasks())
        if run is not None and run[1] == task:
            culprit, fix = f"--checkpoint {run[0]} is a run of task {task!r}", f"give a run of {legged}"
        else:
            culprit, fix = f"--task {task}", f"give --task one of {legged}"
        raise CommandError(f"{culprit}: record-motion records legged robots: {fix}") from None


def _recorded_policy(args: argparse.Namespace, n: int, fixed: dict[str, Any]) -> tuple[Any, Any]:
    """The recording environment and ``--checkpoint``'s policy, on ``--task`` or else the run's task."""
    path, trained_on = run_task(args.checkpoint, trust_config=args.trust_config)
    task = args.task or trained_on or "quadruped_flat"
    env = _recording_env(task, n, args.seed, (path, trained_on), **fixed)
    with _fitting_task(path, task, args.trust_config, _legged_tasks()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="using task")  # said below, once the policy is known to fit
        runner = load_run(path, task=task, env=env, trust_config=args.trust_config).runner
    if trained_on not in (None, task):
        print(f"[st-rl] recording on task {task!r}; the run was trained on {trained_on!r}", file=sys.stderr)
    return env, runner.get_inference_policy()


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "train": cmd_train,
    "tasks": lambda args: cmd_tasks(),
    "play": cmd_play,
    "plot": cmd_plot,
    "record-motion": cmd_record_motion,
    "export": cmd_export,
    "tune": tune.main,
}
