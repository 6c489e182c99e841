"""The safety machinery of a PPO update: non-finite loss checks and the learning rate on the device."""

from __future__ import annotations

from typing import Any

import torch
import torch.optim as optim

import st_rl.algorithms.functional as F
from st_rl.utils import distributed as dist_utils

__all__ = ["NonFiniteLossError", "UpdateGuard"]

_CAUSES = (
    "Typical causes: exploding observations (enable empirical_normalization or clip observations), a too high "
    "learning_rate, or rewards of very large magnitude."
)
_NEVER = float(2**24)  # the device-side flag for "no non-finite minibatch"


class NonFiniteLossError(FloatingPointError):
    """A loss became NaN or Inf; the parameters and optimizer state stay as before the update."""


def fused_takes_tensor_lr(optimizer_cls: type[optim.Optimizer], device: torch.device) -> bool:
    """Whether this torch's fused ``optimizer_cls`` steps with a learning rate held in a device tensor."""
    try:
        p = torch.zeros(1, device=device, requires_grad=True)
        p.grad = torch.zeros(1, device=device)
        optimizer_cls([p], lr=torch.tensor(1e-3, device=device), fused=True).step()  # type: ignore[call-arg]
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def scalars_to_cpu(values: dict[Any, torch.Tensor]) -> dict[Any, torch.Tensor]:
    """0-dim device tensors as 0-dim CPU float tensors, copied in one transfer."""
    if not values:
        return {}
    host = torch.stack([v.float() for v in values.values()]).cpu()
    return dict(zip(values, host.unbind()))


