"""PPO on a GPU with CUDA graphs (``cuda_graph``): the update (every epoch's minibatches: forward, losses,
backward, clipping, optimizer steps, the loss table) and the rollout's policy step (normalise, forward, sample,
log-probability, value) and normaliser update, each captured once and replayed with one launch."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.optim as optim

from st_rl.modules.actor_critic import ActorCritic
from st_rl.modules.normalizer import EmpiricalNormalization
from st_rl.storage.rollout_storage import MiniBatch, RolloutStorage
from st_rl.utils import distributed as dist_utils

__all__ = ["CapturedFunction", "GraphedRollout", "GraphedUpdate", "check_mode"]

MinibatchLoop = Callable[[Iterator[MiniBatch], list[optim.Optimizer], list[list[torch.nn.Parameter]]], int]

# The methods a capture runs: "auto" captures them only as st_rl defines them (an override in a subclass may keep
# Python state, which a replay would skip).
_ALGORITHM_METHODS = (
    "act",
    "process_env_step",
    "compute_losses",
    "_ppo_losses",
    "_minibatch_loop",
    "loss_weight",
    "_sampled_step",
    "_policy_outputs",
)
_POLICY_METHODS = (
    "act",
    "update_distribution",
    "evaluate",
    "get_actions_log_prob",
    "policy_output",
    "update_normalization",
    "actor_features",
    "critic_features",
    "normalize_actor_obs",
    "normalize_critic_obs",
)


def check_mode(mode: Any) -> bool | str:
    """``cuda_graph``: ``"auto"`` captures where nothing stands against it, ``True`` also warns where something
    does, ``False`` keeps everything eager."""
    if not (isinstance(mode, bool) or mode == "auto"):
        raise ValueError(f"cuda_graph must be true, false or 'auto', got {mode!r}")
    return mode


@contextlib.contextmanager
def _autocast_cache_off() -> Iterator[None]:
    """Autocast's cast cache would hold tensors of the capture's memory pool across replays."""
    was = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        torch.set_autocast_cache_enabled(was)


def _addresses(tensors: Any) -> tuple[int, ...]:
    return tuple(t.data_ptr() for t in tensors if torch.is_tensor(t))


def _policy_key(alg: Any) -> tuple[Any, ...]:
    """What every capture of the policy bakes in: its tensors' addresses and the precision."""
    policy = alg.actor_critic
    return (_addresses(policy.parameters()), _addresses(policy.buffers()), alg.precision)


def _common_obstacle(alg: Any) -> str | None:
    checks = (
        (alg.device.type != "cuda", "the device is not a GPU"),
        (alg.actor_critic.is_recurrent, "the policy is recurrent (trajectory counts vary per update)"),
        (
            getattr(alg.actor_critic, "adaptor", None) is not None
            or getattr(alg.actor_critic, "estimator", None) is not None,
            "the policy has a state adaptor or estimator",
        ),
        (bool(alg.extensions), f"the extensions {sorted(alg.extensions)} are not captured"),
        (alg.compiled, "compile is on"),
        (dist_utils.is_distributed(), "the run has several ranks"),
    )
    return next((why for failed, why in checks if failed), None)


def _foreign_code(alg: Any) -> str | None:
    """Which captured method is not st_rl's own (``cuda_graph=true`` captures it anyway), or None."""
    return _foreign_methods(type(alg), type(alg.actor_critic))


@functools.cache  # asked twice per rollout step: a fact of the two classes
def _foreign_methods(alg_cls: type, policy_cls: type) -> str | None:
    if not issubclass(policy_cls, ActorCritic):
        return f"the policy {policy_cls.__name__} is not an st_rl ActorCritic (cuda_graph=true captures it)"
    for cls, names in ((alg_cls, _ALGORITHM_METHODS), (policy_cls, _POLICY_METHODS)):
        for name in names:
            module = getattr(getattr(cls, name, None), "__module__", None) or "st_rl."
            if not module.startswith("st_rl."):
                return f"{cls.__name__}.{name} is not st_rl's (cuda_graph=true captures it)"
    return None


