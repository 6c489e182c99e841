"""Command line: ``st-rl train`` trains a built-in task or your environment (``--env``) with the task's preset,
a config file (``--config``) and ``KEY=VALUE`` overrides; ``st-rl tasks`` lists the tasks; ``st-rl play``
evaluates a checkpoint (metrics, video, plot; rendering uses ``MUJOCO_GL=egl`` unless set); ``st-rl plot``
draws a run's training curves. Errors print one line, ``st-rl: error: ...`` (exit code 2; 130 for a Ctrl-C
before training started); ``--debug`` shows the traceback.

This module imports only the standard library when it is imported (torch and st_rl's packages inside
:func:`main`), so that a Ctrl-C while Python starts up is reported like any other interrupt."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import inspect
import json
import math
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

EXIT_ERROR = 2
"""Exit code of an error the user can fix (a bad option, config, file, device, environment factory ...)."""
EXIT_UNEXPECTED = 1
"""Exit code of an unexpected error (a bug in st_rl or in code it runs); ``--debug`` shows its traceback."""


class CommandError(ValueError):
    """A mistake the user can fix, reported by :func:`main` as one line, ``st-rl: error: <message>``."""


def _default_device() -> str:
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _check_device(text: str, option: str = "--device") -> str:
    """``text`` if it names a device this machine can compute on, else a :class:`ConfigError` naming ``option``.

    Under ``torchrun`` a CUDA device's index is replaced by the rank's own (only CUDA's presence is checked).
    """
    import torch

    from st_rl.config import ConfigError, Problem

    def error(rule: str, fix: str) -> ConfigError:
        return ConfigError(Problem(option, text, rule, fix), source="command line")

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise error("is not a device", "give cpu, cuda, cuda:N (an NVIDIA GPU) or mps (Apple)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = (
                "this PyTorch is built without CUDA"
                if torch.version.cuda is None
                else "PyTorch finds no CUDA GPU on this machine (driver, CUDA_VISIBLE_DEVICES?)"
            )
            raise error(
                f"CUDA is not available: {why}", "use --device cpu, or install a CUDA build of PyTorch"
            )
        count = torch.cuda.device_count()
        distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        if device.index is not None and device.index >= count and not distributed:
            raise error(
                f"there {'is' if count == 1 else 'are'} {count} CUDA GPU(s)",
                f"use cuda:0 .. cuda:{count - 1}",
            )
    elif device.type == "meta":
        raise error("holds no data: nothing can be computed there", "use --device cpu or cuda")
    elif device.type != "cpu":
        try:
            torch.empty(1, device=device)
        except Exception as e:  # noqa: BLE001 - any backend failure means the device is unusable
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise error(f"cannot be used on this machine ({first})", "use --device cpu") from None
    return text


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``st-rl: error: ...``, with exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"st-rl: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def _number_at_least(kind: type, low: float, strict: bool = False) -> Callable[[str], Any]:
    """An argparse ``type`` accepting finite values of ``kind`` (int or float) >= ``low`` (> ``low`` when
    ``strict``)."""
    noun = "an integer" if kind is int else "a finite number"
    relation = ">" if strict else ">="

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {noun} {relation} {low:g}, got {text!r}")
        return value

    parse.__name__ = f"{'integer' if kind is int else 'number'} {relation} {low:g}"
    return parse


def _positive_float(text: str) -> float:
    """An argparse ``type`` accepting finite numbers > 0 (durations, rates)."""
    return _number_at_least(float, 0.0, strict=True)(text)


_positive_float.__name__ = "number > 0"


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``low``."""
    return _number_at_least(int, low)


def _finite_float_at_least(low: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting finite numbers >= ``low``."""
    return _number_at_least(float, low)


_TRUST_CONFIG_HELP = (
    "let the run's config.json / the checkpoint's config import the code it names (package.module:Class "
    "class names, checkpoint manipulators); only for runs you trust (docs/security.md)"
)


def _build_parser() -> argparse.ArgumentParser:
    from st_rl.configs import AMP_STYLE_REWARD_COEF, DEFAULT_TASK

    parser = _Parser(
        prog="st-rl",
        description="st_rl: RL for legged robots.",
        epilog="Errors are one line; --debug (before or after the command) shows the Python traceback.",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks of errors")
    sub = parser.add_subparsers(dest="command")
    train = sub.add_parser(
        "train",
        help="train PPO on a built-in task or your own environment",
        description="Train a built-in task (--task) or your environment (--env), with the task's preset "
        "config or a config file (--config), changed by KEY=VALUE overrides (docs/configuration.md, "
        "'Command line').",
    )
    train.add_argument("--task", default=DEFAULT_TASK, help=f"built-in task (default: {DEFAULT_TASK})")
    train.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="training config (.yaml/.yml/.json, st_gym flat or legged_gym nested form) replacing the task's "
        "preset config; the environment stays --task unless --env is given",
    )
    train.add_argument(
        "--env",
        default=None,
        metavar="MODULE:FACTORY",
        help="train your environment: FACTORY(num_envs=, device=, seed=) (the keywords it takes) from MODULE "
        "(importable from the current directory) or a .py file; without --config, the PPO settings of the "
        "--task preset are used",
    )
    train.add_argument(
        "--algorithm", default=None, metavar="NAME", help="algorithm.class_name (e.g. PPO, or pkg.mod:Class)"
    )
    train.add_argument(
        "--policy", default=None, metavar="NAME", help="policy.class_name (e.g. ActorCriticRecurrent)"
    )
    train.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved training config as YAML and exit without training",
    )
    train.add_argument(
        "overrides",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides applied last, e.g. algorithm.learning_rate=3e-4 "
        "policy.actor_hidden_dims=[128,128] runner.num_steps_per_env=48 seed=3; ~KEY deletes a key",
    )
    train.add_argument(
        "--num-envs", type=_int_at_least(1), default=None, help="parallel environments (preset default)"
    )
    train.add_argument(
        "--iterations",
        type=_int_at_least(1),
        default=None,
        help="learning iterations (default: max_iterations of the config)",
    )
    train.add_argument(
        "--device", default=None, help="training device (default: cuda:0 if present, else cpu)"
    )
    train.add_argument("--seed", type=int, default=None, help="random seed (preset default 42)")
    train.add_argument("--log-dir", default=None, help="run directory (default: logs/<task>/<date_time>)")
    train.add_argument(
        "--resume",
        default=None,
        help="checkpoint file or run directory to continue from (with --motion, a PPO checkpoint gets AMP "
        "added); continue a run in its own directory with --resume DIR --log-dir DIR",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run in --log-dir (its model_*.pt and TensorBoard files are deleted); "
        "without it, a directory holding checkpoints or a config.json is written to only with --resume",
    )
    train.add_argument(
        "--threads", type=_int_at_least(1), default=None, help="CPU threads for torch (default: all cores)"
    )
    train.add_argument(
        "--log-interval", type=_int_at_least(1), default=None, help="print/log every N iterations"
    )
    train.add_argument(
        "--motion",
        default=None,
        help="reference-motion file (st-rl record-motion): train with AMP (APPO) towards that gait, with "
        "st_rl.configs.amp_train_config's defaults (gradient penalty 2, initial learning rate 4e-4; change them "
        "with policy.amp_discriminator.discriminator_grad_pen=... / algorithm.learning_rate=...)",
    )
    train.add_argument(
        "--style-reward-coef",
        type=_finite_float_at_least(0.0),
        default=None,
        help=f"with --motion: AMP style reward weight per step (default {AMP_STYLE_REWARD_COEF})",
    )
    train.add_argument(
        "--style-ramp",
        type=_int_at_least(0),
        nargs=2,
        default=None,
        metavar=("START", "END"),
        help="with --motion: no style reward before iteration START, full weight from END (learn the task "
        "first); 0 <= START <= END",
    )
    sub.add_parser("tasks", help="list the built-in tasks")
    from st_rl.tune import add_arguments as add_tune_arguments

    add_tune_arguments(
        sub.add_parser(
            "tune", help="hyperparameter search on a built-in task (Optuna: pip install st-rl[tune])"
        )
    )
    play = sub.add_parser(
        "play",
        help="evaluate a checkpoint: tracking metrics, video and plot",
        description="Run a checkpoint's deterministic policy and report velocity-tracking metrics; write an MP4 "
        "of env 0 and a plot of its commanded vs achieved velocities. Rendering uses MUJOCO_GL=egl unless "
        "MUJOCO_GL is set (MUJOCO_GL=osmesa for software rendering: apt-get install libosmesa6).",
    )
    play_source = play.add_mutually_exclusive_group(required=True)
    play_source.add_argument("--checkpoint", help="model_<it>.pt, or a run directory (latest checkpoint)")
    play_source.add_argument(
        "--policy",
        help="an exported policy.onnx / policy.pt (st-rl export): deployment check without st_rl model classes",
    )
    play.add_argument("--task", default=None, help="task (default: the one the run was trained on)")
    play.add_argument(
        "--num-envs", type=_int_at_least(1), default=16, help="parallel environments (default 16)"
    )
    play.add_argument("--duration", type=_positive_float, default=20.0, help="simulated seconds (default 20)")
    play.add_argument(
        "--video", default=None, help="MP4 path (default: play_<iter>.mp4 next to the checkpoint)"
    )
    play.add_argument("--no-video", action="store_true", help="do not render a video")
    play.add_argument(
        "--plot", default=None, help="PNG path (default: play_<iter>.png next to the checkpoint)"
    )
    play.add_argument("--no-plot", action="store_true", help="do not draw the tracking plot")
    play.add_argument(
        "--command",
        type=float,
        nargs="+",
        metavar="V",
        dest="fixed_command",
        default=None,
        help="fixed command VX VY YAW for all envs (VX VY for 2-D tasks); default: the task's random commands",
    )
    play.add_argument("--device", default="cpu", help="policy device (default: cpu)")
    play.add_argument("--seed", type=int, default=None, help="environment seed (default: the run's seed)")
    play.add_argument(
        "--video-quality",
        choices=("fast", "medium", "high"),
        default="medium",
        help="fast: no shadows (cheap software GL); high: the model's own settings (default: medium)",
    )
    play.add_argument("--fps", type=_positive_float, default=25.0, help="video frame rate (default 25)")
    play.add_argument(
        "--threads", type=_int_at_least(1), default=None, help="CPU threads for torch (default: all cores)"
    )
    play.add_argument(
        "--upload",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="attach the video and plot to the run's W&B / Neptune run (default: when the run used one)",
    )
    play.add_argument("--trust-config", action="store_true", help=_TRUST_CONFIG_HELP)
    plot = sub.add_parser("plot", help="plot the training curves of a run (TensorBoard event files)")
    plot.add_argument("log_dir", help="run directory")
    plot.add_argument(
        "--out", default=None, help="PNG path or folder (default: <log_dir>/training_curves.png)"
    )
    rec = sub.add_parser("record-motion", help="record reference motion (AMP motion-file format)")
    rec.add_argument("--out", required=True, help="motion file to write (.pkl)")
    source = rec.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a trained quadruped checkpoint to record from")
    source.add_argument("--scripted-trot", action="store_true", help="record an open-loop trot gait")
    source.add_argument(
        "--scripted-walk",
        action="store_true",
        help="record open-loop trots that walk: strides spread over the trajectories from -0.4 to 0.4 rad "
        "(backward to forward, about -0.6 to 0.6 m/s)",
    )
    rec.add_argument(
        "--task",
        default=None,
        help="a legged task (default: the one the checkpoint's run was trained on; quadruped_flat for the "
        "scripted gaits)",
    )
    rec.add_argument("--duration", type=_positive_float, default=10.0, help="seconds recorded per trajectory")
    rec.add_argument("--num-trajectories", type=_int_at_least(1), default=4)
    rec.add_argument(
        "--command", dest="fixed_command", type=float, nargs=3, default=None, metavar=("VX", "VY", "YAW")
    )
    for axis, what in (
        ("vx", "forward speeds (m/s)"),
        ("vy", "lateral speeds (m/s)"),
        ("yaw", "turn rates (rad/s)"),
    ):
        rec.add_argument(
            f"--grid-{axis}",
            type=float,
            nargs="+",
            default=None,
            metavar="V",
            help=f"command grid: {what}; one trajectory per combination of the --grid-* values, each at its "
            "own fixed command (missing axes: 0)",
        )
    rec.add_argument(
        "--fields",
        default="default",
        help="style fields: 'default' (root height, base velocities, joints, feet), 'joints' (joint positions "
        "and velocities) or a comma-separated list",
    )
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--trust-config", action="store_true", help=_TRUST_CONFIG_HELP)
    export = sub.add_parser(
        "export",
        help="export a checkpoint's policy to ONNX / TorchScript with metadata (policy.onnx, policy.pt, policy.json)",
    )
    export.add_argument(
        "--checkpoint", required=True, help="model_<it>.pt, or a run directory (latest checkpoint)"
    )
    export.add_argument("--out", default=None, help="output folder (default: <run dir>/exported)")
    export.add_argument(
        "--format",
        nargs="+",
        choices=("onnx", "torchscript"),
        default=["onnx", "torchscript"],
        dest="formats",
    )
    export.add_argument("--task", default=None, help="task (default: the one the run was trained on)")
    export.add_argument(
        "--no-check", action="store_true", help="skip running the files against the eager policy"
    )
    export.add_argument("--trust-config", action="store_true", help=_TRUST_CONFIG_HELP)
    for subparser in sub.choices.values():  # --debug after the command too (SUPPRESS: keep an earlier one)
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show Python tracebacks of errors"
        )
    return parser


def cmd_tasks() -> int:
    from st_rl.configs import DEFAULT_TASK, PRESETS, get_preset

    for name in sorted(PRESETS):
        preset = get_preset(name)
        mark = " (default)" if name == DEFAULT_TASK else ""
        print(
            f"{name}{mark}: {preset.description}; {preset.num_envs} envs, {preset.train.max_iterations} iterations"
        )
    print("gym:<Gymnasium id> (e.g. gym:HalfCheetah-v5): a Gymnasium task with Box spaces (st-rl[gymnasium])")
    return 0


def _validate_train_args(args: argparse.Namespace) -> None:
    """Checks between ``st-rl train`` options (each option's own range is checked by its argparse type).

    Raises:
        ConfigError: naming every option that cannot be used as given, with the fix.
    """
    from st_rl.config import ConfigError, Problem

    problems: list[Problem] = []
    if args.style_ramp is not None:
        start, end = args.style_ramp
        if not args.motion:
            problems.append(
                Problem(
                    "--style-ramp",
                    [start, end],
                    "only applies to AMP training",
                    "add --motion FILE or drop it",
                )
            )
        elif start > end:
            problems.append(
                Problem(
                    "--style-ramp",
                    [start, end],
                    "needs 0 <= START <= END",
                    f"e.g. --style-ramp {end} {start}",
                )
            )
    if args.style_reward_coef is not None and not args.motion:
        problems.append(
            Problem(
                "--style-reward-coef",
                args.style_reward_coef,
                "only applies to AMP training",
                "add --motion FILE or drop it",
            )
        )
    if args.env is not None and args.motion:
        problems.append(
            Problem(
                "--motion",
                args.motion,
                "builds the built-in quadruped's AMP observations and cannot be combined with --env",
                "give your environment's AMP training config with --config (docs/amp.md)",
            )
        )
    if problems:
        raise ConfigError(problems, source="command line")


def _env_name(spec: str) -> str:
    """A short name for ``--env MODULE:FACTORY`` (the module's last part), used as the experiment name."""
    module = spec.rpartition(":")[0]
    if module.endswith(".py"):
        return os.path.splitext(os.path.basename(module))[0]
    return module.rpartition(".")[2] or "env"


def _train_config(args: argparse.Namespace) -> tuple[dict[str, Any], Any, str | None, bool]:
    """The training config of ``st-rl train``: the preset of ``--task`` (or ``--config``), then ``--motion``'s AMP
    form, then the dedicated options (``--seed``, ``--log-interval``, ``--policy``, ``--algorithm``), then the
    ``KEY=VALUE`` overrides.

    Returns:
        ``(config, preset or None, checkpoint to resume or None, whether AMP is added to a PPO checkpoint)``.
    """
    from st_rl.config import MISSING, ConfigError, Problem, apply_overrides, load_config_file
    from st_rl.configs import AMP_STYLE_REWARD_COEF, amp_train_config, get_preset
    from st_rl.utils.utils import get_checkpoint_path

    preset = None
    try:
        preset = get_preset(args.task)
    except ValueError:
        if args.config is None:
            raise
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
            raise ConfigError(
                [
                    Problem(
                        key,
                        cfg.get(key, MISSING),
                        "--motion needs a policy and an algorithm section",
                        "add it",
                    )
                    for key in missing
                ],
                source=f"config file {args.config}",
            )
        nested = isinstance(cfg.get("runner"), dict)
        coef = AMP_STYLE_REWARD_COEF if args.style_reward_coef is None else args.style_reward_coef
        cfg = amp_train_config(cfg, coef, style_reward_ramp=args.style_ramp)
        if nested:  # legged_gym form: the runner's own runner_class_name would win over the top-level one
            cfg["runner"]["runner_class_name"] = cfg.pop("runner_class_name")
    flags = [] if args.env is not None else [f"task={json.dumps(args.task)}"]
    if args.seed is not None:
        flags.append(f"seed={args.seed}")
    if args.log_interval is not None:
        flags.append(f"log_interval={args.log_interval}")
    if args.policy is not None:
        flags.append(f"policy.class_name={json.dumps(args.policy)}")
    if args.algorithm is not None:
        flags.append(f"algorithm.class_name={json.dumps(args.algorithm)}")
    cfg = apply_overrides(cfg, flags)
    cfg = apply_overrides(cfg, list(args.overrides))
    if args.env is not None:  # 'task' names a built-in task for st-rl play; a user's env is not one
        cfg.pop("task", None)
        if isinstance(cfg.get("runner"), dict):
            cfg["runner"].pop("task", None)
    resume_path = get_checkpoint_path(args.resume) if args.resume else None
    add_amp = resume_path is not None and bool(args.motion) and not _has_discriminator(resume_path)
    if add_amp:
        # AMP on top of a policy trained without it (docs/amp.md): policy, critic and normalisers from the
        # checkpoint, a fresh discriminator and optimizer.
        cfg = apply_overrides(cfg, ['ckpt_manipulator="add_amp_discriminator"'])
    return cfg, preset, resume_path, add_amp


def _learning_iterations(args: argparse.Namespace, runner_cfg: dict[str, Any]) -> int:
    """``--iterations``, else the config's ``max_iterations``, checked to be an integer >= 1."""
    from st_rl.config import MISSING, ConfigError, Problem

    if args.iterations is not None:
        return args.iterations
    value = runner_cfg.get("max_iterations", MISSING)
    if value is MISSING or value is None:
        raise ConfigError(
            Problem(
                "runner.max_iterations",
                MISSING,
                "the number of learning iterations is not set",
                "give --iterations N, or max_iterations in the config",
            )
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            Problem(
                "runner.max_iterations",
                value,
                "must be an integer >= 1",
                "set max_iterations to the number of learning iterations, or give --iterations N",
            )
        )
    return value


def _config_text(resolved: dict[str, Any]) -> str:
    """The resolved config as YAML (JSON, which is valid YAML, without PyYAML)."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a test dependency
        return json.dumps(resolved, indent=2)

    class Dumper(yaml.SafeDumper):
        """Block-style mappings, lists of scalars on one line (``actor_hidden_dims: [128, 64]``)."""

    def represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> Any:
        flat = all(not isinstance(item, (dict, list)) for item in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)

    Dumper.add_representer(list, represent_list)
    return yaml.dump(resolved, Dumper=Dumper, sort_keys=False, default_flow_style=False)


def _import_env_module(module_name: str, spec: str) -> Any:
    """Import the module of ``--env``: a module name (the current directory first on ``sys.path``) or a .py file."""
    from st_rl.config import ConfigError, Problem

    if module_name.endswith(".py"):
        file = os.path.abspath(module_name)
        if not os.path.isfile(file):
            raise ConfigError(
                Problem("--env", spec, f"there is no file {file}", "check the path"), "command line"
            )
        folder, name = os.path.dirname(file), os.path.splitext(os.path.basename(file))[0]
        if folder not in sys.path:  # its sibling modules import as they would from that folder
            sys.path.insert(0, folder)
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) != file:
            name = f"st_rl_user_env_{name}"
        loader_spec = importlib.util.spec_from_file_location(name, file)
        if loader_spec is None or loader_spec.loader is None:
            raise ConfigError(
                Problem("--env", spec, f"{file} cannot be imported", "give a Python source file"),
                "command line",
            )
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException as e:
            sys.modules.pop(name, None)
            if isinstance(e, (Exception, SystemExit)):
                raise _user_code_error(spec, f"importing {file}", e) from e
            raise
        return module
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise ConfigError(
                Problem(
                    "--env",
                    spec,
                    f"there is no module {module_name!r} in the current directory ({cwd}) or the installed packages",
                    "run st-rl from the folder that holds it, install its package, or give the file: "
                    "--env path/to/file.py:FACTORY",
                ),
                "command line",
            ) from e
        raise ImportError(f"--env {spec}: importing {module_name!r} failed: {e}") from e
    except (Exception, SystemExit) as e:  # a syntax error, an exception or sys.exit() while the module runs
        raise _user_code_error(spec, f"importing {module_name!r}", e) from e


def _user_code_error(spec: str, what: str, error: BaseException, where: str | None = None) -> CommandError:
    """The one-line error for an exception raised by the user's code of ``--env`` (importing it, calling the
    factory, or the environment while training): where it happened (``where``: ``file:line``; default: the
    innermost frame) and what was raised."""
    import traceback

    if isinstance(error, SyntaxError):
        where = f"{error.filename} line {error.lineno}" if error.filename else "the module"
        return CommandError(
            f"--env {spec}: {what} failed: a syntax error in {where}: {error.msg}; fix it (--debug shows the "
            "traceback)"
        )
    frames = traceback.extract_tb(error.__traceback__)
    if where is None and frames:
        where = f"{frames[-1].filename}:{frames[-1].lineno}"
    at = f" at {where}" if where else ""
    message = (str(error).strip().splitlines() or [""])[0]
    raised = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if isinstance(error, SystemExit):  # the module ran a script's main (argparse, sys.exit)
        raised = f"SystemExit (sys.exit({error.code!r}))"
    return CommandError(
        f"--env {spec}: {what} raised {raised}{at}; fix your code there (--debug shows the traceback)"
    )


def _user_env_frame(error: BaseException, spec: str, env: Any) -> str | None:
    """``file:line`` of the innermost frame of ``error``'s traceback in the user's code of ``--env`` (the module
    of the factory, the module of the environment's class), or None when the user's code is not on the way (the
    error is st_rl's, or a library's)."""
    import traceback

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    files = set()
    module_name = spec.rpartition(":")[0]
    candidates = [
        os.path.abspath(module_name) if module_name.endswith(".py") else None,
        getattr(sys.modules.get(module_name), "__file__", None),
        getattr(sys.modules.get(type(env).__module__), "__file__", None),
    ]
    for file in candidates:
        if file and not os.path.abspath(file).startswith(package):
            files.add(os.path.abspath(file))
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if os.path.abspath(frame.filename) in files:
            return f"{frame.filename}:{frame.lineno}"
    return None


def _checked_env(spec: str, env: Any) -> Any:
    """``env`` if it looks like a vectorised environment, else a :class:`ConfigError` naming ``--env``."""
    from st_rl.config import ConfigError, Problem

    api = "a vectorised environment with num_envs, num_actions, get_observations() and step(actions)"
    if env is None:
        rule, fix = "the factory returned None", f"make it return the environment ({api})"
    elif inspect.isclass(env):
        rule, fix = (
            f"the factory returned the class {env.__name__}, not an environment",
            f"return an instance, {env.__name__}(...)",
        )
    else:
        missing = [attr for attr in ("num_envs", "step", "get_observations") if not hasattr(env, attr)]
        if not missing:
            return env
        kind = type(env).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        rule = f"the factory returned {article} {kind}, which has no {', '.join(missing)}"
        fix = f"return {api} (docs/environments.md)"
    raise ConfigError(Problem("--env", spec, rule, fix), source="command line")


def _call_factory(spec: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call the ``--env`` factory; its exceptions and a result that is no environment are one-line errors."""
    try:
        env = factory(**kwargs)
    except (Exception, SystemExit) as e:
        raise _user_code_error(spec, "the factory", e) from e
    return _checked_env(spec, env)


def _make_user_env(spec: str, num_envs: int | None, device: str, seed: int | None) -> Any:
    """Build the environment of ``--env MODULE:FACTORY``.

    ``FACTORY`` (a function or a class) is called with those of ``num_envs``, ``device`` and ``seed`` that its
    signature takes (``num_envs`` only when ``--num-envs`` is given, ``seed`` only when the config has one).

    Raises:
        ConfigError: a malformed spec, a missing module or factory, a factory that is not callable or needs
            arguments st-rl cannot give, or ``--num-envs`` for a factory without ``num_envs``.
    """
    from st_rl.config import MISSING, ConfigError, Problem

    def error(path: str, value: Any, rule: str, fix: str) -> ConfigError:
        return ConfigError(Problem(path, value, rule, fix), source="command line")

    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise error(
            "--env",
            spec,
            "must be MODULE:FACTORY",
            "e.g. --env my_robot.envs:make_env, or --env path/to/envs.py:make_env",
        )
    factory: Any = _import_env_module(module_name, spec)
    for part in attr.split("."):
        if not hasattr(factory, part):
            names = [n for n in dir(factory) if not n.startswith("_") and callable(getattr(factory, n, None))]
            raise error("--env", spec, f"{module_name!r} has no {attr!r}", f"use one of {names[:20]}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise error(
            "--env", spec, f"{attr!r} is a {type(factory).__name__}, not callable", "name a function or class"
        )
    given = {"num_envs": num_envs, "device": device, "seed": seed}
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature (a C function): give what we have
        return _call_factory(spec, factory, {k: v for k, v in given.items() if v is not None})
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = {
        n
        for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    kwargs = {k: v for k, v in given.items() if v is not None and (takes_any or k in named)}
    if num_envs is not None and "num_envs" not in kwargs:
        raise error(
            "--num-envs",
            num_envs,
            f"{spec} takes no num_envs argument",
            "drop --num-envs, or give the factory a num_envs parameter",
        )
    required = [
        n
        for n, p in params.items()
        if n in named and p.default is inspect.Parameter.empty and n not in kwargs
    ] + [n for n, p in params.items() if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is p.empty]
    if "num_envs" in required:
        raise error("--num-envs", MISSING, f"{spec} needs num_envs", "give --num-envs N")
    if required:
        raise error(
            "--env",
            spec,
            f"the factory needs {required}, which st-rl does not give",
            "give them defaults; st-rl passes num_envs, device and seed (those the factory takes)",
        )
    return _call_factory(spec, factory, kwargs)


def cmd_train(args: argparse.Namespace) -> int:
    """``st-rl train``: build the config (docs/configuration.md, "Command line"), the environment and the
    runner, and train; with ``--print-config`` print the resolved config instead.

    The run directory is checked before anything is built (docs/configuration.md, "Run directories"): one
    holding an earlier run needs ``--resume`` (of one of its checkpoints) or ``--overwrite``, and one that another
    process writes is refused. Without ``--log-dir`` a new directory ``logs/<experiment>/<date_time>`` is made
    (``_2``, ``_3``, ... when a run started in the same second took that name) and removed again when training
    fails before writing into it. SIGINT / SIGTERM stop training after the iteration in progress, with a
    checkpoint (:class:`~st_rl.runners.TrainingInterrupted`, reported by :func:`main`).

    Returns:
        The exit code (0).
    """
    from st_rl.config import ConfigError, Problem
    from st_rl.runners.run_dir import check_run_dir
    from st_rl.utils.config import resolve_train_cfg

    _validate_train_args(args)
    if args.device is not None and not args.print_config:
        _check_device(args.device)
    cfg, preset, resume_path, add_amp = _train_config(args)
    with warnings.catch_warnings():
        if not args.print_config:  # the runner reports unknown keys when it resolves the config again
            warnings.simplefilter("ignore")
        # Validates the config before anything is built; --print-config also shows the defaults.
        resolved = resolve_train_cfg(cfg).to_dict(full=args.print_config)
    if args.print_config:
        print(_config_text(resolved), end="")
        return 0
    runner_cfg = resolved["runner"]
    iterations = _learning_iterations(args, runner_cfg)
    seed = runner_cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(Problem("runner.seed", seed, "must be an integer or null", "e.g. seed=42"))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from st_rl.utils.distributed import init_distributed

    # Under torchrun each rank joins the process group, trains on its own GPU and steps its own robots.
    timeout = runner_cfg.get("distributed_timeout_s")
    info, rank_device = init_distributed(
        args.device or _default_device(), float(600.0 if timeout is None else timeout)
    )
    device = str(rank_device)
    experiment = runner_cfg.get("experiment_name") or (_env_name(args.env) if args.env else args.task)
    made: list[str] = []  # folders made for a default run directory, removed again if still empty at the end
    if args.log_dir:
        log_dir = args.log_dir
    elif info.is_main:
        log_dir = _new_run_dir(os.path.join("logs", experiment), made)
    else:  # rank 0 writes the run directory; the others never write into it
        log_dir = os.path.join("logs", experiment, datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"))
    try:
        if info.is_main:  # before the environment is built: refuse early, and write nothing
            overwrite_other = _check_resume_target(log_dir, resume_path, args.overwrite)
            check_run_dir(
                log_dir, resume=resume_path is not None and not overwrite_other, overwrite=args.overwrite
            )
        else:
            overwrite_other = False
        return _train(
            args, cfg, preset, runner_cfg, info, device, log_dir, iterations, seed, resume_path, add_amp,
            overwrite_other,
        )  # fmt: skip
    finally:
        for folder in reversed(made):
            try:
                os.rmdir(folder)  # only when empty: training failed before writing anything
            except OSError:
                break


def _new_run_dir(root: str, made: list[str] | None = None) -> str:
    """Make a new run directory ``root/<date_time>`` atomically: ``<date_time>_2``, ``_3``, ... when a run
    started in the same second (another process, or this one) took the name. The folders made (``root`` and
    its missing parents first, the run directory last) are appended to ``made``."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    made = [] if made is None else made
    missing = []
    parent = os.path.abspath(root)
    while not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    os.makedirs(root, exist_ok=True)
    made.extend(reversed(missing))
    for n in range(1, 10_000):
        path = os.path.join(root, stamp if n == 1 else f"{stamp}_{n}")
        try:
            os.mkdir(path)  # atomic: exactly one process gets each name
        except FileExistsError:
            continue
        except FileNotFoundError:  # a failed run removed its empty root meanwhile
            os.makedirs(root, exist_ok=True)
            os.mkdir(path)
        made.append(path)
        return path
    raise CommandError(f"{root} holds 10000 runs started at {stamp}; give --log-dir DIR")


def _check_resume_target(log_dir: str, resume_path: str | None, overwrite: bool) -> bool:
    """Check ``--resume CKPT --log-dir DIR`` where DIR holds another run than the one CKPT belongs to.

    Returns:
        Whether DIR's earlier run is to be replaced by the run continued from CKPT (``--overwrite``).

    Raises:
        CommandError: DIR holds another run and ``--overwrite`` is not given (nothing was written), or
            ``--overwrite`` would delete the checkpoint being resumed.
    """
    from st_rl.runners.run_dir import previous_run_files

    if resume_path is None:
        return False
    inside = os.path.realpath(os.path.dirname(os.path.abspath(resume_path))) == os.path.realpath(log_dir)
    if inside:
        if overwrite:
            raise CommandError(
                f"--overwrite would delete the checkpoints of {log_dir}, and --resume {resume_path} is one of "
                "them: give --resume to continue that run, or --overwrite (without --resume) to replace it"
            )
        return False
    names = previous_run_files(log_dir)
    if not names:
        return False
    if overwrite:
        return True
    checkpoints = [n for n in names if n.startswith("model_")]
    holds = f"{len(checkpoints)} checkpoint(s) and " if checkpoints else ""
    raise CommandError(
        f"--log-dir {log_dir} holds another run ({holds}{'config.json' if 'config.json' in names else ''}"
        f"), and --resume {resume_path} is not one of its checkpoints: continuing from it there would mix two "
        f"runs. Fix: train into a new --log-dir (continued from {resume_path}), continue that run with --resume "
        f"{log_dir} --log-dir {log_dir}, or replace it with --overwrite"
    )


def _train(
    args: argparse.Namespace,
    cfg: dict[str, Any],
    preset: Any,
    runner_cfg: dict[str, Any],
    info: Any,
    device: str,
    log_dir: str,
    iterations: int,
    seed: int | None,
    resume_path: str | None,
    add_amp: bool,
    overwrite_other: bool,
) -> int:
    """:func:`cmd_train` once the config, the device and the run directory are settled."""
    from st_rl.config import MISSING, ConfigError, Problem
    from st_rl.runners import build_runner
    from st_rl.tasks import make_env

    name = args.env or args.task
    env_seed = None if seed is None else seed + info.rank
    loader = None
    if args.env is not None:
        env = _make_user_env(args.env, args.num_envs, device, env_seed)
        num_envs = getattr(env, "num_envs", args.num_envs)
    else:
        num_envs = args.num_envs or (preset.num_envs if preset is not None else None)
        if num_envs is None:
            raise ConfigError(
                Problem("--num-envs", MISSING, f"task '{args.task}' has no preset", "give --num-envs N"),
                source="command line",
            )
        env_kwargs = dict(preset.env_kwargs) if preset is not None else {}
        if args.motion:
            from st_rl.datasets import MotionLoader

            dt = make_env(args.task, num_envs=1, seed=0).dt
            loader = MotionLoader(args.motion, amp_obs_frame_num=2, time_between_frames=dt, device=device)
            env_kwargs.update(amp_obs_frame_num=2, style_fields=loader.style_fields)
            if info.is_main:
                print(
                    f"[st-rl] AMP towards {args.motion}: {len(loader.style_fields)} style fields, "
                    "2-frame windows"
                )
        try:
            env = make_env(args.task, num_envs=num_envs, device=device, seed=env_seed, **env_kwargs)
        except ValueError as e:
            if loader is None or "style fields" not in str(e):
                raise
            raise CommandError(
                f"--motion {args.motion}: its fields are not style fields of task {args.task!r}: {_first_line(e)} "
                f"(record the motion on this task: st-rl record-motion --task {args.task})"
            ) from e
        if loader is not None:
            env.set_ref_motion_source(loader)
    try:
        runner = build_runner(
            runner_cfg.get("runner_class_name") or "OnPolicyRunner", env, cfg, log_dir=log_dir, device=device
        )
    except ValueError:  # a config error, named by its message
        raise
    except Exception as e:
        if args.env is None:
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        raise CommandError(
            f"--env {args.env}: st_rl cannot train this environment: {type(e).__name__}: {first} (--debug shows "
            "the traceback; docs/environments.md lists what st_rl needs)"
        ) from e
    with runner:  # closes the writer and releases the run directory's lock, also on errors and interrupts
        runner.overwrite = runner.overwrite or args.overwrite
        lock = None
        if resume_path is not None:
            if info.is_main:
                if add_amp:
                    print(
                        f"[st-rl] adding AMP to the policy in {resume_path}: its policy, critic and "
                        "normalisers, a fresh discriminator and optimizer"
                    )
                else:
                    print(f"[st-rl] resuming from {resume_path}")
            runner.load(resume_path)
        if overwrite_other:
            # --resume CKPT --log-dir DIR --overwrite: the run continued from CKPT replaces DIR's earlier run, whose
            # checkpoints and TensorBoard files go now that CKPT has loaded (the runner keeps the files of a run
            # it resumes). The lock is held while deleting; learn() takes it over.
            from st_rl.runners.run_dir import RunDirLock, clear_previous_run

            lock = RunDirLock(log_dir)
            lock.acquire()
            removed = clear_previous_run(log_dir)
            print(
                f"[st-rl] overwrite: deleted {len(removed)} files of the earlier run in {log_dir}",
                file=sys.stderr,
                flush=True,
            )
        ranks = f" x {info.world_size} ranks" if info.enabled else ""
        if info.is_main:
            print(
                f"[st-rl] training '{name}' with {num_envs} envs{ranks} on {device} for {iterations} "
                f"iterations; logs and checkpoints in {os.path.abspath(log_dir)}",
                flush=True,
            )
        try:
            args.training_started = True  # a Ctrl-C from here on is the runner's (TrainingInterrupted)
            try:
                velrmsd, cot = runner.learn(iterations, init_at_random_ep_len=True)
            except Exception as e:
                spec = args.env
                where = _user_env_frame(e, spec, env) if spec is not None else None
                if spec is None or where is None:
                    raise
                raise _user_code_error(spec, "the environment", e, where) from e
        finally:
            if lock is not None:
                lock.release()  # a no-op once learn() took it over
            if info.enabled:
                import torch.distributed as dist

                dist.destroy_process_group()
    if not info.is_main:
        return 0
    summary = {
        "task": name,
        "iterations": runner.current_learning_iteration,
        "velrmsd": float(velrmsd),
        "CoT": float(cot),
        "log_dir": os.path.abspath(log_dir),
    }
    print("[st-rl] done: " + json.dumps(summary))
    return 0


def _has_discriminator(path: str) -> bool:
    from st_rl.utils.checkpoint import load_checkpoint

    return any(
        k.startswith("discriminator.") for k in load_checkpoint(path, map_location="cpu")["model_state_dict"]
    )


def cmd_play(args: argparse.Namespace) -> int:
    from st_rl.play import set_default_gl_backend

    if not args.no_video:
        set_default_gl_backend("egl")  # MuJoCo reads MUJOCO_GL when it is imported
    from st_rl.play import play
    from st_rl.utils.checkpoint import CheckpointError, load_checkpoint
    from st_rl.utils.utils import get_checkpoint_path

    if args.fixed_command is not None and len(args.fixed_command) not in (2, 3):
        raise CommandError(
            f"--command takes VX VY YAW (or VX VY), got {len(args.fixed_command)} values; e.g. --command 0.8 0 0"
        )
    _check_device(args.device)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.policy:
        return _cmd_play_exported(args)
    path = get_checkpoint_path(args.checkpoint)
    stem = os.path.splitext(path)[0]
    it = load_checkpoint(path, map_location="cpu").get("iter")
    tag = str(it) if it is not None else os.path.basename(stem).replace("model_", "")
    folder = os.path.dirname(os.path.abspath(path))
    video = None if args.no_video else (args.video or os.path.join(folder, f"play_{tag}.mp4"))
    plot = None if args.no_plot else (args.plot or os.path.join(folder, f"play_{tag}.png"))
    try:
        metrics = play(
            path,
            task=args.task,
            num_envs=args.num_envs,
            duration_s=args.duration,
            video=video,
            plot=plot,
            device=args.device,
            command=args.fixed_command,
            seed=args.seed,
            video_fps=args.fps,
            video_quality=args.video_quality,
            trust_config=args.trust_config,
        )
    except CheckpointError as e:
        raise _task_mismatch(path, args.task, args.trust_config) or e from e
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    if args.upload is not False:
        from st_rl.utils.writers import attach_files_to_run

        backend = attach_files_to_run(os.path.dirname(path), [video, plot], required=bool(args.upload))
        if backend:
            print(f"[st-rl] attached the video and plot to the run's {backend} run")
    print("[st-rl] done: " + json.dumps(scalars))
    return 0


def _task_mismatch(path: str, task: str | None, trust_config: bool) -> CommandError | None:
    """The error for a checkpoint that does not fit ``--task`` because its run was trained on another task, or
    None when that is not why."""
    if task is None:
        return None
    from st_rl.evaluation.runs import run_task

    try:
        _, trained_on = run_task(path, trust_config=trust_config)
    except Exception:  # noqa: BLE001 - the original error is reported instead
        return None
    if trained_on is None or trained_on == task:
        return None
    return CommandError(
        f"--checkpoint {path} is a run of task {trained_on!r}, and its policy does not fit task {task!r} (--task): "
        f"drop --task to use {trained_on!r}, or give a checkpoint of a {task!r} run"
    )


def _cmd_play_exported(args: argparse.Namespace) -> int:
    from st_rl.play import play_exported

    stem = os.path.splitext(os.path.abspath(args.policy))[0]
    video = None if args.no_video else (args.video or f"{stem}_play.mp4")
    plot = None if args.no_plot else (args.plot or f"{stem}_play.png")
    metrics = play_exported(
        args.policy,
        task=args.task,
        num_envs=args.num_envs,
        duration_s=args.duration,
        video=video,
        plot=plot,
        command=args.fixed_command,
        seed=args.seed,
        video_fps=args.fps,
        video_quality=args.video_quality,
        trust_config=args.trust_config,
    )
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    print("[st-rl] done: " + json.dumps(scalars))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from st_rl.export import ExportError, export_policy
    from st_rl.utils.checkpoint import CheckpointError
    from st_rl.utils.utils import get_checkpoint_path

    path = get_checkpoint_path(args.checkpoint)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(path)), "exported")
    try:
        result = export_policy(
            path, out, args.formats, task=args.task, check=not args.no_check, trust_config=args.trust_config
        )
    except (ExportError, CheckpointError) as e:
        mismatch = _task_mismatch(path, args.task, args.trust_config)
        if mismatch is not None:
            raise mismatch from e
        if isinstance(e, CheckpointError):
            raise
        print(f"st-rl: error: export failed: {_first_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    meta = result.metadata
    names = (
        " ".join(s["name"] for s in meta["inputs"]) + " -> " + " ".join(s["name"] for s in meta["outputs"])
    )
    for fmt, file in result.files.items():
        err = result.max_abs_error.get(fmt, float("nan"))
        print(f"[st-rl] wrote {fmt}: {os.path.abspath(file)} (max |action - eager| {err:.2g})")
    print(f"[st-rl] wrote metadata: {os.path.abspath(result.metadata_path)}")
    print(
        f"[st-rl] {meta['policy_class']} from {path} (iteration {meta['iteration']}): {names}; "
        f"{meta['num_obs']} observations, {meta['num_actions']} actions"
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from st_rl.plotting import plot_training

    out = plot_training(args.log_dir, args.out)
    print(f"[st-rl] training curves: {os.path.abspath(out)}")
    return 0


def cmd_record_motion(args: argparse.Namespace) -> int:
    import torch

    from st_rl.tasks.motion_recorder import (
        command_grid,
        record_motion,
        save_motion_file,
        scripted_trot_policy,
    )

    n = max(1, args.num_trajectories)
    command = args.fixed_command
    grid = (args.grid_vx, args.grid_vy, args.grid_yaw)
    if any(g is not None for g in grid):
        if command is not None:
            raise ValueError("give either --command or --grid-vx/--grid-vy/--grid-yaw, not both")
        command = command_grid(*(g or (0.0,) for g in grid))
        n = command.shape[0]
    fixed: dict[str, Any] = {"resampling_time_s": 1e9} if command is not None else {}
    if args.scripted_trot or args.scripted_walk:
        task = args.task or "quadruped_flat"
        env = _recording_env(task, n, args.seed, None, noise_level=0.0, **fixed)
        stride = torch.linspace(-0.4, 0.4, n) if args.scripted_walk and n > 1 else 0.0
        policy = scripted_trot_policy(env, stride=stride)
    else:
        env, policy = _recorded_policy(args, n, fixed)
    if args.fields == "joints":
        from st_rl.tasks.motion_recorder import joint_style_fields

        fields = joint_style_fields(env)
    elif args.fields == "default":
        fields = None
    else:
        fields = [f.strip() for f in args.fields.split(",") if f.strip()]
    motion = record_motion(env, policy, args.duration, fields=fields, env_ids=range(n), command=command)
    if not motion:
        raise CommandError(
            "every recorded trajectory fell before recording started; nothing written (a policy that walks, "
            "or --scripted-trot)"
        )
    save_motion_file(motion, args.out)
    frames = sum(len(t["Frames"]) for t in motion.values())
    n_fields = len(next(iter(motion.values()))["Fields"])
    print(f"[st-rl] wrote {len(motion)} trajectories ({frames} frames of {n_fields} fields) to {args.out}")
    return 0


def _legged_tasks() -> list[str]:
    from st_rl.tasks import TASKS

    return sorted(name for name in TASKS if name.startswith("quadruped"))


def _recording_env(task: str, n: int, seed: int, run: tuple[str, str | None] | None, **cfg: Any) -> Any:
    """The environment record-motion records on: ``task`` without pushes (``run``: the checkpoint and the task
    its run was trained on, for the error when ``task`` is not a legged one)."""
    from st_rl.tasks import make_env

    try:
        return make_env(task, num_envs=n, seed=seed, max_push_vel_xy=0.0, **cfg)
    except TypeError as e:
        if "unknown config option" not in str(e):
            raise
        legged = ", ".join(_legged_tasks())
        if run is not None and run[1] == task:
            raise CommandError(
                f"--checkpoint {run[0]} is a run of task {task!r}; record-motion records legged robots ({legged}): "
                "give a checkpoint of a run of one of them"
            ) from None
        raise CommandError(
            f"--task {task}: record-motion records legged robots, not {task!r}: give --task one of {legged}"
        ) from None


def _recorded_policy(args: argparse.Namespace, n: int, fixed: dict[str, Any]) -> tuple[Any, Any]:
    """record-motion --checkpoint: the recording environment and the checkpoint's policy.

    The task is ``--task``, else the one the checkpoint's run was trained on. The run's stored config rebuilds
    its policy (flat or nested form, any runner); the recording env is ours: no pushes, commands held when a
    command or grid is given.
    """
    from st_rl.evaluation.runs import load_run, run_task
    from st_rl.utils.checkpoint import CheckpointError

    path, trained_on = run_task(args.checkpoint, trust_config=args.trust_config)
    task = args.task or trained_on or "quadruped_flat"
    other = trained_on is not None and trained_on != task
    env = _recording_env(task, n, args.seed, (path, trained_on), **fixed)
    try:
        with warnings.catch_warnings():  # said below, once the policy is known to fit
            warnings.filterwarnings("ignore", message="using task")
            runner = load_run(path, task=task, env=env, trust_config=args.trust_config).runner
    except CheckpointError as e:
        if not other:
            raise
        own = f"drop --task to record on {trained_on!r}, or " if trained_on in _legged_tasks() else ""
        raise CommandError(
            f"--checkpoint {path} is a run of task {trained_on!r}, and its policy does not fit task {task!r} "
            f"(--task): {own}give a checkpoint of a {task!r} run"
        ) from e
    if other:
        print(f"[st-rl] recording on task {task!r}; the run was trained on {trained_on!r}", file=sys.stderr)
    return env, runner.get_inference_policy()


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0].strip()


def _error_lines(error: BaseException) -> tuple[list[str], int]:
    """What :func:`main` prints for ``error`` (the lines after ``st-rl: error: ``) and the exit code."""
    from st_rl.config import ConfigError

    if isinstance(error, ConfigError):  # its other problems indented below the first
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return [lines[0], *("  " + line for line in lines[1:])], EXIT_ERROR
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        target = f"{error.filename} -> {error.filename2}" if error.filename2 else str(error.filename)
        return [f"{error.strerror}: {target}"], EXIT_ERROR
    if isinstance(error, (ValueError, OSError, ImportError)):  # errors st_rl raises with a message to show
        return [_first_line(error) or type(error).__name__], EXIT_ERROR
    out_of_memory = getattr(sys.modules.get("torch"), "OutOfMemoryError", None)  # torch >= 2.5
    if out_of_memory is not None and isinstance(error, out_of_memory):
        return [
            f"out of memory on the device ({_first_line(error).split('. ')[0]}): use fewer --num-envs, a "
            "smaller policy or --device cpu"
        ], EXIT_ERROR
    if isinstance(error, MemoryError) or "DefaultCPUAllocator: can't allocate memory" in str(error):
        import re

        size = re.search(r"you tried to allocate (\d+) bytes", str(error))
        detail = f"{int(size.group(1)) / 2**30:,.1f} GiB asked for" if size else _first_line(error)
        return [f"out of memory on the CPU ({detail}): use fewer --num-envs or a smaller policy"], EXIT_ERROR
    detail = _first_line(error)
    return [
        f"unexpected {type(error).__name__}{': ' + detail if detail else ''} (--debug shows the traceback; if st_rl "
        "is at fault, please report it with that traceback)"
    ], EXIT_UNEXPECTED


def _report_error(error: BaseException) -> int:
    """Print an error as ``st-rl: error: <first line>`` (a ConfigError's other problems indented below) and
    return the exit code."""
    lines, code = _error_lines(error)
    print("\n".join([f"st-rl: error: {lines[0]}", *lines[1:]]), file=sys.stderr, flush=True)
    return code


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "train":
        return cmd_train(args)
    if args.command == "tasks":
        return cmd_tasks()
    if args.command == "play":
        return cmd_play(args)
    if args.command == "plot":
        return cmd_plot(args)
    if args.command == "record-motion":
        return cmd_record_motion(args)
    if args.command == "export":
        return cmd_export(args)
    if args.command == "tune":
        from st_rl.tune import main as tune_main

        return tune_main(args)
    parser.print_help()
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run the ``st-rl`` command.

    Every error prints one line, ``st-rl: error: ...``, to stderr: a mistake the user can fix (a bad option,
    config, value, path, device or import, an ``--env`` factory that fails or returns no environment, a file that
    cannot be read or written: ``ValueError`` including ``ConfigError``, ``OSError``, ``ImportError``) returns 2;
    anything else returns 1 and says so. With ``--debug`` errors propagate with their traceback. Argument errors
    exit with code 2 the same way (``SystemExit``). Training stopped by SIGINT / SIGTERM prints ``interrupted:
    saved <checkpoint>`` to stderr and returns 130 / 143 (128 + the signal number); a Ctrl-C before training
    started (Python starting up, building the environment ...) prints one line and returns 130.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args: argparse.Namespace | None = None
    handlers = _install_stop_handlers()
    format_warning = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        parser = _build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            # 'train' overrides after an option (argparse fills a '*' positional only once)
            if args.command == "train" and not any(item.startswith("-") for item in extra):
                args.overrides = [*args.overrides, *extra]
            else:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
        debug = debug or bool(getattr(args, "debug", False))
        _refuse_empty_paths(parser, args)
        return _dispatch(parser, args)
    except KeyboardInterrupt as e:
        return _report_interrupt(e, args, debug)
    except Exception as e:
        if debug:
            raise
        return _report_error(e)
    finally:
        warnings.formatwarning = format_warning
        _restore_handlers(handlers)


_PATH_OPTIONS = {
    "train": ("config", "env", "resume", "log_dir", "motion"),
    "play": ("checkpoint", "policy", "video", "plot"),
    "export": ("checkpoint", "out"),
    "plot": ("log_dir", "out"),
    "record-motion": ("checkpoint", "out"),
    "tune": ("space", "storage", "log_root", "motion"),
}
"""The options of each command that name a file or folder."""


def _refuse_empty_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An empty path (``--resume "$RUN"`` with ``RUN`` unset) is an error, not the option left out: ``--resume ""``
    used to train from scratch and ``--motion ""`` without AMP, silently."""
    for name in _PATH_OPTIONS.get(args.command, ()):
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            flag = name if args.command == "plot" and name == "log_dir" else "--" + name.replace("_", "-")
            parser.error(
                f"argument {flag}: an empty path (an unset shell variable?); give a path or leave it out"
            )


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """A warning as ``st-rl: warning: <message>`` (Python's format adds the file and a line of st_rl's source)."""
    return f"st-rl: warning: {message}\n"


class _Stopped(KeyboardInterrupt):
    """SIGTERM / SIGHUP outside ``learn()`` (which handles them itself): stop, as a Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _install_stop_handlers() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP (where the platform has it) stop the command like a Ctrl-C, so that a closed
    terminal or ``timeout`` ends it with one line and exit code 128 + the signal number (instead of killing it
    without a word). Signals the caller ignores (``nohup``) or handles stay as they are. Returns the previous
    handlers."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread: signals stay as they are
            break
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    import signal

    for signum, handler in previous.items():
        with contextlib.suppress(ValueError):  # installed in the main thread, restored there
            signal.signal(signum, handler)


def _report_interrupt(error: KeyboardInterrupt, args: argparse.Namespace | None, debug: bool) -> int:
    """Print how a Ctrl-C / SIGTERM stopped the command (one line to stderr) and return the exit code."""
    # Not imported here: the Ctrl-C may have stopped Python while it imported torch.
    training_interrupted = getattr(sys.modules.get("st_rl.runners.interrupt"), "TrainingInterrupted", None)
    if training_interrupted is not None and isinstance(error, training_interrupted):
        checkpoint = getattr(error, "checkpoint", None)
        if checkpoint is not None:
            print(f"interrupted: saved {os.path.abspath(checkpoint)}", file=sys.stderr, flush=True)
        else:
            print(f"interrupted: {error}", file=sys.stderr, flush=True)
        return int(getattr(error, "exit_code", 130))
    if debug:
        raise error
    command = getattr(args, "command", None)
    if command == "train" and not getattr(args, "training_started", False):
        what = " before training started; nothing was saved: start it again"
    elif command == "train":
        what = " during training; the checkpoints already saved are complete: continue with --resume"
    else:
        what = f"; st-rl {command} stopped" if command else " while st-rl was starting"
    signum = getattr(error, "signum", None)
    name = "Ctrl-C" if signum is None else _signal_name(signum)
    with contextlib.suppress(OSError):  # the terminal went away (SIGHUP)
        print(f"st-rl: error: interrupted ({name}){what}", file=sys.stderr, flush=True)
    return 130 if signum is None else 128 + int(signum)


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


if __name__ == "__main__":
    sys.exit(main())
