"""Proximal Policy Optimization with extensions (AMP, distillation, estimator, RND, symmetry, your own)."""

from __future__ import annotations

import functools
import inspect
import operator
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.optim as optim

import st_rl.algorithms.extensions as extension_classes
import st_rl.algorithms.functional as F
from st_rl.algorithms.collector import RolloutCollector
from st_rl.algorithms.cuda_graph import GraphedRollout, GraphedUpdate
from st_rl.algorithms.extensions.base import Extension
from st_rl.algorithms.guard import NonFiniteLossError, UpdateGuard
from st_rl.config.defaults import PPO_SIGNATURE_DEFAULTS
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.registry import resolve_class
from st_rl.storage.rollout_storage import MiniBatch, RolloutStorage, Transition, compute_returns
from st_rl.utils import distributed as dist_utils
from st_rl.utils.checkpoint import migrate_checkpoint
from st_rl.utils.cpu_memory import keep_freed_memory
from st_rl.utils.precision import resolve_precision

__all__ = ["COMPILE_MODES", "PPO", "NonFiniteLossError", "compile_policy", "compute_returns"]

# st_gym's keys for every algorithm: plain PPO ignores them silently.
_TOLERATED_KEYS = frozenset({"class_name", "amp_obs_dim", "bc_loss_coef"})
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
"""``torch.compile`` modes of ``compile``; the CUDA-graph modes ('reduce-overhead', 'max-autotune') crash in the
update (it reads outputs that the next graph replay overwrites) and are refused."""
_NORMALIZER_ENTRIES = (
    ("obs_norm_state_dict", "actor_obs_normalizer"),
    ("critic_obs_norm_state_dict", "critic_obs_normalizer"),
)


def make_optimizer(optimizer_cls: type[optim.Optimizer], params: Any, lr: float) -> optim.Optimizer:
    """``optimizer_cls(params, lr=lr)``, fused where the class and device support it."""
    params = list(params)
    if "fused" in inspect.signature(optimizer_cls.__init__).parameters and all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
    ):
        try:
            return optimizer_cls(params, lr=lr, fused=True)  # type: ignore[call-arg]
        except (RuntimeError, TypeError, ValueError):
            pass  # no fused kernel for this device in this torch build
    return optimizer_cls(params, lr=lr)  # type: ignore[call-arg]


def optimizer_class(name: str) -> type[optim.Optimizer]:
    """A ``torch.optim`` optimizer class by name (``ValueError`` listing the names if unknown)."""
    names = sorted(
        n
        for n, c in optim.__dict__.items()
        if isinstance(c, type) and issubclass(c, optim.Optimizer) and c is not optim.Optimizer
    )
    if name not in names:
        raise ValueError(f"Unknown optimizer_class_name '{name}'; available: {names}")
    return optim.__dict__[name]


def compile_policy(policy: nn.Module, mode: str | bool | None = None) -> bool:
    """Compile the policy's ``actor`` and ``critic`` in place (checkpoints unchanged) in ``mode`` (a string, else
    torch's default); False, with a warning, where this torch cannot compile."""
    try:
        torch.compile(lambda x: x * 2.0)(torch.ones(2))  # a probe: fails fast when the backend is unusable
    except Exception as exc:  # noqa: BLE001 - any backend failure means: run eagerly
        warnings.warn(f"torch.compile is not usable here ({exc!r}); running eagerly", stacklevel=3)
        return False
    networks = [m for name, m in policy.named_children() if name in ("actor", "critic")]
    for module in networks:
        module.compile(mode=mode if isinstance(mode, str) else None)
    return bool(networks)


def _check_options(
    schedule: str, lr_anneal_iterations: int | None, epochs: int, mini_batches: int, compile_mode: Any
) -> None:
    """The options a direct Python caller may get wrong (a config is checked before, at the edge)."""
    if isinstance(compile_mode, str) and compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile must be a bool or one of {COMPILE_MODES}, got {compile_mode!r}")
    if schedule not in ("fixed", "adaptive", "linear"):
        raise ValueError(f"schedule must be 'fixed', 'adaptive' or 'linear', got {schedule!r}")
    if schedule == "linear" and (lr_anneal_iterations is None or int(lr_anneal_iterations) < 1):
        raise ValueError(f"schedule='linear' needs lr_anneal_iterations >= 1, got {lr_anneal_iterations!r}")
    if epochs < 1 or mini_batches < 1:
        raise ValueError("num_learning_epochs and num_mini_batches must be >= 1")


