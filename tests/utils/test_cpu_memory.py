"""keep_freed_memory: a large CPU tensor allocated again reuses the freed pages instead of faulting in new ones."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from st_rl.utils.cpu_memory import ENV_VAR

# Counts the page faults of the second of two 64 MiB allocations; PPO on the CPU applies the setting.
PROBE = """
import resource, torch
from st_rl.algorithms import PPO
from st_rl.modules import ActorCritic
PPO(ActorCritic(3, 3, 1, actor_hidden_dims=[8], critic_hidden_dims=[8]), device="cpu")
x = torch.ones(16 * 2**20)
del x
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
x = torch.ones(16 * 2**20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
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
    assert _faults(**{ENV_VAR: "default"}) > pages // 2  # malloc maps the 64 MiB afresh: one fault per page
    assert _faults() < pages // 20  # reused
