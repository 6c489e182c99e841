"""DAgger data collection: the student being trained drives (the teacher with probability
``teacher_act_prob(student iteration)``), the teacher labels the stored ``actions``."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from st_rl.algorithms.schedules import as_schedule
from st_rl.modules.factory import build_actor_critic
from st_rl.protocols import GaussianPolicy
from st_rl.registry import class_label, untrusted_config
from st_rl.runners.checkpointer import check_model_state
from st_rl.runners.demonstration import DemonstrationSaver
from st_rl.utils.checkpoint import CheckpointError, load_checkpoint
from st_rl.utils.logger import (
    NullWriter,
    Writer,
    aggregate_episode_infos,
    format_console_block,
    make_writer,
)
from st_rl.utils.utils import latest_checkpoint, read_run_config

__all__ = ["DEFAULT_WAIT_FOR_RUN_S", "DaggerSaver"]

DEFAULT_WAIT_FOR_RUN_S = 600.0  # wait_for_run_s=None, run directory exists: wait this long for config.json
RUN_POLL_INTERVAL_S = 5.0


class DaggerSaver(DemonstrationSaver):
    """A :class:`DemonstrationSaver` (``policy``: the teacher) whose rollouts the student being trained drives.

    Args:
        training_policy_logdir: the student's training run (``config.json``, ``model_<it>.pt``).
        teacher_act_prob: ``"exp"``, ``"linear"``, ``"tanh"`` (over the student's iteration, scale
            ``update_times_scale``), a constant, or a callable ``iteration -> prob``.
        action_sample_std: if ``> 0``, the student's std is set to it and its actions are sampled.
        log_to_tensorboard: write statistics to ``<logdir>/collector_<save_dir name's first 2 tokens>``.
        checkpoint_retries: attempts to read a checkpoint that fails to load, 0.5 s apart.
        wait_for_run_s: wait for the run's ``config.json``; ``None``: :data:`DEFAULT_WAIT_FOR_RUN_S` if
            ``training_policy_logdir`` exists, else fail at once.
        trust_config: the run's ``config.json`` may name code to import (docs/security.md).
    """

    def __init__(
        self,
        *args: Any,
        training_policy_logdir: str,
        teacher_act_prob: str | float | Callable[[int], float] = "exp",
        update_times_scale: float = 5000,
        action_sample_std: float = 0.0,
        log_to_tensorboard: bool = False,
        checkpoint_retries: int = 5,
        trust_config: bool = False,
        wait_for_run_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.trust_config = bool(trust_config)
        if wait_for_run_s is not None and not float(wait_for_run_s) >= 0:
            raise ValueError(f"wait_for_run_s must be >= 0 or None, got {wait_for_run_s!r}")
        self.wait_for_run_s = None if wait_for_run_s is None else float(wait_for_run_s)
        super().__init__(*args, **kwargs)
        self.training_policy_logdir = os.fspath(training_policy_logdir)
        self.update_times_scale = update_times_scale
        self.teacher_act_prob = as_schedule(teacher_act_prob, update_times_scale)
        self.action_sample_std = float(action_sample_std)
        self.log_to_tensorboard = bool(log_to_tensorboard)
        self.checkpoint_retries = max(1, int(checkpoint_retries))
        named = isinstance(teacher_act_prob, (str, int, float))
        self.metadata.update(
            training_policy_logdir=self.training_policy_logdir,
            update_times_scale=update_times_scale,
            action_sample_std=self.action_sample_std,
            teacher_act_prob=teacher_act_prob if named else class_label(teacher_act_prob),
        )
        self.tb_writer: Writer = NullWriter()
        if self.log_to_tensorboard:
            tokens = os.path.basename(os.path.normpath(self.save_dir)).split("_")[:2]
            self.tb_log_dir = os.path.join(self.training_policy_logdir, "_".join(["collector", *tokens]))
            self.tb_writer = make_writer("tensorboard", self.tb_log_dir)
        self.training_policy: Any = None
        self.training_policy_iteration = 0
        self.current_teacher_act_prob: float | None = None  # drawn with each reload of the student
        self.collector_iteration = 0
        self.loaded_checkpoint: str | None = None
        self._loaded_file_iter = -1
        self._reported_no_checkpoint = False
        self.rollout_episode_infos: list[dict[str, Any]] = []
        self.use_teacher_act_mask = torch.ones(self.env.num_envs, dtype=torch.bool, device=self.device)

    def init_traj_handlers(self) -> None:
        super().init_traj_handlers()
        if self.training_policy is None:
            self.build_training_policy()

    def init_storage_buffer(self) -> None:
        super().init_storage_buffer()
        self.rollout_episode_infos = []

    def build_training_policy(self) -> None:
        """Build a fresh student from ``<training_policy_logdir>/config.json`` (waiting for it if asked)."""
        self._wait_for_run_config()
        config = read_run_config(self.training_policy_logdir)
        runner_cfg = config.get("runner") or {}
        policy_cfg = dict(config.get("policy") or {})
        class_name = runner_cfg.get("policy_class_name") or policy_cfg.get("class_name")
        if not class_name:
            raise ValueError(
                f"{self.training_policy_logdir}/config.json names no policy class (policy.class_name)"
            )
        normalize = runner_cfg.get("empirical_normalization", False)
        if (config.get("algorithm") or {}).get("empirical_normalization", normalize):
            policy_cfg.setdefault("actor_obs_normalization", True)
        source = os.path.join(self.training_policy_logdir, "config.json")
        opt_in = "pass trust_config=True to DaggerSaver if you trust that file"
        with untrusted_config(source, opt_in, trusted=self.trust_config):
            self.training_policy = build_actor_critic(self.env, class_name, policy_cfg).to(self.device)
        self.training_policy.eval()
        self.training_policy_iteration = 0
        self._loaded_file_iter = -1
        self.loaded_checkpoint = None
        self._apply_action_std()

    def _wait_for_run_config(self) -> None:
        logdir = self.training_policy_logdir
        path = os.path.join(logdir, "config.json")
        wait = self.wait_for_run_s
        if os.path.isfile(path) or wait == 0:
            return  # read_run_config reports a missing file
        if wait is None:
            if not os.path.isdir(logdir):
                raise FileNotFoundError(
                    f"DaggerSaver: training_policy_logdir {logdir!r} does not exist, so no config.json will appear "
                    "there: start the training run first, fix the path, or pass wait_for_run_s=SECONDS to wait."
                )
            wait = DEFAULT_WAIT_FOR_RUN_S
        deadline = time.monotonic() + wait
        left = "with no time limit" if math.isinf(wait) else f"up to {wait:g} s"
        self._say(f"waiting {left} for the training run to write {path}...")
        while not os.path.isfile(path):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FileNotFoundError(
                    f"DaggerSaver: no config.json in {logdir} after waiting {wait:g} s (a training run writes it when "
                    "its learn() starts): check that it runs and logs there, or pass a larger wait_for_run_s."
                )
            time.sleep(min(RUN_POLL_INTERVAL_S, remaining))

    @property
    def training_obs_normalizer(self) -> nn.Module:
        """The student's own actor observation normaliser."""
        return self.training_policy.actor_obs_normalizer

    def _apply_action_std(self) -> None:
        if self.action_sample_std <= 0:
            return
        policy = self.training_policy
        if not isinstance(policy, GaussianPolicy) or not isinstance(policy.std, torch.Tensor):
            raise ValueError(
                f"action_sample_std > 0 needs a student with a 'std'; {type(policy).__name__} has none"
            )
        with torch.no_grad():
            self.training_policy.std.fill_(self.action_sample_std)

    def load_latest_training_policy(self) -> None:
        """Load the newest ``model_<it>.pt`` if newer, and resample the teacher mask."""
        if self.training_policy is None:
            self.build_training_policy()
        path = latest_checkpoint(self.training_policy_logdir)
        if path is None:
            if not self._reported_no_checkpoint:
                self._say(
                    f"no model_<it>.pt in {self.training_policy_logdir} yet; the student keeps its initial weights "
                    "until the training run saves one."
                )
                self._reported_no_checkpoint = True
        else:
            file_iter = int(os.path.basename(path)[len("model_") : -len(".pt")])
            if file_iter > self._loaded_file_iter:
                self._load_student(path, file_iter)
        prob = float(self.teacher_act_prob(self.training_policy_iteration))
        self.current_teacher_act_prob = prob
        self.use_teacher_act_mask = torch.rand(self.env.num_envs, device=self.device) < prob

    def _load_student(self, path: str, file_iter: int) -> None:
        for attempt in range(self.checkpoint_retries):
            try:
                state = load_checkpoint(path, map_location=self.device)
                break
            except FileNotFoundError:
                return  # replaced between listing and reading; the next round sees the newer file
            except CheckpointError as e:
                if attempt + 1 == self.checkpoint_retries:
                    warnings.warn(
                        f"DaggerSaver: cannot load {path} ({e}); keeping the current student.", stacklevel=3
                    )
                    return
                time.sleep(0.5)  # probably still being written
        model = state["model_state_dict"]
        self.training_policy.enable_obs_normalization(
            actor=any(k.startswith("actor_obs_normalizer.") for k in model),
            critic=any(k.startswith("critic_obs_normalizer.") for k in model),
        )
        check_model_state(path, self.training_policy, model)
        self.training_policy.load_state_dict(model)
        self.training_policy.eval()
        self.training_policy_iteration = int(state.get("iter", file_iter))
        self._loaded_file_iter = file_iter
        self.loaded_checkpoint = path
        self._apply_action_std()
        self._say(f"student loaded from {path} (iteration {self.training_policy_iteration})")

    def get_student_actions(self) -> torch.Tensor:
        """The student's actions for the current actor observations."""
        student = self.training_policy
        act = student.act if self.action_sample_std > 0 else student.act_inference
        return self._check_actions(act(self.obs), "student")

    def get_transition(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any], Any, Any]:
        """Execute the student's actions (the teacher's where masked); store the teacher's."""
        teacher_actions = self.get_policy_actions()
        student_actions = self.get_student_actions()
        actions = torch.where(self.use_teacher_act_mask[:, None], teacher_actions, student_actions)
        n_obs, n_critic_obs, rewards, dones, infos = self.env.step(actions)
        return teacher_actions, rewards, dones, infos, n_obs, n_critic_obs

    def add_transition(self, step_i: int, infos: dict[str, Any]) -> None:
        super().add_transition(step_i, infos)
        episode = infos.get("episode", infos.get("log"))
        if episode:
            self.rollout_episode_infos.append(episode)

    def policy_reset(self, dones: torch.Tensor) -> None:
        super().policy_reset(dones)
        if self.training_policy is not None:
            self.training_policy.reset(dones)

    def check_stop(self) -> bool:
        """Reload the newest student, then check the collection targets."""
        self.load_latest_training_policy()
        return super().check_stop()

    def print_log(self) -> None:
        """The round's episode statistics (console, TensorBoard), then the progress."""
        stats = aggregate_episode_infos(self.rollout_episode_infos)
        step = self.collector_iteration
        prob = self.current_teacher_act_prob
        if prob is None:
            prob = float(self.teacher_act_prob(self.training_policy_iteration))
        scalars = {"Collector/teacher_act_prob": prob, "Collector/total_timesteps": self.total_timesteps}
        scalars["Collector/training_policy_iteration"] = self.training_policy_iteration
        for key, value in {**stats, **scalars}.items():
            self.tb_writer.add_scalar(key, value, step)
        rows = [
            ("Student iteration", str(self.training_policy_iteration)),
            ("Teacher act prob", f"{prob:.3f}"),
        ]
        rows += [(key, f"{value:.4f}") for key, value in stats.items()]
        print(format_console_block(f"DAgger collection round {step + 1}", rows), flush=True)
        self.collector_iteration += 1
        self.rollout_episode_infos = []
        super().print_log()

    def close(self) -> None:
        super().close()
        self.tb_writer.flush()
