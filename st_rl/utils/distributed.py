"""Multi-process training with ``torch.distributed`` (``torchrun``): each rank steps its own environments."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = [
    "DistributedInfo",
    "all_reduce_gradients",
    "all_reduce_mean",
    "broadcast_module",
    "gather_objects",
    "global_mean_std",
    "init_distributed",
    "is_distributed",
    "max_over_ranks",
    "reduce_moments",
    "world_size",
]


@dataclass(frozen=True)
class DistributedInfo:
    """Where this process stands in a multi-process run (a single process is rank 0 of 1)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def init_distributed(
    device: str | torch.device, timeout_s: float = 600.0
) -> tuple[DistributedInfo, torch.device]:
    """Join ``torchrun``'s process group, if any: ``(rank info, this rank's device)`` (``cuda:<LOCAL_RANK>``)."""
    device = torch.device(device)
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return DistributedInfo(), device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"LOCAL_RANK {local_rank} has no GPU: {torch.cuda.device_count()} visible. Launch at most one rank "
                "per GPU (torchrun --nproc_per_node=<number of GPUs>)."
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=float(timeout_s)))
    info = DistributedInfo(rank=dist.get_rank(), local_rank=local_rank, world_size=dist.get_world_size())
    return info, device


def broadcast_module(module: torch.nn.Module, src: int = 0) -> None:
    """Copy every parameter and buffer of ``module`` from rank ``src`` to all ranks."""
    if not is_distributed():
        return
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(tensor.data, src=src)


def all_reduce_gradients(parameters: list[torch.nn.Parameter], nonfinite: torch.Tensor | None = None) -> bool:
    """Average the gradients (missing ones: zeros) over all ranks in one all-reduce; whether any rank's
    ``nonfinite`` flag (its loss was NaN/Inf) is set."""
    flag = torch.zeros(1, device=parameters[0].device) if nonfinite is None else nonfinite.float().reshape(1)
    if not is_distributed():
        return bool(flag.item())
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    bucket = torch.cat([g.reshape(-1) for g in grads] + [flag.to(grads[0].dtype)])
    dist.all_reduce(bucket, op=dist.ReduceOp.SUM)
    any_bad = bool(bucket[-1].item() > 0)
    chunks = (bucket[:-1] / dist.get_world_size()).split([g.numel() for g in grads])
    for p, chunk in zip(parameters, chunks):
        if p.grad is None:
            p.grad = chunk.view_as(p).clone()
        else:
            p.grad.copy_(chunk.view_as(p))
    return any_bad


def gather_objects(obj: Any) -> list[Any]:
    """``obj`` of every rank, in rank order."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def max_over_ranks(value: int, device: torch.device) -> int:
    """The largest ``value`` of all ranks."""
    if not is_distributed():
        return value
    flag = torch.tensor([value], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """The mean of ``value`` over ranks."""
    if not is_distributed():
        return value
    out = value.detach().clone().float()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out / dist.get_world_size()


def global_mean_std(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (Bessel-corrected) std of ``x`` over all elements of all ranks."""
    if not is_distributed():
        return x.mean(), x.std()
    flat = x.detach().reshape(-1).double()
    stats = torch.stack([flat.new_tensor(float(flat.numel())), flat.sum(), flat.square().sum()])
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    n, s, ss = stats[0], stats[1], stats[2]
    mean = s / n
    var = (ss - n * mean * mean) / (n - 1).clamp(min=1.0)
    return mean.to(x.dtype), var.clamp(min=0.0).sqrt().to(x.dtype)


def reduce_moments(
    n_local: int, mean: torch.Tensor, var: torch.Tensor
) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Merge per-rank batch moments (population variance; the same ``n_local`` on every rank)."""
    if not is_distributed():
        return n_local, mean, var
    size = dist.get_world_size()
    packed = torch.cat([mean.double().reshape(-1), (var.double() + mean.double() ** 2).reshape(-1)])
    dist.all_reduce(packed, op=dist.ReduceOp.SUM)
    d = mean.numel()
    g_mean = packed[:d] / size
    g_var = (packed[d:] / size - g_mean**2).clamp(min=0.0)
    return n_local * size, g_mean.reshape(mean.shape).to(mean.dtype), g_var.reshape(var.shape).to(var.dtype)
