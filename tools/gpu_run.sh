#!/usr/bin/env bash
# Runs on the GPU machine with the staged .gpu/ folder (see tools/gpu_stage.sh):
# the test binaries, compute-sanitizer memcheck on the GPU tests, and the GPU
# benchmarks -- whatever is staged -- writing under $OUT (default ./gpu_out):
#   run.log          GPU, library check (ldd), test / memcheck / benchmark output
#   bench-json.tgz   one Google Benchmark JSON per binary, <date>-<gpu>-<bench>.json
#                    (one archive: the device tool returns at most 8 files)
#   study-NAME.tgz   the study's run folder, checkpoints left out (STUDY_ARGS set, data staged)
# Knobs: BENCHES="gemm conv" (default: all staged), TESTS=gpu|none (only the
# GPU-named tests / none; default all), MEMCHECK=0 (skip memcheck), TEST_TIMEOUT /
# BENCH_TIMEOUT / MEMCHECK_TIMEOUT seconds per binary (300 / 240 / 300). The device
# tool stops a command after 600 s: split a session over several calls, e.g.
#   tests staged:  MEMCHECK=0 bash tools/gpu_run.sh;  TESTS=none bash tools/gpu_run.sh
#   bench staged:  BENCHES="gemm conv" bash tools/gpu_run.sh   (~2-4 min), then
#                  BENCHES="memory_ops losses optim elementwise train_step" ...
#   study staged (--with-data):  TESTS=none STUDY_NAME=global-s1 STUDY_ARGS="--seed 1"
#                  bash tools/gpu_run.sh   (again, at once, to continue: see step 4)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
for b in $G/mn_tests_* $G/bench_* $G/omniglot_*; do
  [[ -x $b ]] || continue
  missing=$(ldd "$b" 2>&1 | grep "not found")
  [[ -n $missing ]] && say "ldd $(basename "$b"): MISSING $missing"
done

# 1. Test binaries (all tests: GPU ones run, nothing should skip for lack of a device).
gtest_gpu='*Cuda*:*CUDA*:*Gpu*:*GPU*'
for t in $G/mn_tests_*; do
  [[ -x $t && ${TESTS:-all} != none ]] || continue
  filter='*'
  [[ ${TESTS:-all} == gpu ]] && filter=$gtest_gpu
  say "== $(basename "$t") --gtest_filter=$filter"
  timeout "${TEST_TIMEOUT:-300}" "$t" --gtest_brief=1 --gtest_filter="$filter" 2>&1 |
    sed "s|^|$(basename "$t"): |" | tee -a "$LOG" | tail -n 30
  say "$(basename "$t") exit ${PIPESTATUS[0]} (124: killed by the timeout)"
done

# 2. compute-sanitizer memcheck on the GPU tests (caching allocator off so a
# use-after-free is visible).
if [[ ${MEMCHECK:-1} != 0 ]] && command -v compute-sanitizer >/dev/null; then
  for t in $G/mn_tests_runtime $G/mn_tests_kernels $G/mn_tests_autograd $G/mn_tests_nn $G/mn_tests_data; do
    [[ -x $t ]] || continue
    say "== memcheck $(basename "$t")"
    MN_CUDA_NO_CACHE=1 timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$t" --gtest_brief=1 --gtest_filter="$gtest_gpu" 2>&1 | tail -n 40 |
      sed "s|^|memcheck $(basename "$t"): |" | tee -a "$LOG"
  say "memcheck $(basename "$t") exit ${PIPESTATUS[0]} (9: memcheck errors, 124: timeout)"
  done
fi

# 3. Benchmarks: the GPU cases of each binary (names differ per binary).
bench_filter() {
  case "$1" in
    optim) echo 'Cuda' ;;                                          # BM_*Cuda/...
    data) echo 'BM_TripletBatch/[01]/1|BM_SsimMinedBatch/1' ;;     # arg device 1
    *) echo '[Gg][Pp][Uu]' ;;  # BM_gpu_*, BM_*Gpu*, BM_loss/*_gpu/, BM_CudnnGpu
  esac
}
json=/tmp/mn_bench_json
rm -rf "$json" && mkdir -p "$json"
for b in ${BENCHES:-gemm conv memory_ops losses optim elementwise train_step data}; do
  [[ -x $G/bench_$b ]] || continue
  [[ $b == data && -z ${MN_DATA_DIR:-} ]] && continue
  say "== bench_$b --benchmark_filter='$(bench_filter "$b")'"
  timeout "${BENCH_TIMEOUT:-240}" $G/bench_$b --benchmark_filter="$(bench_filter "$b")" \
    --benchmark_out="$json/${date}-${gpu}-${b}.json" --benchmark_out_format=json --benchmark_color=false \
    2>&1 | tee -a "$LOG" | tail -n 40
  say "bench_$b exit ${PIPESTATUS[0]} (124: killed by the timeout)"
  tar -C "$json" -czf "$OUT/bench-json.tgz" .
done

# 4. The study (optional): STUDY_ARGS="--loss global" STUDY_NAME=global-s1 bash tools/gpu_run.sh
# The run folder is /tmp/mn_runs/$STUDY_NAME on the GPU machine: it survives between
# calls while the machine stays warm, and a call that finds last.safetensors there
# resumes (--resume). Each call stops resumably within STUDY_SECONDS (default 540)
# via --time-limit. study-$STUDY_NAME.tgz holds the run folder without checkpoints
# (a full-width checkpoint with Adam state is ~470 MB, over the tool's file limits).
if [[ -n "${STUDY_ARGS:-}" && -n "${MN_DATA_DIR:-}" ]]; then
  name=${STUDY_NAME:-study}
  bin=$G/${STUDY_BIN:-omniglot_triplet}   # STUDY_BIN=omniglot_siamese for the siamese net
  run=/tmp/mn_runs/$name
  mkdir -p "$run"
  resume=""
  [[ -f $run/last.safetensors ]] && resume="--resume"
  say "== study $name: $(basename "$bin") $STUDY_ARGS $resume (time limit ${STUDY_SECONDS:-540} s)"
  # shellcheck disable=SC2086  # STUDY_ARGS is a list of flags
  "$bin" --device cuda --out-dir "$run" --time-limit "${STUDY_SECONDS:-540}" $resume $STUDY_ARGS 2>&1 |
    tee "$run/stdout-$(date +%H%M%S).log" | grep -v '^epoch .*ETA' | tee -a "$LOG" | tail -n 60
  say "study $name exit ${PIPESTATUS[0]} (0: finished, 3: stopped resumably, call again to continue)"
  tar -C /tmp/mn_runs --exclude='*.safetensors' -czf "$OUT/study-$name.tgz" "$name"
fi