class UpdateGuard:
    """The non-finite loss checks of a PPO update and its learning rate.

    Sync-free (the CUDA default), the first non-finite minibatch of each loss is recorded on the device and read
    once after the loop, which then restores the update's start; the adaptive learning rate lives in a device
    tensor where the fused optimizer takes one. Otherwise each loss is read before its backward pass. Multi-rank,
    a non-finite flag travels with the all-reduced gradients, so every rank raises together.
    """

    def __init__(self, device: torch.device, learning_rate: float) -> None:
        self.device = device
        self.sync_free = False
        self.lr_tensor: torch.Tensor | None = None
        self._lr = float(learning_rate)
        self._iteration = 0
        self._on_device = False
        self._first_bad: dict[str, torch.Tensor] = {}
        self._never = torch.tensor(_NEVER)
        self._start: tuple[list[torch.Tensor], list[torch.Tensor], list[set[int]], float] | None = None
        self._optimizers: list[optim.Optimizer] = []
        self._params: list[torch.nn.Parameter] = []

    @property
    def learning_rate(self) -> float:
        return self._lr

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._lr = float(value)
        if self.lr_tensor is not None:
            self.lr_tensor.fill_(self._lr)

    def set_sync_free(self, enabled: bool, optimizer: optim.Optimizer, device_lr: bool) -> None:
        """Switch the sync-free checks; with ``device_lr`` link a device learning rate into ``optimizer``."""
        self.sync_free = bool(enabled)
        wanted = self.sync_free and device_lr and optimizer.defaults.get("fused")
        on_device = wanted and fused_takes_tensor_lr(type(optimizer), self.device)
        self.lr_tensor = (
            torch.tensor(self._lr, dtype=torch.float32, device=self.device) if on_device else None
        )
        for group in optimizer.param_groups:  # PPO's optimizer has one group
            group["lr"] = self._lr if self.lr_tensor is None else self.lr_tensor

    def adapt_learning_rate(
        self, kl_mean: torch.Tensor, desired_kl: float, optimizer: optim.Optimizer
    ) -> None:
        """One adaptive-KL step: on the device with a device learning rate, else on the host."""
        if self.lr_tensor is not None:
            self.lr_tensor.copy_(F.adaptive_learning_rate_tensor(self.lr_tensor, kl_mean, desired_kl))
            return
        self.learning_rate = F.adaptive_learning_rate(self._lr, float(kl_mean), desired_kl)
        for group in optimizer.param_groups:
            group["lr"] = self._lr

    def begin(
        self, params: list[torch.nn.Parameter], optimizers: list[optim.Optimizer], iteration: int
    ) -> None:
        """Start an update; sync-free, remember what a failure restores."""
        self._params, self._optimizers, self._iteration, self._first_bad = params, optimizers, iteration, {}
        self._on_device = self.sync_free and not dist_utils.is_distributed()
        self._start = None
        if self._on_device:
            self._never = torch.tensor(_NEVER, device=self.device)
            live = [p.data for p in params]
            states = [state for opt in optimizers for state in opt.state.values()]
            live += [t for state in states for t in state.values() if torch.is_tensor(t)]
            had_state = [{id(p) for p in opt.state} for opt in optimizers]
            self._start = (live, [t.detach().clone() for t in live], had_state, self._lr)

    def backward(self, loss: torch.Tensor, losses: dict[str, torch.Tensor], index: int) -> None:
        """Check minibatch ``index``'s losses and back-propagate ``loss`` (multi-rank: averaging gradients)."""
        if dist_utils.is_distributed():
            loss.backward()
            if dist_utils.all_reduce_gradients(self._params, ~torch.isfinite(loss)):
                self._raise_now(loss, losses, any_rank=True)
            return
        if self._on_device:
            for name, value in (*losses.items(), ("total_loss", loss)):
                first = self._first_bad.get(name, self._never)
                bad_now = ~torch.isfinite(value.detach()).all() & (first == self._never)
                self._first_bad[name] = torch.where(bad_now, index, first)
        elif not bool(torch.isfinite(loss)):
            self._raise_now(loss, losses)
        loss.backward()

    def finish(self, scalars: dict[str, torch.Tensor], num_updates: int) -> dict[str, torch.Tensor]:
        """``scalars`` on the host, read with the flags and learning rate in one wait for the device."""
        to_host: dict[Any, torch.Tensor] = {**scalars, **{("flag", k): v for k, v in self._first_bad.items()}}
        if self.lr_tensor is not None:
            to_host["lr", None] = self.lr_tensor
        host = scalars_to_cpu(to_host)
        if ("lr", None) in host:
            self._lr = float(host.pop(("lr", None)))
        flags = {k[1]: int(host.pop(k)) for k in list(host) if isinstance(k, tuple)}
        first_bad = {name: i for name, i in flags.items() if i < int(_NEVER)}
        if first_bad:
            self._restore()
            k = min(first_bad.values())
            bad = [name for name, i in first_bad.items() if i == k]
            raise NonFiniteLossError(
                f"Non-finite loss at learning iteration {self._iteration} in {bad} (minibatch {k + 1} of "
                f"{num_updates}). The parameters and optimizer state were restored to their values before this "
                f"update. {_CAUSES}"
            )
        return host

    def _restore(self) -> None:
        assert self._start is not None
        live, saved, had_state, learning_rate = self._start
        with torch.no_grad():
            for tensor, copy in zip(live, saved):
                tensor.copy_(copy)
        for opt, ids in zip(self._optimizers, had_state):
            for p in [p for p in opt.state if id(p) not in ids]:
                del opt.state[p]  # created by this update's first step: the optimizer starts fresh again
        self.learning_rate = learning_rate

    def _raise_now(self, loss: torch.Tensor, losses: dict[str, torch.Tensor], any_rank: bool = False) -> None:
        bad = [k for k, v in losses.items() if not bool(torch.isfinite(v).all())]
        where = f" (on rank {dist_utils.dist.get_rank()})" if bad and dist_utils.is_distributed() else ""
        if any_rank and not bad:
            where = " on another rank"
        raise NonFiniteLossError(
            f"Non-finite loss at learning iteration {self._iteration} in {bad or ['total_loss']}{where}. "
            f"The parameters were not updated. {_CAUSES}"
        )
