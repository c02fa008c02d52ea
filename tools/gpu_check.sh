#!/usr/bin/env bash
# The GPU check (issue 53) in two calls of the device tool (one H100/H200; at most 600 s
# a call, 900 s of device time a session, 2,000 characters a command, 64 MiB carried).
# The calls build nothing: the binaries are compiled for sm_90 here and carried in .gpu/.
#
# Here, without a GPU:
#   MN_BUILD_DIR=build-gpu tools/gpu_stage.sh tc --with-data
#                        builds the check's targets for sm_90 and stages .gpu/ (binaries
#                        packed with xz, OpenBLAS, Omniglot) with .gpu/STAGED (HEAD, a
#                        hash of the compiled sources, architectures, cuDNN)
#   tools/gpu_check.sh --dry-run
#                        both calls: each step with its estimated seconds, each call's
#                        device time (start + command + transfers) against the limits, the
#                        exact `run` arguments (command, timeout_s, carry), the targets, and
#                        whether .gpu/ is fresh (same sources as the working tree, built at
#                        HEAD) and fits the carry. Exit 0: ready; 2: stage first (it says
#                        how); 1: the plan breaks a limit.
#   tools/gpu_check.sh --collect DIR
#                        after each call: unpacks DIR/results.tgz (DIR: the tool's files_at)
#                        into bench/results/ and experiments/results/omniglot/ (nothing else)
#   tools/gpu_check.sh --targets DIR
#                        the median-vs-target table of the benchmark files in DIR
# On the GPU machine (the `run` lines that --dry-run prints; .gpu carried):
#   call1  the GPU tests of every test binary, beside them compute-sanitizer memcheck and
#          racecheck on the tests of the new kernels (tensor-core *Mma*, BF16/TF32, pooling,
#          the optimizers), then on the quiet GPU bench_train_step, bench_conv (ours
#          against cuDNN), PyTorch's Koch step and bench_gemm (against cuBLAS); the table of
#          every median beside its target (PASS / MISS) ends run.log
#   call2  the full-protocol Omniglot cell (omniglot_grid --scale full, t1-global seed 1)
#          under --time-limit and `timeout`; rerun at once to go on (see run_full_cell)
# Each call writes under $OUT: run.log, results.tgz (its files at their repository paths:
# bench/results/<date>-<gpu>-*.json|jsonl|md|log, experiments/results/omniglot/<name>/)
# and logs.tgz (every full log). Knobs (environment): BUDGET1, BUDGET2 (command seconds),
# START_S, XFER_S (per-call overheads counted by --dry-run), TEST_WINDOW, TEST_BINS,
# TEST_SHARDS, SAN_JOBS, BENCH_MIN_TIME, TORCH_RUNS, TORCH_SECONDS, FULL_ROWS,
# FULL_SEEDS, FULL_CELL_ARGS, FULL_NAME, TARGET_STEP_TF32_MS, TARGET_STEP_BF16_MS,
# TARGET_CONV_RATIO.
set -uo pipefail
# DIR of --collect / --targets, absolute before the cd to the repository root.
dir_arg=${2:-}
[[ -n $dir_arg && -d $dir_arg ]] && dir_arg=$(cd "$dir_arg" && pwd)
cd "$(dirname "$0")/.." || exit 1
t0=$(date +%s)

# ---- The plan: limits, budgets, estimates and targets, in one place ---------------------
CALL_LIMIT=600 SESSION_LIMIT=900 CMD_LIMIT=2000 CARRY_LIMIT=$(( 64 * 1024 * 1024 ))
START_S=${START_S:-90}        # a cold machine's start (device README: "a minute or more")
XFER_S=${XFER_S:-15}          # sending the tree with .gpu and fetching $OUT
GRACE_S=15                    # the run's timeout_s = budget + GRACE_S: the script ends first
BUDGET1=${BUDGET1:-285}       # call 1's command, seconds
BUDGET2=${BUDGET2:-360}       # call 2's command, seconds
RESERVE_S=15                  # kept at the end of a call for the table and the packing
TEST_WINDOW=${TEST_WINDOW:-110}
TEST_BINS=${TEST_BINS:-runtime kernels autograd nn data experiments}
TEST_SHARDS=${TEST_SHARDS:-kernels:3 nn:2}
# Every GPU test (TensorErrors.CudaTensorWithoutDeviceThrowsClearly tests the no-GPU path).
GTEST_GPU='*Cuda*:*CUDA*:*Gpu*:*GPU*:Elementwise.DeviceMismatchThrows-TensorErrors.CudaTensorWithoutDeviceThrowsClearly'
# The tests of what changed: the tensor-core kernels (the Koch-sized MmaKochCuda cases take
# minutes under a sanitizer: the test run covers them), pooling, the optimizers' kernels.
MMA_FILTER='*Mma*Cuda*:Bf16*Cuda*:Tf32*Cuda*:PoolCuda.*:PoolIndexCuda.*:PReLUMaxPoolCuda.*-MmaKochCuda.*'
OPTIM_FILTER='OptimTyped/*.Cuda*'
# tool:test binary:gtest filter, run one after another (side by side they are far slower).
SAN_JOBS=${SAN_JOBS:-memcheck:kernels:$MMA_FILTER memcheck:nn:$OPTIM_FILTER memcheck:autograd:ConvReluPoolCuda.* racecheck:nn:$OPTIM_FILTER racecheck:kernels:$MMA_FILTER}
BENCH_MIN_TIME=${BENCH_MIN_TIME:-0.05}
TORCH_RUNS=${TORCH_RUNS:-tf32:50 bf16:50 fp32:50 tf32:16 bf16:16 fp32:16 tf32:4 bf16:4 fp32:4}
TORCH_SECONDS=${TORCH_SECONDS:-2}
FULL_ROWS=${FULL_ROWS:-^t1-global\$}
FULL_SEEDS=${FULL_SEEDS:-1}
FULL_CELL_ARGS=${FULL_CELL_ARGS:-}
export TARGET_STEP_TF32_MS=${TARGET_STEP_TF32_MS:-8} TARGET_STEP_BF16_MS=${TARGET_STEP_BF16_MS:-5}
export TARGET_CONV_RATIO=${TARGET_CONV_RATIO:-1.5}
STAGE_CMD='MN_BUILD_DIR=build-gpu tools/gpu_stage.sh tc --with-data'
# The Koch net: 4 convolutions and the 9216 x 4096 dense layer (weights and biases).
KOCH_PARAMS=$(( 64*1*100+64 + 128*64*49+128 + 128*128*16+128 + 256*128*16+256 + 9216*4096+4096 ))

