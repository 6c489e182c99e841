"""CPU memory: a large CPU tensor allocated again reuses the freed pages instead of faulting in new ones, and lives
on transparent huge pages once st_rl is imported."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys

import pytest

from st_rl.utils.cpu_memory import ENV_VAR

THP_VAR = "THP_MEM_ALLOC_ENABLE"  # PyTorch's switch, set by `import st_rl`

# Page faults of each of twelve 64 MiB allocations, each freed before the next; PPO on the CPU applies the setting.
# (The first allocations may fault: a freed block followed by a small live one is too small for the next aligned
# request of the same size, so the heap grows once or twice before its top is reused. A reused allocation can
# also fault now and then when the kernel migrates its pages, so the test reads the median of the last eight.)
PROBE = """
import resource, torch
from st_rl.algorithms import PPO
from st_rl.modules import ActorCritic
PPO(ActorCritic(3, 3, 1, actor_hidden_dims=[8], critic_hidden_dims=[8]), device="cpu")
faults = []
for _ in range(12):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(16 * 2**20)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del x
print(*faults)
"""


def _run(probe: str, **env: str) -> str:
    """The last line a fresh process running ``probe`` prints (without this process's own huge-page switch)."""
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env={k: v for k, v in {**os.environ, **env}.items() if k != THP_VAR},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def _faults(**env: str) -> float:
    """Median page faults of one allocation after the first four."""
    return statistics.median(int(v) for v in _run(PROBE, **env).split()[4:])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_ppo_on_the_cpu_keeps_freed_memory_for_the_next_allocation():
    pages = 64 * 2**20 // 4096
    assert _faults(**{ENV_VAR: "default"}) > pages // 2  # malloc maps the 64 MiB afresh: one fault per page
    assert _faults() < pages // 20  # reused


# THPeligible of the mapping that holds a fresh 64 MiB tensor: 1 once the region is advised onto huge pages.
HUGE_PAGE_PROBE = """
import torch, st_rl
x = torch.empty(16 * 2**20)
ptr, eligible, inside = x.data_ptr(), None, False
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and not head.endswith(":"):
        lo, hi = (int(v, 16) for v in head.split("-"))
        inside = lo <= ptr < hi
    elif inside and line.startswith("THPeligible:"):
        eligible = int(line.split()[1])
print(eligible)
"""


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "unavailable"


@pytest.mark.skipif(
    _thp_mode() != "madvise", reason="transparent huge pages on request only ('madvise' mode)"
)
def test_importing_st_rl_puts_large_cpu_tensors_on_huge_pages():
    assert _run(HUGE_PAGE_PROBE) == "1"
    assert _run(HUGE_PAGE_PROBE, **{ENV_VAR: "default"}) == "0"
