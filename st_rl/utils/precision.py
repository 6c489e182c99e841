"""Mixed precision (``precision="fp32" | "bf16" | "auto"``): only the policy's hidden-layer matrix products
run in bfloat16; outputs, parameters, statistics and losses stay float32 (no loss scaling)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

PRECISIONS = ("fp32", "bf16", "auto")
BF16_MIN_SPEEDUP = 1.25
"""GPU ``precision="auto"``: bf16 only where a measured pass is this much faster (else exact float32)."""
CPU_BF16_MIN_MACS = 100_000_000
"""CPU ``precision="auto"``: bf16 from this many linear-layer multiply-adds per minibatch pass (measured)."""


@cache
def _cpu_has_fast_bf16() -> bool:
    """AVX512-BF16 or AMX on this CPU (``/proc/cpuinfo``) with PyTorch's AVX512 kernels in use (without them,
    e.g. ``ATEN_CPU_CAPABILITY=avx2``, bfloat16 is emulated and slow)."""
    if torch.backends.cpu.get_cpu_capability() not in ("AVX512", "AMX"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return ("avx512_bf16" in flags or "amx_bf16" in flags) and torch.backends.mkldnn.is_available()


def has_fast_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` has native bfloat16 matrix units (CPU: AVX512-BF16/AMX; CUDA: compute capability 8+)."""
    device = torch.device(device)
    if device.type == "cpu":
        return _cpu_has_fast_bf16()
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_capability(device)[0] >= 8
    return False


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """``"fp32"`` or ``"bf16"`` for ``precision`` on ``device`` (``"auto"``: bf16 where :func:`has_fast_bf16`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    device = torch.device(device)
    if precision == "auto":
        return "bf16" if has_fast_bf16(device) else "fp32"
    if precision == "bf16" and device.type not in ("cpu", "cuda"):
        raise ValueError(f"precision='bf16' needs a CPU or CUDA device, got {device}; use precision='fp32'")
    return precision


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager[Any]:
    """bfloat16 autocast on ``device`` when ``precision == "bf16"``, otherwise nothing."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` here (torch 2.2-2.3 have per-device functions)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 when it is a half type, else ``x``."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _timed(step: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure_precision(
    step: Callable[[], None], device: torch.device | str, repeats: int = 3
) -> tuple[str, float, float]:
    """``(choice, fp32 s, bf16 s)``: the fastest of ``repeats`` alternating timings of ``step`` (a forward and
    backward pass) after a warm-up; ``"bf16"`` where it is :data:`BF16_MIN_SPEEDUP` times faster."""
    device = torch.device(device)
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for i in range(repeats + 1):
        for precision in ("fp32", "bf16"):
            with autocast(device, precision):
                elapsed = _timed(step, device)
            if i > 0:
                times[precision].append(elapsed)
    fp32, bf16 = min(times["fp32"]), min(times["bf16"])
    return ("bf16" if bf16 * BF16_MIN_SPEEDUP <= fp32 else "fp32"), fp32, bf16


def linear_macs(module: torch.nn.Module) -> int:
    """Multiply-adds of one sample through every ``nn.Linear`` of ``module``."""
    return sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, torch.nn.Linear))