# Steps of each call: name|estimated seconds|what (the estimates from the 2026-11-26/27
# H200 calls: tests ~90 s alone, a benchmark case ~0.5 s, PyTorch ~4 s a run).
plan_call1() {
  cat <<EOF
unpack|10|unpack .gpu (binaries, OpenBLAS, Omniglot), nvidia-smi, ldd of every binary
tests+sanitizers|$TEST_WINDOW|GPU tests of mn_tests_{${TEST_BINS// /,}} (shards: $TEST_SHARDS) side by side, each under timeout $TEST_WINDOW; beside them one after another, within the same window: compute-sanitizer $(san_summary)
bench_train_step|30|BM_TrainStepGpu{,Tf32,Bf16} at 4, 16 and 50 triplets (Koch step, global loss, Adam), 3 repetitions of 0.5 s: medians
bench_conv|55|BM_ConvGpu{Ours,OursTf32,OursBf16} and BM_ConvGpuCudnn: 4 Koch layers x fwd/bwd_data/bwd_weight x FP32/TF32/BF16, N=150, 5 repetitions of ${BENCH_MIN_TIME} s: medians
koch_train_torch|35|bench/references/koch_train_torch.py (PyTorch eager, one process): ${TORCH_RUNS} (precision:triplets), ${TORCH_SECONDS} s each
bench_gemm|15|BM_gpu_{ours,cublas}{,_tf32,_bf16} at koch_fc and 4096, 3 repetitions: medians
table+pack|5|the median-vs-target table (run.log, bench/results/<date>-<gpu>-targets.md); results.tgz, logs.tgz
EOF
}
# shellcheck disable=SC2016  # the quotes are text in the plan; the heredoc expands
plan_call2() {
  cat <<EOF
unpack|10|unpack .gpu (nothing to do on the machine call 1 left warm)
omniglot_grid|$(( BUDGET2 - 25 ))|omniglot_grid --scale full --rows '$FULL_ROWS' --seeds $FULL_SEEDS --device cuda${FULL_CELL_ARGS:+ --cell-args '$FULL_CELL_ARGS'}: --time-limit (what is left - 30 s), under timeout -k 10 (what is left - 15 s); resumes from last.safetensors when this machine has it. To finish: 25,000 steps + 50 validations + Lake's 400 trials, ~270 s at the 8 ms TF32 target (~1,000 s at the 2026-11-27 37.6 ms step)
pack|10|the cell's folder without checkpoints as experiments/results/omniglot/<name>/ in results.tgz
EOF
}
san_summary() {
  local j tool bin filter out=""
  for j in $SAN_JOBS; do
    IFS=: read -r tool bin filter <<< "$j"
    out+="${out:+; }$tool mn_tests_$bin '$filter'"
  done
  echo "$out"
}
run_json() {  # call number -> the device tool's run arguments
  local b=$BUDGET1
  (( $1 == 2 )) && b=$BUDGET2
  printf '{"command": "BUDGET%d=%d bash tools/gpu_check.sh call%d", "timeout_s": %d, "carry": [".gpu"]}' \
    "$1" "$b" "$1" $(( b + GRACE_S ))
}

# ---- Freshness of the staged build ------------------------------------------------------
# What the binaries are compiled from: a hash over the compiled sources of the working tree
# (tracked and untracked-not-ignored), so edits after staging make .gpu stale.
source_stamp() {
  git ls-files -z --cached --others --exclude-standard -- '*.cpp' '*.cc' '*.c' '*.h' '*.hpp' \
      '*.cu' '*.cuh' '*.in' '*.cmake' '*CMakeLists.txt' ':(exclude)experiments/results' |
    sort -z | xargs -0 -r sha1sum 2>/dev/null | sha1sum | cut -c1-16
}
staged_value() { sed -n "s/^$1=//p" .gpu/STAGED 2>/dev/null | head -n 1; }
travel_bytes() {  # what travels without carry: tracked and untracked-not-ignored files
  git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null |
    awk '{s += $1} END {print s + 0}'
}
largest_folders() {  # the three largest folders (3 levels deep) of what travels
  git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c '%s %n' -- 2>/dev/null |
    awk '{ n = split($2, a, "/"); k = a[1]; for (i = 2; i <= 3 && i < n; ++i) k = k "/" a[i]; s[k] += $1 }
         END { for (k in s) printf "%d %s\n", s[k], k }' |
    sort -rn | head -n 3 | awk '{ printf "%s%s %.1f MiB", (NR > 1 ? ", " : ""), $2, $1 / 1048576 }'
}
# Prints the state of .gpu; returns 0 when it is fresh and fits, 2 otherwise.
check_stage() {
  local problems=() head stamp tree gpu_b restage=0
  head=$(git rev-parse HEAD)
  stamp=$(source_stamp)
  tree=$(travel_bytes)
  echo "staged build (.gpu, carried by both calls; the calls build nothing):"
  if [[ ! -f .gpu/STAGED ]]; then
    problems+=("no .gpu/STAGED (not staged, or staged before this check existed)")
    restage=1
  else
    echo "  staged $(staged_value date) from $(staged_value build_dir): group $(staged_value group)," \
         "data $(staged_value data), architectures $(staged_value archs), cuDNN $(staged_value cudnn)"
    if [[ $(staged_value sources) != "$stamp" ]]; then
      problems+=("sources changed since staging (stamp $(staged_value sources), now $stamp)")
    elif [[ $(staged_value head) != "$head" ]]; then
      echo "  built at $(staged_value head | cut -c1-12), HEAD is ${head:0:12}: the compiled sources are identical"
    else
      echo "  built at HEAD ${head:0:12} from the working tree's sources (stamp $stamp): fresh"
    fi
    [[ $(staged_value group) == tc ]] || problems+=("group $(staged_value group), not tc")
    [[ $(staged_value data) == yes ]] || problems+=("no Omniglot staged (--with-data): call 2 needs it")
    [[ " $(staged_value archs) " == *[^0-9]90[^0-9]* ]] || problems+=("no sm_90 code (architectures: $(staged_value archs))")
    [[ $(staged_value cudnn) == yes ]] || problems+=("built without cuDNN: bench_conv has no cuDNN cases")
    (( ${#problems[@]} )) && restage=1
  fi
  gpu_b=0
  [[ -d .gpu ]] && gpu_b=$(du -sb .gpu | cut -f1)
  awk -v t="$tree" -v g="$gpu_b" 'BEGIN { printf "  travels: working tree %.1f MiB + .gpu %.1f MiB = %.1f MiB of 64 MiB\n",
    t / 1048576, g / 1048576, (t + g) / 1048576 }'
  if (( tree + gpu_b > CARRY_LIMIT )); then
    problems+=("the working tree and .gpu exceed the 64 MiB that travels; restaging does not help while the tree
    alone is $(( tree / 1048576 )) MiB: slim the tree (its largest folders: $(largest_folders)) or carry less")
  fi
  if (( ${#problems[@]} )); then
    local p
    for p in "${problems[@]}"; do echo "  NOT READY: $p"; done
    (( restage )) && echo "  stage here (sm_90, only the check's targets): $STAGE_CMD"
    return 2
  fi
  echo "  ready"
  return 0
}

# ---- --dry-run ----------------------------------------------------------------------------
print_call() {  # n title budget plan-function; sets call_s
  local n=$1 title=$2 budget=$3 name est what sum=0 cmd
  echo "call $n: $title"
  printf '  %-18s %6s  %s\n' step "est s" what
  while IFS='|' read -r name est what; do
    printf '  %-18s %6d  %s\n' "$name" "$est" "$what"
    sum=$(( sum + est ))
  done < <("$4")
  local to=$(( budget + GRACE_S ))
  call_s=$(( START_S + to + XFER_S ))
  echo "  steps: $sum s of the ${budget} s command budget$( (( sum > budget )) && echo ' OVER' )"
  echo "  device time: start $START_S + timeout_s $to + transfers $XFER_S = $call_s s (limit $CALL_LIMIT)$( (( call_s > CALL_LIMIT )) && echo ' OVER' )"
  cmd=$(run_json "$n")
  echo "  run: $cmd"
  local c=${cmd#*\"command\": \"}
  c=${c%%\"*}
  echo "  command: ${#c} characters (limit $CMD_LIMIT)$( (( ${#c} > CMD_LIMIT )) && echo ' OVER' )"
  echo "  then here: tools/gpu_check.sh --collect <the reply's files_at>"
  (( sum <= budget && call_s <= CALL_LIMIT && ${#c} <= CMD_LIMIT ))
}
dry_run() {
  local ok=0 c1 c2 call_s stage_rc
  echo "gpu_check plan: two device calls, back to back (call 2 on the machine call 1 leaves warm"
  echo "for 30 s saves its start; counted below as if cold). Limits: $CALL_LIMIT s a call"
  echo "(start, command, transfers), $SESSION_LIMIT s in all, $CMD_LIMIT characters a command, 64 MiB carried."
  echo
  print_call 1 "GPU tests, sanitizers, benchmarks against cuDNN / cuBLAS / PyTorch" "$BUDGET1" plan_call1 || ok=1
  c1=$call_s
  echo
  print_call 2 "the full-protocol Omniglot cell" "$BUDGET2" plan_call2 || ok=1
  c2=$call_s
  echo
  echo "total device time: $c1 + $c2 = $(( c1 + c2 )) s (limit $SESSION_LIMIT)$( (( c1 + c2 > SESSION_LIMIT )) && echo ' OVER' )"
  (( c1 + c2 <= SESSION_LIMIT )) || ok=1
  echo
  echo "targets (call 1's table: each median beside its target, PASS / MISS; NO DATA counts as a failure):"
  echo "  Koch train step, 50 triplets, TF32: BM_TrainStepGpuTf32/50 <= $TARGET_STEP_TF32_MS ms"
  echo "  Koch train step, 50 triplets, BF16: BM_TrainStepGpuBf16/50 <= $TARGET_STEP_BF16_MS ms"
  local small="bench_train_step registers GPU cases at 50 triplets only: 4 and 16 from PyTorch alone"
  grep -qE 'BM_TrainStepGpu\)->Arg\(4\)' bench/bench_train_step.cpp 2>/dev/null && small="ours and PyTorch"
  echo "  reported beside them (no target): FP32; 4 and 16 triplets ($small); PyTorch eager"
  echo "  each conv pass <= ${TARGET_CONV_RATIO}x cuDNN's time in the same precision: layers 1-4 x fwd, bwd_data,"
  echo "    bwd_weight x FP32, TF32, BF16 (BM_ConvGpuOurs{,Tf32,Bf16}/L/P vs BM_ConvGpuCudnn/L/P/{0,1,2}): 36 rows"
  echo "  GEMM beside cuBLAS (no target): the Koch dense layer and 4096^3, FP32, TF32, BF16"
  echo
  local ck=$(( KOCH_PARAMS * 4 ))
  echo "call 2's checkpoints: Koch's net has $KOCH_PARAMS parameters: last.safetensors (weights + Adam's two moments)"
  echo "  ~$(( 3 * ck / 1000000 )) MB, best.safetensors ~$(( ck / 1000000 )) MB: over the 16 MiB a file / 64 MiB a call that come"
  echo "  back and the 64 MiB carry (split, last alone would take $(( (3 * ck + 16777215) / 16777216 )) files over $(( (3 * ck + 67108863) / 67108864 )) calls), so a cell resumes only on"
  echo "  the same machine: its folder stays in /tmp/mn_runs while the machine is held (warm 30 s after"
  echo "  a call, 30 min at most): run call 2 again at once to go on. What comes back (and --collect"
  echo "  commits) is the folder without checkpoints: config, metrics.jsonl, summary.json, curves, results.md."
  echo
  check_stage
  stage_rc=$?
  echo
  if (( ok )); then echo "plan: OVER A LIMIT (above)"; return 1; fi
  echo "plan: within the limits"
  return "$stage_rc"
}

# ---- --targets: medians beside targets ---------------------------------------------------
# Reads DIR's Google Benchmark JSON (*.json: median aggregates when repetitions were run,
# else the median of the iteration rows, else the single real_time; a file cut short by a
# timeout is read up to its last whole entry) and PyTorch's JSON lines (*.jsonl); prints a
# markdown table. Exit 0 (a MISS is a result, not an error of the script).
targets_table() {
  python3 - "$1" <<'PY'
import glob, json, os, re, statistics, sys

d = sys.argv[1]
T_TF32 = float(os.environ.get("TARGET_STEP_TF32_MS", 8))
T_BF16 = float(os.environ.get("TARGET_STEP_BF16_MS", 5))
RATIO = float(os.environ.get("TARGET_CONV_RATIO", 1.5))
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load(path):
    text = open(path).read()
    try:
        return json.loads(text).get("benchmarks", [])
    except ValueError:  # cut short: keep the entries before the last whole one's end
        i = text.rfind("\n    }")
        try:
            return json.loads(text[:i + 6] + "\n  ]\n}").get("benchmarks", []) if i > 0 else []
        except ValueError:
            return []


def key(name):  # BM_ConvGpuOurs/0/1/manual_time_median -> BM_ConvGpuOurs/0/1
    skip = re.compile(r"^(min_time:|min_warmup_time:|repeats:|iterations:|manual_time|real_time|process_time)")
    return "/".join(p for p in name.split("/") if not skip.match(p))


medians, errors, its = {}, {}, {}
for path in sorted(glob.glob(os.path.join(d, "*.json"))):
    for b in load(path):
        k = key(b.get("run_name") or b.get("name", ""))
        ms = b.get("real_time", 0.0) * UNIT_MS.get(b.get("time_unit", "ns"), 1e-6)
        if b.get("run_type") == "aggregate" or b.get("aggregate_name"):
            if b.get("aggregate_name") == "median":
                medians[k] = ms
        elif b.get("error_occurred"):
            errors[k] = b.get("error_message", "error")
        else:
            its.setdefault(k, []).append(ms)
for k, v in its.items():
    medians.setdefault(k, statistics.median(v))

torch = {}
for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not str(r.get("benchmark", "")).endswith("_cuda"):
            continue
        mode = "bf16" if r.get("bf16_autocast") else "tf32" if r.get("tf32") else "fp32"
        torch[(mode, int(r["batch_triplets"]))] = float(r["median_ms"])

counts = {"PASS": 0, "MISS": 0, "NO DATA": 0}


def f(x):
    return "—" if x is None else f"{x:.3f}"


def status(value, limit, missing_key):
    why = f" ({errors[missing_key]})" if missing_key in errors else ""
    if limit is None:
        return "—" if value is not None else "not measured" + why
    if value is None:
        counts["NO DATA"] += 1
        return "NO DATA" + why
    s = "PASS" if value <= limit else "MISS"
    counts[s] += 1
    return s


print("## Koch training step, median ms per step (50 triplets = 150 images; global loss, Adam)\n")
print("| precision | triplets | ours ms | PyTorch ms | ours / PyTorch | target | status |")
print("| --- | --- | --- | --- | --- | --- | --- |")
step = {"fp32": "BM_TrainStepGpu", "tf32": "BM_TrainStepGpuTf32", "bf16": "BM_TrainStepGpuBf16"}
step_target = {("tf32", 50): T_TF32, ("bf16", 50): T_BF16}
for mode in ("tf32", "bf16", "fp32"):
    for b in (50, 16, 4):
        k = f"{step[mode]}/{b}"
        ours, pt = medians.get(k), torch.get((mode, b))
        lim = step_target.get((mode, b))
        ratio = f"{ours / pt:.2f}x" if ours and pt else "—"
        print(f"| {mode} | {b} | {f(ours)} | {f(pt)} | {ratio} | {'<= %g ms' % lim if lim else '—'} | "
              f"{status(ours, lim, k)} |")

print(f"\n## Convolutions at the Koch layers, N = 150, median ms (target: ours <= {RATIO:g}x cuDNN, same precision)\n")
print("| precision | layer | pass | ours ms | cuDNN ms | ours / cuDNN | target | status |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
ours_name = {"fp32": "BM_ConvGpuOurs", "tf32": "BM_ConvGpuOursTf32", "bf16": "BM_ConvGpuOursBf16"}
for mi, mode in enumerate(("fp32", "tf32", "bf16")):
    for layer in range(4):
        for p, pname in enumerate(("fwd", "bwd_data", "bwd_weight")):
            ko, kc = f"{ours_name[mode]}/{layer}/{p}", f"BM_ConvGpuCudnn/{layer}/{p}/{mi}"
            o, c = medians.get(ko), medians.get(kc)
            r = o / c if o is not None and c else None
            note = " (not in a training step)" if layer == 0 and p == 1 else ""
            print(f"| {mode} | {layer + 1} | {pname}{note} | {f(o)} | {f(c)} | "
                  f"{'—' if r is None else f'{r:.2f}x'} | <= {RATIO:g}x | {status(r, RATIO, ko if o is None else kc)} |")

print("\n## GEMM, median ms (beside cuBLAS in the same math; no target)\n")
print("| precision | shape | ours ms | cuBLAS ms | ours / cuBLAS |")
print("| --- | --- | --- | --- | --- |")
for shape in ("koch_fc", "4096"):
    for mode, sfx in (("fp32", ""), ("tf32", "_tf32"), ("bf16", "_bf16")):
        o, c = medians.get(f"BM_gpu_ours{sfx}/{shape}"), medians.get(f"BM_gpu_cublas{sfx}/{shape}")
        print(f"| {mode} | {shape} | {f(o)} | {f(c)} | {f'{o / c:.2f}x' if o and c else '—'} |")

n = sum(counts.values())
print(f"\ntargets: {n} rows: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['NO DATA']} NO DATA")
PY
}

# ---- --collect: the returned results into the repository ---------------------------------
# Unpacks DIR/results*.tgz into the repository (COLLECT_ROOT for tests): only regular files
# under bench/results/ and experiments/results/omniglot/, nothing outside. Exit 1 if a
# member was refused or no archive was found. A new Omniglot folder changes the scoreboard
# (experiments/results/README.md, generated): it is rewritten.
collect() {
  local out rc
  out=$(collect_files "$1")
  rc=$?
  echo "$out"
  if [[ -z ${COLLECT_ROOT:-} && $out == *" experiments/results/omniglot/"* ]]; then
    python3 tools/scoreboard.py && echo "rewrote experiments/results/README.md (tools/scoreboard.py)"
  fi
  return "$rc"
}
collect_files() {
  python3 - "$1" "${COLLECT_ROOT:-$PWD}" <<'PY'
import os, shutil, sys, tarfile

src, root = sys.argv[1], sys.argv[2]
allowed = ("bench/results/", "experiments/results/omniglot/")
archives = sorted(n for n in os.listdir(src) if n.startswith("results") and n.endswith(".tgz"))
if not archives:
    sys.exit(f"gpu_check --collect: no results*.tgz in {src}")
bad = False
for name in archives:
    with tarfile.open(os.path.join(src, name)) as t:
        for m in t.getmembers():
            if m.isdir():
                continue
            p = os.path.normpath(m.name)
            if not m.isfile() or os.path.isabs(p) or p.split(os.sep)[0] == ".." or not p.startswith(allowed):
                print(f"refused {m.name}")
                bad = True
                continue
            dest = os.path.join(root, p)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            existed = os.path.exists(dest)
            with t.extractfile(m) as fin, open(dest, "wb") as fout:
                shutil.copyfileobj(fin, fout)
            print(("replaced " if existed else "added ") + p)
sys.exit(1 if bad else 0)
PY
}

# ---- On the GPU machine ----------------------------------------------------------------
left() { echo $(( budget - ($(date +%s) - t0) )); }
bounded() {  # cap -> min(cap, what is left but the reserve)
  local l=$(( $(left) - RESERVE_S ))
  (( $1 < l )) && l=$1
  echo "$l"
}
device_setup() {  # phase
  phase=$1
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi -L failed); --dry-run plans the calls" >&2
    exit 2
  fi
  if [[ ! -f .gpu/bin.tar.xz ]]; then
    echo "gpu_check: .gpu/bin.tar.xz missing: stage here ($STAGE_CMD) and carry .gpu" >&2
    exit 2
  fi
  # A machine held between calls keeps /tmp: unpack again when .gpu was staged anew.
  cmp -s .gpu/STAGED /tmp/mn_gpu_bin/.staged 2>/dev/null || rm -rf /tmp/mn_gpu_bin /tmp/mn_gpu_lib
  # shellcheck source=tools/gpu_env.sh
  source tools/gpu_env.sh
  cp .gpu/STAGED "$G/.staged" 2>/dev/null
  logs=/tmp/mn_logs_$phase res=/tmp/mn_results_$phase
  rm -rf "$logs" "$res" && mkdir -p "$logs" "$res/bench/results"
  trap pack EXIT
  say "== $(date -u +%FT%TZ) gpu_check $phase, budget ${budget} s; staged $(tr '\n' ' ' < .gpu/STAGED 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
  local b missing
  for b in "$G"/mn_tests_* "$G"/bench_* "$G"/omniglot_*; do
    [[ -x $b ]] || continue
    missing=$(ldd "$b" 2>&1 | grep "not found")
    [[ -n $missing ]] && say "ldd $(basename "$b"): MISSING $missing"
  done
  say "unpacked after $(( $(date +%s) - t0 )) s"
}
pack() {  # results.tgz at repository paths (run.log among them), logs.tgz
  [[ -n ${res:-} && -d ${res:-} ]] || return
  cp "$LOG" "$res/bench/results/${date}-${gpu}-gpu-check-$phase.log"
  tar -C "$res" -czf "$OUT/results.tgz" .
  tar -C "$logs" -czf "$OUT/logs.tgz" . 2>/dev/null
}

# Call 1, step 2: the GPU tests, and the sanitizer jobs one after another beside them.
sanitizer_chain() {  # deadline (epoch seconds)
  local i=0 j tool bin filter l shapes tag
  for j in $SAN_JOBS; do
    IFS=: read -r tool bin filter <<< "$j"
    tag="san$((i++))-$tool-$bin"
    l=$(( $1 - $(date +%s) ))
    if (( l < 10 )) || ! command -v compute-sanitizer >/dev/null; then echo skipped > "$logs/$tag.rc"; continue; fi
    # racecheck on the Koch-sized cases takes minutes a kernel: small and odd shapes only
    # (MN_TEST_SHAPES=small, tests/common/test_util.h), which still run every kernel.
    shapes=full
    [[ $tool == racecheck ]] && shapes=small
    MN_TEST_SHAPES=$shapes MN_CUDA_NO_CACHE=1 timeout "$l" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      --print-limit 40 "$G/mn_tests_$bin" --gtest_filter="$filter" > "$logs/$tag.log" 2>&1
    echo $? > "$logs/$tag.rc"
  done
}
run_tests_and_sanitizers() {
  local window t n i s rc f pid pids=() sum
  window=$(bounded "$TEST_WINDOW")
  say "== GPU tests beside compute-sanitizer, ${window} s ($(left) s left)"
  command -v compute-sanitizer >/dev/null || say "compute-sanitizer: not on the PATH"
  sanitizer_chain $(( $(date +%s) + window )) &
  local san_pid=$!
  declare -A shards=()
  for s in $TEST_SHARDS; do shards[${s%%:*}]=${s#*:}; done
  for t in $TEST_BINS; do
    [[ -x $G/mn_tests_$t ]] || { say "test $t: not staged"; continue; }
    n=${shards[$t]:-1}
    for (( i = 0; i < n; ++i )); do
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$window" "$G/mn_tests_$t" \
        --gtest_filter="$GTEST_GPU" > "$logs/test-$t-$i.log" 2>&1 &
      pids+=("$!:$t:$i:$n")
    done
  done
  for s in "${pids[@]}"; do
    IFS=: read -r pid t i n <<< "$s"
    wait "$pid"; rc=$?
    f=$logs/test-$t-$i.log
    sum=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$f" | tr '\n' ' ')
    say "test $t $((i + 1))/$n: exit $rc; ${sum:-no summary (124: out of time)}"
    (( rc == 124 )) && say "  last test started: $(grep -E '^\[ RUN' "$f" | tail -n 1)"
    grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z].*\)$' "$f" | head -n 20 | sed "s|^|  $t |" | tee -a "$LOG"
  done
  wait "$san_pid"
  i=0
  local j tool bin filter tag
  for j in $SAN_JOBS; do
    IFS=: read -r tool bin filter <<< "$j"
    tag="san$((i++))-$tool-$bin"
    f=$logs/$tag.log rc=$(cat "$logs/$tag.rc" 2>/dev/null)
    if [[ $rc == skipped ]]; then say "$tool $bin: skipped (no time left, or no compute-sanitizer)"; continue; fi
    if grep -qiE 'device not supported|not supported on this' "$f"; then
      say "$tool $bin: compute-sanitizer refused this device: $(grep -m1 -iE 'not supported' "$f")"; continue
    fi
    say "$tool $bin '$filter': exit $rc (0 clean, 9 findings, 124 out of time); $(grep -E 'SUMMARY|^\[  (PASSED|FAILED) +\] [0-9]' "$f" | tr '\n' ' ')"
    (( rc == 124 )) && say "  last test started: $(grep -E '^\[ RUN' "$f" | tail -n 1)"
    grep -E '^=========  ?(Invalid|Program hit|Uninitialized|Race|Barrier|Error|Warning)' "$f" |
      sort | uniq -c | sort -rn | head -n 8 | tee -a "$LOG"
  done
}

# Call 1, steps 3-6: the benchmarks on the quiet GPU.
bench() {  # name filter repetitions cap-seconds
  local name=$1 t s rc out
  t=$(bounded "$4")
  [[ -x $G/bench_$name ]] || { say "bench_$name: not staged"; return; }
  (( t >= 10 )) || { say "bench_$name: skipped, $(left) s left"; return; }
  out=$res/bench/results/${date}-${gpu}-$name.json
  s=$(date +%s)
  timeout "$t" "$G/bench_$name" --benchmark_filter="$2" --benchmark_min_time="$BENCH_MIN_TIME" \
    --benchmark_repetitions="$3" --benchmark_report_aggregates_only=true --benchmark_color=false \
    --benchmark_out="$out" --benchmark_out_format=json > "$logs/bench-$name.log" 2>&1
  rc=$?
  say "bench_$name: exit $rc after $(( $(date +%s) - s )) s (cap $t s), $(grep -c '_median' "$logs/bench-$name.log") medians"
}
run_torch() {
  local t s
  t=$(bounded 60)
  (( t >= 10 )) || { say "PyTorch: skipped, $(left) s left"; return; }
  s=$(date +%s)
  # One process for every run (imports once); a run that fails does not stop the others.
  # shellcheck disable=SC2086  # TORCH_RUNS is a list
  PYTHONUNBUFFERED=1 timeout "$t" python3 - "$TORCH_SECONDS" $TORCH_RUNS \
    > "$res/bench/results/${date}-${gpu}-train_step-torch.jsonl" 2> "$logs/torch.log" <<'PY'
import runpy, sys
seconds, runs = sys.argv[1], sys.argv[2:]
for spec in runs:
    mode, batch = spec.split(":")
    flags = {"fp32": [], "tf32": ["--tf32"], "bf16": ["--bf16"]}[mode]
    sys.argv = ["koch_train_torch.py", "--device", "cuda", "--batch", batch, "--seconds", seconds] + flags
    try:
        runpy.run_path("bench/references/koch_train_torch.py", run_name="__main__")
    except BaseException as e:  # noqa: B036 (argparse exits too)
        print(f"{spec}: {type(e).__name__}: {e}", file=sys.stderr)
PY
  say "PyTorch Koch step: exit $? after $(( $(date +%s) - s )) s (cap $t s), $(wc -l < "$res/bench/results/${date}-${gpu}-train_step-torch.jsonl") of $(wc -w <<< "$TORCH_RUNS") runs"
}
call1() {
  budget=$BUDGET1
  device_setup call1
  run_tests_and_sanitizers
  say "== benchmarks on the quiet GPU ($(left) s left)"
  bench train_step '^BM_TrainStepGpu' 3 45
  bench conv '^BM_ConvGpu(Ours|OursTf32|OursBf16|Cudnn)/' 5 90
  run_torch
  bench gemm '^BM_gpu_(ours|cublas)(_tf32|_bf16)?/(koch_fc|4096)' 3 30
  local md=$res/bench/results/${date}-${gpu}-targets.md
  {
    echo "# GPU check targets, $(date -u +%F) on $gpu"
    echo
    echo "tools/gpu_check.sh call1; staged: $(tr '\n' ' ' < .gpu/STAGED 2>/dev/null)"
    echo
    targets_table "$res/bench/results"
  } > "$md"
  tee -a "$LOG" < "$md"
  say "== call 1 done after $(( $(date +%s) - t0 )) s; here: tools/gpu_check.sh --collect <files_at>"
}

# Call 2: the full-protocol cell. Its checkpoints (~467 MB with Adam's state) can neither come
# back nor be carried, so the run folder lives in /tmp/mn_runs, which lasts while this
# machine is held: the same command, run again at once, resumes from last.safetensors.
run_full_cell() {
  [[ -x $G/omniglot_grid ]] || { say "omniglot_grid: not staged ($STAGE_CMD)"; return; }
  [[ -n ${MN_DATA_DIR:-} ]] || { say "Omniglot: not staged ($STAGE_CMD)"; return; }
  local name=${FULL_NAME:-} run l rc s d
  # The folder a previous call on this machine left (its date may be yesterday's), else a new one.
  if [[ -z $name ]]; then
    for d in /tmp/mn_runs/*-full-protocol; do [[ -d $d ]] && name=$(basename "$d"); done
  fi
  [[ -n $name ]] || name=${date}-full-protocol
  run=/tmp/mn_runs/$name
  mkdir -p "$run"
  if compgen -G "$run/*/seed*/last.safetensors" >/dev/null; then
    say "resuming $run: $(for m in "$run"/*/seed*/metrics.jsonl; do echo "$m: $(grep -c '"epoch"' "$m") epoch lines;"; done)"
  else
    say "starting $run (no checkpoint on this machine)"
  fi
  l=$(( $(left) - 30 ))
  (( l > 60 )) || { say "full cell: not started, $(left) s left"; return; }
  say "== omniglot_grid --scale full, time limit ${l} s ($(left) s left)"
  s=$(date +%s)
  local extra=()
  [[ -n $FULL_CELL_ARGS ]] && extra=(--cell-args "$FULL_CELL_ARGS")
  timeout -k 10 $(( l + 15 )) "$G/omniglot_grid" --scale full --rows "$FULL_ROWS" --seeds "$FULL_SEEDS" \
    --ablation-seeds 1 --close-points 0 --device cuda --out-dir "$run" --time-limit "$l" "${extra[@]}" \
    > "$logs/grid.log" 2>&1
  rc=$?
  say "omniglot_grid: exit $rc after $(( $(date +%s) - s )) s (0 finished, 3 stopped resumably: run call 2 again at once, 124/137 killed)"
  grep -E '^\[grid|^epoch [0-9]+:|Lake|one-shot' "$logs/grid.log" | grep -v ETA | tail -n 8 | tee -a "$LOG"
  mkdir -p "$res/experiments/results/omniglot"
  tar -C /tmp/mn_runs --exclude='*.safetensors' -cf - "$name" | tar -C "$res/experiments/results/omniglot" -xf -
  say "packed experiments/results/omniglot/$name ($(du -sh "$res/experiments/results/omniglot/$name" | cut -f1), checkpoints left on this machine: $(du -ch "$run"/*/seed*/*.safetensors 2>/dev/null | tail -n 1 | cut -f1))"
}
call2() {
  budget=$BUDGET2
  device_setup call2
  run_full_cell
  say "== call 2 done after $(( $(date +%s) - t0 )) s; here: tools/gpu_check.sh --collect <files_at>"
}

case ${1:-} in
  --dry-run) dry_run ;;
  --targets) [[ -d $dir_arg ]] || { echo "usage: tools/gpu_check.sh --targets DIR" >&2; exit 2; }; targets_table "$dir_arg" ;;
  --collect) [[ -d $dir_arg ]] || { echo "usage: tools/gpu_check.sh --collect DIR" >&2; exit 2; }; collect "$dir_arg" ;;
  --source-stamp) source_stamp ;;
  call1) call1 ;;
  call2) call2 ;;
  *) echo "usage: tools/gpu_check.sh --dry-run | --collect DIR | --targets DIR | call1 | call2 (see its header)" >&2; exit 2 ;;
esac
