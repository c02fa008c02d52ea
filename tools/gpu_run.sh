#!/usr/bin/env bash
# Runs on the GPU machine with the staged .gpu/ folder (see tools/gpu_stage.sh):
# the GPU test suite, compute-sanitizer memcheck on the GPU tests, and the GPU
# benchmarks, writing logs and JSON under $OUT (default ./gpu_out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
G=.gpu
if [[ -f $G/omniglot.tgz ]]; then
  mkdir -p /tmp/mn_data && tar -C /tmp/mn_data -xzf $G/omniglot.tgz && export MN_DATA_DIR=/tmp/mn_data
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
gpu=$(head -1 "$OUT/gpu.txt" | cut -d, -f1 | tr ' ' '-')
date=$(date +%F)
# 1. Every test binary (GPU tests run, nothing should skip for lack of a device).
for t in $G/mn_tests_*; do
  "$t" --gtest_brief=1 2>&1 | tail -n 25 | sed "s|^|$(basename "$t"): |" | tee -a "$OUT/tests.log"
done
# 2. compute-sanitizer memcheck (caching allocator off so use-after-free is visible).
if command -v compute-sanitizer >/dev/null; then
  for t in $G/mn_tests_runtime $G/mn_tests_kernels $G/mn_tests_nn $G/mn_tests_data; do
    MN_CUDA_NO_CACHE=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" \
      --gtest_filter='*Cuda*:*CUDA*:*Gpu*:*GPU*' 2>&1 | tail -n 6 | sed "s|^|memcheck $(basename "$t"): |" | tee -a "$OUT/sanitizer.log"
  done
fi
# 3. Benchmarks (GPU cases; JSON named with the GPU).
for b in gemm conv memory_ops losses optim elementwise train_step; do
  [[ -x $G/bench_$b ]] || continue
  timeout 240 $G/bench_$b --benchmark_filter='[Gg][Pp][Uu]' --benchmark_out="$OUT/${date}-${gpu}-${b}.json" \
    --benchmark_out_format=json 2>&1 | tail -n 15 | tee -a "$OUT/bench.log"
done
# 4. The study (optional): STUDY_ARGS="--epochs 50" bash tools/gpu_run.sh
if [[ -n "${STUDY_ARGS:-}" && -n "${MN_DATA_DIR:-}" ]]; then
  $G/omniglot_triplet --device cuda --out-dir "$OUT/omniglot_triplet" $STUDY_ARGS 2>&1 | tail -n 80 | tee "$OUT/study.log"
fi
