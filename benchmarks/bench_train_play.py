"""The default job, end to end, for one or more source trees: `st-rl train` on a task, then `st-rl play`.

Each source tree (a checkout of st_rl, e.g. this one and an older commit) runs in its own Python process that
imports st_rl from that tree (``python -S`` with ``PYTHONPATH=<tree>:<site-packages>``, so an editable install
of another tree does not interfere), one after the other on the same machine. The table reports the training
wall time, the mean steps/s over the logged iterations after the first, and the deterministic policy's
velocity-tracking RMSD and survival from ``st_rl.play.play`` (16 robots, 20 s, no video).

Example (the comparison recorded in benchmarks/RESULTS.md):

    git worktree add /tmp/before <old commit>
    python benchmarks/bench_train_play.py --src /tmp/before . --iterations 700
"""

from __future__ import annotations

import argparse
import json
import os
import re
import site
import subprocess
import sys
import tempfile
import time

PLAY = (
    "import json, sys; from st_rl.play import play; "
    "m = play(sys.argv[1], num_envs=16, duration_s=20.0, video=None, plot=None, verbose=False); "
    "print('RESULT ' + json.dumps({k: float(m[k]) for k in ('velrmsd', 'yaw_rmsd', 'survival', 'CoT')}))"
)


def _env(src: str, threads: int | None) -> dict[str, str]:
    paths = [os.path.abspath(src), *site.getsitepackages()]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
    }
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_tree(src: str, task: str, iterations: int, seed: int, log_root: str, threads: int | None) -> dict:
    """Train and play one source tree; returns its row."""
    log_dir = os.path.join(log_root, os.path.basename(os.path.abspath(src)) or "src")
    cmd = [sys.executable, "-S", "-m", "st_rl", "train", "--task", task, "--iterations", str(iterations),
           "--seed", str(seed), "--log-dir", log_dir]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(src, threads), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"training from {src} failed:\n{proc.stderr[-3000:]}")
    sps = [int(m) for m in re.findall(r"Computation: (\d+) steps/s", proc.stdout)]
    play = subprocess.run(
        [sys.executable, "-S", "-c", PLAY, log_dir], env=_env(src, threads), capture_output=True, text=True
    )
    line = next((ln for ln in play.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"play of {log_dir} failed:\n{play.stderr[-3000:]}")
    metrics = json.loads(line[len("RESULT ") :])
    return {
        "src": src,
        "iterations": iterations,
        "train_min": wall / 60,
        "steps_per_s": sum(sps[1:]) / max(len(sps) - 1, 1),
        **metrics,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--src", nargs="+", required=True, help="source trees (st_rl checkouts), run in order"
    )
    parser.add_argument("--task", default="quadruped_flat")
    parser.add_argument("--iterations", type=int, default=700)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None, help="OMP threads (default: all cores)")
    parser.add_argument("--log-root", default=None, help="where runs go (default: a temporary folder)")
    args = parser.parse_args()
    log_root = args.log_root or tempfile.mkdtemp(prefix="bench_train_play_")
    rows = []
    for src in args.src:
        print(f"training {src} ...", flush=True)
        rows.append(run_tree(src, args.task, args.iterations, args.seed, log_root, args.threads))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n`{' '.join(sys.argv)}` (task {args.task}, seed {args.seed}, runs in {log_root})\n")
    print(
        "| source | iterations | train min | steps/s | play velrmsd m/s | yaw RMSD rad/s | survival | CoT |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['src']} | {r['iterations']} | {r['train_min']:.1f} | {r['steps_per_s']:,.0f} | "
            f"{r['velrmsd']:.3f} | {r['yaw_rmsd']:.3f} | {r['survival']:.3f} | {r['CoT']:.2f} |"
        )


if __name__ == "__main__":
    main()
