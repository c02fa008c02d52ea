#!/usr/bin/env bash
# A whole GPU session for the Omniglot study in three device calls, chained while
# the machine stays warm (30 s between calls). Stage first, here:
#   tools/gpu_stage.sh all --with-data        (every binary, OpenBLAS, Omniglot, image cache)
# then, each with `.gpu` carried:
#   bash tools/gpu_session.sh start   the training-step benchmark, ours vs PyTorch, on a
#                                     quiet GPU; bench_conv; the TF32 parity tests; then
#                                     launches the study queues in the background (setsid),
#                                     all stopping resumably STUDY_SECONDS after the launch;
#                                     then the GPU tests of every binary while they train
#   bash tools/gpu_session.sh check   compute-sanitizer memcheck and racecheck on the GPU
#                                     tests while the runs train (CHECK_SECONDS in all)
#   bash tools/gpu_session.sh finish  waits for the runs (SIGTERM, a resumable stop, once
#                                     FINISH_SECONDS have passed), scores each run's
#                                     best-by-validation checkpoint on Lake's 400 trials
#                                     where the run did not finish, checks that Python's
#                                     safetensors opens a checkpoint
# Every call returns run.log, bench-json.tgz (start) and studies.tgz: the run folders
# of /tmp/mn_runs without checkpoints (470 MB each with Adam state: over the device
# tool's limits, so runs must end within the session).
# Knobs: RUNS: queues separated by ';' that train side by side, each a chain of runs
# name:binary:flags joined by '+' that run one after another, all stopping resumably
# STUDY_SECONDS (1200) after the launch (a run is not started with under
# MIN_RUN_SECONDS, 120, left); START_SECONDS (540) for the whole start call; TF32 (auto:
# the default --precision auto (TF32) when the TF32 parity tests pass, else --precision fp32;
# 1: --precision tf32; 0: --precision fp32); CHECK_SECONDS (540); FINISH_SECONDS (480);
# STUDY_DEVICE (cuda; cpu for a dry run of the script with tiny RUNS on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source tools/gpu_env.sh
phase=${1:-}
runs_dir=/tmp/mn_runs
mkdir -p "$runs_dir"
gtest_gpu='*Cuda*:*CUDA*:*Gpu*:*GPU*'
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

# Default: the three seeds of the study's final model first (the >= 92 % goal, Table 2's
# triplet row), the siamese net beside them (Table 2), then Table 1's other variants.
T=omniglot_triplet
RUNS=${RUNS:-"global-s1:$T:--seed 1+schroff-s1:$T:--loss schroff+softmax-s1:$T:--loss softmax;\
global-s2:$T:--seed 2+kumar-s1:$T:--loss kumar+global-triplet-s1:$T:--loss global-triplet;\
global-s3:$T:--seed 3+hard-positive-s1:$T:--loss kumar --sampling hard-positive;\
siamese-s1:omniglot_siamese:--seed 1+siamese-s2:omniglot_siamese:--seed 2+siamese-s3:omniglot_siamese:--seed 3"}

