#!/bin/bash
# Interleaved rounds of the training-step benchmarks against their PyTorch references on
# the CPU (ours, then PyTorch with a reused heap, N times), for noisy machines where one
# run of each side is not enough. Summary: python3 tools/step_rounds_table.py OUTDIR
#   tools/step_rounds.sh OUTDIR [N=3]     (BUILD=build by default; CONV4=0 skips the conv4 step)
# Needs python3-torch (tools/install-deps.sh --bench) and /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/step_rounds.sh OUTDIR [N]}
N=${2:-3}
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
REUSED=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
for b in bench_sampling_step bench_conv4_step; do
  [[ -x "$BUILD/bench/$b" ]] || { echo "step_rounds: $BUILD/bench/$b not built (cmake --build $BUILD)" >&2; exit 2; }
done
mkdir -p "$OUT"
export MN_NUM_THREADS=2
unset OPENBLAS_CORETYPE
{ echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"; uptime; date -u; } >"$OUT/machine.txt"
for i in $(seq 1 "$N"); do
  echo "round $i $(date -u +%T)"
  "$BUILD/bench/bench_sampling_step" --benchmark_out="$OUT/sampling-ours-$i.json" --benchmark_out_format=json >/dev/null
  GLIBC_TUNABLES=$REUSED "$PY" bench/references/sampling_train_torch.py --threads 2 >"$OUT/sampling-torch-reused-$i.jsonl"
  if [[ ${CONV4:-1} == 1 ]]; then
    "$BUILD/bench/bench_conv4_step" --benchmark_out="$OUT/conv4-ours-$i.json" --benchmark_out_format=json >/dev/null
    GLIBC_TUNABLES=$REUSED "$PY" bench/references/conv4_train_torch.py --threads 2 >"$OUT/conv4-torch-reused-$i.json"
  fi
done
echo "done $(date -u +%T)"
