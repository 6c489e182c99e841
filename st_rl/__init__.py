"""st_rl: reinforcement learning for legged robots in massively parallel simulation."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# PyTorch's switch that puts CPU tensors of 2 MiB and more on transparent huge pages (fewer TLB misses over a CPU
# update's activations, docs/performance.md). PyTorch reads it at its first CPU allocation, hence here; this file
# imports no torch (the CLI handles Ctrl-C during that import). ST_RL_CPU_MALLOC=default leaves it alone.
if _sys.platform.startswith("linux") and _os.environ.get("ST_RL_CPU_MALLOC", "").lower() != "default":
    _os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
