"""The on-policy training loop: rollout, update, log, checkpoint."""

from __future__ import annotations

import contextlib
import copy
import os
import statistics
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn as nn

import st_rl
from st_rl.config.defaults import RUNNER_DEFAULTS
from st_rl.config.schema import check_minibatches
from st_rl.env.adapter import EnvAdapter
from st_rl.modules.actor_critic import ActorCritic
from st_rl.modules.factory import build_actor_critic, fill_missing, resolve_policy_kwargs
from st_rl.modules.normalizer import EmpiricalNormalization, NonFiniteObservationError
from st_rl.protocols import GaussianPolicy
from st_rl.runners.interrupt import InterruptGuard, TrainingInterrupted
from st_rl.runners.run_dir import RunDirectory, check_run_dir
from st_rl.utils import checkpoint as ckpt
from st_rl.utils import distributed as dist_utils
from st_rl.utils.config import TrainConfig, resolve_class, resolve_train_cfg
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
    """A trial that may stop a run early (an Optuna ``Trial`` is one): :meth:`OnPolicyRunner.learn` reports to
    it and asks it after every iteration."""

    def report(self, value: float, step: int) -> None:
        """Record the objective ``value`` at iteration ``step``."""
        ...

    def should_prune(self) -> bool:
        """Whether to stop training now."""
        ...