def _make_lr_scheduler(optimizer: optim.Optimizer, name: str | None, kwargs: Any, schedule: str) -> Any:
    if name is None:
        return None
    if schedule == "adaptive":
        warnings.warn("lr scheduler and schedule='adaptive': the scheduler sets the lr", stacklevel=3)
    sched_cls = getattr(torch.optim.lr_scheduler, name, None)
    if not isinstance(sched_cls, type):
        raise ValueError(f"Unknown lr_scheduler_class_name {name!r} (a torch.optim.lr_scheduler class)")
    return sched_cls(optimizer, **dict(kwargs or {}))


def _extra_loss_coefs(kwargs: dict[str, Any], owner: str) -> dict[str, Any]:
    """``{name: weight}`` of the ``<name>_coef`` keyword arguments; warns about other unknown ones."""
    unknown = sorted(k for k in kwargs if not k.endswith("_coef") and k not in _TOLERATED_KEYS)
    if unknown:
        warnings.warn(f"{owner} ignores unknown arguments: {unknown}", stacklevel=3)
    return {k[: -len("_coef")]: v for k, v in kwargs.items() if k.endswith("_coef")}


def _make_extensions(
    specs: Iterable[Extension | dict[str, Any]],
    rnd_cfg: dict[str, Any] | None,
    symmetry_cfg: dict[str, Any] | None,
) -> list[Extension]:
    """Extensions from objects or config dicts with ``class_name``, then RND and symmetry."""
    named = {"RandomNetworkDistillation": rnd_cfg, "Symmetry": symmetry_cfg}
    specs = [*specs, *({**dict(cfg), "class_name": name} for name, cfg in named.items() if cfg is not None)]
    out = []
    for spec in specs:
        if isinstance(spec, dict):
            kwargs = dict(spec)
            cls = resolve_class(kwargs.pop("class_name", None), extension_classes, "extension", Extension)
            spec = cls(**kwargs)
        out.append(spec)
    return out


