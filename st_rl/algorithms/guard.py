"""The safety machinery of a PPO update: non-finite loss checks and the learning rate on the device."""

from __future__ import annotations

import torch
import torch.optim as optim

import st_rl.algorithms.functional as F
from st_rl.utils import distributed as dist_utils

__all__ = ["NonFiniteLossError", "UpdateGuard"]

_CAUSES = (
    "Typical causes: exploding observations (enable empirical_normalization or clip observations), a too high "
    "learning_rate, or rewards of very large magnitude."
)


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


class UpdateGuard:
    """The non-finite loss checks of a PPO update and its learning rate. Multi-rank, a non-finite flag travels
    with the all-reduced gradients (every rank raises together). Sync-free (:meth:`set_sync_free`, the CUDA
    default), the losses :meth:`record` keeps are read once after the loop, and a non-finite one restores the
    update's start before :class:`NonFiniteLossError`: the check costs no kernel. Otherwise the total loss is
    read before each backward pass (free on a CPU). Sync-free with the adaptive schedule, the learning rate
    lives in a device tensor where the fused optimizer takes one."""

    def __init__(self, device: torch.device, learning_rate: float) -> None:
        self.device = device
        self.sync_free = False
        self.lr_tensor: torch.Tensor | None = None
        self._lr = float(learning_rate)
        self._iteration = 0
        self._on_device = False
        self._capacity = 0
        self._names: list[str] = []
        self._table = torch.empty(0)
        self._rows: list[torch.Tensor] = []
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
        self,
        params: list[torch.nn.Parameter],
        optimizers: list[optim.Optimizer],
        iteration: int,
        num_minibatches: int,
    ) -> None:
        """Start an update; sync-free, remember the parameters and optimizer states a failure restores."""
        self._params, self._optimizers, self._iteration = params, optimizers, iteration
        self._capacity, self._names, self._rows = num_minibatches, [], []
        self._on_device = self.sync_free and not dist_utils.is_distributed()
        self._start = None
        if self._on_device:
            live = [p.data for p in params]
            states = [state for opt in optimizers for state in opt.state.values()]
            live += [t for state in states for t in state.values() if torch.is_tensor(t)]
            had_state = [{id(p) for p in opt.state} for opt in optimizers]
            self._start = (live, [t.detach().clone() for t in live], had_state, self._lr)

    def record(self, index: int, values: dict[str, torch.Tensor]) -> None:
        """Keep minibatch ``index``'s losses (names ``l/...``) and statistics: one stacking kernel, no wait.
        Their means come from :meth:`finish`, which also finds the non-finite losses in them."""
        if not self._names:
            self._names = list(values)
            if self._table.shape != (self._capacity, len(values)) or self._table.device != self.device:
                self._table = torch.empty((self._capacity, len(values)), device=self.device)
        elif list(values) != self._names:
            raise ValueError(f"minibatch {index + 1} has the terms {list(values)}, the first {self._names}")
        with torch.no_grad():
            if index < self._capacity:
                torch.stack(list(values.values()), out=self._table[index])
            else:  # more minibatches than announced (a custom generator)
                self._rows.append(torch.stack([v.float() for v in values.values()]))

    @property
    def names(self) -> list[str]:
        """The columns of the table :meth:`record` keeps (``l/`` losses, ``s/`` statistics)."""
        return list(self._names)

    def replayed(self, names: list[str]) -> None:
        """A replayed CUDA graph filled the table (as the :meth:`record` calls it captured, for ``names``)."""
        self._names = list(names)

    def backward(self, loss: torch.Tensor, losses: dict[str, torch.Tensor]) -> None:
        """Back-propagate ``loss``; checked first unless sync-free (multi-rank: averaging gradients)."""
        if dist_utils.is_distributed():
            loss.backward()
            if dist_utils.all_reduce_gradients(self._params, ~torch.isfinite(loss)):
                self._raise_now(loss, losses, any_rank=True)
            return
        if not self._on_device and not bool(torch.isfinite(loss)):
            self._raise_now(loss, losses)
        loss.backward()

    def finish(self, num_updates: int) -> dict[str, torch.Tensor]:
        """The means of what :meth:`record` kept, as 0-dim CPU tensors, read with the learning rate in the
        update's one wait for the device; ``NonFiniteLossError`` (after restoring the update's start) if a
        sync-free minibatch's loss was non-finite."""
        if not self._names or num_updates == 0:
            return {}
        table = self._table[: min(num_updates, self._capacity)]
        if self._rows:
            table = torch.cat([table, torch.stack(self._rows)])
        if self.lr_tensor is not None:
            host = torch.cat([table.flatten(), self.lr_tensor.reshape(1)]).cpu()
            self._lr = float(host[-1])
            table = host[:-1].reshape(table.shape)
        else:
            table = table.cpu()
        if self._on_device:
            losses = [i for i, name in enumerate(self._names) if name.startswith("l/")]
            bad_rows = (~torch.isfinite(table[:, losses])).any(dim=1).tolist()  # host values: no wait
            if any(bad_rows):
                self._restore()
                first = bad_rows.index(True)
                bad = [self._names[i][2:] for i in losses if not torch.isfinite(table[first, i])]
                raise NonFiniteLossError(
                    f"Non-finite loss at learning iteration {self._iteration} in {bad} (minibatch "
                    f"{first + 1} of {num_updates}); parameters and optimizer state restored. {_CAUSES}"
                )
        return dict(zip(self._names, table.mean(dim=0).unbind()))

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
