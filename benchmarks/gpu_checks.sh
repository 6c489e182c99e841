#!/usr/bin/env bash
# Issue "Faster than rsl_rl": the GPU checks as one prepared run (about 6 minutes on an H100 or H200).
#
# On a lent GPU machine (docs: /work/.library/device/README.md), from the repository root, with mujoco, pydantic,
# tensordict and rsl-rl-lib carried as wheels in .whl:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site; bash benchmarks/gpu_checks.sh
# Writes to $OUT (or /tmp/gpu_checks): summary.md (the tables), all.log (every step's whole output) and the raw
# timings as JSON. Steps: the CUDA tests (the update's CUDA graph against the eager update), kernels and host
# launches per rollout step and update (st_rl and rsl_rl), the host-sync audit, and iteration times against
# rsl_rl at 4096 and 16384 envs (st_rl auto, and fp32 without CUDA graphs).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-/tmp/gpu_checks}"
mkdir -p "$out"
steps=" ${STEPS:-tests op_count_mlp sync_audit vs_rsl_4096 vs_rsl_16384} "  # STEPS="a b": only those steps
run() {  # name, timeout in seconds, command...
    local name=$1 limit=$2
    shift 2
    [[ "$steps" == *" $name "* ]] || return 0
    echo "== $name: $*" | tee -a "$out/summary.md" >>"$out/all.log"
    timeout "$limit" "$@" 2>&1 | tee -a "$out/all.log" | grep -E '^\||kernels|passed|failed|FAILED|Error|^rsl|^st_rl' \
        | tee -a "$out/summary.md"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/summary.md"
python -c "import torch; print('torch', torch.__version__)" | tee -a "$out/summary.md"
run tests 100 python -m pytest -q -p no:cacheprovider tests/algorithms/test_cuda_graph.py tests/test_cuda.py
run op_count_mlp 80 python benchmarks/op_count.py --device cuda --num-envs 4096 --precision fp32
run sync_audit 50 python benchmarks/cuda_sync_audit.py --num-envs 4096
run vs_rsl_4096 140 python benchmarks/bench_vs_rsl_rl.py --device cuda --rounds 2 --iterations 12 --warmup 2 \
    --st-variants auto fp32+eager --json "$out/vs_rsl_4096.json"
run vs_rsl_16384 140 python benchmarks/bench_vs_rsl_rl.py --device cuda --num-envs 16384 --rounds 1 \
    --iterations 10 --warmup 2 --st-variants auto fp32+eager --json "$out/vs_rsl_16384.json"
