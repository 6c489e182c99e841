"""keep_freed_memory: a large CPU tensor allocated again reuses the freed pages instead of faulting in new ones."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from st_rl.utils.cpu_memory import ENV_VAR

# Page faults of the 5th to 8th of eight 64 MiB allocations, each freed before the next; PPO on the CPU applies
# the setting. (The first allocations may fault: a freed block followed by a small live one is too small for the
# next aligned request of the same size, so the heap grows once or twice before its top is reused.)
PROBE = """
import resource, torch
from st_rl.algorithms import PPO
from st_rl.modules import ActorCritic
PPO(ActorCritic(3, 3, 1, actor_hidden_dims=[8], critic_hidden_dims=[8]), device="cpu")
faults = []
for _ in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.ones(16 * 2**20)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del x
print(sum(faults[4:]))
"""


def _faults(**env: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_ppo_on_the_cpu_keeps_freed_memory_for_the_next_allocation():
    pages = 64 * 2**20 // 4096
    assert _faults(**{ENV_VAR: "default"}) > 3 * pages  # malloc maps the 64 MiB afresh: one fault per page
    assert _faults() < pages // 20  # reused
