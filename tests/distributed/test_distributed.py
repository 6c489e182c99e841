"""Multi-rank training with torch.distributed (2 CPU ranks, gloo, launched by torchrun).

Deterministic under load: no assertion reads a clock and no rank is given a deadline it could miss by being
slow. The ranks' collective timeout stays at its default (600 s) except where timing out is the expected
outcome (``stuck``: the other rank never arrives); failures propagate by events (a rank exits, torchrun stops
the others, a gloo peer sees its connection close). ``torchrun --standalone`` shares the launcher's TCP store,
whose port the OS assigned and the launcher holds, so no free port is guessed. A subprocess timeout remains
only as a hang guard, far above any honest run time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from dist_worker import FINISHED  # this folder is on sys.path under pytest

from st_rl.algorithms import PPO
from st_rl.algorithms.functional import normalize_advantages
from st_rl.modules import ActorCritic

WORKER = os.path.join(os.path.dirname(__file__), "dist_worker.py")
# What a rank printed when it aborted at the end of the update test, after its iteration (twice in full-suite runs,
# one of them in CI; torch 2.13, gloo, 2 loaded cores; once in 300 runs of the worker alone with other load).
TEARDOWN_ABORT = "terminate called without an active exception"


# Hang guard: below pytest's per-test timeout (600 s, pyproject.toml) so that a hang fails with the ranks' output.
HANG_GUARD_S = 540


def torchrun(mode: str, out: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # an abort shows the rank's stack
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        WORKER,
        mode,
        out,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_ranks_finished(proc: subprocess.CompletedProcess) -> None:
    """Every rank did its work and wrote its results (the workers pass a barrier after writing them). An abort
    in the teardown after that barrier, with ``TEARDOWN_ABORT``, is gloo's and leaves the results complete: the
    tests check them; any other failure fails."""
    if proc.returncode != 0:
        assert FINISHED in proc.stderr and TEARDOWN_ABORT in proc.stderr, proc.stderr[-3000:]


def test_two_rank_update_equals_single_rank_update_on_joined_batch(tmp_path):
    proc = torchrun("update", str(tmp_path))
    assert_ranks_finished(proc)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    # Rank 0's initial parameters were broadcast; both ranks end with the same parameters.
    for k in r0["pre"]:
        assert torch.equal(r0["pre"][k], r1["pre"][k]), k
        torch.testing.assert_close(r0["post"][k], r1["post"][k], rtol=0, atol=1e-7)
    assert r0["lr"] == r1["lr"]

    # Normaliser statistics equal those of the joined data (all raw observations both ranks stepped).
    for key, raw in (("obs_norm", "raw_obs"), ("critic_norm", "raw_critic")):
        joined = torch.cat([r0[raw], r1[raw]], dim=1).reshape(-1, r0[raw].shape[-1])
        var, mean = torch.var_mean(joined, dim=0, correction=0)
        for r in (r0, r1):
            torch.testing.assert_close(r[key]["_mean"][0], mean, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(r[key]["_var"][0], var, rtol=1e-4, atol=1e-6)
            assert int(r[key]["count"]) == joined.shape[0]

    # A single-rank PPO update from the same parameters on the joined batch (envs side by side).
    s0, s1 = r0["storage"], r1["storage"]
    T, n = s0["observations"].shape[:2]
    ac = ActorCritic(
        6, 8, 2, actor_hidden_dims=[32, 32], critic_hidden_dims=[32, 32], actor_obs_normalization=True
    )
    # The broadcast initial parameters, with the statistics the ranks normalised the stored raw observations by.
    state = dict(r0["pre"])
    state.update({f"actor_obs_normalizer.{k}": v for k, v in r0["obs_norm"].items()})
    state.update({f"critic_obs_normalizer.{k}": v for k, v in r0["critic_norm"].items()})
    ac.load_state_dict(state)
    alg = PPO(ac, num_learning_epochs=2, num_mini_batches=1, learning_rate=1e-3, schedule="adaptive", gamma=0.99,
              lam=0.95, entropy_coef=0.01, precision="fp32")  # fmt: skip
    alg.init_obs_norm(6, 8)
    alg.init_storage(2 * n, T, [6], [8], [2])
    st = alg.storage
    for name in s0:
        getattr(st, name).copy_(torch.cat([s0[name], s1[name]], dim=1))
    raw_advantages = st.returns - st.values  # GAE is per env: the joined returns are the ranks' returns
    st.advantages.copy_(normalize_advantages(raw_advantages))  # normalised over the joined batch
    st.step = T
    alg.update(0)
    assert alg.learning_rate == pytest.approx(r0["lr"])
    for k, v in ac.state_dict().items():
        torch.testing.assert_close(r0["post"][k], v, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_rank_training_reaches_the_single_rank_threshold_and_resumes(tmp_path):
    start = time.perf_counter()
    proc = torchrun("learn", str(tmp_path), timeout=1700)
    assert_ranks_finished(proc)
    result = json.loads((tmp_path / "learn.json").read_text())
    print(f"2-rank velocity_tracking return {result['return']:.3f} in {time.perf_counter() - start:.1f}s")
    assert result["return"] > 6.5  # the single-rank learning test's threshold (tests/test_learning.py)
    assert result["tot_timesteps"] == 30 * 24 * 128 * 2  # counted over both ranks
    assert result["resumed_iteration"] == 31
    assert "model_30.pt" in result["files"] and "model_31.pt" in result["files"]
    # Rank 0 writes one event file per runner (the trained one and the resumed one); rank 1 writes none.
    assert sum(f.startswith("events.out.tfevents") for f in result["files"]) == 2


def test_failing_rank_does_not_block_the_others(tmp_path):
    proc = torchrun("fail", str(tmp_path))  # returning at all (before the hang guard) is the "no hang" check
    assert proc.returncode != 0
    assert "rank 1 fails on purpose" in proc.stderr
    assert "timed out" not in proc.stderr.lower(), "a rank gave up waiting instead of seeing the failure"


def test_stuck_rank_makes_the_others_time_out(tmp_path):
    proc = torchrun("stuck", str(tmp_path))
    assert proc.returncode != 0
    message = (tmp_path / "stuck0.txt").read_text()
    assert "timed out" in message.lower() or "timeout" in message.lower(), message


@pytest.mark.parametrize("mode", ["nan", "nan_norm"])
def test_nonfinite_env_output_raises_on_every_rank(tmp_path, mode):
    proc = torchrun(mode, str(tmp_path))
    missing = [r for r in (0, 1) if not (tmp_path / f"nan{r}.txt").exists()]
    assert not missing, f"ranks {missing} did not raise:\n{proc.stderr[-3000:]}"
    messages = [(tmp_path / f"nan{r}.txt").read_text() for r in (0, 1)]
    assert all("NaN or Inf" in m for m in messages), messages
    if mode == "nan":  # the adapter's error, shared by all ranks, names the group
        assert all(m.startswith("NonFiniteError") and "observation group 'policy'" in m for m in messages)