class PPO(RolloutCollector):
    """PPO (clipped surrogate and value losses, entropy bonus, GAE, adaptive-KL learning rate) plus extensions.
    A minibatch's loss is ``sum(weight[name] * loss[name])`` over ``surrogate_loss``, ``value_loss``, ``entropy``
    (``-mean(H)``) and every extension's losses. The arguments: docs/configuration.md (algorithm)."""

    config_tolerated: frozenset[str] = _TOLERATED_KEYS | {"surrogate_loss_coef"}
    config_accepts_coefs = True

    def __init__(
        self,
        actor_critic: nn.Module,
        num_learning_epochs: int = PPO_SIGNATURE_DEFAULTS.num_learning_epochs,
        num_mini_batches: int = PPO_SIGNATURE_DEFAULTS.num_mini_batches,
        clip_param: float = PPO_SIGNATURE_DEFAULTS.clip_param,
        gamma: float = PPO_SIGNATURE_DEFAULTS.gamma,
        lam: float = PPO_SIGNATURE_DEFAULTS.lam,
        value_loss_coef: float = PPO_SIGNATURE_DEFAULTS.value_loss_coef,
        entropy_coef: float = PPO_SIGNATURE_DEFAULTS.entropy_coef,
        learning_rate: float = PPO_SIGNATURE_DEFAULTS.learning_rate,
        max_grad_norm: float | None = PPO_SIGNATURE_DEFAULTS.max_grad_norm,
        use_clipped_value_loss: bool = PPO_SIGNATURE_DEFAULTS.use_clipped_value_loss,
        clip_min_std: float | Sequence[float] = 1e-15,
        optimizer_class_name: str = "Adam",
        schedule: str = PPO_SIGNATURE_DEFAULTS.schedule,
        desired_kl: float | None = PPO_SIGNATURE_DEFAULTS.desired_kl,
        device: str | torch.device = "cpu",
        empirical_normalization: bool = False,
        *args: Any,
        lr_anneal_iterations: int | None = None,
        extensions: Iterable[Extension | dict[str, Any]] = (),
        rnd_cfg: dict[str, Any] | None = None,
        symmetry_cfg: dict[str, Any] | None = None,
        use_ppo_loss: bool = True,
        buffer_dilation_ratio: float = 1.0,
        lr_scheduler_class_name: str | None = None,
        lr_scheduler: dict[str, Any] | None = None,
        precision: str = "auto",
        compile: bool | str = False,  # noqa: A002 - the option's name in configs
        cuda_graph: bool | str = "auto",
        **kwargs: Any,
    ) -> None:
        if args:
            raise TypeError(f"{type(self).__name__} takes keywords only after actor_critic; got {args}")
        _check_options(schedule, lr_anneal_iterations, num_learning_epochs, num_mini_batches, compile)
        if buffer_dilation_ratio < 1.0:
            raise ValueError(f"buffer_dilation_ratio must be >= 1, got {buffer_dilation_ratio}")
        self.device = torch.device(device)
        self.precision_request = precision
        self.precision = resolve_precision(precision, self.device)
        if self.device.type == "cpu":
            keep_freed_memory()  # the update's large activations reuse memory (st_rl/utils/cpu_memory.py)
        self.actor_critic: Any = actor_critic.to(self.device)
        self.num_learning_epochs, self.num_mini_batches = int(num_learning_epochs), int(num_mini_batches)
        self.clip_param, self.gamma, self.lam = clip_param, gamma, lam
        self.value_loss_coef, self.entropy_coef = value_loss_coef, entropy_coef
        self.surrogate_loss_coef = float(kwargs.pop("surrogate_loss_coef", 1.0))
        self.extra_loss_coefs = _extra_loss_coefs(kwargs, type(self).__name__)
        self.guard = UpdateGuard(self.device, learning_rate)
        self.max_grad_norm, self.use_clipped_value_loss = max_grad_norm, use_clipped_value_loss
        self.clip_min_std: Any = clip_min_std
        if isinstance(clip_min_std, (list, tuple)):
            self.clip_min_std = torch.tensor(clip_min_std, dtype=torch.float32, device=self.device)
        self.schedule, self.desired_kl = schedule, desired_kl
        self.initial_learning_rate = float(learning_rate)
        self.lr_anneal_iterations = None if lr_anneal_iterations is None else int(lr_anneal_iterations)
        self.use_ppo_loss = bool(use_ppo_loss)
        self.buffer_dilation_ratio = float(buffer_dilation_ratio)
        self.optimizer_class_name = optimizer_class_name
        self.empirical_normalization = bool(empirical_normalization)
        if self.empirical_normalization and not self.actor_critic.actor_obs_normalization:
            self.actor_critic.enable_obs_normalization()
        self.extensions: dict[str, Extension] = {}
        self.storage: RolloutStorage | None = None
        for ext in _make_extensions(extensions, rnd_cfg, symmetry_cfg):
            self.add_extension(ext)
        self.optimizer = make_optimizer(
            optimizer_class(optimizer_class_name), self._policy_parameters(), learning_rate
        )
        self._lr_scheduler = _make_lr_scheduler(
            self.optimizer, lr_scheduler_class_name, lr_scheduler, schedule
        )
        if self._lr_scheduler is not None:  # the attribute exists only with a scheduler (as the reference's)
            self.lr_scheduler = self._lr_scheduler
        self.transition, self._compile_clock = Transition(), None
        self.compiled = bool(compile) and compile_policy(self.actor_critic, compile)
        self.graphed_update, self.graphed_rollout = GraphedUpdate(cuda_graph), GraphedRollout(cuda_graph)
        self.set_sync_free(self.device.type == "cuda")

    @property
    def learning_rate(self) -> float:
        """The policy optimizer's learning rate (kept by the guard)."""
        return self.guard.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self.guard.learning_rate = value

    @property
    def sync_free(self) -> bool:
        """Whether the update's checks stay on the device (see :meth:`set_sync_free`)."""
        return self.guard.sync_free

    def set_sync_free(self, enabled: bool) -> None:
        """Keep the update's per-minibatch checks on the device (the CUDA default; see ``UpdateGuard``)."""
        adaptive = self.schedule == "adaptive" and self.desired_kl is not None
        device_lr = (adaptive or self.graphed_update.mode is not False) and self._lr_scheduler is None
        self.guard.set_sync_free(enabled, self.optimizer, device_lr=device_lr)

    def add_extension(self, extension: Extension) -> Extension:
        """Attach an extension (before ``init_storage``); returns it."""
        if not isinstance(extension, Extension):
            raise TypeError(f"extensions must be Extension instances, got {type(extension).__name__}")
        if extension.name in self.extensions:
            raise ValueError(f"two extensions are named {extension.name!r}")
        if self.storage is not None:
            raise RuntimeError("add extensions before init_storage(): they register storage fields")
        extension.setup(self.actor_critic, self.device)
        for module in extension.modules():
            module.to(self.device)
        extension.iteration = self.current_learning_iteration
        if extension.shared_parameters() and "optimizer" in self.__dict__:  # added after construction
            self.optimizer.add_param_group({"params": extension.shared_parameters()})
        self.extensions[extension.name] = extension
        return extension

    policy = property(operator.attrgetter("actor_critic"))

    @property
    def current_learning_iteration(self) -> int:
        return self.__dict__.get("_iteration", 0)

    @current_learning_iteration.setter
    def current_learning_iteration(self, value: int) -> None:
        self._iteration = int(value)
        for ext in self.__dict__.get("extensions", {}).values():
            ext.iteration = self._iteration

    rnd = property(lambda self: self.extensions.get("rnd"))  # the RND extension or None (reference name)

    def loss_weight(self, name: str) -> float:
        """Weight of loss ``name`` in the total loss."""
        own = {"surrogate_loss": self.surrogate_loss_coef, "value_loss": self.value_loss_coef}
        if name in own or name == "entropy":
            return own.get(name, self.entropy_coef)
        for ext in self.extensions.values():
            weights = ext.loss_weights()
            if name in weights:
                return float(weights[name])
        return float(self.extra_loss_coefs.get(name, 1.0))

    def attach_env(self, env: Any) -> None:
        """Hand the training environment to every extension (runners call this once)."""
        for ext in self.extensions.values():
            ext.attach_env(env)

    def init_obs_norm(self, num_obs: int, num_critic_obs: int) -> None:
        """The reference's call: enables the policy's normalisers with ``empirical_normalization``."""
        if self.empirical_normalization:
            self.actor_critic.enable_obs_normalization()

    def train_mode(self, mode: bool = True) -> None:
        self.actor_critic.train(mode)
        for ext in self.extensions.values():
            ext.train(mode)

    def eval_mode(self) -> None:
        self.train_mode(False)

    def _optimizers(self) -> list[optim.Optimizer]:
        return [self.optimizer] + [e.optimizer for e in self.extensions.values() if e.optimizer is not None]

    def modules(self) -> list[nn.Module]:
        """The policy and every extension's modules (broadcast from rank 0 in multi-rank runs)."""
        return [self.actor_critic] + [m for ext in self.extensions.values() for m in ext.modules()]

    def update(
        self, current_learning_iteration: int | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Run the epochs over the stored rollout; return the mean losses and stats (0-dim CPU tensors)."""
        assert self.storage is not None
        if current_learning_iteration is not None:
            self.current_learning_iteration = current_learning_iteration
        if self.schedule == "linear":
            self._anneal_learning_rate(self.current_learning_iteration)
        storage = self.storage
        batches = (
            storage.recurrent_mini_batch_generator
            if self.actor_critic.is_recurrent
            else storage.mini_batch_generator
        )
        optimizers, clip_groups, params = self._optimizers(), self._grad_clip_groups(), self._trainable
        num_minibatches = self.num_learning_epochs * self.num_mini_batches
        self.guard.begin(params, optimizers, self.current_learning_iteration, num_minibatches)
        if self.graphed_update.enabled(self):
            num_updates = self.graphed_update.run(self, self._minibatch_loop, optimizers, clip_groups)
        else:
            minibatches = batches(self.num_mini_batches, self.num_learning_epochs)
            num_updates = self._minibatch_loop(minibatches, optimizers, clip_groups)
        host = self.guard.finish(num_updates)
        self._after_update()
        stats_out = {k[2:]: v for k, v in host.items() if k.startswith("s/")}
        for ext in self.extensions.values():
            stats_out.update({k: torch.tensor(float(v)) for k, v in ext.log_scalars().items()})
        return {k[2:]: v for k, v in host.items() if k.startswith("l/")}, stats_out

    def _minibatch_loop(
        self,
        minibatches: Iterable[MiniBatch],
        optimizers: list[optim.Optimizer],
        clip_groups: list[list[nn.Parameter]],
    ) -> int:
        """Losses, backward pass, clipping and optimizer steps of each minibatch; returns their number."""
        weights: dict[str, float] = {}
        num_updates = 0
        for minibatch in minibatches:
            for ext in self.extensions.values():
                minibatch = ext.transform_minibatch(minibatch)
            losses, _, stats = self.compute_losses(minibatch)
            weights = weights or {name: self.loss_weight(name) for name in losses}
            terms = [
                value if weights[name] == 1.0 else weights[name] * value for name, value in losses.items()
            ]
            loss = functools.reduce(operator.add, terms) if terms else torch.zeros((), device=self.device)
            self.guard.record(
                num_updates,
                {**{f"l/{k}": v for k, v in losses.items()}, "l/total_loss": loss}
                | {f"s/{k}": v for k, v in stats.items()},
            )
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            self.guard.backward(loss, losses)
            if self.max_grad_norm is not None:
                for group in clip_groups:
                    nn.utils.clip_grad_norm_(group, self.max_grad_norm)
            for optimizer in optimizers:
                optimizer.step()
            num_updates += 1
        return num_updates

    def _after_update(self) -> None:
        assert self.storage is not None
        self.storage.clear()
        self.actor_critic.clip_std(min=self.clip_min_std)
        for ext in self.extensions.values():
            ext.after_update(self.storage)
        if self._lr_scheduler is not None:
            self._lr_scheduler.step()
            self.learning_rate = self.optimizer.param_groups[0]["lr"]
        if self._compile_clock is not None and self._compile_clock > 0:
            print(
                "[st_rl] torch.compile: the first rollout and update, compilation included, took "
                f"{time.perf_counter() - self._compile_clock:.1f} s",
                flush=True,
            )
            self._compile_clock = 0.0

    def _anneal_learning_rate(self, iteration: int) -> None:
        assert self.lr_anneal_iterations is not None
        remaining = max(0.0, 1.0 - iteration / self.lr_anneal_iterations)
        self.learning_rate = self.initial_learning_rate * remaining
        if self.guard.lr_tensor is None:  # else the optimizer reads the guard's device tensor
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate

    def _grad_clip_groups(self) -> list[list[nn.Parameter]]:
        """Parameter sets clipped separately: the policy, extensions' policy-side groups, extensions' own."""
        apart = [group for ext in self.extensions.values() for group in ext.clip_groups()]
        apart_ids = {id(p) for group in apart for p in group}
        policy = [p for p in self._policy_parameters() if id(p) not in apart_ids]
        own = [ext.parameters() for ext in self.extensions.values() if ext.parameters()]
        return [policy, *apart, *own]

    def _policy_parameters(self) -> list[nn.Parameter]:
        return [
            *self.actor_critic.parameters(),
            *(p for e in self.extensions.values() for p in e.shared_parameters()),
        ]

    @property
    def _trainable(self) -> list[nn.Parameter]:
        params = self._policy_parameters() + [p for e in self.extensions.values() for p in e.parameters()]
        return [p for p in params if p.requires_grad]

    def compute_losses(
        self, minibatch: MiniBatch
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """``(losses, inter_vars, stats)`` of one minibatch: PPO's losses (unless ``use_ppo_loss`` is off), then
        every extension's; the adaptive schedule adapts the learning rate here."""
        critic_obs = minibatch.critic_obs if self.use_ppo_loss else None
        with self.autocast():
            output = self.actor_critic.policy_output(
                minibatch.obs, critic_obs, minibatch.masks, minibatch.hidden_states
            )
        ppo_terms = self._ppo_losses(minibatch, output) if self.use_ppo_loss else ({}, {}, {})
        losses, inter_vars, stats = ppo_terms
        for ext in self.extensions.values():
            for name, value in ext.losses(minibatch, output).items():
                if name in losses:
                    raise ValueError(f"loss {name!r} of extension {ext.name!r} is taken")
                losses[name] = value
        return losses, inter_vars, stats

    def _ppo_losses(self, minibatch: MiniBatch, output: PolicyOutput) -> tuple[dict, dict, dict]:
        mu, sigma = output.action_mean, output.action_std
        inter_vars: dict[str, torch.Tensor] = {}
        stats: dict[str, torch.Tensor] = {}
        if self.desired_kl is not None and self.schedule == "adaptive":
            with torch.inference_mode():
                kl = F.gaussian_kl(minibatch.old_mu, minibatch.old_sigma, mu, sigma)
                kl_mean = dist_utils.all_reduce_mean(kl.mean())  # same learning rate on every rank
                self.guard.adapt_learning_rate(kl_mean, self.desired_kl, self.optimizer)
            inter_vars["kl"] = kl
            stats["kl"] = kl.mean()
        surrogate_loss, surr_vars = F.clipped_surrogate_loss(
            output.log_prob(minibatch.actions),
            minibatch.old_actions_log_prob,
            minibatch.advantages,
            self.clip_param,
        )
        inter_vars.update(surr_vars)
        assert output.values is not None
        value_loss, value_clipped = F.value_function_loss(
            output.values, minibatch.values, minibatch.returns, self.clip_param, self.use_clipped_value_loss
        )
        if value_clipped is not None:
            inter_vars["value_clipped"] = value_clipped
        losses = dict(surrogate_loss=surrogate_loss, value_loss=value_loss, entropy=-output.entropy.mean())
        with torch.no_grad():
            stats["clip_fraction"] = ((surr_vars["ratio"] - 1.0).abs() > self.clip_param).float().mean()
        return losses, inter_vars, stats

    def state_dict(self) -> dict[str, Any]:
        """Model, optimizer, scheduler and every extension's entries; normalisers that are on also under the
        reference's ``obs_norm_state_dict`` / ``critic_obs_norm_state_dict`` (never read back)."""
        optimizer_state = self.optimizer.state_dict()
        optimizer_state["param_groups"] = [  # a device learning rate is saved as the float it is
            {**g, "lr": float(g["lr"])} if torch.is_tensor(g["lr"]) else g
            for g in optimizer_state["param_groups"]
        ]
        state: dict[str, Any] = {
            "model_state_dict": self.actor_critic.state_dict(),
            "optimizer_state_dict": optimizer_state,
        }
        for key, name in _NORMALIZER_ENTRIES:
            normalizer = getattr(self.actor_critic, name, None)
            if isinstance(normalizer, EmpiricalNormalization):
                state[key] = normalizer.state_dict()  # shares storage with model_state_dict: saved once
        if self._lr_scheduler is not None:
            state["lr_scheduler_state_dict"] = self._lr_scheduler.state_dict()
        for ext in self.extensions.values():
            for key, value in ext.state_dict().items():
                if key in state:
                    raise ValueError(f"extension {ext.name!r} writes the taken checkpoint entry {key!r}")
                state[key] = value
        return state

    def load_state_dict(self, state_dict: dict[str, Any], load_optimizer: bool = True) -> None:
        """Restore :meth:`state_dict` (older formats migrated); the optimizer and scheduler with ``load_optimizer``."""
        state_dict = migrate_checkpoint(state_dict)
        self.actor_critic.load_state_dict(state_dict["model_state_dict"])
        if load_optimizer and "optimizer_state_dict" in state_dict:
            self.optimizer.load_state_dict(state_dict["optimizer_state_dict"])
            self.guard.learning_rate = float(self.optimizer.param_groups[0]["lr"])
            self.set_sync_free(self.sync_free)  # re-links a device learning rate to the loaded value
        scheduler, has_state = self._lr_scheduler, "lr_scheduler_state_dict" in state_dict
        if scheduler is not None and load_optimizer and has_state:
            scheduler.load_state_dict(state_dict["lr_scheduler_state_dict"])
        elif scheduler is not None and load_optimizer:
            warnings.warn("No lr scheduler state in the checkpoint: it starts fresh.", stacklevel=2)
        elif scheduler is None and has_state:
            warnings.warn("The checkpoint's lr scheduler state is ignored (no scheduler).", stacklevel=2)
        for ext in self.extensions.values():
            ext.load_state_dict(state_dict, load_optimizer=load_optimizer)
