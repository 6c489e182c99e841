"""The extension protocol: one optional feature of PPO in one object.

PPO holds a list of extensions and calls their hooks at fixed points of the rollout and the update. Every
hook has a no-op default, so an extension implements only what its feature needs:

====================  =========================================================================================
hook                  called
====================  =========================================================================================
``setup``             once, when PPO is built: check the policy, build networks on the device.
``attach_env``        once, when a runner connects the environment (e.g. to take its mirror functions).
``storage_fields``    when the rollout storage is allocated: the fields the extension records each step.
``on_act``            after the policy acted on a step (``transition`` holds actions, values, ...); may record
                      fields and may return the actions to execute instead (e.g. a teacher's).
``on_env_step``       after the environment stepped, before the transition is stored; may record fields and
                      returns the rewards PPO trains on (e.g. plus a style or curiosity reward).
``transform_minibatch`` before each minibatch's losses (e.g. resample hidden states, augment data).
``losses``            after PPO's forward pass of the minibatch (``policy.action_mean`` etc. refer to it):
                      named losses, each weighted by ``loss_weights()[name]`` (default 1) and summed with PPO's.
``after_update``      after the epochs, with the storage still holding the rollout.
``log_scalars``       once per update: scalars logged as ``Train/<name>``.
``state_dict``        checkpoint entries (top-level keys of the checkpoint the extension owns).
====================  =========================================================================================

An extension with its own optimizer sets ``optimizer`` and returns its parameters from ``parameters()``: the
summed loss is back-propagated once, then PPO clips those gradients separately and steps that optimizer
after its own. Parameters that live in the policy but must be clipped apart from it (AMP's discriminator)
are returned by ``clip_groups()``. ``modules()`` lists the extension's modules (moved to the training device,
put in train/eval mode, broadcast from rank 0 in multi-rank runs).

Extensions never read each other: what one needs from a step it records in the transition under its own
field names.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import torch
import torch.nn as nn

from st_rl.storage.rollout_storage import Field, MiniBatch, RolloutStorage, Transition

__all__ = ["Extension", "StorageLayout"]


@dataclasses.dataclass(frozen=True)
class StorageLayout:
    """What an extension may need to size its storage fields.

    Attributes:
        num_envs: N.
        num_transitions_per_env: T.
        obs_shape: actor observation shape.
        critic_obs_shape: critic observation shape (None: the critic reads the actor observations).
        action_shape: action shape.
        options: the user's storage keyword arguments (``train_cfg["storage"]``).
    """

    num_envs: int
    num_transitions_per_env: int
    obs_shape: tuple[int, ...]
    critic_obs_shape: tuple[int, ...] | None
    action_shape: tuple[int, ...]
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


class Extension:
    """Base class of PPO extensions (see the module docstring for the protocol).

    Attributes:
        name: unique name in an algorithm (``alg.extensions[name]``).
        reruns_policy: the extension's ``losses`` run extra policy forward passes, which overwrite the
            policy's cached outputs (action mean, estimates); PPO calls such extensions after the others.
        optimizer: the extension's own optimizer, if any.
        iteration: the current learning iteration (set by PPO before each rollout).
        storage_options: the keys of the config's ``storage`` section this extension reads from
            ``StorageLayout.options``, ``{key: type}``; the config validation accepts them (beside the rollout
            storage's own keyword arguments) and refuses every other key.
    """

    name: ClassVar[str] = "extension"
    reruns_policy: ClassVar[bool] = False
    storage_options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0
        self.device = torch.device("cpu")

    # ------------------------------------------------------------------ set-up
    def setup(self, policy: Any, device: torch.device) -> None:
        """Check ``policy`` and build what the extension needs on ``device`` (called once by PPO)."""
        self.device = device

    def attach_env(self, env: Any) -> None:
        """The training environment (the user's object, before adaptation), given once by the runner."""

    def storage_fields(self, layout: StorageLayout) -> dict[str, Field]:
        """Storage fields this extension records at every step, ``{name: Field}``."""
        return {}

    def modules(self) -> list[nn.Module]:
        """Modules the extension owns (device moves, train/eval mode, multi-rank broadcast)."""
        return []

    def parameters(self) -> list[nn.Parameter]:
        """Parameters trained by the extension's own ``optimizer``."""
        return []

    def clip_groups(self) -> list[list[nn.Parameter]]:
        """Policy parameters whose gradient norm is clipped apart from the rest of the policy."""
        return []

    def train(self, mode: bool = True) -> None:
        for module in self.modules():
            module.train(mode)

    # ------------------------------------------------------------------ rollout
    def on_act(
        self, obs: torch.Tensor, critic_obs: torch.Tensor, transition: Transition
    ) -> torch.Tensor | None:
        """After the policy acted: record fields; return replacement actions or None."""
        return None

    def on_env_step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        infos: dict[str, Any],
        transition: Transition,
        next_obs: torch.Tensor | None,
        next_critic_obs: torch.Tensor | None,
    ) -> torch.Tensor:
        """After the environment stepped: record fields; return the rewards to train on."""
        return rewards

    def on_dataset_step(self, transition: Transition) -> None:
        """A recorded transition replaces the policy's step (``transition.actions`` are the dataset's)."""

    # ------------------------------------------------------------------ update
    def transform_minibatch(self, minibatch: MiniBatch) -> MiniBatch:
        """The minibatch PPO and the extensions' losses see."""
        return minibatch

    def losses(self, minibatch: MiniBatch) -> dict[str, torch.Tensor]:
        """Named losses of the minibatch (after PPO's forward pass of the policy on it)."""
        return {}

    def loss_weights(self) -> dict[str, float]:
        """Weight of each loss returned by :meth:`losses` (missing names weigh 1)."""
        return {}

    def after_update(self, storage: RolloutStorage) -> None:
        """After the update epochs (the storage still holds the rollout)."""

    def log_scalars(self) -> dict[str, float]:
        """Scalars to log once per update (``Train/<name>``)."""
        return {}

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Checkpoint entries owned by the extension (top-level checkpoint keys)."""
        return {}

    def load_state_dict(self, checkpoint: dict[str, Any], load_optimizer: bool = True) -> None:
        """Restore the extension's entries from a whole checkpoint dict."""
