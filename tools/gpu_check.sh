#!/usr/bin/env bash
# One device call that checks the whole GPU path inside a short lease (the device tool
# lends 15 minutes a session, 10 a command): on the GPU machine, from the repository
# root with .gpu carried (stage it here first: MN_BUILD_DIR=build tools/gpu_stage.sh tc
# --with-data; `all` for PLAN=legacy), within BUDGET seconds (default 540). `tools/gpu_check.sh --dry-run`
# (anywhere, no GPU needed) prints the plan with each step's estimated device seconds.
# The default plan (PLAN=tensor-cores) is the tensor-core call of issues 31/32: the GPU
# tests with compute-sanitizer memcheck and racecheck on the tensor-core kernels' tests
# beside them (SAN_EARLY), the benchmarks in TF32 and BF16 against cuDNN / cuBLAS and
# PyTorch 2.x eager (TF32, bf16 autocast), then E: one full-protocol omniglot_triplet
# --preset full run (50 x 500 x 50, validation each epoch, Lake's 400 trials) with
# --time-limit at the budget's end. PLAN=legacy keeps the older defaults below.
#   A. every GPU test of every test binary, side by side (a skip counts as a failure:
#      the device is there), and Elementwise.DeviceMismatchThrows;
#   B. on the quiet GPU: BENCHES (default bench_gemm, bench_conv: ours FP32/TF32 against
#      cuBLAS and cuDNN in the same process; bench_train_step), PyTorch's Koch train
#      step (bench/references/koch_train_torch.py, TORCH_MODES="fp32 tf32"), and one
#      epoch of the sampling study on MNIST per SAMPLING_STRATEGIES;
#   C. end-to-end (OMNIGLOT_RUNS=0 skips it): omniglot_triplet on the GPU, a tiny run
#      whose losses and scores are compared with the same command on the CPU
#      (SMOKE_ARGS), and a throughput run at the study's 50 triplets (SPEED_ARGS); both
#      beside D;
#   E. (PLAN=tensor-cores, FULL_RUN=1) the full-protocol run, FULL_ARGS added to
#      --preset full; its folder (no checkpoints) comes back in smoke.tgz;
#   D. compute-sanitizer memcheck (each test binary), racecheck, initcheck and synccheck
#      (the kernel tests) on the GPU tests, side by side, until the budget ends
#      (SAN_SERIAL=1: one job after another, each with the whole machine, at most
#      SAN_JOB_SECONDS each: much faster than side by side, see san()).
# Knobs (environment): BUDGET; TEST_BINS (test binaries for A, default all; ' ' none),
# TEST_FILTER (gtest filter for A, default every GPU test), TEST_TIMEOUT, TEST_SHARDS
# ("kernels:3 nn:2": processes per binary); BENCHES, BENCH_TIMEOUT,
# GEMM_FILTER, CONV_FILTER, BENCH_MIN_TIME, BEFORE_ENV (also run each benchmark with these
# settings, e.g. "MN_CUDA_SPLIT_K=0 MN_CONV_BWD_FLIP=0 MN_CONV_WIDE_TILE=0", as
# <bench>-before.json), PROFILE=1 (kernel summary of the training step: Nsight Systems
# where nsys exists, else Nsight Compute over PROFILE_KERNELS kernels, PROFILE_TIMEOUT),
# TORCH_MODES, SAMPLING_STRATEGIES (' ' none); OMNIGLOT_RUNS=0,
# SMOKE_ARGS, SPEED_ARGS; SAN_JOBS (space-separated tool:binary:shards:gtest-filter
# sanitizer runs instead of the default list), RACECHECK_SHARDS, RACECHECK_FILTER,
# SAN_EARLY=1 (C and D beside A for SAN_SECONDS, then B), SAN_SERIAL=1 with
# SAN_JOB_SECONDS, SAN_FULL_SHAPES=1 (racecheck and initcheck with the full-size cases).
# Writes under $OUT: run.log (the summary: one line per step, with exit codes), logs.tgz
# (every full log), bench-json.tgz (Google Benchmark JSON and PyTorch's JSON lines,
# named <date>-<gpu>-<bench>.json, ready for bench/results/) and smoke.tgz (the run
# folders without checkpoints). On a machine without a GPU it stops at once with a
# clear message (exit 2).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
t0=$(date +%s)
budget=${BUDGET:-540}
left() { echo $(( budget - ($(date +%s) - t0) )); }
plan=${PLAN:-tensor-cores}
if [[ $plan == tensor-cores ]]; then
  # The tensor-core call: sanitizers on the new kernels' tests beside the test run,
  # the references in the three precisions, the full-protocol run last.
  # (the Koch-sized MmaKoch cases are left to A: under a sanitizer they take minutes)
  tc_filter='*Mma*Cuda*:*Bf16*Cuda*:*Tf32*Cuda*-*MmaKoch*'
  : "${SAN_EARLY:=1}" "${SAN_SECONDS:=120}"
  : "${SAN_JOBS:=memcheck:kernels:2:$tc_filter racecheck:kernels:2:$tc_filter memcheck:experiments:1:*Precision*Cuda*}"
  : "${BENCHES:=gemm conv train_step}"
  : "${GEMM_FILTER:=BM_gpu_(ours|cublas)(_tf32|_bf16)?/(koch_fc|4096)}"
  : "${CONV_FILTER:=BM_ConvGpu(OursTf32|OursBf16|OursFwdRelu)/|BM_ConvGpuCudnn/[0-9]/[0-9]/[12]}"
  : "${TORCH_MODES:=fp32 tf32 bf16}"
  : "${FULL_RUN:=1}"
  : "${SMOKE_ARGS:=--preset full --epochs 1 --iters 6 --batch 8 --val-tasks 20 --val-triplets 200}"
  : "${SPEED_ARGS:=}"