class CapturedFunction:
    """``fn(*inputs)`` replayed from a CUDA graph. The first call with a new ``key`` runs eagerly on a side
    stream (lazy state, library workspaces); the next with that key captures ``fn`` on static copies of the
    inputs and replays; later calls copy the inputs in and replay. The outputs are the graph's static tensors,
    overwritten by the next replay. ``key`` holds whatever the capture bakes in (addresses, host numbers)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.graph: Any = None
        self.key: Any = None
        self.failed: str | None = None  # why a capture failed: then every call runs eagerly
        self.last = ""  # "warm-up", "capture", "replay" or "eager": what the last call did
        self._warm_key: Any = None
        self._inputs: list[torch.Tensor] = []
        self._outputs: Any = None

    def __call__(
        self,
        fn: Callable[..., Any],
        inputs: Sequence[torch.Tensor],
        key: Callable[[], Any],
        capturing: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> Any:
        if self.failed is not None:
            self.last = "eager"
            return fn(*inputs)
        now = key()
        if self.graph is not None and now == self.key:
            for static, value in zip(self._inputs, inputs):
                static.copy_(value)
            self.graph.replay()
            self.last = "replay"
            return self._outputs
        self.reset()
        if now != self._warm_key:
            current = torch.cuda.current_stream()
            side = torch.cuda.Stream()
            side.wait_stream(current)
            with torch.cuda.stream(side):
                out = fn(*inputs)
            current.wait_stream(side)
            self._warm_key, self.last = key(), "warm-up"
            return out
        self._inputs = [x.clone() for x in inputs]
        graph = torch.cuda.CUDAGraph()
        try:
            with capturing(), _autocast_cache_off(), torch.cuda.graph(graph):
                self._outputs = fn(*self._inputs)
        except Exception as exc:  # noqa: BLE001 - any op that cannot be captured (a host sync, say): stay eager
            self.reset()
            self.failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(
                f"cuda_graph: {self.name} could not be captured ({self.failed}); it runs eagerly",
                stacklevel=3,
            )
            self.last = "eager"
            return fn(*inputs)
        self.graph, self.key, self.last = graph, now, "capture"
        graph.replay()
        return self._outputs

    def reset(self) -> None:
        """Drop the graph and its memory; the next call warms up and captures again."""
        if self.graph is not None:
            self.graph.reset()
        self.graph, self.key, self._outputs, self._inputs = None, None, None, []


class _GraphedPart:
    """What the captured parts share: the ``cuda_graph`` option, and why a part runs eagerly (said once)."""

    part = ""

    def __init__(self, mode: bool | str) -> None:
        self.mode = check_mode(mode)
        self.reason: str | None = None  # why the part runs eagerly, once decided

    @staticmethod
    def obstacles(alg: Any) -> Sequence[tuple[bool, str]]:
        """``(stands against capturing, why)`` pairs of this part, beyond those every part has."""
        return ()

    def unsupported(self, alg: Any) -> str | None:
        """Why ``alg``'s part cannot be captured now, or None."""
        found = _common_obstacle(alg) or next((why for failed, why in self.obstacles(alg) if failed), None)
        return found or (_foreign_code(alg) if self.mode == "auto" else None)

    def enabled(self, alg: Any) -> bool:
        """Whether this call is captured or replayed (decided afresh each call: options can change)."""
        if self.mode is False:
            return False
        reason = self.unsupported(alg)
        if reason is not None and reason != self.reason and self.mode is True:
            warnings.warn(f"cuda_graph=true: {self.part} runs eagerly because {reason}", stacklevel=3)
        self.reason = reason
        return reason is None


