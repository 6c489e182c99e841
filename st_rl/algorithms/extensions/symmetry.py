"""Symmetry: a mirror loss (and optionally mirrored data) that makes the policy act symmetrically."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol, cast, runtime_checkable

import torch
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.extensions.base import Extension
from st_rl.modules.actor_critic import PolicyOutput
from st_rl.protocols import DeterministicActor
from st_rl.registry import refuse_untrusted_import
from st_rl.storage.rollout_storage import MiniBatch
from st_rl.utils.collections import tree_map

__all__ = ["MirrorSymmetricEnv", "Symmetry", "mirror_error"]

MirrorFn = Callable[[torch.Tensor], torch.Tensor]


@runtime_checkable
class MirrorSymmetricEnv(Protocol):
    """An environment that provides its mirror maps."""

    def mirror_functions(self) -> dict[str, MirrorFn]:
        """``{"obs": M_o, "actions": M_a}`` and optionally ``"critic_obs"``: functions on raw tensors."""
        ...


def _resolve(fn: MirrorFn | str | None, what: str) -> MirrorFn | None:
    if fn is None or callable(fn):
        return fn
    if isinstance(fn, str) and ":" in fn:
        refuse_untrusted_import(fn, f"algorithm.symmetry_cfg.{what}")
        module, _, name = fn.partition(":")
        obj: Any = getattr(importlib.import_module(module), name, None)
        if callable(obj):
            return cast(MirrorFn, obj)
    raise ValueError(f"symmetry {what} must be a callable or 'package.module:function', got {fn!r}")


@torch.no_grad()
def mirror_error(policy: Any, obs: torch.Tensor, mirror_obs: MirrorFn, mirror_actions: MirrorFn) -> float:
    """``mean ||pi(M_o o) - M_a pi(o)||`` of a feed-forward policy (an actor-critic or a callable) on raw ``obs``."""
    act = policy.act_inference if isinstance(policy, DeterministicActor) else policy
    actions = act(obs)
    mirrored = act(mirror_obs(obs))
    return float(torch.linalg.vector_norm(mirrored - mirror_actions(actions), dim=-1).mean())


class Symmetry(Extension):
    """Left-right (or any involutive) symmetry: the mirror loss ``symmetry_loss = mse(mu(M_o o), M_a mu(o))``
    and/or mirrored samples added to every minibatch (``use_data_augmentation``, feed-forward policies). The
    mirror functions of raw tensors are callables or ``"package.module:function"`` strings, else the
    environment's ``mirror_functions()``; ``mirror_critic_obs`` defaults to ``mirror_obs``."""

    name = "symmetry"

    def __init__(
        self,
        mirror_obs: MirrorFn | str | None = None,
        mirror_actions: MirrorFn | str | None = None,
        mirror_critic_obs: MirrorFn | str | None = None,
        use_mirror_loss: bool = True,
        mirror_loss_coef: float = 1.0,
        use_data_augmentation: bool = False,
    ) -> None:
        super().__init__()
        if not use_mirror_loss and not use_data_augmentation:
            raise ValueError("Symmetry needs use_mirror_loss and/or use_data_augmentation")
        self.mirror_obs = _resolve(mirror_obs, "mirror_obs")
        self.mirror_actions = _resolve(mirror_actions, "mirror_actions")
        self.mirror_critic_obs = _resolve(mirror_critic_obs, "mirror_critic_obs")
        self.use_mirror_loss = bool(use_mirror_loss)
        self.mirror_loss_coef = float(mirror_loss_coef)
        self.use_data_augmentation = bool(use_data_augmentation)

    def setup(self, policy: Any, device: torch.device) -> None:
        super().setup(policy, device)
        self.policy: Any = policy
        if self.use_data_augmentation and policy.is_recurrent:
            raise ValueError(
                "Symmetry data augmentation needs a feed-forward policy; use the mirror loss with recurrent ones"
            )

    def attach_env(self, env: Any) -> None:
        if self.mirror_obs is not None and self.mirror_actions is not None:
            return
        if not isinstance(env, MirrorSymmetricEnv):
            raise ValueError(
                f"Symmetry needs mirror_obs and mirror_actions, or an environment with mirror_functions(); "
                f"{type(env).__name__} has none"
            )
        functions = cast("dict[str, Any]", env.mirror_functions())
        self.mirror_obs = self.mirror_obs or functions["obs"]
        self.mirror_actions = self.mirror_actions or functions["actions"]
        self.mirror_critic_obs = self.mirror_critic_obs or functions.get("critic_obs")

    def _functions(self) -> tuple[MirrorFn, MirrorFn, MirrorFn]:
        if self.mirror_obs is None or self.mirror_actions is None:
            raise RuntimeError("Symmetry has no mirror functions: pass them or train through a runner")
        return self.mirror_obs, self.mirror_actions, self.mirror_critic_obs or self.mirror_obs

    def transform_minibatch(self, minibatch: MiniBatch) -> MiniBatch:
        if not self.use_data_augmentation:
            return minibatch
        m_obs, m_act, m_critic = self._functions()
        flips: dict[str, MirrorFn] = {
            "obs": m_obs,
            "next_obs": m_obs,
            "critic_obs": m_critic,
            "next_critic_obs": m_critic,
            "actions": m_act,
            "old_mu": m_act,
            "action_labels": m_act,
            "old_sigma": lambda v: m_act(v).abs(),
        }
        mirrored: dict[str, Any] = {}
        for name in minibatch.keys():  # noqa: SIM118 - a MiniBatch is not iterable
            value = minibatch.get(name)
            if value is not None and name not in ("hidden_states", "masks"):
                mirrored[name] = torch.cat([value, flips.get(name, lambda v: v)(value)])
        return minibatch._replace(**mirrored)

    def loss_weights(self) -> dict[str, float]:
        return {"symmetry_loss": self.mirror_loss_coef}

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        if not self.use_mirror_loss:
            return {}
        m_obs, m_act, _ = self._functions()
        policy = self.policy
        kw: dict[str, Any] = {}
        if policy.is_recurrent:  # both sequences from the reset state
            kw = {
                "masks": minibatch.masks,
                "hidden_states": tree_map(torch.zeros_like, minibatch.hidden_states).actor,
            }
        with torch.no_grad():
            target = m_act(policy.act_inference(minibatch.obs, **kw))
        prediction = policy.act_inference(m_obs(minibatch.obs), **kw)
        loss = F.mse_loss(prediction, target)
        self.record(symmetry_mirror_error=torch.linalg.vector_norm(prediction - target, dim=-1).mean())
        return {"symmetry_loss": loss}