fi
if [[ ${1:-} == --dry-run ]]; then
  # Estimates from the 2026-11-27 H200 calls (tests ~90 s, a benchmark case ~1 s, the
  # Koch step benchmark ~10 s a precision, PyTorch ~12 s a mode) and, for the full run,
  # the issue's target (<= 4 minutes); the start and the transfers (~60 s) are extra.
  est_tests=90 est_bench=0
  for b in ${BENCHES:-gemm conv train_step}; do
    case $b in gemm) est_bench=$(( est_bench + 30 )) ;; conv) est_bench=$(( est_bench + 70 )) ;;
               train_step) est_bench=$(( est_bench + 35 )) ;; *) est_bench=$(( est_bench + 30 )) ;; esac
  done
  est_torch=$(( 12 * $(wc -w <<< "${TORCH_MODES:-fp32 tf32}") ))
  est_full=0
  [[ ${FULL_RUN:-0} == 1 ]] && est_full=240
  echo "gpu_check plan ($plan), budget ${budget} s:"
  echo "  A. GPU tests of ${TEST_BINS:-runtime kernels autograd nn data experiments}, filter ${TEST_FILTER:-every *Cuda* test}: ~${est_tests} s"
  echo "  D. sanitizers${SAN_EARLY:+ (beside A, ${SAN_SECONDS:-?} s)}: ${SAN_JOBS:-memcheck on every binary, racecheck, initcheck, synccheck}"
  echo "  B. benchmarks ${BENCHES:-gemm conv train_step} (gemm: ${GEMM_FILTER:-all GPU}; conv: ${CONV_FILTER:-all GPU}): ~${est_bench} s; PyTorch ${TORCH_MODES:-fp32 tf32}: ~${est_torch} s"
  echo "  C. smoke run (${SMOKE_ARGS:-default}) beside D: ~15 s"
  [[ ${FULL_RUN:-0} == 1 ]] && echo "  E. omniglot_triplet --preset full --device cuda ${FULL_ARGS:-} --time-limit <what is left - 20 s>: ~${est_full} s at the targets (4 ms TF32 steps)"
  total=$(( est_tests + est_bench + est_torch + est_full ))
  echo "  estimated: ${total} s of ${budget} s (+ ~60 s for the machine's start and the transfers)"
  staged="missing: run MN_BUILD_DIR=build tools/gpu_stage.sh tc --with-data"
  [[ -d .gpu ]] && staged="$(du -sh .gpu | cut -f1) staged"
  echo "  .gpu: $staged"
  exit 0
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed); run it on the GPU machine" >&2
  exit 2
fi
[[ -d .gpu ]] || { echo "gpu_check: .gpu/ missing: run tools/gpu_stage.sh here and carry .gpu" >&2; exit 2; }
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
logs=/tmp/mn_logs
rm -rf "$logs" && mkdir -p "$logs"
say "== $(date -u +%FT%TZ) gpu_check, budget ${budget} s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
for b in "$G"/mn_tests_* "$G"/bench_* "$G"/omniglot_*; do
  [[ -x $b ]] || continue
  missing=$(ldd "$b" 2>&1 | grep "not found")
  [[ -n $missing ]] && say "ldd $(basename "$b"): MISSING $missing"
