#!/usr/bin/env bash
# Prepares a GPU session (H100/H200): builds for sm_90 here and stages stripped
# binaries in .gpu/ (keep it out of git: `echo /.gpu/ >> .git/info/exclude`).
#   tools/gpu_stage.sh tests|bench|study|all|tc [--with-data]
# stages one group as plain files (all three together exceed the device tool's 64
# MiB carry limit: about 38 MB of tests, 34 MB of benchmarks, 18 MB for the study),
# or `all` of them packed with xz as .gpu/bin.tar.xz (unpacked to /tmp on the GPU
# machine by tools/gpu_env.sh; 46 MB on 2026-11-28 with sm_80 + sm_90 code, too much
# beside the 13 MB repository and the data), or `tc`: what tools/gpu_check.sh's two
# calls run (the test binaries, bench_gemm, bench_conv, bench_train_step, omniglot_grid),
# packed the same way, building only those targets; with --with-data it stages Omniglot
# but not MNIST. Every group writes .gpu/STAGED (HEAD, a hash of the compiled sources,
# the CUDA architectures in the binaries, cuDNN), which `tools/gpu_check.sh --dry-run`
# compares with the working tree. Then, on the GPU machine, from the
# repository root with .gpu carried:
#   bash tools/gpu_run.sh      (runs whatever is staged; knobs in its header)
#   bash tools/gpu_session.sh start|check|finish   (all --with-data: a whole session)
# A second argument --with-data (`tools/gpu_stage.sh tests --with-data`) also packs
# the Omniglot folder (about 5 MB compressed) and MNIST (11 MB) so the real-data
# tests, bench_data's GPU cases and the experiments (Omniglot, sampling) can run there.
# The quickest whole check in one call is tools/gpu_check.sh (its header says how).
set -euo pipefail
cd "$(dirname "$0")/.."
# MN_BUILD_DIR=build reuses the default build (CMakeLists.txt builds sm_80 + sm_90 unless
# CMAKE_CUDA_ARCHITECTURES says otherwise) instead of a second, sm_90-only one.
bd="${MN_BUILD_DIR:-build-gpu}"
[[ -f "$bd/CMakeCache.txt" ]] || cmake -S . -B "$bd" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
what="${1:-tests}"
# The compiled sources as they are now (an edit during the build makes the stage stale).
stamp=$(bash tools/gpu_check.sh --source-stamp)
if [[ "$what" == tc ]]; then
  # Only what tools/gpu_check.sh runs (a whole CUDA build takes hours on 2 cores).
  cmake --build "$bd" -j2 --target mn_tests_runtime mn_tests_kernels mn_tests_autograd mn_tests_nn \
    mn_tests_data mn_tests_experiments bench_gemm bench_conv bench_train_step omniglot_grid
else
  cmake --build "$bd" -j2
fi
case "$what" in
  tests) pattern="$bd/tests/mn_tests_*" ;;
  bench) pattern="$bd/bench/bench_*" ;;
  study) pattern="$bd/experiments/omniglot_*" ;;
  all) pattern="$bd/tests/mn_tests_* $bd/bench/bench_* $bd/experiments/omniglot_* $bd/experiments/sampling" ;;
  tc) pattern="$bd/tests/mn_tests_* $bd/bench/bench_gemm $bd/bench/bench_conv $bd/bench/bench_train_step $bd/experiments/omniglot_grid" ;;
  *) echo "usage: tools/gpu_stage.sh tests|bench|study|all|tc [--with-data]" >&2; exit 2 ;;
esac
rm -rf .gpu && mkdir -p .gpu/lib
# The CUDA code in the binaries (cuobjdump), else the configured architectures.
archs=""
if command -v cuobjdump >/dev/null && [[ -x "$bd/bench/bench_conv" ]]; then
  archs=$(cuobjdump --list-elf "$bd/bench/bench_conv" 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ' || true)
fi
[[ -n "$archs" ]] || archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$bd/CMakeCache.txt")
cudnn=no
grep -qE '^CUDNN_LIB:FILEPATH=/' "$bd/CMakeCache.txt" && cudnn=yes
dest=.gpu
[[ "$what" == all || "$what" == tc ]] && dest=.gpu/bin && mkdir -p "$dest"
for b in $pattern; do
  [[ -x "$b" && -f "$b" ]] && strip -o "$dest/$(basename "$b")" "$b"
done
if [[ "$what" == all || "$what" == tc ]]; then
  # xz -9: a 64 MiB dictionary, so that the CUDA kernels every binary links (static
  # libraries, the same bytes in each) can be packed once rather than once per binary (the
  # default 8 MiB window sees about one binary at a time). Not yet measured on a CUDA build:
  # on the CPU-only test binaries (3 MB each) it changes nothing.
  XZ_OPT='-9' tar -C "$dest" -cJf .gpu/bin.tar.xz . && rm -rf "$dest"
fi
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gpu/lib/
if [[ "$what" == bench || "$what" == all || "$what" == tc ]]; then
  # bench_gemm links OpenBLAS (36 MB, with libgfortran and libquadmath), which the
  # GPU machine lacks: packed with xz (about 5 MB); gpu_run.sh unpacks it to /tmp.
  mkdir -p .gpu/lib/pack
  # Where OpenBLAS is not installed here, bench_gemm was built without its CPU reference.
  for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
    f="/usr/lib/x86_64-linux-gnu/$l"
    if [[ -e "$f" ]]; then cp -L "$f" .gpu/lib/pack/; else echo "gpu_stage: $l not installed here: not staged"; fi
  done
  if [[ -n "$(ls .gpu/lib/pack)" ]]; then tar -C .gpu/lib/pack -cJf .gpu/lib/libs.tar.xz .; fi
  rm -rf .gpu/lib/pack
fi
if [[ "${2:-}" == "--with-data" ]]; then
  root=""
  for d in "${MN_DATA_DIR:-}" "${DATA_DIR:-}" ./datasets ../shared/datasets; do
    [[ -n "$d" && -d "$d/omniglot/images_background" ]] && { root="$d"; break; }
  done
  [[ -n "$root" ]] || { echo "gpu_stage: Omniglot not found (set MN_DATA_DIR)" >&2; exit 1; }
  tar -C "$root" -czf .gpu/omniglot.tgz omniglot
  # MNIST (11 MB, already gzipped) for the sampling study's GPU runs, unpacked beside it.
  [[ -d "$root/mnist" && "$what" != tc ]] && tar -C "$root" -cf .gpu/mnist.tar mnist
  # The packed-image cache (about 2.4 MB with xz), so the runs skip decoding PNGs.
  cache="${MN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/metricnet}"
  if [[ -f "$cache/omniglot_images_background.mnpack" ]]; then
    tar -C "$cache" -cJf .gpu/cache.tar.xz omniglot_images_background.mnpack omniglot_images_evaluation.mnpack
  fi
fi
# Written last: a stage that stopped half-way has no STAGED and reads as missing.
{
  echo "head=$(git rev-parse HEAD)"
  echo "sources=$stamp"
  echo "group=$what"
  echo "data=$([[ "${2:-}" == --with-data ]] && echo yes || echo no)"
  echo "archs=${archs:-unknown}"
  echo "cudnn=$cudnn"
  echo "build_dir=$bd"
  echo "date=$(date -u +%FT%TZ)"
} > .gpu/STAGED
du -sh .gpu
