#!/usr/bin/env bash
# One CPU benchmark session: every CPU benchmark of issue 20 (and the studies'
# steps) beside its reference, in one run on an otherwise idle machine, written
# as Google Benchmark / reference JSON into OUT (default bench/results/<date>-cpu-session).
#
#   tools/cpu_bench.sh [OUT]            # BUILD=build THREADS=2 by default
#
# What runs, in this order (each ours then its reference, or interleaved):
#   lscpu and uptime before/after (the load average shows whether the machine was quiet)
#   SGEMM 1024^3 / 2048^3 / Koch dense: ours (auto ISA), ours forced to AVX2, OpenBLAS with
#     OPENBLAS_CORETYPE unset (its best kernel), interleaved, 3 repetitions
#   Koch conv layers 1-4 (batch 12) and the sampling / conv4 layers (batch 128), fwd and
#     both backwards: bench_conv vs references/koch_conv_layers_torch.py (--set koch, studies)
#   Koch triplet train step at 4, 16, 50 triplets vs references/koch_train_torch.py
#   conv4 step (the Omniglot CPU presets) vs references/conv4_train_torch.py
#   sampling-study step vs references/sampling_train_torch.py
#   pair-selection epoch (batch 16 MLP) vs references/pair_selection_epoch.py
#   losses at 150 x 128 and the parallel_for hand-off, 1 thread vs 2
# PyTorch runs twice where the issue asks (with a reused heap, and as installed).
# Total about 25 minutes on the project's 2-core machine. Exit status: the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
OUT=${1:-bench/results/$(date -u +%Y-%m-%d)-cpu-session}
PY=${PY:-/usr/bin/python3}
REUSED=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
mkdir -p "$OUT"
for b in bench_gemm bench_conv bench_train_step bench_conv4_step bench_sampling_step bench_pair_selection bench_losses \
  bench_parallel; do
  [[ -x "$BUILD/bench/$b" ]] || { echo "cpu_bench: $BUILD/bench/$b not built (cmake --build $BUILD)" >&2; exit 2; }
done
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/session.log"; }
gb() {  # gb NAME BINARY [args...]: Google Benchmark JSON into OUT/NAME.json
  local name=$1 bin=$2; shift 2
  log "$name: $bin $*"
  "$BUILD/bench/$bin" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json "$@" >>"$OUT/session.log" 2>&1
}
py() {  # py FILE HEAP(reused|installed) SCRIPT [args...]: the reference's JSON (lines) into OUT/FILE
  local name=$1 heap=$2 script=$3; shift 3
  log "$name: $script $* ($heap heap)"
  if [[ $heap == reused ]]; then
    GLIBC_TUNABLES=$REUSED "$PY" "bench/references/$script" "$@" >"$OUT/$name" 2>>"$OUT/session.log"
  else
    env -u GLIBC_TUNABLES "$PY" "bench/references/$script" "$@" >"$OUT/$name" 2>>"$OUT/session.log"
  fi
}
export MN_NUM_THREADS=$THREADS
lscpu >"$OUT/lscpu.txt"
{ echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"; uptime; } >"$OUT/machine.txt"

# SGEMM: OpenBLAS with its own best kernel (the environment pins it to Haswell otherwise).
(
  unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
  export OPENBLAS_NUM_THREADS=$THREADS
  gb gemm bench_gemm --benchmark_filter='BM_cpu_(ours|openblas)/' --benchmark_repetitions=3 \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
  export MN_CPU_ISA=avx2
  gb gemm-forced-avx2 bench_gemm --benchmark_filter='BM_cpu_ours/' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true
)

# Convolution layers.
gb conv bench_conv --benchmark_filter='BM_ConvCpu(Study)?/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
py conv-torch-koch.json reused koch_conv_layers_torch.py --set koch --threads "$THREADS"
py conv-torch-studies.json reused koch_conv_layers_torch.py --set studies --threads "$THREADS"

# Training steps.
gb train-step bench_train_step --benchmark_filter='BM_TrainStepCpu/'
for b in 4 16 50; do
  py "train-step-torch-b$b-reused.json" reused koch_train_torch.py --device cpu --batch "$b" --threads "$THREADS"
  py "train-step-torch-b$b-installed.json" installed koch_train_torch.py --device cpu --batch "$b" --threads "$THREADS"
done
gb conv4-step bench_conv4_step
py conv4-step-torch-reused.json reused conv4_train_torch.py --threads "$THREADS"
py conv4-step-torch-installed.json installed conv4_train_torch.py --threads "$THREADS"
gb sampling-step bench_sampling_step
py sampling-step-torch-reused.jsonl reused sampling_train_torch.py --threads "$THREADS"
py sampling-step-torch-installed.jsonl installed sampling_train_torch.py --threads "$THREADS"

gb pair-selection-epoch bench_pair_selection
py pair-selection-epoch-torch-reused.json reused pair_selection_epoch.py --threads "$THREADS"
py pair-selection-epoch-torch-installed.json installed pair_selection_epoch.py --threads "$THREADS"

# Small kernels: one thread against two.
for t in 1 2; do
  (export MN_NUM_THREADS=$t; gb "losses-150x128-${t}thread" bench_losses --benchmark_filter='BM_loss/.*_cpu/150/128' \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true)
done
gb parallel bench_parallel --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
uptime >>"$OUT/machine.txt"
log "done: $OUT"
