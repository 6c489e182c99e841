"""The extension protocol: one optional feature of PPO in one object whose hooks (no-ops by default) PPO calls;
docs/architecture.md lists them with an example."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import torch
import torch.nn as nn

from st_rl.modules.actor_critic import PolicyOutput
from st_rl.storage.rollout_storage import Field, MiniBatch, RolloutStorage, Transition

__all__ = ["Extension", "StorageLayout"]


def masked_mean(x: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``x`` over the real steps of padded trajectories (``masks`` of ``x``'s shape), else of all."""
    if masks is None or x.shape != masks.shape:
        return x.mean()
    mask = masks.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


@dataclasses.dataclass(frozen=True)
class StorageLayout:
    """What sizes an extension's storage fields (``options``: the config's ``storage`` keys)."""

    num_envs: int
    num_transitions_per_env: int
    obs_shape: tuple[int, ...]
    critic_obs_shape: tuple[int, ...] | None
    action_shape: tuple[int, ...]
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


class Extension:
    """Base class of PPO extensions: ``name`` is unique in an algorithm, ``optimizer`` its own (or None),
    ``iteration`` the learning iteration (set by PPO), ``storage_options`` ``{key: type}`` of the ``storage`` config
    keys it reads."""

    name: ClassVar[str] = "extension"
    storage_options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0
        self.device = torch.device("cpu")

    def setup(self, policy: Any, device: torch.device) -> None:
        """Check ``policy`` and build what the extension needs on ``device``."""
        self.device = device

    def attach_env(self, env: Any) -> None:
        """The user's training environment, given once by the runner."""

    def storage_fields(self, layout: StorageLayout) -> dict[str, Field]:
        """``{name: Field}`` recorded at every step."""
        return {}

    def modules(self) -> list[nn.Module]:
        """Modules the extension owns."""
        return []

    def parameters(self) -> list[nn.Parameter]:
        """Parameters trained by the extension's own ``optimizer``."""
        return []

    def shared_parameters(self) -> list[nn.Parameter]:
        """Parameters the extension owns but trains with the policy's optimizer (after the policy's)."""
        return []

    def clip_groups(self) -> list[list[nn.Parameter]]:
        """Policy parameters whose gradient norm is clipped apart from the rest of the policy."""
        return []

    def train(self, mode: bool = True) -> None:
        for module in self.modules():
            module.train(mode)

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

    def transform_minibatch(self, minibatch: MiniBatch) -> MiniBatch:
        """The minibatch PPO and the extensions' losses see."""
        return minibatch

    def losses(self, minibatch: MiniBatch, output: PolicyOutput) -> dict[str, torch.Tensor]:
        """Named losses of the minibatch; ``output`` is the policy's forward pass on it."""
        return {}

    def loss_weights(self) -> dict[str, float]:
        """Weight of each loss returned by :meth:`losses` (missing names weigh 1)."""
        return {}

    def after_update(self, storage: RolloutStorage) -> None:
        """After the update epochs (the storage still holds the rollout)."""

    def record(self, **values: torch.Tensor) -> None:
        """Add device scalars to the means :meth:`log_scalars` reports."""
        sums, counts = self.__dict__.setdefault("_sums", {}), self.__dict__.setdefault("_counts", {})
        for key, value in values.items():
            sums[key] = sums[key] + value.detach() if key in sums else value.detach()
            counts[key] = counts.get(key, 0) + 1

    def log_scalars(self) -> dict[str, float]:
        """Scalars logged once per update (``Train/<name>``); by default :meth:`record`'s means."""
        sums, counts = self.__dict__.pop("_sums", {}), self.__dict__.pop("_counts", {})
        return {k: float(v) / counts[k] for k, v in sums.items()}

    def state_dict(self) -> dict[str, Any]:
        """Top-level checkpoint entries the extension owns."""
        return {}

    def load_state_dict(self, checkpoint: dict[str, Any], load_optimizer: bool = True) -> None:
        """Restore the extension's entries from a whole checkpoint dict."""
