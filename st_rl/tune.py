"""Hyperparameter search on the built-in tasks with Optuna (``st-rl tune``, docs/tuning.md)."""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import inspect
import json
import math
import os
import socket
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import yaml

from st_rl.algorithms import NonFiniteLossError
from st_rl.config.defaults import RUNNER_DEFAULTS
from st_rl.config.presets import amp_train_config, get_preset
from st_rl.config.resolve import resolve_train_cfg
from st_rl.datasets import MotionLoader, gait_distance
from st_rl.env.adapter import EnvAdapter
from st_rl.evaluation.metrics import _check_locomotion_env, evaluate_policy
from st_rl.runners import build_runner
from st_rl.runners.run_dir import LockOwner
from st_rl.tasks import make_env
from st_rl.tasks.motion_recorder import collect_style_windows
from st_rl.utils.checkpoint import first_line
from st_rl.utils.writers import import_optional

DEFAULT_SPACE: dict[str, list[Any]] = {
    "algorithm.learning_rate": ["log", 1e-4, 1e-2],
    "algorithm.entropy_coef": ["float", 0.0, 0.01],
    "algorithm.gamma": ["float", 0.95, 0.999],
    "algorithm.lam": ["float", 0.9, 0.99],
    "algorithm.num_learning_epochs": ["int", 2, 8],
    "algorithm.num_mini_batches": ["categorical", 2, 4, 8],
    "algorithm.clip_param": ["float", 0.1, 0.3],
    "policy.hidden_width": ["categorical", 32, 64, 128, 256],
}
"""The PPO search space: ``dotted.key -> [kind, ...]`` (:func:`parse_space`)."""

AMP_SPACE: dict[str, list[Any]] = {
    "policy.amp_discriminator.style_reward_coef": ["log", 0.003, 0.05],
    "policy.amp_discriminator.discriminator_grad_pen": ["log", 0.5, 20.0],
    "algorithm.amp_replay_buffer_size": ["categorical", 0, 20000, 100000],
    "algorithm.learning_rate": ["log", 3e-4, 3e-3],
}
"""The AMP search space of ``st-rl tune --motion``."""

OBJECTIVES: dict[str, tuple[str, str, str]] = {
    # name: (direction, metric the runner reports during training, description)
    "return": ("maximize", "mean_reward", "mean episode return on a fresh evaluation env"),
    "velrmsd": ("minimize", "velrmsd", "velocity-tracking RMSD (m/s) on a fresh evaluation env"),
}
SPACE_KINDS = ("float", "log", "int", "int_log", "categorical")
DEFAULT_TASK = "velocity_tracking"
DEFAULT_LOG_ROOT = os.path.join("logs", "tune")


def _optuna() -> Any:
    return import_optional("optuna", "tune", "st-rl tune")


def parse_space(space: Mapping[str, Any]) -> dict[str, Any]:
    """A checked copy of a search space: dotted config keys (``policy.hidden_width`` sets every hidden layer) ->
    ``[kind, low, high]`` (kind ``float``, ``log``, ``int``, ``int_log``), ``["categorical", ...]`` or a value."""
    out: dict[str, Any] = {}
    forms = "['float'|'log'|'int'|'int_log', low, high], ['categorical', choice, ...] or a fixed value"
    for key, spec in space.items():
        if not isinstance(key, str) or not key or key.startswith(".") or key.endswith("."):
            raise ValueError(f"search-space key {key!r} must be a dotted config path like 'algorithm.gamma'")
        kind, args = (spec[0], list(spec[1:])) if isinstance(spec, (list, tuple)) and spec else (None, [])
        if not isinstance(kind, str):
            out[key] = copy.deepcopy(spec)
            continue
        if kind not in SPACE_KINDS:
            raise ValueError(f"search space {key!r}: unknown kind {kind!r}; use {forms}")
        if kind == "categorical" and not args:
            raise ValueError(f"search space {key!r}: 'categorical' needs at least one choice")
        if kind != "categorical":
            if len(args) != 2 or not all(isinstance(a, (int, float)) for a in args) or args[0] >= args[1]:
                raise ValueError(f"search space {key!r}: {kind!r} needs [low, high] with low < high")
            if kind in ("log", "int_log") and args[0] <= 0:
                raise ValueError(f"search space {key!r}: {kind!r} needs low > 0")
        out[key] = [kind, *args]
    return out


