"""Helpers that act on (nested tuples / namedarraytuples of) tensors or arrays, recursively."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from st_rl.utils.collections import get_leading_dims, tree_map

__all__ = [
    "buffer_expand",
    "buffer_from_example",
    "buffer_func",
    "buffer_method",
    "buffer_swap",
    "buffer_to",
    "get_leading_dims",
    "numpify_buffer",
    "torchify_buffer",
]


def buffer_func(buffer: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    """Apply ``func(leaf, *args, **kwargs)`` to every tensor/array leaf; ``None`` stays ``None``."""
    return tree_map(lambda x: func(x, *args, **kwargs), buffer)


def buffer_method(buffer: Any, method_name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``leaf.<method_name>(*args, **kwargs)`` on every leaf."""
    return tree_map(lambda x: getattr(x, method_name)(*args, **kwargs), buffer)


def buffer_from_example(example: Any, leading_dims: int | tuple[int, ...]) -> Any:
    """Zero buffers shaped ``(*leading_dims, *leaf.shape)`` with each leaf's dtype and device."""
    lead = (leading_dims,) if isinstance(leading_dims, int) else tuple(leading_dims)

    def make(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return torch.zeros(*lead, *x.shape, dtype=x.dtype, device=x.device)
        arr = np.asarray(x)
        return np.zeros(lead + arr.shape, dtype=arr.dtype)

    return buffer_func(example, make)


def buffer_expand(buffer: Any, expand_size: int, dim: int = 0) -> Any:
    """Append ``expand_size`` zero entries along ``dim`` to every leaf."""

    def expand(x: Any) -> Any:
        shape = list(x.shape)
        shape[dim] = expand_size
        if isinstance(x, torch.Tensor):
            return torch.cat([x, x.new_zeros(shape)], dim=dim)
        return np.concatenate([x, np.zeros(shape, dtype=x.dtype)], axis=dim)

    return buffer_func(buffer, expand)


def buffer_swap(buffer: Any, cursor: int, dim: int = 0) -> Any:
    """Rotate every leaf along ``dim`` so that entry ``cursor`` becomes entry 0 (oldest first in a ring)."""
    return buffer_func(buffer, lambda x: (torch if isinstance(x, torch.Tensor) else np).roll(x, -cursor, dim))


def buffer_to(buffer: Any, device: str | torch.device | None = None, **kwargs: Any) -> Any:
    """Move every tensor leaf to ``device``."""
    return buffer_func(buffer, lambda x: x.to(device, **kwargs))


def torchify_buffer(buffer: Any) -> Any:
    """numpy leaves -> tensors (sharing memory where possible)."""
    return buffer_func(
        buffer, lambda x: x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
    )


def numpify_buffer(buffer: Any) -> Any:
    """tensor leaves -> numpy arrays (moved to the CPU)."""
    return buffer_func(buffer, lambda x: x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x)
