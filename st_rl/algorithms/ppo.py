"""Proximal Policy Optimization."""

from __future__ import annotations

import inspect
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.optim as optim

from st_rl.algorithms import functional as F
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import MiniBatch, RolloutStorage
from st_rl.utils import distributed as dist_utils

# Keys that st_gym's PPO config form carries for every algorithm (AMP / BC settings); plain PPO accepts and
# ignores them silently. Anything else unknown is reported.
_TOLERATED_KEYS = frozenset({"class_name", "amp_obs_dim", "bc_loss_coef"})


def make_optimizer(optimizer_cls: type[optim.Optimizer], params: Any, lr: float) -> optim.Optimizer:
    """``optimizer_cls(params, lr=lr)``, with the fused kernel where the class and device support it.

    Fused Adam/AdamW/SGD update all parameters in one kernel instead of a Python loop over tensors, which
    matters for the small networks of locomotion policies; the update rule is the same.
    """
    params = list(params)
    if "fused" in inspect.signature(optimizer_cls.__init__).parameters and all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
    ):
        try:
            return optimizer_cls(params, lr=lr, fused=True)  # type: ignore[call-arg]
        except (RuntimeError, TypeError, ValueError):
            pass  # this torch build has no fused kernel for the device: use the default implementation
    return optimizer_cls(params, lr=lr)  # type: ignore[call-arg]


class NonFiniteLossError(FloatingPointError):
    """Raised when a loss becomes NaN or Inf (before the optimizer step, so parameters stay intact)."""


