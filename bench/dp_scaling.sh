#!/usr/bin/env bash
# Data-parallel scaling on one machine (bench/README.md, "Data parallel"): the
# omniglot_triplet cpu-demo step as 1 process x T threads against R ranks x T/R
# threads (mpirun), alternated ROUNDS times; each run trains ITERS steps of the
# preset's 16 x 8 batch and reports the harness's training images/s (summary.json:
# train_images_per_second, training only: no data loading, validation or test).
#   bench/dp_scaling.sh [BUILD_DIR] [OUT_DIR] [ITERS] [ROUNDS]
set -euo pipefail
build=${1:-build}; out=${2:-bench/results/dp-scaling}; iters=${3:-200}; rounds=${4:-2}
bin=$build/experiments/omniglot_triplet
threads=$(nproc); ranks=2
mkdir -p "$out"
small=(--preset cpu-demo --epochs 1 --iters "$iters" --val-tasks 20 --val-triplets 100)
run() {  # name, command...
  local name=$1; shift
  rm -rf "$out/$name"
  /usr/bin/time -f "%e s wall, %U s user, %S s sys" -o "$out/$name.time" "$@" --out-dir "$out/$name" \
      > "$out/$name.log" 2>&1
  python3 - "$out/$name" "$out/$name.time" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"{sys.argv[1]}: {s['train_images_per_second']:.1f} images/s over {s['train_seconds']:.1f} s of training; "
      f"{open(sys.argv[2]).read().strip()}; load {open('/proc/loadavg').read().split()[0]}")
PY
}
lscpu | grep -E "Model name|^CPU\(s\)" > "$out/cpu.txt"
for r in $(seq 1 "$rounds"); do
  MN_NUM_THREADS=$threads run "one_rank_${threads}threads_r$r" "$bin" "${small[@]}"
  MN_NUM_THREADS=$((threads / ranks)) run "${ranks}ranks_$((threads / ranks))thread_r$r" \
      mpirun -np $ranks --oversubscribe --allow-run-as-root -x MN_NUM_THREADS "$bin" "${small[@]}"
done | tee "$out/results.txt"
