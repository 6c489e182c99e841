"""The on-policy training loop: rollout, update, log, checkpoint."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import types
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn as nn

import st_rl
import st_rl.algorithms as algorithms
from st_rl.config.defaults import RUNNER_DEFAULTS
from st_rl.config.resolve import TrainConfig, env_cfg_to_jsonable, resolve_train_cfg
from st_rl.config.schema import check_minibatches
from st_rl.env.adapter import EnvAdapter
from st_rl.modules.factory import build_actor_critic, fill_missing, resolve_policy_kwargs
from st_rl.modules.normalizer import EmpiricalNormalization, NonFiniteObservationError
from st_rl.protocols import GaussianPolicy
from st_rl.registry import resolve_class
from st_rl.runners.checkpointer import Checkpointer
from st_rl.runners.interrupt import InterruptGuard, TrainingInterrupted
from st_rl.runners.run_dir import RunDirectory, check_run_dir
from st_rl.utils import checkpoint as ckpt
from st_rl.utils import distributed as dist_utils
from st_rl.utils.logger import (
    NullWriter,
    Stopwatch,
    Writer,
    aggregate_episode_infos,
    format_console_block,
    format_duration,
    make_writer,
)
from st_rl.utils.utils import store_code_state, write_run_config


@runtime_checkable
class PruningTrial(Protocol):
    """A trial that may stop a run early (e.g. an Optuna ``Trial``), asked after every iteration."""

    def report(self, value: float, step: int) -> None: ...

    def should_prune(self) -> bool: ...


# The keys of :meth:`OnPolicyRunner.log`'s ``locs`` (the reference passes its ``locals()``)
LOCS_KEYS: tuple[str, ...] = ("it", "tot_iter", "collection_time", "learn_time", "losses", "stats")
LOCS_KEYS += ("ep_infos", "rewbuffer", "lenbuffer", "rframebuffer")


class InferencePolicy(nn.Module):
    """Raw observations in, deterministic actions out; ``normalizer`` (default: identity) runs first."""

    def __init__(self, actor_critic: nn.Module, normalizer: nn.Module | None = None) -> None:
        super().__init__()
        self.actor_critic: Any = actor_critic
        self.normalizer = normalizer if normalizer is not None else nn.Identity()

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.actor_critic.act_inference(self.normalizer(observations))

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Forget the memory of finished episodes (recurrent policies; a no-op otherwise)."""
        self.actor_critic.reset(dones)


class EpisodeTracker:
    """The training episodes' returns and lengths, gathered to the host once per iteration."""

    def __init__(self, steps: int, num_envs: int, device: torch.device) -> None:
        self.infos: list[dict[str, Any]] = []  # the env's "episode" / "log" infos of this iteration
        self.returns: deque[float] = deque(maxlen=100)
        self.lengths: deque[float] = deque(maxlen=100)
        self.step_rewards: deque[float] = deque(maxlen=2000)
        self._sum = torch.zeros(num_envs, device=device)
        self._length = torch.zeros(num_envs, device=device)
        self._returns, self._lengths, self._rewards = (
            torch.zeros(steps, num_envs, device=device) for _ in "abc"
        )
        self._done = torch.zeros(steps, num_envs, dtype=torch.bool, device=device)

    def record(self, i: int, rewards: torch.Tensor, dones: torch.Tensor, infos: dict[str, Any]) -> None:
        """Step ``i`` of the rollout (no host sync)."""
        self._sum += rewards
        self._length += 1
        self._returns[i] = self._sum
        self._lengths[i] = self._length
        self._done[i] = dones
        self._rewards[i] = rewards
        self._sum.masked_fill_(dones, 0.0)
        self._length.masked_fill_(dones, 0.0)
        episode = infos.get("episode", infos.get("log"))
        if episode is not None:
            self.infos.append(episode)

    def gather(self) -> None:
        """Move finished episodes and the rewards of steps that ended none to the host."""
        self.returns.extend(self._returns[self._done].tolist())
        self.lengths.extend(self._lengths[self._done].tolist())
        self.step_rewards.extend(self._rewards[~self._done][-2000:].tolist())


