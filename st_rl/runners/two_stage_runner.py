"""Two-stage training: learn from a recorded dataset first, then from the environment."""

from __future__ import annotations

from typing import Any

import torch

from st_rl.runners.interrupt import stop_at_once
from st_rl.runners.on_policy_runner import OnPolicyRunner
from st_rl.storage.rollout_files.rollout_dataset import rollout_dataset_from_config


class TwoStageRunner(OnPolicyRunner):
    """:class:`OnPolicyRunner` whose first ``pretrain_iterations`` iterations (``< 0``: while the data lasts)
    replay the runner config's ``pretrain_dataset`` (its actions are the labels: the TPPO family), then step the
    environment afresh. ``log_interval`` defaults to 50; dataset statistics are logged as ``Perf/dataset_<key>``."""

    def __init__(
        self, env: Any, train_cfg: Any, log_dir: str | None = None, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        if "log_interval" not in self.cfg:
            self.log_interval = 50
        self.pretrain_iterations = int(self.cfg.get("pretrain_iterations", 0))
        if self.cfg.get("pretrain_dataset") is None:
            raise ValueError(
                "TwoStageRunner needs 'pretrain_dataset' in the runner config, e.g. {'data_dir': ...}"
            )
        if self.alg.storage is None or not self.alg.storage.has_field("action_labels"):
            raise ValueError(
                f"TwoStageRunner needs a TPPO-family algorithm (action labels); got {type(self.alg).__name__}"
            )
        self.rollout_dataset = rollout_dataset_from_config(
            self.cfg["pretrain_dataset"], self.env_adapter.num_envs, self.device
        )
        self._from_dataset = False
        self._dataset_started = False  # the first batch may wait for a collector

    def is_pretraining(self) -> bool:
        return self.pretrain_iterations < 0 or self.current_learning_iteration < self.pretrain_iterations

    def rollout_step(self, obs: torch.Tensor, critic_obs: torch.Tensor, **kwargs: Any):
        if self.is_pretraining():
            if self._dataset_started:
                transition, infos = self.rollout_dataset.get_transition_batch()
            else:  # the first batch may wait for a collector: a signal ends the wait
                where = ", ".join(self.rollout_dataset.data_dirs)
                with stop_at_once(f"while waiting for the pretrain dataset in {where}"):
                    transition, infos = self.rollout_dataset.get_transition_batch()
                self._dataset_started = True
            if transition is not None:
                return self._dataset_step(transition, infos)
        if self._from_dataset:
            # Back to the environment: its own observation, fresh policy memory.
            self._from_dataset = False
            obs, critic_obs, _ = self.env_adapter.get_observations()
            self.alg.actor_critic.reset(
                torch.ones(self.env_adapter.num_envs, dtype=torch.bool, device=self.device)
            )
        return super().rollout_step(obs, critic_obs, **kwargs)

    def _dataset_step(self, transition: Any, infos: dict[str, Any]):
        env, priv = self.env_adapter, transition.privileged_observation
        widths = [("observations", transition.observation.shape[-1], env.num_obs)]
        if env.has_critic_group and priv is not None:
            widths.append(("privileged observations", priv.shape[-1], env.num_critic_obs))
        for what, width, expected in widths:
            if width != expected:
                raise ValueError(
                    f"The pretrain dataset's {what} have {width} columns but the environment's have {expected}: "
                    "record the dataset on the same task/observation layout."
                )
        self._from_dataset = True
        dev = self.device
        if not self.env_adapter.has_critic_group:  # the critic sees the actor's observations
            transition = transition._replace(privileged_observation=None, next_privileged_observation=None)
        rewards = transition.reward.to(dev).reshape(-1).float()
        dones = transition.done.to(dev).reshape(-1).bool()
        step_infos = {"time_outs": infos["time_outs"].to(dev).reshape(-1)} if "time_outs" in infos else {}
        self.alg.collect_transition_from_dataset(transition._replace(reward=rewards, done=dones), step_infos)
        for key, value in infos.items():
            if key != "time_outs":
                self.writer.add_scalar(f"Perf/dataset_{key}", float(value), self.current_learning_iteration)
        next_obs, next_critic = transition.next_observation.to(dev), transition.next_privileged_observation
        next_critic = next_obs if next_critic is None else next_critic.to(dev)
        return next_obs, next_critic, rewards, dones, step_infos