done
command -v compute-sanitizer >/dev/null || say "compute-sanitizer: not on the PATH"
pack() {
  tar -C "$logs" -czf "$OUT/logs.tgz" . 2>/dev/null
  [[ -d /tmp/mn_bench_json ]] && tar -C /tmp/mn_bench_json -czf "$OUT/bench-json.tgz" .
  [[ -d /tmp/mn_smoke ]] && tar -C /tmp/mn_smoke --exclude='*.safetensors' -czf "$OUT/smoke.tgz" .
}
trap pack EXIT
# (TensorErrors.CudaTensorWithoutDeviceThrowsClearly tests the no-GPU path: it skips here.)
gtest_gpu='*Cuda*:*CUDA*:*Gpu*:*GPU*:Elementwise.DeviceMismatchThrows-TensorErrors.CudaTensorWithoutDeviceThrowsClearly'
read -ra tests <<< "${TEST_BINS:-runtime kernels autograd nn data experiments}"

# A. The GPU tests, one process per binary, side by side.
run_tests() {
say "== A. GPU tests ($(left) s left)"
# TEST_SHARDS ("kernels:3 nn:2"): a binary split across that many processes (gtest sharding).
local t n i
declare -gA shards_of=()
for t in ${TEST_SHARDS:-}; do shards_of[${t%%:*}]=${t#*:}; done
for t in "${tests[@]}"; do
  n=${shards_of[$t]:-1}
  for (( i = 0; i < n; ++i )); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-150}" stdbuf -oL "$G/mn_tests_$t" \
      --gtest_filter="${TEST_FILTER:-$gtest_gpu}" > "$logs/test-$t-$i.log" 2>&1 &
    echo $! > "$logs/test-$t-$i.pid"
  done
done
for t in "${tests[@]}"; do
  n=${shards_of[$t]:-1}
  for (( i = 0; i < n; ++i )); do
    wait "$(cat "$logs/test-$t-$i.pid")"; rc=$?
    f="$logs/test-$t-$i.log"
    sum=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$f" | tr '\n' ' ')
    say "test $t shard $i/$n: exit $rc; ${sum:-no summary (crashed or timed out: 124)}"
    (( rc == 124 )) && say "  last test started: $(grep -E '^\[ RUN' "$f" | tail -n 1)"
    grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z].*\)$' "$f" | head -n 40 | sed "s|^|  $t |" | tee -a "$LOG"
  done
done
}

# B. Benchmarks on the quiet GPU.
json=/tmp/mn_bench_json
rm -rf "$json" && mkdir -p "$json"
smoke=/tmp/mn_smoke
rm -rf "$smoke" && mkdir -p "$smoke"
bench() {  # name filter timeout [suffix [env assignments...]]
  (( $(left) > 60 )) || { say "bench_$1: skipped, $(left) s left"; return; }
  local name=$1 filter=$2 t=$3 suffix=${4:-}
  shift 3; (( $# )) && shift
  env "$@" timeout "$t" "$G/bench_$name" --benchmark_filter="$filter" --benchmark_min_time="${BENCH_MIN_TIME:-0.2}" \
    --benchmark_out="$json/${date}-${gpu}-$name$suffix.json" --benchmark_out_format=json --benchmark_color=false \
    > "$logs/bench-$name$suffix.log" 2>&1
  say "bench_$name$suffix: exit $? ($(grep -c '^BM_' "$logs/bench-$name$suffix.log") lines) $*"
}
run_benches() {
say "== B. benchmarks ($(left) s left)"
# BEFORE_ENV (e.g. "MN_CUDA_SPLIT_K=0 MN_CONV_BWD_FLIP=0 MN_CONV_WIDE_TILE=0") also runs
# each benchmark with those settings, as <bench>-before.json: a same-machine before/after.
# shellcheck disable=SC2086  # word lists
for b in ${BENCHES:-gemm conv train_step}; do
  case $b in
    train_step) f='Gpu' ;;
    gemm) f=${GEMM_FILTER:-'[Gg][Pp][Uu]'} ;;
    conv) f=${CONV_FILTER:-'[Gg][Pp][Uu]'} ;;
    *) f='[Gg][Pp][Uu]' ;;
  esac
  [[ -n ${BEFORE_ENV:-} ]] && bench "$b" "$f" "${BENCH_TIMEOUT:-70}" -before $BEFORE_ENV
  bench "$b" "$f" "${BENCH_TIMEOUT:-70}"