def build_algorithm(
    train_cfg: TrainConfig, adapter: EnvAdapter, num_steps_per_env: int, device: torch.device
) -> Any:
    """The policy (sizes recorded in ``train_cfg``) and the algorithm with its storage."""
    alg_cfg = train_cfg.algorithm
    policy_kwargs = resolve_policy_kwargs(adapter, train_cfg.policy)
    fill_missing(train_cfg.policy, policy_kwargs)
    if alg_cfg.get("empirical_normalization"):
        policy_kwargs.setdefault("actor_obs_normalization", True)  # the policy owns its normalisers
    actor_critic = build_actor_critic(None, train_cfg.policy_class_name, policy_kwargs)
    alg_cls = resolve_class(train_cfg.algorithm_class_name, algorithms, "algorithm")
    max_iterations = train_cfg.runner.get("max_iterations")
    unset = alg_cfg.get("schedule") == "linear" and alg_cfg.get("lr_anneal_iterations") is None
    if unset and max_iterations is not None:
        alg_cfg["lr_anneal_iterations"] = int(max_iterations)  # decays over the configured run length
    alg = alg_cls(actor_critic, device=device, **alg_cfg)
    alg.attach_env(adapter.env)
    critic_shape = [adapter.num_critic_obs] if adapter.has_critic_group else [None]
    shapes = ([adapter.num_obs], critic_shape, [adapter.num_actions])
    alg.init_storage(adapter.num_envs, num_steps_per_env, *shapes, **train_cfg.storage)
    return alg


def trial_value(
    trial_metric: str | Callable[[dict[str, float]], float] | None,
    task_metrics: dict[str, torch.Tensor],
    returned_metrics: Sequence[str],
    returns: Sequence[float],
    lengths: Sequence[float],
) -> float:
    """The value :meth:`OnPolicyRunner.learn` reports to its trial (see its ``trial_metric``)."""
    metrics = dict.fromkeys(returned_metrics, 0.0) | {name: float(v) for name, v in task_metrics.items()}
    metrics["mean_reward"] = statistics.mean(returns) if returns else float("nan")
    metrics["mean_episode_length"] = statistics.mean(lengths) if lengths else float("nan")
    if trial_metric is None:
        return metrics[returned_metrics[0]]
    if callable(trial_metric):
        return float(trial_metric(metrics))
    if trial_metric not in metrics:
        raise ValueError(f"Unknown trial_metric {trial_metric!r}; use one of {sorted(metrics)} or a callable")
    return metrics[trial_metric]


