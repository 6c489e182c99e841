"""Proximal Policy Optimization with extensions (AMP, distillation, estimator, RND, symmetry, your own)."""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.optim as optim

from st_rl.algorithms import functional as F
from st_rl.algorithms.extensions.base import Extension, StorageLayout
from st_rl.config.defaults import PPO_SIGNATURE_DEFAULTS
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import MiniBatch, RolloutStorage, Transition
from st_rl.utils import distributed as dist_utils
from st_rl.utils.precision import autocast, resolve_precision

# Keys that st_gym's PPO config form carries for every algorithm (AMP / BC settings); plain PPO accepts and
# ignores them silently. Anything else unknown is reported.
_TOLERATED_KEYS = frozenset({"class_name", "amp_obs_dim", "bc_loss_coef"})
PPO_LOSSES = ("surrogate_loss", "value_loss", "entropy")


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


def optimizer_class(name: str) -> type[optim.Optimizer]:
    """A ``torch.optim`` optimizer class by name.

    Raises:
        ValueError: unknown name (the message lists the available ones).
    """
    cls = optim.__dict__.get(name)
    if isinstance(cls, type) and issubclass(cls, optim.Optimizer) and cls is not optim.Optimizer:
        return cls
    names = sorted(
        n
        for n, c in optim.__dict__.items()
        if isinstance(c, type) and issubclass(c, optim.Optimizer) and c is not optim.Optimizer
    )
    raise ValueError(f"Unknown optimizer_class_name '{name}'; available: {names}")


def compute_returns(storage: RolloutStorage, last_values: torch.Tensor, gamma: float, lam: float) -> None:
    """GAE returns and globally normalised advantages of the stored rollout, written into the storage."""
    storage.untie_buffer_loop()  # ring storages: oldest step first
    returns, advantages = F.compute_gae(
        storage.rewards[..., 0],
        storage.values[..., 0],
        storage.dones[..., 0],
        last_values.reshape(-1),
        gamma,
        lam,
    )
    storage.returns.copy_(returns.unsqueeze(-1))
    storage.advantages.copy_(F.normalize_advantages(advantages).unsqueeze(-1))


def _make_extension(spec: Extension | dict[str, Any]) -> Extension:
    """An extension object from itself or from a config dict with ``class_name``."""
    if not isinstance(spec, dict):
        return spec
    import st_rl.algorithms.extensions as namespace
    from st_rl.utils.config import resolve_class

    kwargs = dict(spec)
    cls = resolve_class(kwargs.pop("class_name", None), namespace, "extension", Extension)
    return cls(**kwargs)


class NonFiniteLossError(FloatingPointError):
    """Raised when a loss becomes NaN or Inf (before the optimizer step, or, in a sync-free update, after
    restoring the parameters and optimizer state of the update's start: they stay intact either way)."""


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_policy(policy: nn.Module, mode: str | None = None) -> bool:
    """Compile the policy's ``actor`` and ``critic`` networks in place (``nn.Module.compile``: parameter names
    and checkpoints stay the same); False, with a warning, where this torch cannot compile (no compiler
    toolchain, an unsupported platform)."""
    try:
        torch.compile(lambda x: x * 2.0)(torch.ones(2))  # a probe: fails fast when the backend is unusable
    except Exception as exc:  # noqa: BLE001 - any backend failure means: run eagerly
        warnings.warn(
            f"torch.compile is not usable here ({type(exc).__name__}: {exc}); running eagerly", stacklevel=3
        )
        return False
    networks = [m for name, m in policy.named_children() if name in ("actor", "critic")]
    for module in networks:
        module.compile(mode=mode)
    return bool(networks)


