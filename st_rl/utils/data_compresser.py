"""Lossy compression of observation components in demonstration datasets (``obs_disassemble_mapping``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

__all__ = [
    "COMPRESSERS",
    "compress_normalized_image",
    "decompress_normalized_image",
    "get_compresser",
    "register_compresser",
]

ArrayLike = TypeVar("ArrayLike", np.ndarray, torch.Tensor)
CompressFn = Callable[[Any], Any]


def compress_normalized_image(x: ArrayLike) -> ArrayLike:
    """Clip to ``[0, 1]`` and store as ``uint8`` levels (round trip error at most ``0.5 / 255``)."""
    if isinstance(x, torch.Tensor):
        return torch.round(torch.clamp(x.float(), 0.0, 1.0) * 255.0).to(torch.uint8)
    return np.round(np.clip(np.asarray(x, dtype=np.float32), 0.0, 1.0) * 255.0).astype(np.uint8)


def decompress_normalized_image(x: ArrayLike) -> ArrayLike:
    """Inverse of :func:`compress_normalized_image`: ``float32`` values ``x / 255``."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.float32) / 255.0
    return np.asarray(x).astype(np.float32) / np.float32(255.0)


COMPRESSERS: dict[str, tuple[CompressFn, CompressFn]] = {
    "normalized_image": (compress_normalized_image, decompress_normalized_image)
}


def register_compresser(name: str, compress: CompressFn, decompress: CompressFn) -> None:
    """Add a compression type usable in ``obs_disassemble_mapping`` (ValueError if ``name`` is taken)."""
    if name in COMPRESSERS:
        raise ValueError(f"compression type {name!r} is already registered")
    COMPRESSERS[name] = (compress, decompress)


def get_compresser(name: str) -> tuple[CompressFn, CompressFn]:
    """``(compress, decompress)`` of a registered type."""
    try:
        return COMPRESSERS[name]
    except KeyError:
        msg = f"Unknown observation compression type {name!r}; registered types: {sorted(COMPRESSERS)}"
        raise ValueError(f"{msg} (add one with st_rl.utils.data_compresser.register_compresser).") from None
