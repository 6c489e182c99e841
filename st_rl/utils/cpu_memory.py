"""CPU training: freed tensor memory stays in the process for the next allocation (glibc's malloc).

glibc maps every allocation above 32 MiB afresh and unmaps it when freed, so each large activation of a CPU
update (24,576 x 512 floats at legged_gym's size: 50 MB) touches new zeroed pages: a page fault per 4 KiB. Kept in
malloc's heap, the memory is reused instead, as PyTorch's CUDA caching allocator reuses GPU memory; the process
keeps its peak memory until it ends.
"""

from __future__ import annotations

import ctypes
import os
import platform
from functools import cache

__all__ = ["ENV_VAR", "keep_freed_memory"]

ENV_VAR = "ST_RL_CPU_MALLOC"
"""Set to ``default`` to leave malloc and PyTorch's CPU allocator as they are."""
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
_TRIM_ABOVE = 2**31 - 1  # bytes of free heap top returned to the system (mallopt takes a C int: its largest)


@cache
def keep_freed_memory() -> bool:
    """Serve every allocation from malloc's heap and return its free top to the system only above 2 GiB (glibc only);
    whether it was applied. Once per process; ``ST_RL_CPU_MALLOC=default`` turns it off."""
    if os.environ.get(ENV_VAR, "").lower() == "default" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_ABOVE))
    except (OSError, AttributeError):
        return False