class GraphedUpdate(_GraphedPart):
    """PPO's minibatch loop replayed from one CUDA graph per update: each epoch's permutation is drawn (as the
    eager loop draws it) into the graph's static minibatch indices. The arithmetic is the eager loop's."""

    part = "the update"

    def __init__(self, mode: bool | str = "auto") -> None:
        super().__init__(mode)
        self.captured = CapturedFunction("the update")
        self._names: list[str] = []
        self._announced = False

    @staticmethod
    def obstacles(alg: Any) -> Sequence[tuple[bool, str]]:
        guard = alg.guard
        return (
            (alg._lr_scheduler is not None, "an lr scheduler sets the learning rate on the host"),
            (type(alg.storage) is not RolloutStorage, "the storage is not a plain RolloutStorage"),
            (not guard.sync_free or guard.lr_tensor is None, "the learning rate is not a device tensor"),
            (any(not o.defaults.get("fused") for o in alg._optimizers()), "an optimizer is not fused"),
        )

    def run(
        self,
        alg: Any,
        loop: MinibatchLoop,
        optimizers: list[optim.Optimizer],
        clip_groups: list[list[torch.nn.Parameter]],
    ) -> int:
        """One update of ``alg`` through ``loop`` (PPO's minibatch loop); returns the number of minibatches."""
        storage = alg.storage
        epochs, batches = alg.num_learning_epochs, alg.num_mini_batches
        batch_size = storage.num_envs * storage.num_transitions_per_env
        perms = torch.stack([torch.randperm(batch_size, device=storage.device) for _ in range(epochs)])

        def update(perms: torch.Tensor) -> int:
            minibatches = storage.mini_batch_generator(batches, epochs, permutations=perms)
            return loop(minibatches, optimizers, clip_groups)

        @contextlib.contextmanager
        def capturable() -> Iterator[None]:  # only a capture checks the flag: replays skip step()'s Python
            groups = [g for o in optimizers for g in o.param_groups]
            for group in groups:
                group["capturable"] = True
            try:
                yield
            finally:
                for group in groups:
                    group["capturable"] = False

        num = self.captured(update, [perms], lambda: self._key_of(alg, optimizers, clip_groups), capturable)
        if self.captured.last == "replay":
            alg.guard.replayed(self._names)
        elif self.captured.last == "capture":
            self._names = alg.guard.names
            if not self._announced:
                print(
                    f"[st_rl] cuda_graph: the update's {num} minibatches replay as one CUDA graph", flush=True
                )
                self._announced = True
        return num

    def reset(self) -> None:
        self.captured.reset()

    @staticmethod
    def _key_of(
        alg: Any, optimizers: list[optim.Optimizer], clip_groups: list[list[torch.nn.Parameter]]
    ) -> tuple[Any, ...]:
        states = [t for o in optimizers for s in o.state.values() for t in s.values()]
        skip = ("params", "lr", "capturable")
        groups = [
            tuple((k, v) for k, v in g.items() if k not in skip and not torch.is_tensor(v))
            for o in optimizers
            for g in o.param_groups
        ]
        lrs = [g["lr"] for o in optimizers for g in o.param_groups]
        storage = alg.storage
        return (
            _policy_key(alg),
            _addresses(states),
            _addresses(storage.buffers.values()),
            tuple(lr.data_ptr() if torch.is_tensor(lr) else lr for lr in lrs),
            tuple(groups),
            tuple(tuple(id(p) for p in group) for group in clip_groups),
            (
                storage.num_envs,
                storage.num_transitions_per_env,
                alg.num_learning_epochs,
                alg.num_mini_batches,
            ),
            (alg.clip_param, alg.max_grad_norm, alg.desired_kl, alg.schedule, alg.use_clipped_value_loss),
            (alg.surrogate_loss_coef, alg.value_loss_coef, alg.entropy_coef, alg.use_ppo_loss),
            tuple(sorted(alg.extra_loss_coefs.items())),
        )


class GraphedRollout(_GraphedPart):
    """The rollout's policy step and normaliser update, each replayed from a CUDA graph (in inference mode,
    where rollouts run). Sampling draws fresh noise at every replay."""

    part = "the rollout"

    def __init__(self, mode: bool | str = "auto") -> None:
        super().__init__(mode)
        self.act = CapturedFunction("the rollout's policy step")
        self.normalize = CapturedFunction("the observation normalisers' update")

    @staticmethod
    def obstacles(alg: Any) -> Sequence[tuple[bool, str]]:
        policy = alg.actor_critic
        custom = [
            type(m).__name__
            for m in (policy.actor_obs_normalizer, policy.critic_obs_normalizer)
            if not isinstance(m, (EmpiricalNormalization, torch.nn.Identity))
        ]
        return (
            (not torch.is_inference_mode_enabled(), "the rollout does not run in inference mode"),
            (bool(custom), f"the observation normalisers {custom} are not EmpiricalNormalization"),
        )

    def policy_step(
        self,
        alg: Any,
        fn: Callable[..., tuple[torch.Tensor, ...]],
        obs: torch.Tensor,
        critic_obs: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """``fn(obs, critic_obs)`` (actions first) from the graph; the actions are a copy, since the environment
        may keep them past the next replay."""
        key = (obs.shape, obs.dtype, critic_obs.shape, critic_obs.dtype, _policy_key(alg))
        out = self.act(fn, [obs, critic_obs], lambda: key)
        return (out[0].clone(), *out[1:]) if self.act.last in ("capture", "replay") else out

    def update_normalization(self, alg: Any, obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        """The policy's ``update_normalization(obs, critic_obs)`` from the graph."""
        policy = alg.actor_critic
        merged = [
            (norm, x)
            for norm, x, on in (
                (policy.actor_obs_normalizer, obs, policy.actor_obs_normalization),
                (policy.critic_obs_normalizer, critic_obs, policy.critic_obs_normalization),
            )
            if on
        ]
        if all(norm.frozen for norm, _ in merged):
            return  # nothing to update (an empty graph)
        frozen = tuple(norm.frozen for norm, _ in merged)
        key = (obs.shape, obs.dtype, critic_obs.shape, critic_obs.dtype, frozen, _policy_key(alg))
        self.normalize(policy.update_normalization, [obs, critic_obs], lambda: key)
        if self.normalize.last == "replay":
            for norm, x in merged:
                norm.count_replayed(x)

    def reset(self) -> None:
        self.act.reset()
        self.normalize.reset()
