"""Running observation normalisation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn


class EmpiricalNormalization(nn.Module):
    """Normalise with running mean and variance: ``(x - mean) / (std + eps)``.

    Statistics are updated from every batch seen in training mode (frozen in ``eval()``) until ``count``
    reaches ``until``. The merge of batch moments is exact (the statistics after several batches equal those
    of the concatenated data). ``count`` is a buffer, so it is saved and restored with the state dict, and
    buffers are updated in place, so updating inside ``torch.inference_mode`` is safe.

    Args:
        shape: shape of one observation (int or sequence).
        eps: added to the standard deviation.
        until: stop updating once this many samples have been seen (``None``: never stop).
    """

    _mean: torch.Tensor
    _var: torch.Tensor
    _std: torch.Tensor
    count: torch.Tensor

    def __init__(
        self, shape: int | Sequence[int], eps: float = 1e-2, until: int | float | None = None
    ) -> None:
        super().__init__()
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        self.eps = eps
        self.until = until
        self.register_buffer("_mean", torch.zeros(1, *shape))
        self.register_buffer("_var", torch.ones(1, *shape))
        self.register_buffer("_std", torch.ones(1, *shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self._count_host = 0  # host mirror of `count`, so `until` needs no device sync

    @property
    def mean(self) -> torch.Tensor:
        return self._mean.squeeze(0).clone()

    @property
    def std(self) -> torch.Tensor:
        return self._std.squeeze(0).clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.update(x)
        return (x - self._mean) / (self._std + self.eps)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the moments of batch ``x`` (leading dims flattened) into the running statistics."""
        if self.until is not None and self._count_host >= self.until:
            return
        x = x.reshape(-1, *self._mean.shape[1:]).to(self._mean.dtype)
        n = x.shape[0]
        if n == 0:
            return
        count_new = self._count_host + n
        rate = n / count_new
        var_x, mean_x = torch.var_mean(x, dim=0, keepdim=True, correction=0)
        delta = mean_x - self._mean
        self._mean.add_(rate * delta)
        self._var.add_(rate * (var_x - self._var + delta * (mean_x - self._mean)))
        self._std.copy_(torch.sqrt(self._var))
        self.count.fill_(count_new)
        self._count_host = count_new

    @torch.no_grad()
    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Map normalised values back to observation space."""
        return y * (self._std + self.eps) + self._mean

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[override]
        key = prefix + "count"
        if key not in state_dict:
            # Older checkpoints (rsl_rl 2.0) lack the count: treat the statistics as mature.
            state_dict = dict(state_dict)
            state_dict[key] = torch.tensor(int(self.until or 1e8), dtype=torch.long)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._count_host = int(self.count.item())