class InferencePolicy(nn.Module):
    """Raw observations in, deterministic actions out (the policy normalises its observations itself).

    ``normalizer`` is applied before the policy; it is the identity unless given (kept for callers that pair
    a policy with an external normaliser).
    """

    def __init__(self, actor_critic: nn.Module, normalizer: nn.Module | None = None) -> None:
        super().__init__()
        self.actor_critic: Any = actor_critic
        self.normalizer = normalizer if normalizer is not None else nn.Identity()

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.actor_critic.act_inference(self.normalizer(observations))

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Forget the memory of finished episodes (recurrent policies; a no-op otherwise)."""
        self.actor_critic.reset(dones)


class OnPolicyRunner:
    """Trains an on-policy algorithm (PPO and its presets) on a vectorised environment.

    Args:
        env: an environment of any supported API (legged_gym 5-tuple, rsl_rl 2.x / st_gym 4-tuple, or
            TensorDict observation groups).
        train_cfg: flat (st_gym) or nested (legged_gym) training config; it is copied, never mutated.
        log_dir: where logs, ``config.json`` and ``model_<it>.pt`` go; ``None`` disables writing. The runner
            locks it against other processes; one holding an earlier run is written only after :meth:`load`
            (continue) or with the runner config key ``overwrite`` (replace), see docs/configuration.md, "Run
            directories". :meth:`close` (or a ``with`` block) closes the writer and releases the lock.
        device: training device.
    """

    def __init__(
        self, env: Any, train_cfg: Any, log_dir: str | None = None, device: str | torch.device = "cpu"
    ):
        self.train_cfg: TrainConfig = resolve_train_cfg(train_cfg)
        self.cfg: dict[str, Any] = self.train_cfg.runner
        self.policy_cfg = self.train_cfg.policy
        self.alg_cfg = self.train_cfg.algorithm
        # Under torchrun: join the process group; a CUDA run trains on cuda:<LOCAL_RANK>.
        self.dist, self.device = dist_utils.init_distributed(
            device, float(self.cfg.get("distributed_timeout_s", RUNNER_DEFAULTS.distributed_timeout_s))
        )
        self.log_dir = log_dir
        self.is_main_process = self.dist.is_main
        seed = self.cfg.get("seed")
        if seed is not None:
            # Rank-specific RNG streams (exploration noise, env randomisation drawn from torch); the model is
            # broadcast from rank 0 below, so its initialisation does not depend on the rank.
            ckpt.seed_everything(int(seed) + self.dist.rank)

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
        if self.num_steps_per_env < 1 or self.save_interval < 1 or self.log_interval < 1:
            raise ValueError("num_steps_per_env, save_interval and log_interval must be >= 1")

        alg_cfg = self.alg_cfg
        policy_kwargs = resolve_policy_kwargs(self.env_adapter, self.policy_cfg)
        fill_missing(self.policy_cfg, policy_kwargs)  # config.json records sizes taken from the environment
        if alg_cfg.get("empirical_normalization"):
            policy_kwargs.setdefault("actor_obs_normalization", True)  # the policy owns its normalisers
        actor_critic = build_actor_critic(None, self.train_cfg.policy_class_name, policy_kwargs)
        import st_rl.algorithms as algorithms

        alg_cls = resolve_class(self.train_cfg.algorithm_class_name, algorithms, "algorithm")
        if (
            alg_cfg.get("schedule") == "linear"
            and alg_cfg.get("lr_anneal_iterations") is None
            and self.cfg.get("max_iterations") is not None
        ):
            # The linear schedule decays over the configured run length (recorded in config.json).
            alg_cfg["lr_anneal_iterations"] = int(self.cfg["max_iterations"])
        self.alg = alg_cls(actor_critic, device=self.device, **alg_cfg)
        self.alg.attach_env(self.env)
        num_obs, num_critic = self.env_adapter.num_obs, self.env_adapter.num_critic_obs
        critic_shape = [num_critic] if self.env_adapter.has_critic_group else [None]
        self.alg.init_storage(
            self.env_adapter.num_envs,
            self.num_steps_per_env,
            [num_obs],
            critic_shape,
            [self.env_adapter.num_actions],
            **self.train_cfg.storage,
        )

        if self.dist.enabled:
            self._sync_ranks_at_start()

        self.writer: Writer = NullWriter()
        self.tot_timesteps = 0
        self.tot_time = 0.0
        self._resumed = False  # set once current_learning_iteration is assigned (load())
        self._current_learning_iteration = 0
        self.git_status_repos = [st_rl.__file__]
        self.task_metrics: dict[str, torch.Tensor] = {}
        self._writer_initialised = False
        self._last_saved_iteration = -1
        self.overwrite = bool(self.cfg.get("overwrite", False))
        self._run_dir: RunDirectory | None = None
        if self.log_dir is not None and self.is_main_process:
            # Nothing is written before learn() (or save()): st_gym's and Isaac Lab's train scripts build the
            # runner, then look up the checkpoint to resume as the newest run directory under the log root
            # (load_run=".*"), which must not be this new, empty one. Then the directory is locked; one holding
            # an earlier run is written to only when the run was resumed (load()) or overwrite is set.
            self._run_dir = RunDirectory(self.log_dir)
            check_run_dir(self.log_dir, resume=True)  # another live process writing it: refused now

    @property
    def current_learning_iteration(self) -> int:
        """Completed learning iterations (restored by :meth:`load`)."""
        return self._current_learning_iteration

    @current_learning_iteration.setter
    def current_learning_iteration(self, value: int) -> None:
        self._current_learning_iteration = value
        # load(), or a script restoring progress: an earlier run in log_dir is continued. (learn() assigns it
        # too, after it has claimed log_dir, when this no longer matters.)
        self._resumed = True

    # ------------------------------------------------------------------ set-up
    def _sync_ranks_at_start(self) -> None:
        """Check that ranks agree on the batch layout and copy rank 0's model and statistics to all ranks."""
        import torch.distributed as dist

        counts: list[Any] = [None] * self.dist.world_size
        dist.all_gather_object(counts, (self.env_adapter.num_envs, self.num_steps_per_env))
        if len(set(counts)) != 1:
            raise ValueError(
                f"Every rank must run the same number of environments and steps per iteration; got (num_envs, "
                f"num_steps_per_env) per rank = {counts}."
            )
        for module in self.alg.modules():  # the policy with its normalisers, and every extension's modules
            dist_utils.broadcast_module(module)

    def _write_config(self) -> None:
        assert self.log_dir is not None
        write_run_config(self.log_dir, self._logged_config())

    def _claim_run_dir(self) -> None:
        """Lock ``log_dir`` for writing (see docs/configuration.md, "Run directories"); when it holds an
        earlier run, continue it (after :meth:`load`), replace it (``overwrite``) or refuse."""
        if self._run_dir is None or self._run_dir.claimed:
            return
        self._run_dir.claim(resumed=self._resumed, overwrite=self.overwrite)
        if not self._run_dir.client_config:  # the caller's own config.json of this run stays as written
            self._write_config()

    def init_writer(self, init_at_random_ep_len: bool) -> None:
        """Create the log writer and optionally randomise the episode lengths.

        Raises:
            RunDirectoryError: ``log_dir`` holds an earlier run that is neither resumed nor overwritten.
            RunDirectoryLocked: another process writes ``log_dir``.
        """
        self._claim_run_dir()
        if not self._writer_initialised:
            if self.is_main_process:
                self.writer = make_writer(
                    self.cfg.get("logger", RUNNER_DEFAULTS.logger), self.log_dir, self.cfg
                )
                if self.log_dir is not None:
                    self.writer.log_config(self._logged_config())
            self._writer_initialised = True
        if init_at_random_ep_len and not self._env_state_restored:  # a resumed run continues its episodes
            self.env_adapter.randomize_episode_lengths()
        self._env_state_restored = False

    init_writter = init_writer  # reference name (st_rl/compat.py)

    def _logged_config(self) -> dict[str, Any]:
        """The resolved config (plus the environment's ``cfg``) as given to a writer's ``log_config``."""
        from st_rl.utils.config import env_cfg_to_jsonable

        data = self.train_cfg.to_dict()
        data["runner"].pop("overwrite", None)  # an instruction for this start, not a setting of the run
        # The env's cfg of any kind (dict, legged_gym class, dataclass, configclass) as plain data: sub-policy
        # runs are read back by the Mutex (action scale) and by DaggerSaver.
        env_cfg = getattr(self.env_adapter.env, "cfg", None)
        if env_cfg is not None:
            data["env"] = env_cfg_to_jsonable(env_cfg)
        return data

    # ------------------------------------------------------------------ loop
    def rollout_step(self, obs: torch.Tensor, critic_obs: torch.Tensor, **kwargs: Any):
        """act -> env.step -> process_env_step; returns ``(obs, critic_obs, rewards, dones, infos)``."""
        actions = self.alg.act(obs, critic_obs)
        obs, critic_obs, rewards, dones, infos = self.env_adapter.step(actions)
        try:
            self.alg.process_env_step(rewards, dones, infos, obs, critic_obs)
        except NonFiniteObservationError:
            self.env_adapter.raise_if_nonfinite()  # the environment returned them: name its observation group
            raise
        return obs, critic_obs, rewards, dones, infos

    def learn(
        self,
        num_learning_iterations: int,
        init_at_random_ep_len: bool = False,
        trial: Any = None,
        trial_metric: str | Callable[[dict[str, float]], float] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Train for ``num_learning_iterations`` more iterations.

        Args:
            num_learning_iterations: iterations to run.
            init_at_random_ep_len: randomise the episode lengths first (not after :meth:`load` restored the
                environment's episodes: a resumed run continues them).
            trial: an Optuna-style trial: after each iteration ``trial.report(value, it)`` is called and, when
                it has ``should_prune()`` (:class:`PruningTrial`), training stops early once that is true.
            trial_metric: the reported value: the name of a task metric of the environment (default: the
                first reported one, the velocity-tracking RMSD), ``"mean_reward"`` (mean training episode
                return) or ``"mean_episode_length"``, or a callable taking that dict and returning a float.
                NaN values (e.g. no episode finished yet) are not reported.

        Returns:
            The environment's two reported task metrics after the last iteration, as st_gym scripts expect:
            velocity-tracking RMSD and cost of transport (zero tensors when the environment has no such
            metrics; see :meth:`st_rl.env.EnvAdapter.task_metrics`).

        Raises:
            TrainingInterrupted: SIGINT, SIGTERM or SIGHUP arrived (main thread only): the iteration in
                progress was finished, a checkpoint saved (its path is the exception's ``checkpoint``) and the
                writers closed. A second signal raises it at once, without saving (``aborted``), as does any
                signal while training starts (before the first rollout step) or while a step waits for data
                (``during`` names the phase; see :func:`st_rl.runners.interrupt.stop_at_once`).
            RunDirectoryError: ``log_dir`` holds an earlier run that is neither resumed (:meth:`load` first)
                nor replaced (``overwrite``); nothing was written.
            RunDirectoryLocked: another live process writes ``log_dir``.
        """
        check_minibatches(self.alg_cfg, self.env_adapter.num_envs, self.num_steps_per_env,
                          self.alg.actor_critic.is_recurrent)  # fmt: skip
        with InterruptGuard(announce=self.is_main_process) as guard:
            with guard.immediate("during start-up"):  # nothing to finish or save yet: a signal stops at once
                self.init_writer(init_at_random_ep_len)
            signum = self._learn_iterations(int(num_learning_iterations), trial, trial_metric, guard)
            if self.log_dir is not None and self._last_saved_iteration != self.current_learning_iteration:
                # Decided without looking at the file system: every rank must take part in save().
                self.save(os.path.join(self.log_dir, f"model_{self.current_learning_iteration}.pt"))
            self.writer.flush()
        signum = signum or guard.signum or 0  # or a signal during the last save
        if signum:
            self._close_writer()
            path = None
            if self.log_dir is not None:
                path = os.path.join(self.log_dir, f"model_{self.current_learning_iteration}.pt")
            raise TrainingInterrupted(path, signum)
        return self.env_adapter.returned_metrics(self.task_metrics)

    def _stop_signal(self, guard: InterruptGuard) -> int:
        """The signal that asks training to stop after this iteration (0: none); multi-rank runs agree."""
        signum = guard.signum or 0
        if self.dist.enabled:
            import torch.distributed as dist

            flag = torch.tensor([signum], dtype=torch.int32, device=self.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            signum = int(flag.item())
        return signum

    def _learn_iterations(
        self,
        num_learning_iterations: int,
        trial: Any,
        trial_metric: str | Callable[[dict[str, float]], float] | None,
        guard: InterruptGuard,
    ) -> int:
        """The loop of :meth:`learn`; returns the signal that stopped it after a whole iteration (0: none)."""
        with guard.immediate("during start-up"):
            obs, critic_obs, _ = self.env_adapter.get_observations()
        self.train_mode()
        # The initial observation only feeds the first action; it does not update the policy's observation
        # statistics, so a run resumed from a checkpoint sees exactly the same updates as an uninterrupted one.

        n_envs, steps = self.env_adapter.num_envs, self.num_steps_per_env
        ep_infos: list[dict[str, Any]] = []
        rframebuffer: deque[float] = deque(maxlen=2000)
        rewbuffer: deque[float] = deque(maxlen=100)
        lenbuffer: deque[float] = deque(maxlen=100)
        cur_reward_sum = torch.zeros(n_envs, device=self.device)
        cur_episode_length = torch.zeros(n_envs, device=self.device)
        finished_return = torch.zeros(steps, n_envs, device=self.device)
        finished_length = torch.zeros(steps, n_envs, device=self.device)
        finished_mask = torch.zeros(steps, n_envs, dtype=torch.bool, device=self.device)
        step_rewards = torch.zeros(steps, n_envs, device=self.device)

        start_iter = self.current_learning_iteration
        tot_iter = start_iter + int(num_learning_iterations)
        self._learn_start_time = time.perf_counter()
        self._learn_start_iter = start_iter
        for it in range(start_iter, tot_iter):
            watch = Stopwatch()
            self.alg.current_learning_iteration = it
            with torch.inference_mode(self.cfg.get("inference_mode_rollout", True)):
                for i in range(steps):
                    obs, critic_obs, rewards, dones, infos = self.rollout_step(obs, critic_obs)
                    cur_reward_sum += rewards
                    cur_episode_length += 1
                    finished_return[i] = cur_reward_sum
                    finished_length[i] = cur_episode_length
                    finished_mask[i] = dones
                    step_rewards[i] = rewards
                    cur_reward_sum.masked_fill_(dones, 0.0)
                    cur_episode_length.masked_fill_(dones, 0.0)
                    if "episode" in infos:
                        ep_infos.append(infos["episode"])
                    elif "log" in infos:
                        ep_infos.append(infos["log"])
                if self.dist.enabled:
                    self.env_adapter.sync_nonfinite()  # every rank raises together
                self.env_adapter.raise_if_nonfinite()
                for module in self.alg.actor_critic.modules():  # batches a normaliser skipped on a GPU
                    if isinstance(module, EmpiricalNormalization):
                        module.raise_if_nonfinite()
            collection_time = watch.lap()
            with torch.no_grad():
                self.alg.compute_returns(critic_obs)
            # One host sync per iteration for the episode bookkeeping.
            rewbuffer.extend(finished_return[finished_mask].tolist())
            lenbuffer.extend(finished_length[finished_mask].tolist())
            alive = ~finished_mask
            rframebuffer.extend(step_rewards[alive][-2000:].tolist())

            losses, stats = self.alg.update(it)
            learn_time = watch.lap()
            self.current_learning_iteration = it + 1
            self.evaluation()
            if trial is not None:
                value = self._trial_value(trial_metric, rewbuffer, lenbuffer)
                if value == value:  # not NaN
                    trial.report(value, it)
            self.tot_timesteps += steps * n_envs * self.dist.world_size
            self.tot_time += collection_time + learn_time
            if self.is_main_process and (it % self.log_interval == 0 or it == tot_iter - 1):
                self.log(locals())
            ep_infos.clear()
            if self.log_dir is not None and (it + 1) % self.save_interval == 0:
                self.save(os.path.join(self.log_dir, f"model_{it + 1}.pt"))
            if it == start_iter and self.log_dir is not None and self.is_main_process:
                store_code_state(self.log_dir, self.git_status_repos)
            if isinstance(trial, PruningTrial) and trial.should_prune():
                break
            signum = self._stop_signal(guard)
            if signum:
                return signum
        return 0

    # ------------------------------------------------------------------ metrics and logs
    def _trial_value(
        self,
        trial_metric: str | Callable[[dict[str, float]], float] | None,
        rewbuffer: deque[float],
        lenbuffer: deque[float],
    ) -> float:
        """The value ``learn`` reports to its trial (see ``trial_metric``)."""
        nan = float("nan")
        zero = torch.zeros(())
        metrics = {
            name: float(self.task_metrics.get(name, zero)) for name in self.env_adapter.RETURNED_METRICS
        }
        metrics.update({name: float(value) for name, value in self.task_metrics.items()})
        metrics["mean_reward"] = statistics.mean(rewbuffer) if rewbuffer else nan
        metrics["mean_episode_length"] = statistics.mean(lenbuffer) if lenbuffer else nan
        if trial_metric is None:
            return metrics[self.env_adapter.RETURNED_METRICS[0]]
        if callable(trial_metric):
            return float(trial_metric(metrics))
        if trial_metric not in metrics:
            raise ValueError(
                f"Unknown trial_metric {trial_metric!r}; use one of {sorted(metrics)} or a callable"
            )
        return metrics[trial_metric]

    @property
    def metrics_velrmsd(self) -> torch.Tensor:
        """The last evaluation's velocity-tracking RMSD (the reference's name; 0 when the env reports none)."""
        return self.env_adapter.returned_metrics(self.task_metrics)[0]

    @property
    def metrics_CoT(self) -> torch.Tensor:  # noqa: N802 - the reference's name
        """The last evaluation's cost of transport (the reference's name; 0 when the env reports none)."""
        return self.env_adapter.returned_metrics(self.task_metrics)[1]

    def evaluation(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Read the environment's task metrics (:meth:`st_rl.env.EnvAdapter.task_metrics`); returns the two
        that :meth:`learn` returns."""
        self.task_metrics = self.env_adapter.task_metrics()
        return self.env_adapter.returned_metrics(self.task_metrics)

    def log(self, locs: dict[str, Any], width: int = 80, pad: int = 35) -> None:
        """Write scalars to the log writer and print the iteration summary."""
        it = locs["it"]
        steps_per_iter = self.num_steps_per_env * self.env_adapter.num_envs * self.dist.world_size
        iteration_time = locs["collection_time"] + locs["learn_time"]
        fps = int(steps_per_iter / max(iteration_time, 1e-9))
        episode = aggregate_episode_infos(locs["ep_infos"])
        w = self.writer
        for key, value in episode.items():
            w.add_scalar(key, value, it)
        for key, value in locs["losses"].items():
            w.add_scalar(f"Loss/{key}", value, it)
        for key, value in locs["stats"].items():
            w.add_scalar(f"Train/{key}", value, it)
        w.add_scalar("Loss/learning_rate", self.alg.learning_rate, it)
        policy = self.alg.actor_critic
        mean_std = float(policy.std.detach().mean()) if isinstance(policy, GaussianPolicy) else float("nan")
        w.add_scalar("Policy/mean_noise_std", mean_std, it)
        w.add_scalar("Perf/total_fps", fps, it)
        w.add_scalar("Perf/collection time", locs["collection_time"], it)
        w.add_scalar("Perf/learning_time", locs["learn_time"], it)
        if self.device.type == "cuda" and torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info(self.device)
            w.add_scalar("Perf/gpu_allocated", torch.cuda.memory_allocated(self.device) / 2**30, it)
            w.add_scalar("Perf/gpu_occupied", (total - free) / 2**30, it)
        metrics = {name: float(value) for name, value in self.task_metrics.items()}
        for name, value in metrics.items():
            w.add_scalar(f"Eval/{name}", value, it)
        rewbuffer, lenbuffer, rframe = locs["rewbuffer"], locs["lenbuffer"], locs["rframebuffer"]
        rows: list[tuple[str, str]] = [
            (
                "Computation",
                f"{fps:.0f} steps/s (collection: {locs['collection_time']:.3f}s, "
                f"learning {locs['learn_time']:.3f}s)",
            ),
        ]
        if rframe:
            mean_frame = statistics.mean(rframe)
            w.add_scalar("Train/mean_reward_each_timestep", mean_frame, it)
            rows.append(("Mean reward per step", f"{mean_frame:.4f}"))
        if rewbuffer:
            mean_rew, mean_len = statistics.mean(rewbuffer), statistics.mean(lenbuffer)
            above = sum(r > mean_rew for r in rewbuffer) / len(rewbuffer)
            wall = int(self.tot_time)
            w.add_scalar("Train/mean_reward", mean_rew, it)
            w.add_scalar("Train/ratio_above_mean_reward", above, it)
            w.add_scalar("Train/mean_episode_length", mean_len, it)
            w.add_scalar("Train/mean_reward/time", mean_rew, wall)
            w.add_scalar("Train/mean_episode_length/time", mean_len, wall)
            rows += [("Mean episode reward", f"{mean_rew:.4f}"), ("Mean episode length", f"{mean_len:.1f}")]
        for key, value in locs["losses"].items():
            rows.append((f"Loss {key}", f"{value:.4f}"))
        rows.append(("Learning rate", f"{self.alg.learning_rate:.2e}"))
        rows.append(("Mean action noise std", f"{mean_std:.3f}"))
        if any(metrics.values()):
            rows.append(("Eval " + " / ".join(metrics), " / ".join(f"{v:.4f}" for v in metrics.values())))
        for key, value in episode.items():
            rows.append((key, f"{value:.4f}"))
        done_iters = it + 1 - self._learn_start_iter
        elapsed = time.perf_counter() - self._learn_start_time
        remaining = (locs["tot_iter"] - it - 1) * elapsed / max(done_iters, 1)
        rows += [
            ("Total timesteps", f"{self.tot_timesteps}"),
            ("Iteration time", f"{iteration_time:.2f}s"),
            ("Total time", format_duration(self.tot_time)),
            ("ETA", format_duration(remaining)),
        ]
        title = f"Learning iteration {it + 1}/{locs['tot_iter']}"
        # A terminal that went away (SIGHUP follows) must not stop training and its final save.
        with contextlib.suppress(OSError):
            print(format_console_block(title, rows, width, pad), flush=True)

    # ------------------------------------------------------------------ persistence
    _last_good_checkpoint: str | None = None  # the newest checkpoint this runner wrote or loaded
    _env_state_restored = False  # load() restored the episodes: learn() does not re-randomise their lengths

    def save(self, path: str, infos: dict[str, Any] | None = None) -> None:
        """Write a checkpoint atomically: algorithm state (policy with its normalisers, optimizer, extensions),
        iteration, infos, RNG and environment state, the policy's rollout hidden state and the config.

        Raises:
            NonFiniteCheckpointError: the parameters, normaliser statistics, optimizer state or rollout hidden
                state hold NaN/Inf. Nothing is written: a file already at ``path`` and the last good checkpoint
                (named in the message) stay as they were.
        """
        alg_state = self.alg.state_dict()
        rollout_state = self._policy_rollout_state()
        bad = self._nonfinite_entries(alg_state, rollout_state)
        rng_per_rank = env_per_rank = rollout_per_rank = None
        if self.dist.enabled:
            # Collective: every rank calls save(); rank 0 writes each rank's RNG, environment and memory state.
            import torch.distributed as dist

            mine = (ckpt.capture_rng_state(), self._env_state(), rollout_state, bad)
            gathered: list[Any] = [None] * self.dist.world_size
            dist.all_gather_object(gathered, mine)
            rng_per_rank = [g[0] for g in gathered]
            env_per_rank = [g[1] for g in gathered]
            rollout_per_rank = [g[2] for g in gathered]
            bad = list(dict.fromkeys(name for g in gathered for name in g[3]))  # every rank refuses together
        if bad:
            self._refuse_nonfinite_save(path, bad)
        self._last_saved_iteration = self.current_learning_iteration
        if not self.is_main_process:
            self._last_good_checkpoint = os.path.abspath(path)  # rank 0 writes it
            return
        if self.log_dir is not None and os.path.realpath(os.path.dirname(os.path.abspath(path))) == (
            os.path.realpath(self.log_dir)
        ):
            self._claim_run_dir()  # the first write into log_dir locks it (and writes config.json)
        state = alg_state
        state["iter"] = self.current_learning_iteration
        state["infos"] = infos
        state["rng_state"] = ckpt.capture_rng_state()
        state["config"] = self.train_cfg.to_dict()
        state["format_version"] = ckpt.CHECKPOINT_FORMAT_VERSION
        state["st_rl_version"] = st_rl.__version__
        env_state = self._env_state()
        if env_state is not None:
            state["env_state"] = env_state
        if rollout_state:
            state["policy_rollout_state"] = rollout_state
        if rng_per_rank is not None:
            state["rng_state_per_rank"] = rng_per_rank
            state["env_state_per_rank"] = env_per_rank
            if any(rollout_per_rank or []):
                state["policy_rollout_state_per_rank"] = rollout_per_rank
        ckpt.save_checkpoint(path, state)
        self._last_saved_iteration = self.current_learning_iteration
        self._last_good_checkpoint = os.path.abspath(path)
        self.writer.save_model(path, self.current_learning_iteration)  # W&B / Neptune / custom writers upload

    def _policy_rollout_state(self) -> dict[str, Any]:
        """The policy's rollout hidden state (recurrent policies; ``{}`` otherwise)."""
        policy = self.alg.actor_critic
        return policy.rollout_state_dict() if isinstance(policy, ActorCritic) else {}

    @staticmethod
    def _nonfinite_entries(alg_state: dict[str, Any], rollout_state: Any) -> list[str]:
        """Names of the tensors of an algorithm state and a rollout state holding NaN/Inf."""
        bad = [name for key, value in alg_state.items() for name in ckpt.nonfinite_tensors(value, key)]
        return bad + ckpt.nonfinite_tensors(rollout_state, "policy_rollout_state")

    def _refuse_nonfinite_save(self, path: str, bad: list[str]) -> None:
        last = self._last_good_checkpoint
        kept = (
            f"The last good checkpoint is {last} (kept on disk)."
            if last is not None
            else "This runner has not written or loaded a good checkpoint yet."
        )
        existing = " The file already there is left unchanged." if os.path.exists(path) else ""
        raise ckpt.NonFiniteCheckpointError(
            f"Refusing to save {path} at iteration {self.current_learning_iteration}: NaN/Inf in "
            f"{ckpt.describe_names(bad)}. Nothing was written.{existing} {kept} Training diverged: lower the "
            "learning rate, enable empirical_normalization or clip observations and rewards, then resume from "
            "the last good checkpoint."
        )

    def _env_state(self) -> Any:
        """What the checkpoint keeps of the environment: its ``state_dict()`` (the built-in tasks: every buffer
        and their random generator), else its ``episode_length_buf`` (so a resumed run continues the episodes'
        lengths instead of re-randomising them); None when it exposes neither."""
        try:
            value = self.env_adapter.state_dict()
            if value is None:
                lengths = getattr(self.env, "episode_length_buf", None)
                if not isinstance(lengths, torch.Tensor):
                    return None
                value = {"episode_length_buf": lengths.detach().clone()}
            ckpt.check_weights_only_safe(value, "env_state")
            return value
        except TypeError as e:
            warnings.warn(f"Environment state not saved: {e}", stacklevel=2)
            return None

    def _load_env_state(self, env_state: Any) -> None:
        """Restore :meth:`_env_state` (through the environment's ``load_state_dict`` when it has one)."""
        if self.env_adapter.load_state_dict(env_state):
            return
        lengths = env_state.get("episode_length_buf") if isinstance(env_state, dict) else None
        current = getattr(self.env, "episode_length_buf", None)
        if not isinstance(lengths, torch.Tensor) or not isinstance(current, torch.Tensor):
            raise KeyError("the environment has no load_state_dict() and the state no episode_length_buf")
        if lengths.shape != current.shape:
            raise ValueError(
                f"episode_length_buf has shape {tuple(lengths.shape)}, the environment {tuple(current.shape)}"
            )
        self.env_adapter.episode_length_buf = lengths.to(current.device, current.dtype).clone()

    def load(self, path: str, load_optimizer: bool = True, map_location: Any = None) -> Any:
        """Restore a checkpoint; returns its ``infos``.

        With ``load_optimizer`` (resuming training) the optimizer, RNG and environment states and the policy's
        rollout hidden state are restored too, so training continues exactly where it stopped (and a following
        ``learn(init_at_random_ep_len=True)`` keeps the restored episode lengths).

        Loading is all or nothing: the whole checkpoint is checked first (``iter``, the model's keys, shapes and
        finiteness, the optimizer's parameter groups, the RNG states) and a problem raises a
        :class:`~st_rl.utils.checkpoint.CheckpointError` naming the file and the entry, with the runner left
        exactly as it was. A missing optimizer state or normaliser statistics are warned about.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            CheckpointError: the checkpoint is unreadable or does not fit this runner
                (:class:`~st_rl.utils.checkpoint.NonFiniteCheckpointError` when it holds NaN/Inf).
        """
        state = ckpt.load_checkpoint(path, map_location=map_location)
        manipulator = self.cfg.get("ckpt_manipulator")
        if manipulator:
            from st_rl.utils.ckpt_manipulator import apply_manipulator

            state = apply_manipulator(manipulator, state, self.alg.state_dict(), path)
            if self.log_dir is not None:
                # What was loaded, for reproducibility; named so that no "latest model" lookup (legged_gym:
                # 'model' in the name, Isaac Lab: model_.*.pt) takes it for this run's newest checkpoint.
                name = os.path.splitext(os.path.basename(path))[0].replace("model_", "")
                ckpt.save_checkpoint(os.path.join(self.log_dir, f"loaded_{name}_manipulated.pt"), state)
        plan = self._check_checkpoint(path, state, load_optimizer)
        snapshot = self._snapshot(load_optimizer)
        try:
            with warnings.catch_warnings():
                # reported below, with the file name
                warnings.filterwarnings("ignore", message="The checkpoint has no observation statistics")
                if plan.get("drop_optimizer"):
                    drop = ("optimizer_state_dict", "lr_scheduler_state_dict")
                    state = {k: v for k, v in state.items() if k not in drop}
                self.alg.load_state_dict(state, load_optimizer=load_optimizer)
            restored_env, not_restored = False, ""
            if load_optimizer:
                if plan["rng_state"] is not None:
                    ckpt.restore_rng_state(plan["rng_state"])
                restored_env, not_restored = self._restore_env_and_memory(path, plan, snapshot["env"])
        except BaseException as e:
            self._restore_snapshot(snapshot)
            if isinstance(e, ckpt.CheckpointError) or not isinstance(e, Exception):
                raise
            raise ckpt.CheckpointError(
                f"Checkpoint {path} could not be loaded ({type(e).__name__}: {ckpt.first_line(e)}); the runner "
                "was left as it was. Check that the config matches the run that saved it."
            ) from e
        for message in plan["warnings"]:
            warnings.warn(message, stacklevel=2)
        if load_optimizer and not_restored:
            warnings.warn(not_restored, stacklevel=2)
        self._env_state_restored = restored_env
        self._last_good_checkpoint = os.path.abspath(path)
        self.alg.current_learning_iteration = plan["iter"]
        self.current_learning_iteration = plan["iter"]
        return state.get("infos")

    # ------------------------------------------------------------------ load helpers
    def _check_checkpoint(self, path: str, state: dict[str, Any], load_optimizer: bool) -> dict[str, Any]:
        """Check everything :meth:`load` will restore, before anything is changed.

        Returns:
            ``iter``, the ``rng_state``, ``env_state`` and ``rollout_state`` of this rank (None: not restored)
            and the ``warnings`` to give once the checkpoint is loaded.

        Raises:
            CheckpointError: naming ``path`` and the entry.
        """

        def error(
            message: str, cls: type[ckpt.CheckpointError] = ckpt.CheckpointError
        ) -> ckpt.CheckpointError:
            return cls(f"Checkpoint {path}: {message}")

        it = state.get("iter", 0)
        if isinstance(it, bool) or not isinstance(it, int) or it < 0:
            raise error(f"'iter' is {it!r}; expected an integer >= 0 (the learning iterations done).")
        alg_keys = set(self.alg.state_dict())
        if not load_optimizer:
            alg_keys -= {"optimizer_state_dict", "lr_scheduler_state_dict"}
        model = state.get("model_state_dict")
        if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
            raise error("'model_state_dict' is not a dict of tensors.")
        notes = self._check_model_state(path, model)
        plan: dict[str, Any] = {"iter": it, "rng_state": None, "env_state": None, "rollout_state": None}
        if load_optimizer:
            optimizer_state = state.get("optimizer_state_dict")
            if optimizer_state is None:
                notes.append(
                    f"{path} has no optimizer state (optimizer_state_dict): the optimizer starts fresh "
                    f"(learning rate {self.alg.learning_rate:g})."
                )
            elif self._other_optimizer(path, optimizer_state, notes):  # its state is dropped: starts fresh
                plan["drop_optimizer"] = True
            else:
                self._check_optimizer_state(path, optimizer_state)
            rng_state, env_state = state.get("rng_state"), state.get("env_state")
            rollout_state = state.get("policy_rollout_state")
            per_rank = state.get("rng_state_per_rank")
            if self.dist.enabled:
                if isinstance(per_rank, list) and len(per_rank) == self.dist.world_size:
                    rank = self.dist.rank
                    rng_state = per_rank[rank]
                    env_state = (state.get("env_state_per_rank") or [None] * len(per_rank))[rank]
                    rollouts = state.get("policy_rollout_state_per_rank") or [None] * len(per_rank)
                    rollout_state = rollouts[rank]
                else:
                    notes.append(
                        f"{path} was saved by a run with another number of ranks; every rank reseeds from the "
                        "config seed + rank instead of restoring its RNG, environment and memory state."
                    )
                    rng_state = env_state = rollout_state = None
                    plan["reseed"] = True
            where = f"rng_state_per_rank[{self.dist.rank}]" if self.dist.enabled else "rng_state"
            if rng_state is not None:
                try:
                    ckpt.check_rng_state(rng_state, where)
                except ValueError as e:
                    raise error(f"{e}; its RNG state cannot be restored.") from e
            plan.update(rng_state=rng_state, env_state=env_state, rollout_state=rollout_state)
            absent = []  # said once, with the states that do not fit (see _restore_env_and_memory)
            if not plan.get("reseed"):
                if rng_state is None:
                    absent.append(
                        "the random number generators (the file has no rng_state): the random draws differ "
                        "from those of an uninterrupted run"
                    )
                if env_state is None:
                    absent.append(
                        "the environment's episodes (the file has no env_state): the environment continues "
                        "from its current state"
                    )
            plan["absent"] = absent
        bad = [name for key in sorted(alg_keys) for name in ckpt.nonfinite_tensors(state.get(key), key)]
        bad += ckpt.nonfinite_tensors(plan["rollout_state"], "policy_rollout_state")
        if bad:
            raise error(
                f"NaN/Inf in {ckpt.describe_names(bad)}: the run had diverged when it was saved. Use an earlier "
                "checkpoint of the run.",
                ckpt.NonFiniteCheckpointError,
            )
        plan["warnings"] = notes
        return plan

    def _check_model_state(self, path: str, model: dict[str, torch.Tensor]) -> list[str]:
        """Check ``model_state_dict`` against the policy's keys and shapes; returns the warnings to give."""
        from st_rl.modules.actor_critic import DEFAULT_NONLINEARITY_KEY, ActorCritic
        from st_rl.modules.normalizer import EmpiricalNormalization

        policy = self.alg.actor_critic
        own = policy.state_dict()
        notes: list[str] = []
        tolerated: set[str] = set()
        ignored: set[str] = set()
        if isinstance(policy, ActorCritic):  # its load_state_dict tolerates missing / unused statistics
            # absent from a checkpoint older than the ReLU default: load_state_dict restores its activations
            tolerated.add(DEFAULT_NONLINEARITY_KEY)
            for prefix in ("actor_obs_normalizer.", "critic_obs_normalizer."):
                own_keys = {k for k in own if k.startswith(prefix)}
                saved_keys = {k for k in model if k.startswith(prefix)}
                if own_keys and not saved_keys:
                    tolerated |= own_keys
                    notes.append(
                        f"{path} has no observation normaliser statistics for {prefix[:-1]} "
                        f"(model_state_dict['{prefix}*']): the normaliser keeps its current statistics (fresh "
                        "ones in a new runner) and learns them again during training."
                    )
                elif saved_keys and not own_keys:
                    ignored |= saved_keys
        for name, module in policy.named_modules():
            if isinstance(module, EmpiricalNormalization):  # old checkpoints lack the count
                tolerated.add(f"{name}.count" if name else "count")
        missing = [k for k in own if k not in model and k not in tolerated]
        unexpected = [k for k in model if k not in own and k not in ignored]
        wrong = [
            f"'{k}' is {tuple(model[k].shape)} in the file, {tuple(v.shape)} in this policy"
            for k, v in own.items()
            if k in model and tuple(model[k].shape) != tuple(v.shape)
        ]
        if missing or unexpected or wrong:
            problems = []
            if missing:
                problems.append(f"it lacks {ckpt.describe_names(missing)}")
            if unexpected:
                problems.append(f"it has unexpected {ckpt.describe_names(unexpected)}")
            if wrong:
                problems.append(f"shapes differ: {ckpt.describe_names(wrong, 3)}")
            raise ckpt.CheckpointError(
                f"Checkpoint {path} does not fit this policy (model_state_dict): {'; '.join(problems)}. Check "
                "that the policy config (class_name, hidden dims, observation sizes) matches the run that saved it."
            )
        return notes

    def _other_optimizer(self, path: str, saved: Any, notes: list[str]) -> bool:
        """Whether ``optimizer_state_dict`` was saved by another optimizer class than this runner's (its parameter
        groups lack this optimizer's hyperparameters once loaded, e.g. Adam's state for SGD, which would fail at
        the first step); then a note that the optimizer starts fresh is added to ``notes``."""
        optimizer = self.alg.optimizer
        groups = saved.get("param_groups") if isinstance(saved, dict) else None
        if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
            return False  # _check_optimizer_state names the problem
        probe = copy.deepcopy(optimizer)
        try:
            probe.load_state_dict(saved)  # fills the defaults an older torch did not save
        except Exception:  # noqa: BLE001 - a malformed state: _check_optimizer_state names the problem
            return False
        missing = sorted(
            {key for group in probe.param_groups for key in optimizer.defaults if key not in group}
        )
        if missing:
            notes.append(
                f"Checkpoint {path}: optimizer_state_dict was saved by another optimizer than this run's "
                f"{type(optimizer).__name__} (it has no {', '.join(missing)}): the optimizer starts fresh "
                f"(learning rate {self.alg.learning_rate:g}); the policy, its normalisers and the rest are restored."
            )
        return bool(missing)

    def _check_optimizer_state(self, path: str, saved: Any) -> None:
        """Check that ``optimizer_state_dict`` fits the optimizer: groups, parameters per group, state shapes."""
        optimizer = self.alg.optimizer
        prefix = f"Checkpoint {path}: optimizer_state_dict"
        if (
            not isinstance(saved, dict)
            or not isinstance(saved.get("param_groups"), list)
            or not isinstance(saved.get("state"), dict)
            or not all(
                isinstance(g, dict) and isinstance(g.get("params"), list) for g in saved["param_groups"]
            )
        ):
            raise ckpt.CheckpointError(f"{prefix} is not an optimizer state ('state' and 'param_groups').")
        groups = saved["param_groups"]
        if len(groups) != len(optimizer.param_groups):
            raise ckpt.CheckpointError(
                f"{prefix} has {len(groups)} parameter group(s), this runner's optimizer "
                f"{len(optimizer.param_groups)}: the algorithm config (extensions, optimizer) differs from the "
                "run that saved it. Resume with the same config, or load with load_optimizer=False."
            )
        params: dict[Any, torch.Tensor] = {}
        for i, (group, own) in enumerate(zip(groups, optimizer.param_groups)):
            if len(group["params"]) != len(own["params"]):
                raise ckpt.CheckpointError(
                    f"{prefix}['param_groups'][{i}] has {len(group['params'])} parameters, this runner's "
                    f"optimizer group {len(own['params'])}: the config differs from the run that saved it."
                )
            params.update(zip(group["params"], own["params"]))
        for index, entry in saved["state"].items():
            if index not in params:
                raise ckpt.CheckpointError(f"{prefix}['state'][{index!r}] belongs to no parameter group.")
            if not isinstance(entry, dict):
                raise ckpt.CheckpointError(f"{prefix}['state'][{index!r}] is not a dict.")
            shape = tuple(params[index].shape)
            for key, value in entry.items():
                if isinstance(value, torch.Tensor) and value.dim() > 0 and tuple(value.shape) != shape:
                    raise ckpt.CheckpointError(
                        f"{prefix}['state'][{index!r}][{key!r}] has shape {tuple(value.shape)}, its parameter "
                        f"{shape}."
                    )

    def _snapshot(self, load_optimizer: bool) -> dict[str, Any]:
        """What :meth:`load` may change, to put back when it fails."""
        env = None
        if load_optimizer:
            try:
                env = self.env_adapter.state_dict()
            except Exception:  # an environment that cannot report its state cannot be put back either
                env = None
        return {
            "alg": copy.deepcopy(self.alg.state_dict()),
            "learning_rate": self.alg.learning_rate,
            "rng": ckpt.capture_rng_state() if load_optimizer else None,
            "env": env,
            "rollout": copy.deepcopy(self._policy_rollout_state()),
        }

    def _restore_snapshot(self, snapshot: dict[str, Any]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.alg.load_state_dict(snapshot["alg"], load_optimizer=True)
            if snapshot["env"] is not None:
                self.env_adapter.load_state_dict(snapshot["env"])
        self.alg.learning_rate = snapshot["learning_rate"]
        if snapshot["rng"] is not None:
            ckpt.restore_rng_state(snapshot["rng"])
        policy = self.alg.actor_critic
        if isinstance(policy, ActorCritic) and snapshot["rollout"]:
            policy.load_rollout_state_dict(snapshot["rollout"])

    def _restore_env_and_memory(self, path: str, plan: dict[str, Any], env_before: Any) -> tuple[bool, str]:
        """Resume: restore the environment state and the policy's rollout hidden state.

        Returns:
            Whether the environment's episodes were restored, and the one warning (``""``: none) that says what
            was not restored, so that training does not continue exactly where it stopped: a state the file
            lacks (``rng_state``, ``env_state``), or one that does not fit this runner (e.g. another number of
            environments). :meth:`load` gives it once the checkpoint is loaded.
        """
        if plan.get("reseed") and self.cfg.get("seed") is not None:
            ckpt.seed_everything(int(self.cfg["seed"]) + self.dist.rank + int(plan["iter"]))
        restored = False
        # One note for all of them (e.g. a run of 4096 envs played on one robot, or an old checkpoint).
        skipped: list[str] = list(plan.get("absent", ()))
        misfit = False
        if plan["env_state"] is not None:
            try:
                self._load_env_state(plan["env_state"])
                restored = True
            except (RuntimeError, KeyError, ValueError, TypeError) as e:
                if env_before is not None:
                    self.env_adapter.load_state_dict(env_before)  # no half-restored environment
                skipped.append(
                    f"the environment's episodes ({ckpt.first_line(e)}): the environment continues from its "
                    "current state"
                )
                misfit = True
        memory_state = plan["rollout_state"]
        policy = self.alg.actor_critic
        if memory_state is not None and isinstance(policy, ActorCritic):
            try:
                policy.load_rollout_state_dict(memory_state, self.env_adapter.num_envs)
            except ValueError as e:
                self.alg.actor_critic.reset()
                skipped.append(f"the policy's rollout memories ({e}): they start from zero")
                misfit = True
        if not skipped:
            return restored, ""
        note = (
            f"Checkpoint {path}: not restored, so training does not continue exactly where it stopped: "
            + "; ".join(skipped)
            + "."
        )
        if misfit:
            note += " (Expected when the number of environments differs from the saved run's.)"
        return restored, note

    def get_inference_policy(self, device: str | torch.device | None = None) -> InferencePolicy:
        """Eval-mode policy taking raw observations (the policy's normaliser inside), optionally moved to
        ``device``."""
        self.eval_mode()
        if device is not None:
            self.alg.actor_critic.to(device)
        return InferencePolicy(self.alg.actor_critic)

    def train_mode(self) -> None:
        self.alg.train_mode()

    def eval_mode(self) -> None:
        self.alg.eval_mode()

    def _close_writer(self) -> None:
        if self._writer_initialised:
            self.writer.close()
            self.writer = NullWriter()
            self._writer_initialised = False

    def close(self) -> None:
        """Close the log writer and release the run directory's lock (idempotent). A later :meth:`learn`
        opens them again."""
        self._close_writer()
        if self._run_dir is not None:
            self._run_dir.close()

    def __enter__(self) -> OnPolicyRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_git_repo_to_log(self, repo_file_path: str) -> None:
        """Record the git state of another repository in ``<log_dir>/git`` at the first iteration."""
        self.git_status_repos.append(repo_file_path)