class OnPolicyRunner:
    """Trains an on-policy algorithm (PPO and its presets) on a vectorised environment of any supported API.

    ``train_cfg``: flat (st_gym) or nested (legged_gym), never mutated. ``log_dir``: logs, ``config.json`` and
    ``model_<it>.pt`` (``None``: nothing written), locked while in use; an earlier run there is continued after
    :meth:`load` or replaced with ``overwrite`` (docs/configuration.md).
    """

    def __init__(
        self, env: Any, train_cfg: Any, log_dir: str | None = None, device: str | torch.device = "cpu"
    ):
        self.train_cfg: TrainConfig = resolve_train_cfg(train_cfg)
        self.cfg: dict[str, Any] = self.train_cfg.runner
        self.policy_cfg = self.train_cfg.policy
        self.alg_cfg = self.train_cfg.algorithm
        self.dist, self.device = dist_utils.init_distributed(
            device, float(self.cfg.get("distributed_timeout_s", RUNNER_DEFAULTS.distributed_timeout_s))
        )
        self.log_dir = log_dir
        self.is_main_process = self.dist.is_main
        if self.cfg.get("seed") is not None:
            ckpt.seed_everything(int(self.cfg["seed"]) + self.dist.rank)
        self.env = env
        self.env_adapter = EnvAdapter(
            env,
            device=self.device,
            obs_groups=self.cfg.get("obs_groups"),
            check_finite=self.cfg.get("check_finite", RUNNER_DEFAULTS.check_finite),
        )
        self.num_steps_per_env = int(self.cfg.get("num_steps_per_env", RUNNER_DEFAULTS.num_steps_per_env))
        self.save_interval = int(self.cfg.get("save_interval", RUNNER_DEFAULTS.save_interval))
        self.log_interval = int(self.cfg.get("log_interval", RUNNER_DEFAULTS.log_interval))
        self.alg = build_algorithm(self.train_cfg, self.env_adapter, self.num_steps_per_env, self.device)
        if self.dist.enabled:
            counts = dist_utils.gather_objects((self.env_adapter.num_envs, self.num_steps_per_env))
            if len(set(counts)) != 1:
                raise ValueError(f"Every rank must run the same (num_envs, num_steps_per_env); got {counts}.")
            for module in self.alg.modules():
                dist_utils.broadcast_module(module)
        self.writer: Writer = NullWriter()
        self.tot_timesteps = 0
        self.tot_time = 0.0
        self._resumed = False
        self._current_learning_iteration = 0
        self.git_status_repos = [st_rl.__file__]
        self.task_metrics: dict[str, torch.Tensor] = {}
        self._learn_start = (time.perf_counter(), 0)
        self.checkpointer = Checkpointer(self)
        self.overwrite = bool(self.cfg.get("overwrite", False))
        self._run_dir: RunDirectory | None = None
        if self.log_dir is not None and self.is_main_process:
            # Nothing is written before learn()/save(): train scripts resume the newest run dir under the log
            # root after building the runner, which must not be this new, empty one.
            self._run_dir = RunDirectory(self.log_dir)
            check_run_dir(self.log_dir, resume=True)  # another live process writing it: refused now

    @property
    def current_learning_iteration(self) -> int:
        """Completed learning iterations (restored by :meth:`load`)."""
        return self._current_learning_iteration

    @current_learning_iteration.setter
    def current_learning_iteration(self, value: int) -> None:
        self._current_learning_iteration = value
        self._resumed = True  # restored progress: an earlier run in log_dir is continued

    def _claim_run_dir(self) -> None:
        if self._run_dir is None or self._run_dir.claimed:
            return
        self._run_dir.claim(resumed=self._resumed, overwrite=self.overwrite)
        if not self._run_dir.client_config:  # the caller's own config.json stays as written
            assert self.log_dir is not None
            write_run_config(self.log_dir, self._logged_config())

    def init_writer(self, init_at_random_ep_len: bool) -> None:
        """Claim ``log_dir``, create the log writer and optionally randomise the episode lengths."""
        self._claim_run_dir()
        if self.is_main_process and isinstance(self.writer, NullWriter):
            self.writer = make_writer(self.cfg.get("logger", RUNNER_DEFAULTS.logger), self.log_dir, self.cfg)
            if self.log_dir is not None:
                self.writer.log_config(self._logged_config())
        if init_at_random_ep_len and not self.checkpointer.env_state_restored:  # resumed episodes continue
            self.env_adapter.randomize_episode_lengths()
        self.checkpointer.env_state_restored = False

    init_writter = init_writer  # reference name (st_rl/compat.py)

    def _logged_config(self) -> dict[str, Any]:
        """The resolved config plus the env's ``cfg`` (read back by the Mutex policy and DaggerSaver)."""
        data = self.train_cfg.to_dict()
        data["runner"].pop("overwrite", None)  # an instruction for this start, not a setting of the run
        env_cfg = getattr(self.env_adapter.env, "cfg", None)
        if env_cfg is not None:
            data["env"] = env_cfg_to_jsonable(env_cfg)
        return data

    def rollout_step(self, obs: torch.Tensor, critic_obs: torch.Tensor, **kwargs: Any):
        """act -> env.step -> process_env_step; returns ``(obs, critic_obs, rewards, dones, infos)``."""
        actions = self.alg.act(obs, critic_obs)
        obs, critic_obs, rewards, dones, infos = self.env_adapter.step(actions)
        try:
            self.alg.process_env_step(rewards, dones, infos, obs, critic_obs)
        except NonFiniteObservationError:
            self.env_adapter.raise_if_nonfinite()  # names the env's observation group
            raise
        return obs, critic_obs, rewards, dones, infos

    def learn(
        self,
        num_learning_iterations: int,
        init_at_random_ep_len: bool = False,
        trial: Any = None,
        trial_metric: str | Callable[[dict[str, float]], float] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Train ``num_learning_iterations`` more iterations; returns the env's velocity-tracking RMSD and cost of
        transport (0 if not reported).

        ``init_at_random_ep_len`` randomises the episode lengths first (not after :meth:`load` restored them).
        ``trial`` gets ``report(value, it)`` after each iteration and stops training once it ``should_prune()``;
        ``trial_metric`` picks the value: a task metric (default: the first), ``"mean_reward"``,
        ``"mean_episode_length"``, or a callable taking that dict (NaN is not reported).
        Raises :class:`TrainingInterrupted` after a stop signal, ``RunDirectoryError`` for an occupied ``log_dir``.
        """
        check_minibatches(
            self.alg_cfg,
            self.env_adapter.num_envs,
            self.num_steps_per_env,
            self.alg.actor_critic.is_recurrent,
        )
        with InterruptGuard(announce=self.is_main_process) as guard:
            with guard.immediate("during start-up"):  # nothing to finish or save yet: a signal stops at once
                self.init_writer(init_at_random_ep_len)
            signum = self._learn_iterations(int(num_learning_iterations), trial, trial_metric, guard)
            path = None if self.log_dir is None else self._model_path(self.current_learning_iteration)
            if path is not None and self.checkpointer.last_saved_iteration != self.current_learning_iteration:
                self.save(path)  # every rank takes part
            self.writer.flush()
        signum = signum or guard.signum or 0  # or a signal during the last save
        if signum:
            self._close_writer()
            raise TrainingInterrupted(path, signum)
        return self.env_adapter.returned_metrics(self.task_metrics)

    def _model_path(self, it: int) -> str:
        assert self.log_dir is not None
        return os.path.join(self.log_dir, f"model_{it}.pt")

    def _learn_iterations(
        self,
        num_learning_iterations: int,
        trial: Any,
        trial_metric: str | Callable[[dict[str, float]], float] | None,
        guard: InterruptGuard,
    ) -> int:
        """The loop of :meth:`learn`; returns the signal that stopped it (0: none)."""
        with guard.immediate("during start-up"):
            obs, critic_obs, _ = self.env_adapter.get_observations()
        self.train_mode()
        # The initial observation does not update the normalisers: a resumed run matches an uninterrupted one.
        episodes = EpisodeTracker(self.num_steps_per_env, self.env_adapter.num_envs, self.device)
        start_iter = self.current_learning_iteration
        tot_iter = start_iter + num_learning_iterations
        self._learn_start = (time.perf_counter(), start_iter)
        for it in range(start_iter, tot_iter):
            watch = Stopwatch()
            self.alg.current_learning_iteration = it
            with torch.inference_mode(self.cfg.get("inference_mode_rollout", True)):
                obs, critic_obs = self._rollout(obs, critic_obs, episodes)
            collection_time = watch.lap()
            with torch.no_grad():
                self.alg.compute_returns(critic_obs)
            episodes.gather()  # one host sync per iteration
            losses, stats = self.alg.update(it)
            learn_time = watch.lap()
            self.current_learning_iteration = it + 1
            self.evaluation()
            if trial is not None:
                metrics, names = self.task_metrics, self.env_adapter.RETURNED_METRICS
                value = trial_value(trial_metric, metrics, names, episodes.returns, episodes.lengths)
                if value == value:  # not NaN
                    trial.report(value, it)
            self.tot_timesteps += self.num_steps_per_env * self.env_adapter.num_envs * self.dist.world_size
            self.tot_time += collection_time + learn_time
            if self.is_main_process and (it % self.log_interval == 0 or it == tot_iter - 1):
                buffers = (episodes.infos, episodes.returns, episodes.lengths, episodes.step_rewards)
                self.log(
                    dict(zip(LOCS_KEYS, (it, tot_iter, collection_time, learn_time, losses, stats, *buffers)))
                )
            episodes.infos.clear()
            if self.log_dir is not None and (it + 1) % self.save_interval == 0:
                self.save(self._model_path(it + 1))
            if it == start_iter and self.log_dir is not None and self.is_main_process:
                store_code_state(self.log_dir, self.git_status_repos)
            if isinstance(trial, PruningTrial) and trial.should_prune():
                break
            signum = dist_utils.max_over_ranks(guard.signum or 0, self.device)  # multi-rank runs agree
            if signum:
                return signum
        return 0

    def _rollout(
        self, obs: torch.Tensor, critic_obs: torch.Tensor, episodes: EpisodeTracker
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Collect ``num_steps_per_env`` steps; raises at the end for non-finite observations."""
        for i in range(self.num_steps_per_env):
            obs, critic_obs, rewards, dones, infos = self.rollout_step(obs, critic_obs)
            episodes.record(i, rewards, dones, infos)
        if self.dist.enabled:
            self.env_adapter.sync_nonfinite()  # every rank raises together
        self.env_adapter.raise_if_nonfinite()
        for module in self.alg.actor_critic.modules():  # batches a normaliser skipped on a GPU
            if isinstance(module, EmpiricalNormalization):
                module.raise_if_nonfinite()
        return obs, critic_obs

    @property
    def metrics_velrmsd(self) -> torch.Tensor:
        """The last evaluation's velocity-tracking RMSD (0 when the env reports none)."""
        return self.env_adapter.returned_metrics(self.task_metrics)[0]

    @property
    def metrics_CoT(self) -> torch.Tensor:  # noqa: N802 - the reference's name
        """The last evaluation's cost of transport (0 when the env reports none)."""
        return self.env_adapter.returned_metrics(self.task_metrics)[1]

    def evaluation(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Read the env's task metrics; returns the two that :meth:`learn` returns."""
        self.task_metrics = self.env_adapter.task_metrics()
        return self.env_adapter.returned_metrics(self.task_metrics)

    def log(self, locs: Mapping[str, Any], width: int = 80, pad: int = 35) -> None:
        """Write one iteration's scalars and print its summary (``locs``: the :data:`LOCS_KEYS`)."""
        it, s = locs["it"], types.SimpleNamespace(**locs)
        iteration_time = s.collection_time + s.learn_time
        steps = self.num_steps_per_env * self.env_adapter.num_envs * self.dist.world_size
        fps = int(steps / max(iteration_time, 1e-9))
        policy = self.alg.actor_critic
        mean_std = float(policy.std.detach().mean()) if isinstance(policy, GaussianPolicy) else float("nan")
        episode = aggregate_episode_infos(s.ep_infos)
        scalars = dict(episode)
        scalars.update({f"Loss/{key}": value for key, value in s.losses.items()})
        scalars.update({f"Train/{key}": value for key, value in s.stats.items()})
        scalars["Loss/learning_rate"] = self.alg.learning_rate
        scalars["Policy/mean_noise_std"] = mean_std
        scalars["Perf/total_fps"] = fps
        scalars["Perf/collection time"] = s.collection_time
        scalars["Perf/learning_time"] = s.learn_time
        if self.device.type == "cuda" and torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info(self.device)
            scalars["Perf/gpu_allocated"] = torch.cuda.memory_allocated(self.device) / 2**30
            scalars["Perf/gpu_occupied"] = (total - free) / 2**30
        metrics = {name: float(value) for name, value in self.task_metrics.items()}
        scalars.update({f"Eval/{name}": value for name, value in metrics.items()})
        computation = (
            f"{fps:.0f} steps/s (collection: {s.collection_time:.3f}s, learning {s.learn_time:.3f}s)"
        )
        rows = [("Computation", computation)]
        if s.rframebuffer:
            scalars["Train/mean_reward_each_timestep"] = statistics.mean(s.rframebuffer)
            rows.append(("Mean reward per step", f"{scalars['Train/mean_reward_each_timestep']:.4f}"))
        timed: dict[str, float] = {}  # against training seconds
        if s.rewbuffer:
            mean_rew, mean_len = statistics.mean(s.rewbuffer), statistics.mean(s.lenbuffer)
            scalars["Train/mean_reward"] = timed["Train/mean_reward/time"] = mean_rew
            above = sum(r > mean_rew for r in s.rewbuffer)
            scalars["Train/ratio_above_mean_reward"] = above / len(s.rewbuffer)
            scalars["Train/mean_episode_length"] = timed["Train/mean_episode_length/time"] = mean_len
            rows += [("Mean episode reward", f"{mean_rew:.4f}"), ("Mean episode length", f"{mean_len:.1f}")]
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, it)
        for key, value in timed.items():
            self.writer.add_scalar(key, value, int(self.tot_time))
        rows += [(f"Loss {key}", f"{value:.4f}") for key, value in s.losses.items()]
        rows += [
            ("Learning rate", f"{self.alg.learning_rate:.2e}"),
            ("Mean action noise std", f"{mean_std:.3f}"),
        ]
        if any(metrics.values()):
            rows.append(("Eval " + " / ".join(metrics), " / ".join(f"{v:.4f}" for v in metrics.values())))
        rows += [(key, f"{value:.4f}") for key, value in episode.items()]
        started, start_iter = self._learn_start
        remaining = (s.tot_iter - it - 1) * (time.perf_counter() - started) / max(it + 1 - start_iter, 1)
        rows += [
            ("Total timesteps", f"{self.tot_timesteps}"),
            ("Iteration time", f"{iteration_time:.2f}s"),
            ("Total time", format_duration(self.tot_time)),
            ("ETA", format_duration(remaining)),
        ]
        # A terminal that went away (SIGHUP follows) must not stop training and its final save.
        block = format_console_block(f"Learning iteration {it + 1}/{s.tot_iter}", rows, width, pad)
        with contextlib.suppress(OSError):
            print(block, flush=True)

    def save(self, path: str, infos: dict[str, Any] | None = None) -> None:
        """Write a checkpoint atomically (algorithm, iteration, infos, RNG, env and rollout state, config);
        NonFiniteCheckpointError (nothing written) if a state holds NaN/Inf."""
        self.checkpointer.save(path, infos)

    def load(self, path: str, load_optimizer: bool = True, map_location: Any = None) -> Any:
        """Restore a checkpoint, all or nothing (else CheckpointError); returns its ``infos``. ``load_optimizer``
        (resume) also restores the optimizer, RNG, env and rollout states exactly."""
        infos, it = self.checkpointer.load(path, load_optimizer, map_location)
        self.alg.current_learning_iteration = it
        self.current_learning_iteration = it
        return infos

    def get_inference_policy(self, device: str | torch.device | None = None) -> InferencePolicy:
        """Eval-mode policy taking raw observations, optionally moved to ``device``."""
        self.eval_mode()
        if device is not None:
            self.alg.actor_critic.to(device)
        return InferencePolicy(self.alg.actor_critic)

    def train_mode(self) -> None:
        self.alg.train_mode()

    def eval_mode(self) -> None:
        self.alg.eval_mode()

    def _close_writer(self) -> None:
        self.writer.close()
        self.writer = NullWriter()

    def close(self) -> None:
        """Close the log writer and release the run directory's lock (idempotent)."""
        self._close_writer()
        if self._run_dir is not None:
            self._run_dir.close()

    def __enter__(self) -> OnPolicyRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_git_repo_to_log(self, repo_file_path: str) -> None:
        """Also record this repository's git state in ``<log_dir>/git``."""
        self.git_status_repos.append(repo_file_path)