snapshot() {  # the run folders without checkpoints, and one line per run
  for r in "$runs_dir"/*/; do
    [[ -d $r ]] || continue
    n=$(basename "$r")
    last=$(tail -n 1 "$r/metrics.jsonl" 2>/dev/null | cut -c1-400)
    st=$(cat "$r/exit_status" 2>/dev/null || echo running)
    say "run $n [$st]: ${last:-no epoch yet}"
  done
  tar -C "$runs_dir" --exclude='*.safetensors' -czf "$OUT/studies.tgz" . 2>/dev/null
}

case "$phase" in
start)
  say "== $(date -u +%FT%TZ) start"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
  for b in $G/mn_tests_* $G/bench_* $G/omniglot_*; do
    missing=$(ldd "$b" 2>&1 | grep "not found")
    [[ -n $missing ]] && say "ldd $(basename "$b"): MISSING $missing"
  done
  json=/tmp/mn_bench_json
  rm -rf "$json" && mkdir -p "$json"
  # 1. The training step on a quiet GPU: ours (FP32, TF32), then PyTorch (same).
  say "== bench_train_step (GPU)"
  timeout 180 $G/bench_train_step --benchmark_filter='Gpu' --benchmark_out="$json/${date}-${gpu}-train_step.json" \
    --benchmark_out_format=json --benchmark_color=false 2>&1 | tee -a "$LOG" | tail -n 12
  for tf in "" "--tf32"; do
    say "== PyTorch reference $tf"
    timeout 120 python3 bench/references/koch_train_torch.py --device cuda --batch 50 --seconds 5 $tf 2>&1 |
      tee -a "$json/${date}-${gpu}-train_step-torch.jsonl" | tee -a "$LOG"
  done
  say "== bench_conv (GPU)"
  timeout 150 $G/bench_conv --benchmark_filter='Gpu' --benchmark_out="$json/${date}-${gpu}-conv.json" \
    --benchmark_out_format=json --benchmark_color=false 2>&1 | tee -a "$LOG" | tail -n 50
  tar -C "$json" -czf "$OUT/bench-json.tgz" .
  # 2. TF32 parity decides --precision for the runs (TF32=auto).
  say "== TF32 parity tests"
  timeout 120 $G/mn_tests_kernels --gtest_brief=1 --gtest_filter='Tf32*' 2>&1 | tee -a "$LOG" | tail -n 20
  tf32_rc=${PIPESTATUS[0]}
  # The binaries' default on a GPU (--precision auto) is TF32 for convolutions and dense layers.
  tf32_flag=""
  case "${TF32:-auto}" in
    1) tf32_flag="--precision tf32" ;;
    0) tf32_flag="--precision fp32" ;;
    auto) [[ $tf32_rc == 0 ]] || tf32_flag="--precision fp32" ;;
  esac
  say "TF32 tests exit $tf32_rc; runs use: ${tf32_flag:---precision auto (tf32, the default)}"
  # 3. The study queues, each in its own session (setsid) so it outlives this call;
  # the queues train side by side, the runs of one queue one after another.
  IFS=';' read -ra queues <<< "$RUNS"
  deadline=$(( $(date +%s) + ${STUDY_SECONDS:-1200} ))
  rm -f "$runs_dir"/STOP
  for i in "${!queues[@]}"; do
    say "queue $i: ${queues[$i]}"
    QUEUE="${queues[$i]}" DEADLINE=$deadline TF32_FLAG="$tf32_flag" QUEUE_ID=$i setsid nohup \
      bash tools/gpu_session.sh queue > "$runs_dir/queue-$i.log" 2>&1 < /dev/null &
  done
  # 4. Every GPU test (and the Python safetensors one) while the runs train, within
  # START_SECONDS for the whole call.
  for b in kernels runtime autograd nn data experiments; do
    t=$G/mn_tests_$b
    left=$(( ${START_SECONDS:-540} - $(elapsed) - 15 ))
    (( left > 20 )) || { say "$(basename "$t"): skipped, no time left"; continue; }
    (( left > ${TEST_TIMEOUT:-150} )) && left=${TEST_TIMEOUT:-150}
    say "== $(basename "$t") (GPU tests, timeout $left s)"
    timeout "$left" "$t" --gtest_brief=1 \
      --gtest_filter="$gtest_gpu:Elementwise.DeviceMismatchThrows:NnCheckpoint.PythonSafetensorsOpensOurFile" 2>&1 |
      sed "s|^|$(basename "$t"): |" | tee -a "$LOG" | tail -n 25
    say "$(basename "$t") exit ${PIPESTATUS[0]} (124: killed by the timeout)"
  done
  sleep 5
  snapshot
  ;;
queue)  # internal (started by `start`): one queue's runs, one after another
  echo $$ > "$runs_dir/queue-$QUEUE_ID.pid"
  IFS='+' read -ra chain <<< "$QUEUE"
  for spec in "${chain[@]}"; do
    IFS=':' read -r name bin flags <<< "$spec"
    left=$(( DEADLINE - $(date +%s) ))
    [[ -f $runs_dir/STOP ]] && break
    (( left >= ${MIN_RUN_SECONDS:-120} )) || { echo "$name: not started, ${left} s left"; break; }
    run=$runs_dir/$name
    mkdir -p "$run"
    resume=""
    [[ -f $run/last.safetensors ]] && resume="--resume"
    cmd="$bin --device ${STUDY_DEVICE:-cuda} --out-dir $run --time-limit $left $resume $flags $TF32_FLAG"
    echo "$cmd" > "$run/command.txt"
    echo "$(date -u +%FT%TZ) $name: $cmd"
    MN_NUM_THREADS=${STUDY_THREADS:-3} $G/$cmd > "$run/stdout.log" 2>&1 &
    echo $! > "$run/pid"
    wait $!
    echo $? > "$run/exit_status"
    echo "$(date -u +%FT%TZ) $name: exit $(cat "$run/exit_status")"
  done
  touch "$runs_dir/queue-$QUEUE_ID.done"
  exit 0
  ;;
check)
  budget=${CHECK_SECONDS:-540}
  say "== $(date -u +%FT%TZ) check (budget ${budget} s)"
  for job in "memcheck mn_tests_kernels" "memcheck mn_tests_runtime" "memcheck mn_tests_nn" \
             "memcheck mn_tests_autograd" "racecheck mn_tests_kernels" "memcheck mn_tests_data"; do
    read -r tool t <<< "$job"
    left=$(( budget - $(elapsed) - 20 ))
    (( left > 30 )) || { say "$tool $t: skipped, no time left"; continue; }
    say "== $tool $t (timeout $left s)"
    MN_CUDA_NO_CACHE=1 timeout "$left" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$G/$t" --gtest_brief=1 --gtest_filter="$gtest_gpu" 2>&1 | tail -n 30 |
      sed "s|^|$tool $t: |" | tee -a "$LOG"
    say "$tool $t exit ${PIPESTATUS[0]} (9: sanitizer errors, 124: timeout)"
  done
  snapshot
  ;;
finish)
  limit=${FINISH_SECONDS:-480}
  say "== $(date -u +%FT%TZ) finish (runs stopped at ${limit} s at the latest)"
  termed=0
  while :; do
    pending=0
    for q in "$runs_dir"/queue-*.pid; do
      [[ -f $q && ! -f ${q%.pid}.done ]] && pending=$((pending + 1))
    done
    (( pending == 0 )) && break
    if (( $(elapsed) >= limit && termed == 0 )); then
      touch "$runs_dir/STOP"   # the queues start no further run
      for r in "$runs_dir"/*/; do
        [[ -f $r/exit_status || ! -f $r/pid ]] && continue
        say "SIGTERM $(basename "$r") (resumable stop)"
        kill -TERM "$(cat "$r/pid")" 2>/dev/null
      done
      termed=1
    fi
    (( $(elapsed) >= limit + 90 )) && { say "runs still going after SIGTERM: giving up on them"; break; }
    sleep 5
  done
  cat "$runs_dir"/queue-*.log 2>/dev/null | tee -a "$LOG"
  for r in "$runs_dir"/*/; do
    n=$(basename "$r")
    bin=$(cut -d' ' -f1 "$r/command.txt")
    if grep -q '"lake"' "$r/summary.json" 2>/dev/null; then
      say "$n: finished; summary.json has Lake's trials"
    elif [[ -f $r/best.safetensors ]]; then
      say "== $n: did not finish; scoring best.safetensors on Lake's 400 trials"
      timeout 120 $G/$bin --device ${STUDY_DEVICE:-cuda} --evaluate "$r/best.safetensors" --out-dir "$r/eval-best" 2>&1 | tail -n 5 | tee -a "$LOG"
    fi
  done
  one=$(ls "$runs_dir"/*/best.safetensors 2>/dev/null | head -1)
  if [[ -n $one ]]; then
    say "== Python safetensors opens $one"
    python3 -c "import sys; from safetensors.torch import load_file; t = load_file(sys.argv[1]); \
print(len(t), 'tensors;', ', '.join(f'{k} {tuple(v.shape)}' for k, v in sorted(t.items())[:4]))" "$one" 2>&1 | tee -a "$LOG"
  fi
  python3 tools/study_table.py "$runs_dir"/*/ 2>&1 | tee -a "$LOG"
  snapshot
  ;;
*)
  echo "usage: tools/gpu_session.sh start|check|finish" >&2
  exit 2
  ;;
esac
say "== $(date -u +%FT%TZ) $phase done after $(elapsed) s"