def load_space(spec: str) -> dict[str, Any]:
    """Read a search space from inline JSON, a ``.json`` or a ``.yaml``/``.yml`` file."""
    text = spec.strip()
    try:
        if text.startswith("{"):
            data = json.loads(text)
        elif not os.path.isfile(spec):  # also never read a device (/dev/zero) to its end
            raise OSError(f"no such file (give inline JSON, or a .json / .yaml file): {spec}")
        else:
            with open(spec) as f:
                data = yaml.safe_load(f) if spec.endswith((".yaml", ".yml")) else json.load(f)
    except (OSError, ValueError, yaml.YAMLError) as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"cannot read the search space {spec!r}: {str(e).replace(chr(10), ' ')}") from e
    if not isinstance(data, dict):
        raise ValueError(f"search space {spec!r} must be a mapping of dotted config keys to specs")
    return parse_space(data)


def _ranged(spec: Any) -> bool:
    return isinstance(spec, list) and bool(spec) and spec[0] in SPACE_KINDS


def suggest(trial: Any, space: Mapping[str, Any]) -> dict[str, Any]:
    """Draw one value per entry of a parsed ``space`` (fixed values are returned as they are)."""
    values: dict[str, Any] = {}
    for key, spec in space.items():
        kind, args = (spec[0], spec[1:]) if _ranged(spec) else (None, [])
        if kind is None:
            values[key] = spec
        elif kind == "categorical":
            values[key] = trial.suggest_categorical(key, list(args))
        else:
            draw, cast = (trial.suggest_int, int) if kind.startswith("int") else (trial.suggest_float, float)
            values[key] = draw(key, cast(args[0]), cast(args[1]), log=kind.endswith("log"))
    return values


def apply_params(train_cfg: dict, env_kwargs: dict, params: Mapping[str, Any]) -> tuple[dict, dict]:
    """Copies of a flat training config and the env keyword arguments with the dotted-key values written in."""
    cfg, env_kw = copy.deepcopy(train_cfg), copy.deepcopy(env_kwargs)
    for key, value in params.items():
        if key == "policy.hidden_width":
            policy = cfg.setdefault("policy", {})
            for dims in ("actor_hidden_dims", "critic_hidden_dims"):
                depth = len(policy.get(dims) or [0, 0])
                policy[dims] = [int(value)] * depth
            continue
        *path, leaf = key.split(".")
        target: Any = env_kw if path[:1] == ["env"] else cfg
        for part in path[1:] if path[:1] == ["env"] else path:
            if not isinstance(target.get(part), dict):
                use = "use algorithm.<key>, policy.<key>, env.<key> or a runner key"
                raise ValueError(f"search-space key {key!r}: the config has no section {part!r}; {use}")
            target = target[part]
        target[leaf] = value
    return cfg, env_kw