done
# Where the bench binary measures whole steps only, a kernel-by-kernel profile of the
# training step (PROFILE=1): Nsight Systems if this machine has it, else nothing.
if [[ ${PROFILE:-0} == 1 ]] && (( $(left) > 90 )); then
  nsys_bin=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1)
  if [[ -n $nsys_bin ]]; then
    for v in now ${PROFILE_BEFORE:+before}; do
      envs=()
      [[ $v == before ]] && read -ra envs <<< "$BEFORE_ENV"
      env "${envs[@]}" timeout 80 "$nsys_bin" profile -o "/tmp/mn_prof_$v" --force-overwrite true --stats=false \
        "$G/bench_train_step" --benchmark_filter='BM_TrainStepGpu/' > "$logs/nsys-$v.log" 2>&1
      timeout 40 "$nsys_bin" stats --report cuda_gpu_kern_sum --format csv "/tmp/mn_prof_$v.nsys-rep" \
        > "$json/${date}-${gpu}-train_step-kernels-$v.csv" 2>> "$logs/nsys-$v.log"
      say "nsys $v: exit $?; top kernels: $(sed -n '2,6p' "$json/${date}-${gpu}-train_step-kernels-$v.csv" | cut -d, -f1,2,9 | tr '\n' ';' | cut -c1-600)"
    done
  elif command -v ncu >/dev/null; then
    # Nsight Compute instead: each kernel's time (serialised, clocks left alone) over
    # the first PROFILE_KERNELS kernels of the training-step benchmark (set-up and
    # warm-up steps included), summed by kernel name.
    timeout "${PROFILE_TIMEOUT:-150}" ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      -c "${PROFILE_KERNELS:-600}" "$G/bench_train_step" --benchmark_filter='BM_TrainStepGpu/' \
      --benchmark_min_time=0.01 > "$logs/ncu-train_step.csv" 2> "$logs/ncu.log"
    say "ncu: exit $? ($(grep -c gpu__time_duration "$logs/ncu-train_step.csv") kernel records)"
    python3 - "$logs/ncu-train_step.csv" > "$json/${date}-${gpu}-train_step-kernels.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))
        if r.get("Metric Name") == "gpu__time_duration.sum"]
tot, cnt = collections.Counter(), collections.Counter()
for r in rows:
    k = r["Kernel Name"].split("(")[0]
    tot[k] += float(r["Metric Value"].replace(",", "")); cnt[k] += 1
print("kernel,calls,total_ns,share")
s = sum(tot.values()) or 1
for k, v in tot.most_common():
    print(f'"{k}",{cnt[k]},{v:.0f},{v / s:.4f}')
PY
    say "ncu top kernels: $(sed -n '2,9p' "$json/${date}-${gpu}-train_step-kernels.csv" | cut -c1-120 | tr '\n' ';')"
  else
    say "profile: neither nsys nor ncu on this machine"
  fi
fi
for tf in ${TORCH_MODES:-fp32 tf32}; do
  (( $(left) > 60 )) || break
  flag=""
  [[ $tf == tf32 ]] && flag="--tf32"
  [[ $tf == bf16 ]] && flag="--bf16"
  timeout 60 python3 bench/references/koch_train_torch.py --device cuda --batch 50 --seconds 5 $flag \
    >> "$json/${date}-${gpu}-train_step-torch.jsonl" 2>> "$logs/torch.log"
  say "PyTorch Koch step $tf: exit $? $(tail -n 1 "$json/${date}-${gpu}-train_step-torch.jsonl" | cut -c1-300)"
