"""The st_rl vs rsl_rl benchmark script (benchmarks/bench_vs_rsl_rl.py) at tiny sizes.

The training test needs the benchmark extra (``pip install -e '.[bench]'``) and is skipped without it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vs_rsl_rl.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_vs_rsl_rl", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_missing_rsl_rl_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _load_script()
    monkeypatch.setattr(bench, "rsl_rl_available", lambda: False)
    assert bench.main(["--setting", "small", "--iterations", "2", "--warmup", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: install the benchmark extra: pip install -e '.[bench]'"]


def test_tiny_benchmark_runs_both_libraries() -> None:
    pytest.importorskip("rsl_rl")
    bench = _load_script()
    setting = bench.Setting("tiny", num_envs=64, hidden=[32, 32], iterations=2, warmup=1, rounds=1)
    variants = bench.parse_variants(["fp32"], compile_all=False)
    result = bench.run_benchmark(setting, variants, rounds=1, threads=1)

    assert [run["library"] for run in result["runs"]] == ["rsl_rl", "st_rl"]
    assert result["obs_dims"] == {"actor": 6, "critic": 8}
    for run in result["runs"]:
        assert len(run["rows"]) == 2
        for row in run["rows"]:
            assert row["iteration"] > 0 and row["collection"] > 0 and row["learning"] > 0
            assert math.isfinite(row["reward"])
        times = [row["time"] for row in run["rows"]]
        assert times == sorted(times)
    summary = result["summary"]
    assert [row["label"] for row in summary["rows"]] == ["rsl_rl", "st_rl fp32"]
    for row in summary["rows"]:
        assert row["iteration_mean_s"] > 0 and row["speedup_vs_rsl_rl"] > 0
        assert math.isfinite(row["final_reward"]) and math.isfinite(row["reward_at_equal_time"])
    table = bench.format_table(result)
    assert "| rsl_rl |" in table and "| st_rl fp32 |" in table
