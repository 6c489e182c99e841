"""The GPU path's launch budget, checked on the CPU: aten ops and host syncs of the learner.

On a GPU nearly every aten op is a kernel launch, and the legged_gym-size iteration is bound by launches. The
counts come from benchmarks/op_count.py (the legged_gym PPO setting with the CUDA path's options forced on:
sync-free update checks, and bf16 autocast for the bf16 rows). They do not depend on the batch size, so a
tiny run gives them. A change that adds ops to the hot path fails here, on any machine.

The budgets are the counts measured when they were set, with a little headroom; lower them when a change
removes ops. ``RSL_RL_MINIBATCH_OPS`` is rsl-rl-lib 5.5.1's count for the same update (its Adam in the
``foreach`` form it takes on CUDA), from ``python benchmarks/op_count.py`` (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "op_count.py"
RSL_RL_MINIBATCH_OPS = 340.9

# (policy, precision): (ops per rollout step, ops per minibatch). The step's budgets grew by 6 when the
# normalisers' update rate moved onto the device (a CUDA graph replays it; a host number would be baked in).
BUDGETS = {
    ("ActorCritic", "fp32"): (123, 299),
    ("ActorCritic", "bf16"): (139, 329),
    ("ActorCriticRecurrent", "fp32"): (153, 410),
    ("ActorCriticRecurrent", "bf16"): (169, 468),
}


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("op_count", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def op_count() -> ModuleType:
    return _load_script()


@pytest.mark.parametrize(("policy", "precision"), list(BUDGETS))
def test_learner_ops_stay_within_the_budget(op_count: ModuleType, policy: str, precision: str) -> None:
    counts = op_count.summarize(op_count.count_st_rl(policy, precision, num_envs=16))
    step_budget, minibatch_budget = BUDGETS[policy, precision]
    assert counts["step_ops"] <= step_budget, counts
    assert counts["minibatch_ops"] <= minibatch_budget, counts
    if policy == "ActorCritic":  # the done criterion of the GPU issue: no more ops per minibatch than rsl_rl
        assert counts["minibatch_ops"] <= RSL_RL_MINIBATCH_OPS, counts
    # One read of the device per update (the losses, statistics and learning rate in one copy; recurrent: also the
    # trajectory counts before padding). The two reads of
    # a rollout step are the observation normalisers' non-finite check, made only on a CPU (free there).
    assert counts["update_syncs"] <= (1 if policy == "ActorCritic" else 2), counts
    assert counts["step_syncs"] <= 2, counts


def test_the_counters_count(op_count: ModuleType) -> None:
    import torch

    x = torch.ones(4)
    with op_count.HostSyncCounter() as syncs, op_count.OpCounter() as ops:
        y = (x * 2 + 1).sum()  # three kernels
        host = y.cpu()  # one read of the device
        float(host), int(host), bool(host)  # reads of the host copy: free
        float(x[0])  # a second read of the device (x[0] is a view: no kernel)
    assert syncs.syncs == {"cpu": 1, "__float__": 1}
    assert ops.ops["aten::mul"] == ops.ops["aten::add"] == ops.ops["aten::sum"] == 1
    assert ops.ops["view:aten::select"] == 1