done
# The sampling study on the GPU (MNIST staged): epoch times and metrics of one epoch
# of each SAMPLING_STRATEGIES, to set beside the CPU grid's and the study's GPU times.
if [[ -n ${MN_DATA_DIR:-} && -d ${MN_DATA_DIR:-}/mnist && -x $G/sampling ]]; then
  for st in ${SAMPLING_STRATEGIES:-random-offline-pair all-positive-online-triplet}; do
    (( $(left) > 150 )) || { say "sampling $st: skipped, $(left) s left"; continue; }
    timeout 60 "$G/sampling" --device cuda --dataset mnist --strategy "$st" --epochs "${SAMPLING_EPOCHS:-1}" \
      --time-limit 50 --out-dir "$smoke/sampling-$st" > "$smoke/sampling-$st.log" 2>&1
    say "sampling $st: exit $?; $(tail -n 3 "$smoke/sampling-$st/metrics.jsonl" 2>/dev/null | cut -c1-400)"
  done
fi
pack
}

# C + D side by side: the end-to-end runs and the sanitizers.
start_cd() {
say "== C. end-to-end runs and D. sanitizers ($(left) s left)"
if [[ -n ${MN_DATA_DIR:-} && -x $G/omniglot_triplet && ${OMNIGLOT_RUNS:-1} != 0 ]]; then
  (
    # shellcheck disable=SC2086  # flag lists
    timeout 120 "$G/omniglot_triplet" --device cuda --out-dir "$smoke/parity" \
      ${SMOKE_ARGS:---preset full --epochs 1 --iters 6 --batch 8 --val-tasks 20 --val-triplets 200} \
      > "$smoke/parity.log" 2>&1
    echo "parity run exit $?" >> "$smoke/parity.log"
    if [[ $plan == legacy || -n ${SPEED_ARGS:-} ]]; then  # the tensor-core plan measures speed in E
      s=$(date +%s)
      # shellcheck disable=SC2086
      timeout 200 "$G/omniglot_triplet" --device cuda --out-dir "$smoke/speed" \
        ${SPEED_ARGS:---preset full --epochs 1 --iters 200 --batch 50} > "$smoke/speed.log" 2>&1
      echo "speed run exit $? after $(( $(date +%s) - s )) s" >> "$smoke/speed.log"
    else
      echo "speed run: left to E" > "$smoke/speed.log"
    fi
  ) &
  smoke_pid=$!
fi
san_pids=()
san() {  # tool binary [shard count [gtest filter]]: one process per shard (gtest's sharding)
  local l=$(( $(left) - 25 )) shards=${3:-1} i
  # racecheck and initcheck take minutes per Koch-sized kernel: their runs leave the
  # full-size cases out (MN_TEST_SHAPES=small, tests/common/test_util.h; the small and
  # odd shapes still run every kernel); SAN_FULL_SHAPES=1 keeps them.
  local shapes=full
  [[ ($1 == racecheck || $1 == initcheck) && ${SAN_FULL_SHAPES:-0} != 1 ]] && shapes=small
  # SAN_EARLY: the sanitizers run beside the tests, for SAN_SECONDS, before the benchmarks.
  [[ ${SAN_EARLY:-0} == 1 ]] && l=${SAN_SECONDS:-$(( budget / 2 ))}
  (( l > 30 )) || { say "$1 $2: skipped, no time left"; return; }
  for (( i = 0; i < shards; ++i )); do
    local tag="$1-$2${san_suffix:-}"
    (( shards > 1 )) && tag="$1-$2-shard$i"
    if [[ ${SAN_SERIAL:-0} == 1 ]]; then
      # One job at a time, each with every core: on 2026-11-27 (H200) memcheck of
      # mn_tests_autograd took 2 s alone and did not finish in 335 s beside 32 other
      # sanitizer and test processes (the GPU time-slices between their contexts).
      l=$(( $(left) - ${SAN_RESERVE:-25} ))
      (( l > 10 )) || { say "$1 $2 shard $i: skipped, no time left"; continue; }
      (( l > ${SAN_JOB_SECONDS:-$l} )) && l=${SAN_JOB_SECONDS}
      MN_TEST_SHAPES=$shapes GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i MN_CUDA_NO_CACHE=1 timeout "$l" \
        compute-sanitizer --tool "$1" --error-exitcode 9 --print-limit 40 \
        stdbuf -oL "$G/mn_tests_$2" --gtest_filter="${4:-$gtest_gpu}" > "$logs/$tag.log" 2>&1
      echo $? > "$logs/$tag.rc"
      san_pids+=("done:$tag")
      continue
    fi
    MN_TEST_SHAPES=$shapes GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i MN_CUDA_NO_CACHE=1 timeout "$l" \
      compute-sanitizer --tool "$1" --error-exitcode 9 --print-limit 40 \
      stdbuf -oL "$G/mn_tests_$2" --gtest_filter="${4:-$gtest_gpu}" > "$logs/$tag.log" 2>&1 &
    san_pids+=("$!:$tag")
  done
}
if command -v compute-sanitizer >/dev/null; then
  if [[ -n ${SAN_JOBS:-} ]]; then
    # SAN_JOBS: space-separated tool:binary:shards:filter entries (a focused session,
    # e.g. the tests of new kernels under every tool); the default list otherwise.
    n=0
    for j in $SAN_JOBS; do
      IFS=: read -r tool bin shards filter <<< "$j"
      san_suffix="-job$((n++))" san "$tool" "$bin" "${shards:-1}" "${filter:-$gtest_gpu}"
    done
  else
    for t in kernels nn runtime autograd data; do san memcheck "$t"; done
    # The slowest tool: one shard per process; RACECHECK_FILTER narrows it (racecheck
    # looks at shared-memory accesses, so the Koch-sized tests add nothing the odd
    # shapes, which run every kernel instantiation, do not).
    san racecheck kernels "${RACECHECK_SHARDS:-6}" "${RACECHECK_FILTER:-$gtest_gpu}"
    san initcheck kernels
    san synccheck kernels
    san racecheck nn
  fi
fi
}
collect_cd() {
for p in "${san_pids[@]}"; do
  if [[ ${p%%:*} == done ]]; then rc=$(cat "$logs/${p#*:}.rc"); else wait "${p%%:*}"; rc=$?; fi
  f="$logs/${p#*:}.log"
  say "${p#*:}: exit $rc (0 clean, 9 errors found, 124 out of time); $(grep -E 'SUMMARY|^\[  (PASSED|FAILED) +\] [0-9]' "$f" | tr '\n' ' ')"
  (( rc == 124 )) && say "  last test started: $(grep -E '^\[ RUN' "$f" | tail -n 1)"
  grep -E '^=========  ?(Invalid|Program hit|Uninitialized|Race|Barrier|Error|Warning)' "$f" | sort | uniq -c | sort -rn | head -n 8 | tee -a "$LOG"
done
if [[ -n ${smoke_pid:-} ]]; then
  wait "$smoke_pid"
  for r in parity speed; do
    say "run $r: $(tail -n 1 "$smoke/$r.log")"
    grep -E '^epoch [0-9]+:|Lake|images/s' "$smoke/$r.log" | grep -v ETA | tail -n 4 | tee -a "$LOG"
  done
  grep -oE '[0-9]+/[0-9]+ train_loss [0-9.e-]+' "$smoke/parity.log" | tee -a "$LOG"
  grep -oE '[0-9]+ images/s' "$smoke/speed.log" | tail -n 1 | sed 's/^/speed run, last progress: /' | tee -a "$LOG"
fi
}
# SAN_EARLY=1: C and D beside A (the sanitizers get SAN_SECONDS), then B on a quiet GPU:
# a first session on new code learns of failures and findings even if time runs out.
# E. The full-protocol run (FULL_RUN=1): on the quiet GPU after the benchmarks, stopped
# resumably 20 s before the budget ends (its checkpoints stay on the machine).
run_full() {
  [[ ${FULL_RUN:-0} == 1 && -n ${MN_DATA_DIR:-} && -x $G/omniglot_triplet ]] || return
  local l=$(( $(left) - 20 ))
  (( l > 60 )) || { say "E. full run: skipped, $(left) s left"; return; }
  say "== E. full-protocol run, time limit ${l} s"
  local s
  s=$(date +%s)
  # shellcheck disable=SC2086  # flag list
  "$G/omniglot_triplet" --device cuda --preset full --out-dir "$smoke/full" --time-limit "$l" ${FULL_ARGS:-} \
    > "$smoke/full.log" 2>&1
  say "full run: exit $? after $(( $(date +%s) - s )) s (0 finished, 3 stopped resumably)"
  grep -E '^epoch [0-9]+:' "$smoke/full.log" | tail -n 3 | tee -a "$LOG"
  grep -E 'Lake|one-shot' "$smoke/full.log" | tail -n 4 | tee -a "$LOG"
  pack
}
if [[ ${SAN_EARLY:-0} == 1 ]]; then
  start_cd; run_tests; collect_cd; run_benches; run_full
else
  run_tests; run_benches; run_full; start_cd; collect_cd
fi
say "== done after $(( $(date +%s) - t0 )) s"