def _fused_takes_tensor_lr(optimizer_cls: type[optim.Optimizer], device: torch.device) -> bool:
    """Whether this torch's fused ``optimizer_cls`` steps with a learning rate held in a device tensor."""
    try:
        p = torch.zeros(1, device=device, requires_grad=True)
        p.grad = torch.zeros(1, device=device)
        optimizer_cls([p], lr=torch.tensor(1e-3, device=device), fused=True).step()  # type: ignore[call-arg]
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def _scalars_to_cpu(values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The 0-dim device tensors ``values`` as 0-dim CPU float tensors, copied in one transfer."""
    if not values:
        return {}
    host = torch.stack([v.float() for v in values.values()]).cpu()
    return dict(zip(values, host.unbind()))


class PPO:
    """PPO with clipped surrogate and value losses, entropy bonus, GAE and an adaptive-KL learning rate, plus
    a list of extensions (see :mod:`st_rl.algorithms.extensions`).

    The total loss of a minibatch is ``sum(weight[name] * loss[name])`` over PPO's losses
    (``surrogate_loss``, ``value_loss``, ``entropy`` = ``-mean(H)``) and every extension's. PPO's weights are
    ``surrogate_loss_coef`` (1), ``value_loss_coef`` and ``entropy_coef``; extensions weigh their own losses.

    Args:
        actor_critic: the policy (e.g. :class:`st_rl.modules.ActorCritic`); it takes raw observations and owns
            its observation normalisers.
        num_learning_epochs: passes over the rollout per update.
        num_mini_batches: minibatches per epoch.
        clip_param: PPO ratio clip (also the value clip).
        gamma: discount.
        lam: GAE lambda.
        value_loss_coef: weight of ``value_loss``.
        entropy_coef: weight of ``entropy``.
        learning_rate: initial learning rate.
        max_grad_norm: gradient norm clip (None: no clipping).
        use_clipped_value_loss: PPO value clipping.
        clip_min_std: lower bound of the policy std after each update (scalar or per action).
        optimizer_class_name: any ``torch.optim`` class name.
        schedule: ``"fixed"``, ``"adaptive"`` (adaptive-KL learning rate) or ``"linear"`` (annealed from
            ``learning_rate`` at iteration 0 to 0 at ``lr_anneal_iterations``, as CleanRL does).
        desired_kl: KL target of the adaptive schedule.
        lr_anneal_iterations: length of the ``"linear"`` schedule in learning iterations (the runner fills
            it from ``max_iterations`` when not given).
        device: training device.
        empirical_normalization: the policy normalises its observations with running statistics (PPO enables
            the policy's normalisers if it was built without them).
        extensions: extension objects, or config dicts ``{"class_name": "pkg.module:Class", **kwargs}`` (short
            names resolve in :mod:`st_rl.algorithms.extensions`); their names must be unique.
        rnd_cfg: keyword arguments of :class:`~st_rl.algorithms.extensions.rnd.RandomNetworkDistillation`
            (curiosity); None: off.
        symmetry_cfg: keyword arguments of :class:`~st_rl.algorithms.extensions.symmetry.Symmetry`; None: off.
        use_ppo_loss: with False the PPO losses are skipped (and returns not computed): the extensions'
            losses alone train the policy (pure distillation / DAgger).
        buffer_dilation_ratio: keep this many rollouts' worth of steps in a ring storage (>= 1).
        lr_scheduler_class_name: a ``torch.optim.lr_scheduler`` class, stepped once per update.
        lr_scheduler: its keyword arguments.
        precision: ``"fp32"``, ``"bf16"`` (the policy's forward passes, in the rollout and the update, under
            bfloat16 autocast; see :mod:`st_rl.utils.precision`) or ``"auto"`` (bf16 where the device has fast
            bfloat16 units: CPUs with AVX512-BF16/AMX, CUDA GPUs of compute capability 8+; else fp32).
        compile: compile the policy's actor and critic networks with ``torch.compile`` (compiled on their first
            call; later iterations reuse the compiled code; the time of the first rollout step and update,
            compilation included, is printed). True uses torch's default mode; a string is the mode
            (``"reduce-overhead"``: CUDA graphs on a GPU, ``"max-autotune"``, ...). Falls back to eager
            execution with a warning where this torch cannot compile.
        **kwargs: ``<name>_coef`` weights of other losses; st_gym's per-algorithm keys are tolerated.
    """

    # The config schema (st_rl.config.schema): keys accepted and ignored, and `<name>_coef` loss weights.
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
        if buffer_dilation_ratio < 1.0:
            raise ValueError(f"buffer_dilation_ratio must be >= 1, got {buffer_dilation_ratio}")
        self.device = torch.device(device)
        self.precision = resolve_precision(precision, self.device)
        self.actor_critic: Any = actor_critic.to(self.device)
        self.num_learning_epochs = int(num_learning_epochs)
        self.num_mini_batches = int(num_mini_batches)
        self.clip_param = clip_param
        self.gamma = gamma
        self.lam = lam
        self.value_loss_coef = value_loss_coef
        self.entropy_coef = entropy_coef
        self.surrogate_loss_coef = float(kwargs.pop("surrogate_loss_coef", 1.0))
        self._lr_t: torch.Tensor | None = None
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
        self.use_ppo_loss = bool(use_ppo_loss)
        self.buffer_dilation_ratio = float(buffer_dilation_ratio)
        self.optimizer_class_name = optimizer_class_name
        self.extra_loss_coefs: dict[str, float] = {}
        self._absorb_extra_kwargs(kwargs)
        self.empirical_normalization = bool(empirical_normalization)
        if self.empirical_normalization and not self.actor_critic.actor_obs_normalization:
            self.actor_critic.enable_obs_normalization()

        self.extensions: dict[str, Extension] = {}
        self._ordered: list[Extension] = []
        self.storage: RolloutStorage | None = None
        for ext in self._default_extensions(rnd_cfg, symmetry_cfg, list(extensions)):
            self.add_extension(ext)

        self.optimizer: optim.Optimizer = make_optimizer(
            optimizer_class(optimizer_class_name), self.actor_critic.parameters(), learning_rate
        )
        self._lr_scheduler: Any = None
        if lr_scheduler_class_name is not None:
            sched_cls = getattr(torch.optim.lr_scheduler, lr_scheduler_class_name, None)
            if sched_cls is None:
                raise ValueError(
                    f"Unknown lr_scheduler_class_name {lr_scheduler_class_name!r} (torch.optim.lr_scheduler)"
                )
            if self.schedule == "adaptive":
                warnings.warn(
                    "Both an lr scheduler and schedule='adaptive' are set; the scheduler decides the learning "
                    "rate after each update.",
                    stacklevel=2,
                )
            # The attribute exists only with a scheduler (the reference's state_dict tests hasattr).
            self._lr_scheduler = self.lr_scheduler = sched_cls(self.optimizer, **dict(lr_scheduler or {}))
        self.transition = Transition()
        if isinstance(compile, str) and compile not in COMPILE_MODES:
            raise ValueError(f"compile must be a bool or one of {COMPILE_MODES}, got {compile!r}")
        mode = compile if isinstance(compile, str) else None
        self.compiled = bool(compile) and compile_policy(self.actor_critic, mode)
        self._compile_clock: float | None = None
        self.sync_free = False
        self.set_sync_free(self.device.type == "cuda")

    @property
    def learning_rate(self) -> float:
        """The policy optimizer's learning rate (with :attr:`sync_free` and the adaptive schedule it lives on the
        device during an update and is read back once at its end)."""
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._learning_rate = float(value)
        if self._lr_t is not None:
            self._lr_t.fill_(self._learning_rate)

    def set_sync_free(self, enabled: bool) -> None:
        """Keep the update's per-minibatch checks on the device (on by default on CUDA).

        With it, the non-finite loss check and the adaptive-KL learning rate never wait for the device inside
        the update: the learning rate is a device tensor (with an optimizer whose fused kernel takes one), the
        non-finite flags are gathered on the device and read once per update, together with the mean losses.
        A non-finite minibatch then restores the parameters and optimizer state of the start of the update
        before :class:`NonFiniteLossError` is raised. Without it (the CPU default, where reading a value costs
        nothing) the check runs before each optimizer step. Multi-rank runs always check per minibatch.
        """
        self.sync_free = bool(enabled)
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"] = self._learning_rate
        self._lr_t = None
        if not (
            self.sync_free
            and self.schedule == "adaptive"
            and self.desired_kl is not None
            and self._lr_scheduler is None
            and self.optimizer.defaults.get("fused")
            and _fused_takes_tensor_lr(type(self.optimizer), self.device)
        ):
            return
        self._lr_t = torch.tensor(self._learning_rate, dtype=torch.float32, device=self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr_t

    def _absorb_extra_kwargs(self, kwargs: dict[str, Any]) -> None:
        unknown = []
        for key, value in kwargs.items():
            if key.endswith("_coef"):
                self.extra_loss_coefs[key[: -len("_coef")]] = value
            elif key not in _TOLERATED_KEYS:
                unknown.append(key)
        if unknown:
            warnings.warn(f"{type(self).__name__} ignores unknown arguments: {sorted(unknown)}", stacklevel=3)

    @staticmethod
    def _default_extensions(
        rnd_cfg: dict[str, Any] | None, symmetry_cfg: dict[str, Any] | None, extensions: list[Any]
    ) -> list[Extension]:
        extensions = [_make_extension(e) for e in extensions]
        if rnd_cfg is not None:
            from st_rl.algorithms.extensions.rnd import RandomNetworkDistillation

            extensions.append(RandomNetworkDistillation(**dict(rnd_cfg)))
        if symmetry_cfg is not None:
            from st_rl.algorithms.extensions.symmetry import Symmetry

            extensions.append(Symmetry(**dict(symmetry_cfg)))
        return extensions

    # ------------------------------------------------------------------ extensions
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
        self.extensions[extension.name] = extension
        # Extensions that run extra policy forward passes go last (they overwrite the policy's cached outputs).
        self._ordered = sorted(self.extensions.values(), key=lambda e: e.reruns_policy)
        return extension

    @property
    def policy(self) -> Any:
        """The policy (``actor_critic``)."""
        return self.actor_critic

    @property
    def current_learning_iteration(self) -> int:
        return self.__dict__.get("_iteration", 0)

    @current_learning_iteration.setter
    def current_learning_iteration(self, value: int) -> None:
        self._iteration = int(value)
        for ext in self.__dict__.get("extensions", {}).values():
            ext.iteration = self._iteration

    @property
    def obs_normalizer(self) -> nn.Module:
        """The policy's actor observation normaliser (identity when normalisation is off)."""
        return self.actor_critic.actor_obs_normalizer

    @obs_normalizer.setter
    def obs_normalizer(self, module: nn.Module) -> None:
        self.actor_critic.actor_obs_normalizer = module
        self.actor_critic.actor_obs_normalization = isinstance(module, EmpiricalNormalization)

    @property
    def critic_obs_normalizer(self) -> nn.Module:
        """The policy's critic observation normaliser (identity when normalisation is off)."""
        return self.actor_critic.critic_obs_normalizer

    @critic_obs_normalizer.setter
    def critic_obs_normalizer(self, module: nn.Module) -> None:
        self.actor_critic.critic_obs_normalizer = module
        self.actor_critic.critic_obs_normalization = isinstance(module, EmpiricalNormalization)

    @property
    def rnd(self) -> Extension | None:
        """The random network distillation extension (None without one), as the reference names it."""
        return self.extensions.get("rnd")

    def loss_weight(self, name: str) -> float:
        """Weight of loss ``name`` in the total loss."""
        if name == "surrogate_loss":
            return self.surrogate_loss_coef
        if name == "value_loss":
            return self.value_loss_coef
        if name == "entropy":
            return self.entropy_coef
        for ext in self._ordered:
            weights = ext.loss_weights()
            if name in weights:
                return float(weights[name])
        return float(self.extra_loss_coefs.get(name, 1.0))

    # ------------------------------------------------------------------ set-up
    def attach_env(self, env: Any) -> None:
        """Hand the training environment to every extension (runners call this once)."""
        for ext in self._ordered:
            ext.attach_env(env)

    def init_obs_norm(self, num_obs: int, num_critic_obs: int) -> None:
        """Kept for existing scripts: the policy owns its normalisers; this enables them when
        ``empirical_normalization`` is set."""
        if self.empirical_normalization:
            self.actor_critic.enable_obs_normalization()

    def init_storage(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        actor_obs_shape: Sequence[int],
        critic_obs_shape: Sequence[int | None],
        action_shape: Sequence[int],
        **kwargs: Any,
    ) -> None:
        """Allocate the rollout storage with PPO's fields and every extension's."""
        storage = RolloutStorage(
            num_envs,
            num_transitions_per_env,
            actor_obs_shape,
            critic_obs_shape,
            action_shape,
            self.device,
            buffer_dilation_ratio=self.buffer_dilation_ratio,
            ring=self.buffer_dilation_ratio > 1.0,
            **kwargs,
        )
        layout = StorageLayout(
            storage.num_envs,
            storage.num_transitions_per_env,
            storage.obs_shape,
            storage.privileged_obs_shape,
            storage.actions_shape,
            dict(kwargs),
        )
        for ext in self._ordered:
            for name, field in ext.storage_fields(layout).items():
                storage.register(name, field)
        self.transition = Transition()
        self.storage = storage

    # ------------------------------------------------------------------ modes
    def train_mode(self) -> None:
        self.actor_critic.train()
        for ext in self._ordered:
            ext.train(True)

    def eval_mode(self) -> None:
        self.actor_critic.eval()
        for ext in self._ordered:
            ext.train(False)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The mixed-precision context of the policy's forward passes (bfloat16 autocast when
        ``self.precision == "bf16"``, else nothing)."""
        return autocast(self.device, self.precision)

    def _update_start_state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[set[int]], float]:
        """Parameters, optimizer states and learning rate as they are (live tensors and their copies), and
        which parameters have optimizer state yet: what a failed sync-free update restores."""
        optimizers = self._optimizers()
        live = [p.data for p in self._trainable]
        live += [
            t for opt in optimizers for st in opt.state.values() for t in st.values() if torch.is_tensor(t)
        ]
        had_state = [{id(p) for p in opt.state} for opt in optimizers]
        return live, [t.detach().clone() for t in live], had_state, self._learning_rate

    def _restore_update_start_state(
        self, state: tuple[list[torch.Tensor], list[torch.Tensor], list[set[int]], float]
    ) -> None:
        live, saved, had_state, learning_rate = state
        with torch.no_grad():
            for tensor, copy in zip(live, saved):
                tensor.copy_(copy)
        for opt, ids in zip(self._optimizers(), had_state):
            for p in [p for p in opt.state if id(p) not in ids]:
                del opt.state[p]  # created by this update's first step: the optimizer starts fresh again
        self.learning_rate = learning_rate

    def _optimizers(self) -> list[optim.Optimizer]:
        return [self.optimizer] + [e.optimizer for e in self._ordered if e.optimizer is not None]

    def modules(self) -> list[nn.Module]:
        """The policy and every extension's modules (what a multi-rank run broadcasts from rank 0)."""
        return [self.actor_critic] + [m for ext in self._ordered for m in ext.modules()]

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for raw observations and record what the update needs."""
        policy, t = self.actor_critic, self.transition
        if self.compiled and self._compile_clock is None:
            self._compile_clock = time.perf_counter()
        if policy.is_recurrent:
            t.hidden_states = policy.get_hidden_states()
        with self.autocast():
            actions = policy.act(obs).detach()
            t.values = policy.evaluate(critic_obs).detach()
        t.action_mean = policy.action_mean.detach()
        t.action_sigma = policy.action_std.detach()
        t.observations = obs
        t.critic_observations = critic_obs
        t.actions = actions
        for ext in self._ordered:
            replaced = ext.on_act(obs, critic_obs, t)
            if replaced is not None:
                t.actions = actions = replaced
        # Executed actions (a teacher's, say) are scored under the policy's rollout distribution.
        t.actions_log_prob = policy.get_actions_log_prob(actions).detach()
        return actions

    def process_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        infos: dict[str, Any],
        next_obs: torch.Tensor | None = None,
        next_critic_obs: torch.Tensor | None = None,
    ) -> None:
        """Store the step's outcome and update the policy's observation statistics with ``next_obs``.

        Extensions may change the rewards first; time-outs are then bootstrapped with
        ``r += gamma * V * time_out``.
        """
        assert self.storage is not None, "call init_storage() before collecting data"
        t = self.transition
        for ext in self._ordered:
            rewards = ext.on_env_step(rewards, dones, infos, t, next_obs, next_critic_obs)
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            rewards = F.bootstrap_time_outs(rewards, t.values, time_outs.to(self.device), self.gamma)
        t.rewards = rewards
        t.dones = dones
        self.storage.add_transitions(t)
        t.clear()
        self.actor_critic.reset(dones)
        if next_obs is not None:
            self.actor_critic.update_normalization(next_obs, next_critic_obs)

    def collect_transition_from_dataset(self, transition: Any, infos: dict[str, Any]) -> None:
        """Record a dataset transition as if the dataset's action had been executed.

        The policy acts on the dataset's raw observations to record its values and distribution (its
        observation statistics are updated with them); the dataset's action is the executed action (with its
        log-probability under the policy's rollout distribution), extensions see it through
        ``on_dataset_step`` (e.g. as the action label); the dataset's reward and done close the step.
        """
        obs = transition.observation.to(self.device)
        critic_obs = transition.privileged_observation
        critic_obs = obs if critic_obs is None else critic_obs.to(self.device)
        policy, t = self.actor_critic, self.transition
        policy.update_normalization(obs, critic_obs)
        if policy.is_recurrent:
            t.hidden_states = policy.get_hidden_states()
        with self.autocast():
            policy.act(obs)
            t.values = policy.evaluate(critic_obs).detach()
        t.action_mean = policy.action_mean.detach()
        t.action_sigma = policy.action_std.detach()
        t.observations, t.critic_observations = obs, critic_obs
        t.actions = transition.action.to(self.device)
        t.actions_log_prob = policy.get_actions_log_prob(t.actions).detach()
        for ext in self._ordered:
            ext.on_dataset_step(t)
        dones = transition.done.to(self.device).reshape(-1).bool()
        rewards = transition.reward.to(self.device).reshape(-1)
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            rewards = F.bootstrap_time_outs(rewards, t.values, time_outs.to(self.device), self.gamma)
        t.rewards, t.dones = rewards, dones
        assert self.storage is not None
        self.storage.add_transitions(t)
        t.clear()
        policy.reset(dones)

    def compute_returns(self, last_critic_obs: torch.Tensor) -> None:
        """Bootstrap from the last critic observation and compute GAE returns/advantages (skipped when the PPO
        losses are off)."""
        assert self.storage is not None
        if not self.use_ppo_loss:
            return
        policy = self.actor_critic
        # Bootstrapping must not advance a recurrent critic's rollout memory.
        saved = policy.get_hidden_states() if policy.is_recurrent else None
        with self.autocast():
            last_values = policy.evaluate(last_critic_obs).detach()
        if saved is not None:
            policy.set_hidden_states(saved)
        compute_returns(self.storage, last_values, self.gamma, self.lam)

    # ------------------------------------------------------------------ update
    def update(
        self, current_learning_iteration: int | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Run the epochs over the stored rollout; return the mean losses and stats.

        The values are 0-dim CPU tensors (copied from the device in one transfer): ``value.item()``, as the
        reference's tensors take it, and ``float(value)`` / ``f"{value:.4f}"`` both work.
        """
        assert self.storage is not None
        if current_learning_iteration is not None:
            self.current_learning_iteration = current_learning_iteration
        if self.schedule == "linear":
            self._anneal_learning_rate(self.current_learning_iteration)
        zeros = torch.zeros((), device=self.device)
        mean_losses: dict[str, torch.Tensor] = {}
        mean_stats: dict[str, torch.Tensor] = {}
        if self.actor_critic.is_recurrent:
            generator = self.storage.recurrent_mini_batch_generator(
                self.num_mini_batches, self.num_learning_epochs
            )
        else:
            generator = self.storage.mini_batch_generator(self.num_mini_batches, self.num_learning_epochs)
        clip_groups = self._grad_clip_groups()
        own_optimizers = [ext for ext in self._ordered if ext.optimizer is not None]
        trainable = self._trainable
        check_on_device = self.sync_free and not dist_utils.is_distributed()
        start_state = self._update_start_state() if check_on_device else None
        nonfinite: dict[str, torch.Tensor] = {}
        never = torch.tensor(2**24, dtype=torch.float32, device=self.device)
        num_updates = 0
        for minibatch in generator:
            for ext in self._ordered:
                minibatch = ext.transform_minibatch(minibatch)
            losses, _, stats = self.compute_losses(minibatch)
            loss = zeros
            for name, value in losses.items():
                loss = loss + self.loss_weight(name) * value
                mean_losses[name] = mean_losses.get(name, zeros) + value.detach()
            mean_losses["total_loss"] = mean_losses.get("total_loss", zeros) + loss.detach()
            for name, value in stats.items():
                mean_stats[name] = mean_stats.get(name, zeros) + value.detach()
            self.optimizer.zero_grad(set_to_none=True)
            for ext in own_optimizers:
                ext.optimizer.zero_grad(set_to_none=True)  # type: ignore[union-attr]
            if dist_utils.is_distributed():
                # One bucketed all-reduce averages the gradients; the non-finite flag rides along, so all ranks
                # raise together.
                loss.backward()
                if dist_utils.all_reduce_gradients(trainable, ~torch.isfinite(loss)):
                    self._check_finite(loss, losses, any_rank=True)
            elif check_on_device:
                # per loss: the index of the first minibatch where it was non-finite (a large number: none)
                for name, value in (*losses.items(), ("total_loss", loss)):
                    first = nonfinite.get(name, never)
                    bad_now = ~torch.isfinite(value.detach()).all() & (first == never)
                    nonfinite[name] = torch.where(bad_now, num_updates, first)
                loss.backward()
            else:
                self._check_finite(loss, losses)
                loss.backward()
            if self.max_grad_norm is not None:
                for group in clip_groups:
                    nn.utils.clip_grad_norm_(group, self.max_grad_norm)
            self.optimizer.step()
            for ext in own_optimizers:
                ext.optimizer.step()  # type: ignore[union-attr]
            num_updates += 1
        n = max(num_updates, 1)
        to_host = {f"l/{k}": v / n for k, v in mean_losses.items()}
        to_host.update({f"s/{k}": v / n for k, v in mean_stats.items()})
        to_host.update({f"f/{k}": v for k, v in nonfinite.items()})
        if self._lr_t is not None:
            to_host["lr"] = self._lr_t
        host = _scalars_to_cpu(to_host)  # the update's one wait for the device
        if "lr" in host:
            self._learning_rate = float(host["lr"])
        first_bad = {k[2:]: int(v) for k, v in host.items() if k.startswith("f/") and int(v) < int(never)}
        if first_bad:
            assert start_state is not None
            self._restore_update_start_state(start_state)
            k = min(first_bad.values())
            bad = [name for name, i in first_bad.items() if i == k]
            raise NonFiniteLossError(
                f"Non-finite loss at learning iteration {self.current_learning_iteration} in {bad} (minibatch "
                f"{k + 1} of {num_updates}). The parameters and optimizer state were restored to their values "
                "before this update. Typical causes: "
                "exploding observations (enable empirical_normalization or clip observations), a too high "
                "learning_rate, or rewards of very large magnitude."
            )
        self.storage.clear()
        self.actor_critic.clip_std(min=self.clip_min_std)
        for ext in self._ordered:
            ext.after_update(self.storage)
        if self._lr_scheduler is not None:
            self._lr_scheduler.step()
            self.learning_rate = self.optimizer.param_groups[0]["lr"]
        out_losses = {k[2:]: v for k, v in host.items() if k.startswith("l/")}
        out_stats = {k[2:]: v for k, v in host.items() if k.startswith("s/")}
        for ext in self._ordered:
            out_stats.update({k: torch.tensor(float(v)) for k, v in ext.log_scalars().items()})
        if self._compile_clock is not None and self._compile_clock > 0:
            print(
                "[st_rl] torch.compile: the first rollout and update, compilation included, took "
                f"{time.perf_counter() - self._compile_clock:.1f} s",
                flush=True,
            )
            self._compile_clock = 0.0
        return out_losses, out_stats

    def _anneal_learning_rate(self, iteration: int) -> None:
        """``learning_rate = initial * (1 - iteration / lr_anneal_iterations)``, floored at 0."""
        assert self.lr_anneal_iterations is not None
        frac = max(0.0, 1.0 - iteration / self.lr_anneal_iterations)
        self.learning_rate = self.initial_learning_rate * frac
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    def _grad_clip_groups(self) -> list[list[nn.Parameter]]:
        """Parameter sets whose gradient norms are clipped to ``max_grad_norm`` separately: the policy, each
        extension's policy-side group and each extension's own parameters."""
        apart = [group for ext in self._ordered for group in ext.clip_groups()]
        apart_ids = {id(p) for group in apart for p in group}
        policy = [p for p in self.actor_critic.parameters() if id(p) not in apart_ids]
        own = [ext.parameters() for ext in self._ordered if ext.parameters()]
        return [policy, *apart, *own]

    @property
    def _trainable(self) -> list[nn.Parameter]:
        params = list(self.actor_critic.parameters()) + [p for e in self._ordered for p in e.parameters()]
        return [p for p in params if p.requires_grad]

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
        """Losses of one minibatch: PPO's ``surrogate_loss``, ``value_loss`` and ``entropy`` (unless
        ``use_ppo_loss`` is off), then every extension's.

        Returns ``(losses, inter_vars, stats)``. With ``schedule="adaptive"`` the learning rate is adapted
        here from the KL between the rollout policy and the current one.
        """
        policy = self.actor_critic
        hidden = minibatch.hidden_states
        actor_kw: dict[str, Any] = {}
        critic_kw: dict[str, Any] = {}
        if policy.is_recurrent:
            actor_kw = {
                "masks": minibatch.masks,
                "hidden_states": hidden.actor if hidden is not None else None,
            }
            critic_kw = {
                "masks": minibatch.masks,
                "hidden_states": hidden.critic if hidden is not None else None,
            }
        with self.autocast():
            policy.act(minibatch.obs, **actor_kw)
        losses: dict[str, torch.Tensor] = {}
        inter_vars: dict[str, torch.Tensor] = {}
        stats: dict[str, torch.Tensor] = {}
        if self.use_ppo_loss:
            self._ppo_losses(minibatch, critic_kw, losses, inter_vars, stats)
        for ext in self._ordered:
            for name, value in ext.losses(minibatch).items():
                if name in losses:
                    raise ValueError(
                        f"extension {ext.name!r} returns loss {name!r}, which another term returns"
                    )
                losses[name] = value
        return losses, inter_vars, stats

    def _ppo_losses(
        self,
        minibatch: MiniBatch,
        critic_kw: dict[str, Any],
        losses: dict[str, torch.Tensor],
        inter_vars: dict[str, torch.Tensor],
        stats: dict[str, torch.Tensor],
    ) -> None:
        policy = self.actor_critic
        log_prob = policy.get_actions_log_prob(minibatch.actions)
        mu, sigma, entropy = policy.action_mean, policy.action_std, policy.entropy
        with self.autocast():
            value = policy.evaluate(minibatch.critic_obs, **critic_kw)
        if self.desired_kl is not None and self.schedule == "adaptive":
            with torch.inference_mode():
                kl = F.gaussian_kl(minibatch.old_mu, minibatch.old_sigma, mu, sigma)
                kl_mean = dist_utils.all_reduce_mean(kl.mean())  # same learning rate on every rank
                if self._lr_t is not None:
                    self._lr_t.copy_(F.adaptive_learning_rate_tensor(self._lr_t, kl_mean, self.desired_kl))
            if self._lr_t is None:
                self.learning_rate = F.adaptive_learning_rate(
                    self.learning_rate, float(kl_mean), self.desired_kl
                )
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
        losses.update(surrogate_loss=surrogate_loss, value_loss=value_loss, entropy=-entropy.mean())
        with torch.no_grad():
            stats["clip_fraction"] = ((surr_vars["ratio"] - 1.0).abs() > self.clip_param).float().mean()

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Model (with its normalisers), optimizer, scheduler and every extension's checkpoint entries.

        Each observation normaliser that is on is also written as the reference's separate entry
        (``obs_norm_state_dict``, ``critic_obs_norm_state_dict``: ``_mean``, ``_var``, ``_std``, ``count``) for
        tools that read it there; :meth:`load_state_dict` reads the statistics from ``model_state_dict``.
        """
        optimizer_state = self.optimizer.state_dict()
        optimizer_state["param_groups"] = [  # a device learning rate is saved as the float it is
            {**g, "lr": float(g["lr"])} if torch.is_tensor(g["lr"]) else g
            for g in optimizer_state["param_groups"]
        ]
        state: dict[str, Any] = {
            "model_state_dict": self.actor_critic.state_dict(),
            "optimizer_state_dict": optimizer_state,
        }
        for key, name in (("obs_norm_state_dict", "actor_obs_normalizer"),
                          ("critic_obs_norm_state_dict", "critic_obs_normalizer")):  # fmt: skip
            normalizer = getattr(self.actor_critic, name, None)
            if isinstance(normalizer, EmpiricalNormalization):
                state[key] = normalizer.state_dict()  # shares storage with model_state_dict: saved once
        if self._lr_scheduler is not None:
            state["lr_scheduler_state_dict"] = self._lr_scheduler.state_dict()
        for ext in self._ordered:
            for key, value in ext.state_dict().items():
                if key in state:
                    raise ValueError(
                        f"extension {ext.name!r} writes checkpoint entry {key!r}, which is taken"
                    )
                state[key] = value
        return state

    def load_state_dict(self, state_dict: dict[str, Any], load_optimizer: bool = True) -> None:
        """Restore what :meth:`state_dict` saved (checkpoints of earlier formats are migrated); the optimizer
        and scheduler only when ``load_optimizer``.

        The normalisers' statistics come from ``model_state_dict``; ``obs_norm_state_dict`` /
        ``critic_obs_norm_state_dict`` are used only for a normaliser that ``model_state_dict`` lacks (the
        reference's layout, st_rl format 1).
        """
        from st_rl.utils.checkpoint import migrate_checkpoint

        state_dict = migrate_checkpoint(state_dict)
        self.actor_critic.load_state_dict(state_dict["model_state_dict"])
        if load_optimizer and "optimizer_state_dict" in state_dict:
            self.optimizer.load_state_dict(state_dict["optimizer_state_dict"])
            self._learning_rate = float(self.optimizer.param_groups[0]["lr"])
            self.set_sync_free(self.sync_free)  # re-links a device learning rate to the loaded value
        if self._lr_scheduler is not None and load_optimizer:
            if "lr_scheduler_state_dict" in state_dict:
                self._lr_scheduler.load_state_dict(state_dict["lr_scheduler_state_dict"])
            else:
                warnings.warn(
                    "The checkpoint has no lr scheduler state; the scheduler starts fresh.", stacklevel=2
                )
        elif self._lr_scheduler is None and "lr_scheduler_state_dict" in state_dict:
            warnings.warn(
                "The checkpoint has an lr scheduler state but no scheduler is configured; ignored.",
                stacklevel=2,
            )
        for ext in self._ordered:
            ext.load_state_dict(state_dict, load_optimizer=load_optimizer)