class PPO:
    """PPO with clipped surrogate and value losses, entropy bonus, GAE and an adaptive-KL learning rate.

    Every loss returned by :meth:`compute_losses` is weighted by the attribute ``<name>_coef`` (default 1):
    ``value_loss_coef`` and ``entropy_coef`` are constructor arguments, and any other ``<name>_coef`` keyword
    (e.g. ``surrogate_loss_coef=0.5``) is accepted and applied.

    Args:
        actor_critic: the policy (e.g. :class:`st_rl.modules.ActorCritic`).
        num_learning_epochs: passes over the rollout per update.
        num_mini_batches: minibatches per epoch.
        clip_param: PPO ratio clip (also the value clip).
        gamma: discount.
        lam: GAE lambda.
        value_loss_coef: weight of ``value_loss``.
        entropy_coef: weight of ``entropy`` (which is ``-mean(H)``).
        learning_rate: initial learning rate.
        max_grad_norm: gradient norm clip.
        use_clipped_value_loss: PPO value clipping.
        clip_min_std: lower bound of the policy std after each update (scalar or per action).
        optimizer_class_name: any ``torch.optim`` class name.
        schedule: ``"fixed"``, ``"adaptive"`` (adaptive-KL learning rate) or ``"linear"`` (annealed from
            ``learning_rate`` at iteration 0 to 0 at ``lr_anneal_iterations``, as CleanRL does).
        desired_kl: KL target of the adaptive schedule.
        lr_anneal_iterations: length of the ``"linear"`` schedule in learning iterations (the runner fills
            it from ``max_iterations`` when not given).
        device: training device.
        empirical_normalization: normalise observations with running statistics.
    """

    def __init__(
        self,
        actor_critic: nn.Module,
        num_learning_epochs: int = 1,
        num_mini_batches: int = 1,
        clip_param: float = 0.2,
        gamma: float = 0.998,
        lam: float = 0.95,
        value_loss_coef: float = 1.0,
        entropy_coef: float = 0.0,
        learning_rate: float = 1e-3,
        max_grad_norm: float = 1.0,
        use_clipped_value_loss: bool = True,
        clip_min_std: float | Sequence[float] = 1e-15,
        optimizer_class_name: str = "Adam",
        schedule: str = "fixed",
        desired_kl: float | None = 0.01,
        lr_anneal_iterations: int | None = None,
        device: str | torch.device = "cpu",
        empirical_normalization: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if args:
            raise TypeError(
                f"{type(self).__name__} takes keyword arguments only after actor_critic; got {args}"
            )
        if schedule not in ("fixed", "adaptive", "linear"):
            raise ValueError(f"schedule must be 'fixed', 'adaptive' or 'linear', got {schedule!r}")
        if schedule == "linear" and (lr_anneal_iterations is None or int(lr_anneal_iterations) < 1):
            raise ValueError(
                "schedule='linear' needs lr_anneal_iterations >= 1 (the number of learning iterations over "
                f"which the learning rate decays to 0), got {lr_anneal_iterations!r}"
            )
        if num_learning_epochs < 1 or num_mini_batches < 1:
            raise ValueError("num_learning_epochs and num_mini_batches must be >= 1")
        self.device = torch.device(device)
        self.actor_critic: Any = actor_critic.to(self.device)
        self.num_learning_epochs = int(num_learning_epochs)
        self.num_mini_batches = int(num_mini_batches)
        self.clip_param = clip_param
        self.gamma = gamma
        self.lam = lam
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.learning_rate = learning_rate
        self.max_grad_norm = max_grad_norm
        self.use_clipped_value_loss = use_clipped_value_loss
        self.clip_min_std = (
            torch.tensor(clip_min_std, dtype=torch.float32, device=self.device)
            if isinstance(clip_min_std, (list, tuple))
            else clip_min_std
        )
        self.schedule = schedule
        self.desired_kl = desired_kl
        self.initial_learning_rate = float(learning_rate)
        self.lr_anneal_iterations = None if lr_anneal_iterations is None else int(lr_anneal_iterations)
        self.empirical_normalization = empirical_normalization
        self.optimizer_class_name = optimizer_class_name
        self._absorb_extra_kwargs(kwargs)

        optimizer_cls = getattr(optim, optimizer_class_name, None)
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, optim.Optimizer)):
            names = sorted(
                n
                for n in dir(optim)
                if isinstance(getattr(optim, n), type)
                and issubclass(getattr(optim, n), optim.Optimizer)
                and n != "Optimizer"
            )
            raise ValueError(f"Unknown optimizer_class_name '{optimizer_class_name}'; available: {names}")
        self.optimizer: optim.Optimizer = make_optimizer(
            optimizer_cls, self.actor_critic.parameters(), learning_rate
        )
        self.transition = RolloutStorage.Transition()
        self.storage: RolloutStorage | None = None
        self.obs_normalizer: Any = nn.Identity()
        self.critic_obs_normalizer: Any = nn.Identity()
        self.current_learning_iteration = 0

    def _absorb_extra_kwargs(self, kwargs: dict[str, Any]) -> None:
        unknown = []
        for key, value in kwargs.items():
            if key.endswith("_coef"):
                setattr(self, key, value)
            elif key not in _TOLERATED_KEYS:
                unknown.append(key)
        if unknown:
            warnings.warn(f"{type(self).__name__} ignores unknown arguments: {sorted(unknown)}", stacklevel=3)

    # ------------------------------------------------------------------ set-up
    def init_obs_norm(self, num_obs: int, num_critic_obs: int) -> None:
        """Create the observation normalisers (running statistics, or identity when disabled)."""
        if self.empirical_normalization:
            self.obs_normalizer = EmpiricalNormalization(shape=[num_obs], until=int(1e8)).to(self.device)
            self.critic_obs_normalizer = EmpiricalNormalization(shape=[num_critic_obs], until=int(1e8)).to(
                self.device
            )
        else:
            self.obs_normalizer = nn.Identity().to(self.device)
            self.critic_obs_normalizer = nn.Identity().to(self.device)

    def init_storage(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        actor_obs_shape: Sequence[int],
        critic_obs_shape: Sequence[int | None],
        action_shape: Sequence[int],
        **kwargs: Any,
    ) -> None:
        """Allocate the rollout storage."""
        self.transition = RolloutStorage.Transition()
        self.storage = RolloutStorage(
            num_envs,
            num_transitions_per_env,
            actor_obs_shape,
            critic_obs_shape,
            action_shape,
            self.device,
            **kwargs,
        )

    # ------------------------------------------------------------------ modes
    def train_mode(self) -> None:
        self.actor_critic.train()
        self.obs_normalizer.train()
        self.critic_obs_normalizer.train()

    def eval_mode(self) -> None:
        self.actor_critic.eval()
        self.obs_normalizer.eval()
        self.critic_obs_normalizer.eval()

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """Sample actions and record what the update needs."""
        if self.actor_critic.is_recurrent:
            self.transition.hidden_states = self.actor_critic.get_hidden_states()
        actions = self.actor_critic.act(obs).detach()
        self.transition.actions = actions
        self.transition.values = self.actor_critic.evaluate(critic_obs).detach()
        self.transition.actions_log_prob = self.actor_critic.get_actions_log_prob(
            self.transition.actions
        ).detach()
        self.transition.action_mean = self.actor_critic.action_mean.detach()
        self.transition.action_sigma = self.actor_critic.action_std.detach()
        self.transition.observations = obs
        self.transition.critic_observations = critic_obs
        return actions

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, infos: dict[str, Any]) -> None:
        """Store the step's outcome; time-outs are bootstrapped with ``r += gamma * V * time_out``."""
        assert self.storage is not None, "call init_storage() before collecting data"
        rewards = rewards.clone()
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            assert self.transition.values is not None
            rewards = F.bootstrap_time_outs(
                rewards, self.transition.values, time_outs.to(self.device), self.gamma
            )
        self.transition.rewards = rewards
        self.transition.dones = dones
        self.storage.add_transitions(self.transition)
        self.transition.clear()
        self.actor_critic.reset(dones)

    def compute_returns(self, last_critic_obs: torch.Tensor) -> None:
        """Bootstrap from the last critic observation and compute GAE returns/advantages."""
        assert self.storage is not None
        # Bootstrapping must not advance a recurrent critic's rollout memory.
        saved = self.actor_critic.get_hidden_states() if self.actor_critic.is_recurrent else None
        last_values = self.actor_critic.evaluate(last_critic_obs).detach()
        if saved is not None and hasattr(self.actor_critic, "set_hidden_states"):
            self.actor_critic.set_hidden_states(saved)
        self.storage.compute_returns(last_values, self.gamma, self.lam)

    # ------------------------------------------------------------------ update
    def update(self, current_learning_iteration: int = 0) -> tuple[dict[str, float], dict[str, float]]:
        """Run the PPO epochs over the stored rollout; return the mean losses and stats."""
        assert self.storage is not None
        self.current_learning_iteration = current_learning_iteration
        if self.schedule == "linear":
            self._anneal_learning_rate(current_learning_iteration)
        mean_losses: dict[str, torch.Tensor] = defaultdict(lambda: torch.zeros((), device=self.device))
        mean_stats: dict[str, torch.Tensor] = defaultdict(lambda: torch.zeros((), device=self.device))
        if self.actor_critic.is_recurrent:
            generator = self.storage.recurrent_mini_batch_generator(
                self.num_mini_batches, self.num_learning_epochs
            )
        else:
            generator = self.storage.mini_batch_generator(self.num_mini_batches, self.num_learning_epochs)
        clip_groups = self._grad_clip_groups()
        num_updates = 0
        for minibatch in generator:
            losses, _, stats = self.compute_losses(minibatch)
            loss = torch.zeros((), device=self.device)
            for name, value in losses.items():
                loss = loss + getattr(self, name + "_coef", 1.0) * value
                mean_losses[name] += value.detach()
            mean_losses["total_loss"] += loss.detach()
            for name, value in stats.items():
                mean_stats[name] += value.detach()
            self.optimizer.zero_grad(set_to_none=True)
            if dist_utils.is_distributed():
                # One bucketed all-reduce averages the gradients; the non-finite flag rides along, so all ranks
                # raise together.
                loss.backward()
                if dist_utils.all_reduce_gradients(self._trainable, ~torch.isfinite(loss)):
                    self._check_finite(loss, losses, any_rank=True)
            else:
                self._check_finite(loss, losses)
                loss.backward()
            for group in clip_groups:
                nn.utils.clip_grad_norm_(group, self.max_grad_norm)
            self.optimizer.step()
            num_updates += 1
        self.storage.clear()
        if hasattr(self.actor_critic, "clip_std"):
            self.actor_critic.clip_std(min=self.clip_min_std)
        n = max(num_updates, 1)
        return (
            {k: float(v) / n for k, v in mean_losses.items()},
            {k: float(v) / n for k, v in mean_stats.items()},
        )

    def _anneal_learning_rate(self, iteration: int) -> None:
        """``learning_rate = initial * (1 - iteration / lr_anneal_iterations)``, floored at 0."""
        assert self.lr_anneal_iterations is not None
        frac = max(0.0, 1.0 - iteration / self.lr_anneal_iterations)
        self.learning_rate = self.initial_learning_rate * frac
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    def _grad_clip_groups(self) -> list[list[nn.Parameter]]:
        """Parameter sets whose gradient norms are clipped to ``max_grad_norm`` separately (default: one)."""
        return [list(self.actor_critic.parameters())]

    @property
    def _trainable(self) -> list[nn.Parameter]:
        return [p for p in self.actor_critic.parameters() if p.requires_grad]

    def _check_finite(
        self, loss: torch.Tensor, losses: dict[str, torch.Tensor], any_rank: bool = False
    ) -> None:
        if any_rank or not bool(torch.isfinite(loss)):
            bad = [k for k, v in losses.items() if not bool(torch.isfinite(v).all())]
            where = f" (on rank {dist_utils.dist.get_rank()})" if bad and dist_utils.is_distributed() else ""
            if any_rank and not bad:
                where = " on another rank"
            raise NonFiniteLossError(
                f"Non-finite loss at learning iteration {self.current_learning_iteration} in {bad or ['total_loss']}{where}. "
                "The parameters were not updated. Typical causes: exploding observations (enable "
                "empirical_normalization or clip observations), a too high learning_rate, or rewards of very "
                "large magnitude."
            )

    def compute_losses(
        self, minibatch: MiniBatch
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Losses ``surrogate_loss``, ``value_loss`` and ``entropy`` for one minibatch.

        Returns ``(losses, inter_vars, stats)``. With ``schedule="adaptive"`` the learning rate is adapted
        here from the KL between the rollout policy and the current one.
        """
        hidden = minibatch.hidden_states
        actor_kw: dict[str, Any] = {}
        critic_kw: dict[str, Any] = {}
        if self.actor_critic.is_recurrent:
            actor_kw = {
                "masks": minibatch.masks,
                "hidden_states": hidden.actor if hidden is not None else None,
            }
            critic_kw = {
                "masks": minibatch.masks,
                "hidden_states": hidden.critic if hidden is not None else None,
            }
        self.actor_critic.act(minibatch.obs, **actor_kw)
        log_prob = self.actor_critic.get_actions_log_prob(minibatch.actions)
        value = self.actor_critic.evaluate(minibatch.critic_obs, **critic_kw)
        mu = self.actor_critic.action_mean
        sigma = self.actor_critic.action_std
        entropy = self.actor_critic.entropy

        inter_vars: dict[str, torch.Tensor] = {}
        stats: dict[str, torch.Tensor] = {}
        if self.desired_kl is not None and self.schedule == "adaptive":
            with torch.inference_mode():
                kl = F.gaussian_kl(minibatch.old_mu, minibatch.old_sigma, mu, sigma)
                kl_mean = float(dist_utils.all_reduce_mean(kl.mean()))  # same learning rate on every rank
            self.learning_rate = F.adaptive_learning_rate(self.learning_rate, kl_mean, self.desired_kl)
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate
            inter_vars["kl"] = kl
            stats["kl"] = kl.mean()

        surrogate_loss, surr_vars = F.clipped_surrogate_loss(
            log_prob, minibatch.old_actions_log_prob, minibatch.advantages, self.clip_param
        )
        inter_vars.update(surr_vars)
        value_loss, value_clipped = F.value_function_loss(
            value, minibatch.values, minibatch.returns, self.clip_param, self.use_clipped_value_loss
        )
        if value_clipped is not None:
            inter_vars["value_clipped"] = value_clipped
        losses = {"surrogate_loss": surrogate_loss, "value_loss": value_loss, "entropy": -entropy.mean()}
        with torch.no_grad():
            stats["clip_fraction"] = ((surr_vars["ratio"] - 1.0).abs() > self.clip_param).float().mean()
        return losses, inter_vars, stats

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Model, optimizer and (when used) normaliser and scheduler states."""
        state: dict[str, Any] = {
            "model_state_dict": self.actor_critic.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict(),
        }
        scheduler = getattr(self, "lr_scheduler", None)
        if scheduler is not None:
            state["lr_scheduler_state_dict"] = scheduler.state_dict()
        if self.empirical_normalization:
            state["obs_norm_state_dict"] = self.obs_normalizer.state_dict()
            state["critic_obs_norm_state_dict"] = self.critic_obs_normalizer.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], load_optimizer: bool = True) -> None:
        """Restore what :meth:`state_dict` saved; the optimizer and scheduler only when ``load_optimizer``."""
        self.actor_critic.load_state_dict(state_dict["model_state_dict"])
        if load_optimizer and "optimizer_state_dict" in state_dict:
            self.optimizer.load_state_dict(state_dict["optimizer_state_dict"])
            self.learning_rate = self.optimizer.param_groups[0]["lr"]
        for key, normalizer in (
            ("obs_norm_state_dict", self.obs_normalizer),
            ("critic_obs_norm_state_dict", self.critic_obs_normalizer),
        ):
            if key not in state_dict:
                continue
            if isinstance(normalizer, EmpiricalNormalization):
                normalizer.load_state_dict(state_dict[key])
            else:
                warnings.warn(
                    f"The checkpoint has '{key}' but empirical_normalization is off: the statistics are ignored.",
                    stacklevel=2,
                )
        scheduler = getattr(self, "lr_scheduler", None)
        if scheduler is not None and load_optimizer:
            if "lr_scheduler_state_dict" in state_dict:
                scheduler.load_state_dict(state_dict["lr_scheduler_state_dict"])
            else:
                warnings.warn(
                    "The checkpoint has no lr scheduler state; the scheduler starts fresh.", stacklevel=2
                )
        elif scheduler is None and "lr_scheduler_state_dict" in state_dict:
            warnings.warn(
                "The checkpoint has an lr scheduler state but no scheduler is configured; ignored.",
                stacklevel=2,
            )
