#!/usr/bin/env bash
# Issue "Faster than rsl_rl": the GPU measurements as one prepared run (about 7 minutes on an H100 or H200).
#
# On a lent GPU machine (docs: /work/.library/device/README.md), from the repository root, with mujoco, pydantic,
# tensordict and rsl-rl-lib carried as wheels in .whl:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site; bash benchmarks/gpu_checks.sh
# Writes the tables to $OUT (or /tmp/gpu_checks): the device, kernel launches and host syncs per rollout step
# and update (st_rl and rsl_rl), the sync audit, and iteration times against rsl_rl at 4096 and 16384 envs.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-/tmp/gpu_checks}"
mkdir -p "$out"
run() {  # name, timeout in seconds, command...
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" | tee -a "$out/summary.md"
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" | grep -E '^\||kernels|^rsl|^st_rl' | tee -a "$out/summary.md"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/summary.md"
python -c "import torch; print('torch', torch.__version__)" | tee -a "$out/summary.md"
run op_count_mlp 60 python benchmarks/op_count.py --device cuda --num-envs 4096 --precision fp32 bf16
run op_count_rnn 60 python benchmarks/op_count.py --device cuda --num-envs 4096 --precision fp32 \
    --policy ActorCriticRecurrent
run sync_audit 60 python benchmarks/cuda_sync_audit.py --num-envs 4096
run vs_rsl_4096 120 python benchmarks/bench_vs_rsl_rl.py --device cuda --rounds 2 --iterations 12 --warmup 2 \
    --st-variants auto fp32 --json "$out/vs_rsl_4096.json"
run vs_rsl_16384 150 python benchmarks/bench_vs_rsl_rl.py --device cuda --num-envs 16384 --rounds 2 \
    --iterations 10 --warmup 2 --st-variants auto fp32 --json "$out/vs_rsl_16384.json"
