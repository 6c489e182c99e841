"""Running observation normalisation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn as nn

from st_rl.utils.distributed import reduce_moments


class NonFiniteObservationError(ValueError):
    """A batch with NaN or Inf was given to a normaliser; its statistics were left unchanged."""


class EmpiricalNormalization(nn.Module):
    """``(x - mean) / (std + eps)`` with running statistics, updated in training mode (all ranks' batches) until
    ``count`` reaches ``until``. A batch with NaN or Inf is refused: on the CPU :meth:`update` raises
    :class:`NonFiniteObservationError`, on an accelerator :meth:`raise_if_nonfinite` does later."""

    if TYPE_CHECKING:  # TorchScript cannot read buffer annotations
        _mean: torch.Tensor
        _var: torch.Tensor
        _std: torch.Tensor
        count: torch.Tensor

    def __init__(
        self,
        shape: int | Sequence[int],
        eps: float = 1e-2,
        until: int | float | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.name, self.eps, self.until = name, eps, until
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        self.register_buffer("_mean", torch.zeros(1, *shape))
        self.register_buffer("_var", torch.ones(1, *shape))
        self.register_buffer("_std", torch.ones(1, *shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self._count_host = 0  # host mirror of `count`, so `until` needs no device sync
        self._skipped = torch.zeros((), dtype=torch.long)  # skipped non-finite batches (accelerators)

    @property
    def mean(self) -> torch.Tensor:
        return self._mean.squeeze(0).clone()

    @property
    def std(self) -> torch.Tensor:
        return self._std.squeeze(0).clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting() and self.training:  # the scripted forward only normalises
            self.update(x)
        return self.normalize(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / (std + eps)`` with the current statistics (never updates them)."""
        return (x - self._mean) / (self._std + self.eps)

    @torch.jit.unused
    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the moments of batch ``x`` (leading dims flattened) into the running statistics."""
        if self.frozen:
            return
        x = x.reshape(-1, *self._mean.shape[1:]).to(self._mean.dtype)
        n = x.shape[0]
        if n == 0:
            return
        var_x, mean_x = torch.var_mean(x, dim=0, keepdim=True, correction=0)
        n, mean_x, var_x = reduce_moments(n, mean_x, var_x)  # all ranks' batches
        # NaN or Inf in the batch (or an overflowing mean) makes var_x non-finite
        finite = torch.isfinite(var_x).all()
        if self._mean.device.type == "cpu" and not bool(finite):
            raise NonFiniteObservationError(
                f"{self._label()} was given a batch of {n} observations holding NaN or Inf (not updated): "
                "find where the observations become non-finite, or clip them."
            )
        self._guarded_update(n, mean_x, var_x, finite)

    def _guarded_update(
        self, n: int, mean_x: torch.Tensor, var_x: torch.Tensor, finite: torch.Tensor
    ) -> None:
        # without a host sync (and host numbers: a CUDA graph may replay this): a non-finite batch leaves the
        # statistics unchanged but counts towards ``until``
        count_new = self.count + n
        rate = n / count_new
        mean_x = torch.where(finite, mean_x, self._mean)  # a refused batch moves nothing
        var_x = torch.where(finite, var_x, self._var)
        delta = mean_x - self._mean
        mean = self._mean + rate * delta
        self._var.copy_(self._var + rate * (var_x - self._var + delta * (mean_x - mean)))
        self._mean.copy_(mean)
        torch.sqrt(self._var, out=self._std)
        self.count.copy_(torch.where(finite, count_new, self.count))
        self._count_host += n
        if self._skipped.device != self._mean.device:
            with torch.inference_mode(False):  # a normal tensor, updatable in and outside inference mode
                self._skipped = torch.zeros((), dtype=torch.long, device=self._mean.device)
        self._skipped.add_((~finite).to(torch.long))  # in place: a CUDA graph replaying this adds to it too

    __jit_unused_properties__ = ["frozen"]  # noqa: RUF012 - TorchScript's name

    @property
    def frozen(self) -> bool:
        """Whether the count reached ``until`` (the host's count: no sync), so updates change nothing."""
        return self.until is not None and self._count_host >= self.until

    @torch.jit.unused
    def count_replayed(self, x: torch.Tensor) -> None:
        """Count the batch ``x`` that a replayed CUDA graph of :meth:`update` merged (a replay runs no Python)."""
        self._count_host += x.numel() // max(self._mean.numel(), 1)

    def _label(self) -> str:
        shape = tuple(self._mean.shape[1:])
        return f"Normaliser '{self.name}'" if self.name else f"Normaliser EmpiricalNormalization{shape}"

    def raise_if_nonfinite(self) -> None:
        """Raise :class:`NonFiniteObservationError` if batches with NaN/Inf were skipped since the last call."""
        skipped = int(self._skipped)
        if skipped:
            self._skipped.zero_()
            raise NonFiniteObservationError(
                f"{self._label()} skipped {skipped} batch(es) of observations holding NaN or Inf: find where the "
                "observations become non-finite, or clip them."
            )

    @torch.no_grad()
    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Map normalised values back to observation space."""
        return y * (self._std + self.eps) + self._mean

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[override]
        key = prefix + "count"
        if key not in state_dict:
            # rsl_rl 2.0 checkpoints lack the count: treat the statistics as mature
            state_dict = dict(state_dict)
            state_dict[key] = torch.tensor(int(self.until or 1e8), dtype=torch.long)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._count_host = int(self.count.item())


def attach_obs_normalizers(policy: Any, actor: bool = True, critic: bool = True) -> None:
    """Give ``policy`` fresh ``actor_obs_normalizer`` / ``critic_obs_normalizer`` where it has none yet."""
    device = policy.std.device
    for side, on in (("actor", actor), ("critic", critic)):
        if on and not getattr(policy, f"{side}_obs_normalization"):
            name, width = f"{side}_obs_normalizer", getattr(policy, f"num_{side}_obs")
            setattr(policy, name, EmpiricalNormalization([width], until=int(1e8), name=name).to(device))
            setattr(policy, f"{side}_obs_normalization", True)


class Normalize(nn.Module):
    """L2-normalise the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, p=2.0, dim=-1)


class RunningMeanStd:
    """Running mean and variance in float64 NumPy with parallel-variance merging (count starts at ``epsilon``)."""

    def __init__(self, epsilon: float = 1e-4, shape: Sequence[int] | tuple = ()) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = float(epsilon)

    def update(self, x: Any) -> None:
        """Merge a batch (first axis = samples)."""
        x = np.asarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
        self.update_from_moments(x.mean(axis=0), x.var(axis=0), x.shape[0])

    def update_from_moments(self, batch_mean: Any, batch_var: Any, batch_count: int) -> None:
        n, delta, total = batch_count, batch_mean - self.mean, self.count + batch_count
        m2 = self.var * self.count + batch_var * n + np.square(delta) * self.count * n / total
        self.mean, self.var, self.count = self.mean + delta * n / total, m2 / total, total

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": torch.from_numpy(self.mean.copy()),
            "var": torch.from_numpy(self.var.copy()),
            "count": float(self.count),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float64)
        self.var = np.asarray(state["var"], dtype=np.float64)
        self.count = float(state["count"])


