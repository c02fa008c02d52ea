#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan, CPU only) in
# build-fuzz/ and fuzzes TARGET (png pgm idx csv lake safetensors config flags, or all) for
# SECONDS each, starting from the seed corpus fuzz/corpus/TARGET. New inputs go
# to build-fuzz/fuzz/run/TARGET/corpus, crashes to .../artifacts; the last line
# of each target's log (executions, coverage) is printed. MN_FUZZ_BUILD_DIR=DIR
# uses an existing fuzz-enabled build instead of build-fuzz/.
#   tools/fuzz.sh all 120
#   tools/fuzz.sh csv 30
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"; secs="${2:-60}"
all="png pgm idx csv lake safetensors config flags"
[[ -n "$target" ]] || { sed -n '2,9p' "$0"; exit 2; }
[[ "$target" == all ]] && target="$all"
for t in $target; do
  [[ " $all " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: $all)" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-dev)" >&2; exit 1; }
# MN_FUZZ_BUILD_DIR reuses a build that already has the targets (e.g. build-san of .ci/run).
B="${MN_FUZZ_BUILD_DIR:-build-fuzz}"
if ! grep -q '^MN_BUILD_FUZZ:BOOL=ON' "$B/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DMN_ENABLE_CUDA=OFF -DMN_BUILD_BENCH=OFF \
    -DMN_BUILD_TESTS=OFF -DMN_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=(); for t in $target; do targets+=("fuzz_$t"); done
nice -n 10 cmake --build "$B" -j2 --target "${targets[@]}"
rc=0
for t in $target; do
  w="$B/fuzz/run/$t"; mkdir -p "$w/corpus" "$w/artifacts"
  echo "fuzz.sh: $t for $secs s"
  if ! "$B/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$w/artifacts/" "$w/corpus" "fuzz/corpus/$t" >"$w/log" 2>&1; then
    echo "fuzz.sh: $t: FINDING (see $w/log and $w/artifacts/)"; rc=1
  fi
  grep -E '^(#[0-9]+|stat::number_of_executed_units|stat::peak_rss_mb)' "$w/log" | tail -3 || true
done
exit $rc