def _check_space(space: Mapping[str, Any], trial_config: Callable[[Mapping[str, Any]], Any]) -> None:
    """Resolve a trial's config at the low end of every range: a ConfigError before the first trial."""
    cfg, _ = trial_config({key: spec[1] if _ranged(spec) else spec for key, spec in space.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resolve_train_cfg(cfg)


@torch.no_grad()
def evaluate_return(runner: Any, env: Any, num_steps: int | None = None) -> float:
    """Mean return of every env's first episode (partial after ``num_steps``, default one episode) under
    ``runner``'s deterministic policy."""
    adapter = EnvAdapter(env, runner.device, obs_groups=runner.cfg.get("obs_groups"), check_finite="off")
    policy = runner.get_inference_policy()
    obs, _, _ = adapter.reset()
    steps = int(num_steps or int(torch.as_tensor(adapter.max_episode_length).max()))
    returns = torch.zeros(adapter.num_envs, device=runner.device)
    running = torch.ones(adapter.num_envs, dtype=torch.bool, device=runner.device)
    policy.reset(running.clone())
    for _ in range(max(1, steps)):
        obs, _, rewards, dones, _ = adapter.step(policy(obs))
        returns += rewards.to(returns.device) * running
        running &= ~dones.to(running.device).bool()
        policy.reset(dones)
        if not running.any():
            break
    runner.train_mode()
    return float(returns.mean())


def evaluate_velrmsd(runner: Any, env: Any, duration_s: float | None = None) -> float:
    """Velocity-tracking RMSD of the deterministic policy over ``duration_s`` (default: an episode, or 10 s)."""
    policy = runner.get_inference_policy()
    if duration_s is None:
        duration_s = float(getattr(env, "max_episode_length_s", 10.0))
    metrics = evaluate_policy(env, policy, duration_s)
    runner.train_mode()
    return float(metrics["velrmsd"])


def default_storage(log_root: str, study_name: str) -> str:
    return f"sqlite:///{os.path.join(log_root, study_name)}.db"


def make_pruner(name: str | None) -> Any:
    """``"median"`` (``MedianPruner(n_startup_trials=3, n_warmup_steps=2)``) or ``"none"``."""
    optuna = _optuna()
    if name in (None, "none"):
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=2)
    raise ValueError(f"unknown pruner {name!r}; use 'median' or 'none'")


def open_study(
    study_name: str,
    storage: str,
    objective: str = "return",
    task: str = DEFAULT_TASK,
    pruner: Any = None,
    sampler: Any = None,
) -> Any:
    """Create the study, or load it (``ValueError`` when it was made for another task or objective)."""
    optuna = _optuna()
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; use one of {sorted(OBJECTIVES)}")
    if storage.startswith("sqlite:///") and os.path.dirname(storage[10:]):
        os.makedirs(os.path.dirname(storage[10:]), exist_ok=True)
    pruner = pruner if pruner is not None else make_pruner("median")
    try:
        direction = OBJECTIVES[objective][0]
        study = optuna.create_study(
            study_name=study_name,
            storage=storage,
            direction=direction,
            pruner=pruner,
            sampler=sampler,
            load_if_exists=True,
        )
    except Exception as e:  # SQLAlchemy's errors of a bad URL or an unreachable database
        raise _storage_error(storage, e) from e
    attrs = study.user_attrs
    for key, value in (("task", task), ("objective", objective)):
        if key in attrs and attrs[key] != value:
            was = f"was created with {key}={attrs[key]!r}, not {value!r}"
            raise ValueError(f"study {study_name!r} {was}: pick another --study-name or the same settings")
        if key not in attrs:
            study.set_user_attr(key, value)
    return study


def fail_interrupted_trials(study: Any) -> list[int]:
    """Mark as failed the RUNNING trials of gone processes of this host (a killed ``st-rl tune``); their numbers."""
    optuna = _optuna()
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        pid, host = trial.user_attrs.get("pid"), trial.user_attrs.get("host")
        if isinstance(pid, int) and isinstance(host, str) and not LockOwner(pid, host).is_alive():
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            failed.append(trial.number)
    return failed


def load_existing_study(study_name: str, storage: str) -> Any:
    """Load a study (``ValueError`` when the storage or the study does not exist)."""
    optuna = _optuna()
    if storage.startswith("sqlite:///") and not os.path.isfile(storage[10:]):
        raise ValueError(f"no study storage at {storage}; run st-rl tune first (or pass --storage)")
    try:
        return optuna.load_study(study_name=study_name, storage=storage)
    except KeyError as e:
        names = optuna.get_all_study_names(storage)
        raise ValueError(f"no study {study_name!r} in {storage}; it has {names}") from e
    except Exception as e:
        raise _storage_error(storage, e) from e


def _storage_error(storage: str, error: Exception) -> ValueError:
    why = f"{type(error).__name__}: {first_line(error)}; give a URL such as sqlite:///logs/tune/study.db"
    return ValueError(f"cannot open the study storage {storage!r} (--storage): {why}")


@dataclasses.dataclass
class _Trials:
    task: str
    preset: Any
    motion: str | None
    device: str
    space: dict[str, Any]
    objective: str
    iterations: int
    num_envs: int
    seed: int
    eval_envs: int
    eval_steps: int | None
    logger: str
    log_interval: int | None
    log_dir: str

    def __post_init__(self) -> None:
        self.loader: Any = None
        self.reference: Any = None
        if self.motion:
            dt = make_env(self.task, num_envs=1, seed=0, **self.preset.env_kwargs).dt
            self.loader = MotionLoader(self.motion, time_between_frames=dt, device=self.device)
            self.reference = self.loader.sample_windows(4096)

    def env(self, n: int, seed: int, env_kwargs: dict[str, Any]) -> Any:
        if self.loader is None:
            return make_env(self.task, num_envs=n, device=self.device, seed=seed, **env_kwargs)
        env_kwargs = {**env_kwargs, "amp_obs_frame_num": 2, "style_fields": self.loader.style_fields}
        env = make_env(self.task, num_envs=n, device=self.device, seed=seed, **env_kwargs)
        env.set_ref_motion_source(self.loader)
        return env

    def config(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        cfg = self.preset.train.to_dict()
        if self.loader is not None:
            cfg = amp_train_config(cfg)
        cfg.update(task=self.task, seed=self.seed, logger=self.logger, save_interval=max(1, self.iterations))
        cfg["log_interval"] = self.log_interval or max(1, self.iterations // 5)
        return apply_params(cfg, self.preset.env_kwargs, params)

    def __call__(self, trial: Any) -> float:
        cfg, env_kwargs = self.config(suggest(trial, self.space))
        log_dir = os.path.join(self.log_dir, f"trial_{trial.number}")
        # pid and host let a later run tell an interrupted trial from a live one
        for key, value in (("log_dir", log_dir), ("pid", os.getpid()), ("host", socket.gethostname())):
            trial.set_user_attr(key, value)
        env = self.env(self.num_envs, self.seed, env_kwargs)
        runner_class = cfg.get("runner_class_name", RUNNER_DEFAULTS.runner_class_name)
        runner = build_runner(runner_class, env, cfg, log_dir=log_dir, device=self.device)
        with runner:  # closes the writers and releases the run directory, also on errors
            metric = OBJECTIVES[self.objective][1]
            runner.learn(self.iterations, init_at_random_ep_len=True, trial=trial, trial_metric=metric)
        done = runner.current_learning_iteration
        trial.set_user_attr("iterations", done)
        if done < self.iterations:
            raise _optuna().TrialPruned(f"pruned after {done}/{self.iterations} iterations")
        eval_env = self.env(self.eval_envs, self.seed + 10000, env_kwargs)
        if self.reference is not None:
            style_env = self.env(self.eval_envs, self.seed + 20000, env_kwargs)
            windows = collect_style_windows(style_env, runner.get_inference_policy(), 10.0)
            trial.set_user_attr("gait_distance", gait_distance(windows, self.reference))
            runner.train_mode()
        evaluate = evaluate_velrmsd if self.objective == "velrmsd" else evaluate_return
        value = evaluate(runner, eval_env, self.eval_steps)
        if not math.isfinite(value):
            raise FloatingPointError(f"trial {trial.number}: the objective is {value}")
        return value


def _report_trial(study: Any, trial: Any) -> None:
    value = "" if trial.value is None else f" value={trial.value:.4g}"
    if "gait_distance" in trial.user_attrs:
        value += f" gait_distance={trial.user_attrs['gait_distance']:.3f}"
    params = ", ".join(f"{k.split('.')[-1]}={_format_value(v)}" for k, v in trial.params.items())
    print(f"[st-rl tune] trial {trial.number} {trial.state.name.lower()}{value} params={params}", flush=True)


def run_study(
    task: str = DEFAULT_TASK,
    n_trials: int = 10,
    iterations: int | None = None,
    num_envs: int | None = None,
    *,
    study_name: str | None = None,
    storage: str | None = None,
    log_root: str = DEFAULT_LOG_ROOT,
    space: Mapping[str, Any] | None = None,
    objective: str = "return",
    eval_envs: int = 64,
    eval_steps: int | None = None,
    pruner: Any = None,
    sampler: Any = None,
    seed: int | None = None,
    device: str = "cpu",
    logger: str = RUNNER_DEFAULTS.logger,
    log_interval: int | None = None,
    timeout_s: float | None = None,
    verbose: bool = True,
    summary_top: int = 5,
    motion: str | None = None,
) -> Any:
    """Run (or continue) a study of ``n_trials`` more trials on a built-in task's preset; returns the study.

    Defaults: a fifth of the preset's iterations, its envs and seed, :data:`DEFAULT_SPACE` (:data:`AMP_SPACE`
    with a ``motion`` file), storage ``sqlite:///<log_root>/<study_name>.db``, trial logs in
    ``<log_root>/<study_name>/trial_<i>``; ``eval_steps`` are seconds for ``objective="velrmsd"``."""
    _optuna()
    preset = get_preset(task)
    study_name = study_name or task
    storage = storage or default_storage(log_root, study_name)
    space = parse_space((AMP_SPACE if motion else DEFAULT_SPACE) if space is None else space)
    iterations = int(iterations or max(1, preset.train.max_iterations // 5))
    seed = int(preset.train.seed if seed is None else seed)
    num_envs = int(num_envs or preset.num_envs)
    trials = _Trials(
        task,
        preset,
        motion,
        device,
        space,
        objective,
        iterations,
        num_envs,
        seed,
        eval_envs,
        eval_steps,
        logger,
        log_interval,
        os.path.join(log_root, study_name),
    )
    if objective == "velrmsd":
        _check_locomotion_env(make_env(task, num_envs=1, seed=0, **preset.env_kwargs))
    _check_space(space, trials.config)
    study = open_study(study_name, storage, objective, task, pruner, sampler)
    for number in fail_interrupted_trials(study):
        print(f"[st-rl tune] trial {number} was interrupted (its process is gone): marked failed", flush=True)
    catch = (NonFiniteLossError, FloatingPointError)
    callbacks = [_report_trial] if verbose else []
    study.optimize(trials, n_trials=n_trials, timeout=timeout_s, catch=catch, callbacks=callbacks)
    if verbose:
        print(format_summary(study, top=summary_top, storage=storage))
    return study


def _format_value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def format_summary(study: Any, top: int = 5, storage: str | None = None) -> str:
    """A table of the ``top`` best completed trials, with trial counts per state."""
    trials = study.get_trials(deepcopy=False)
    counts = collections.Counter(t.state.name.lower() for t in trials)
    objective = study.user_attrs.get("objective", "?")
    description = OBJECTIVES.get(objective, ("", "", objective))[2]
    direction = study.direction.name.lower()
    where = f" ({storage})" if storage else ""
    lines = [
        f"Study {study.study_name!r}{where}, task {study.user_attrs.get('task', '?')!r}: {len(trials)} trials "
        f"({counts['complete']} complete, {counts['pruned']} pruned, {counts['fail']} failed, {counts['running']} "
        "running)",
        f"Objective: {description} ({direction})",
    ]
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    if not complete:
        lines.append("No completed trial yet.")
        return "\n".join(lines)
    complete.sort(key=lambda t: t.value, reverse=direction == "maximize")
    best = complete[0]
    lines.append(f"Best trial {best.number}: value {best.value:.6g} (in {best.user_attrs.get('log_dir')})")
    keys = sorted({k for t in complete[:top] for k in t.params})
    extra = ["gait_distance"] if any("gait_distance" in t.user_attrs for t in complete[:top]) else []
    header = ["rank", "trial", "value", *extra, *[k.split(".")[-1] for k in keys]]
    rows = [
        [str(i + 1), str(t.number), f"{t.value:.5g}"]
        + [_format_value(t.user_attrs.get(k, "-")) for k in extra]
        + [_format_value(t.params.get(k, "-")) for k in keys]
        for i, t in enumerate(complete[:top])
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """``st-rl tune``."""
    study_name = args.study_name or args.task
    storage = args.storage or default_storage(args.log_root, study_name)
    try:
        if args.summary:
            study = load_existing_study(study_name, storage)
            print(format_summary(study, top=args.top, storage=storage))
            return 0
        if args.threads:
            torch.set_num_threads(args.threads)
        _optuna().logging.set_verbosity(_optuna().logging.WARNING)  # one line per trial instead
        params = inspect.signature(run_study).parameters  # the options named as run_study's parameters
        kwargs = {name: value for name, value in vars(args).items() if name in params}
        kwargs.update(study_name=study_name, storage=storage, pruner=make_pruner(args.pruner))
        kwargs["space"] = load_space(args.space) if args.space else None
        run_study(n_trials=args.trials, timeout_s=args.timeout, summary_top=args.top, **kwargs)
    except ValueError as e:  # one line (a ConfigError's other problems left out), naming the option
        raise ValueError(first_line(e)) from e
    return 0