class Normalizer(RunningMeanStd):
    """AMP-style normaliser: ``clip((x - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)``."""

    def __init__(self, input_dim: int | Sequence[int], epsilon: float = 1e-4, clip_obs: float = 10.0) -> None:
        shape = (int(input_dim),) if isinstance(input_dim, int) else tuple(input_dim)
        super().__init__(epsilon=epsilon, shape=shape)
        self.epsilon, self.clip_obs = epsilon, clip_obs

    def normalize(self, x: Any) -> np.ndarray:
        """NumPy normalisation (no statistics update)."""
        z = (np.asarray(x) - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(z, -self.clip_obs, self.clip_obs)

    def normalize_torch(self, x: torch.Tensor, device: Any = None, update: bool = False) -> torch.Tensor:
        """Torch normalisation on ``device``; ``update=True`` first merges ``x`` into the statistics."""
        if update:
            self.update(x)
        device = device if device is not None else x.device
        mean = torch.as_tensor(self.mean, dtype=torch.float32, device=device)
        std = torch.sqrt(torch.as_tensor(self.var + self.epsilon, dtype=torch.float32, device=device))
        return torch.clamp((x.to(device) - mean) / std, -self.clip_obs, self.clip_obs)

    def update_normalizer(self, rollouts: Iterable[Any], expert_loader: Iterable[Any]) -> None:
        """Merge policy and expert batches (each an array or the first item of a tuple)."""
        for source in (rollouts, expert_loader):
            for batch in source:
                self.update(batch[0] if isinstance(batch, (tuple, list)) else batch)
