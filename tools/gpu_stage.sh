#!/usr/bin/env bash
# Prepares a GPU session (H100/H200): builds for sm_90 here and stages stripped
# binaries in .gpu/ (keep it out of git: `echo /.gpu/ >> .git/info/exclude`).
#   tools/gpu_stage.sh tests|bench|study [--with-data]
# stages one group (all three together exceed the device tool's 64 MiB carry
# limit: about 38 MB of tests, 34 MB of benchmarks, 18 MB for the study). Then, on
# the GPU machine, from the repository root with .gpu carried:
#   bash tools/gpu_run.sh      (runs whatever is staged; knobs in its header)
# A second argument --with-data (`tools/gpu_stage.sh tests --with-data`) also packs
# the Omniglot folder (about 5 MB compressed) so the real-data tests, bench_data's
# GPU cases and the experiments can run there.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-gpu -j2
what="${1:-tests}"
case "$what" in
  tests) pattern="build-gpu/tests/mn_tests_*" ;;
  bench) pattern="build-gpu/bench/bench_*" ;;
  study) pattern="build-gpu/experiments/omniglot_*" ;;
  *) echo "usage: tools/gpu_stage.sh tests|bench|study [--with-data]" >&2; exit 2 ;;
esac
rm -rf .gpu && mkdir -p .gpu/lib
for b in $pattern; do
  [[ -x "$b" && -f "$b" ]] && strip -o ".gpu/$(basename "$b")" "$b"
done
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gpu/lib/
if [[ "$what" == bench ]]; then
  # bench_gemm links OpenBLAS (36 MB, with libgfortran and libquadmath), which the
  # GPU machine lacks: packed with xz (about 5 MB); gpu_run.sh unpacks it to /tmp.
  mkdir -p .gpu/lib/pack
  for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
    cp -L "/usr/lib/x86_64-linux-gnu/$l" .gpu/lib/pack/
  done
  tar -C .gpu/lib/pack -cJf .gpu/lib/libs.tar.xz . && rm -rf .gpu/lib/pack
fi
if [[ "${2:-}" == "--with-data" ]]; then
  root=""
  for d in "${MN_DATA_DIR:-}" "${DATA_DIR:-}" ./datasets ../shared/datasets; do
    [[ -n "$d" && -d "$d/omniglot/images_background" ]] && { root="$d"; break; }
  done
  [[ -n "$root" ]] || { echo "gpu_stage: Omniglot not found (set MN_DATA_DIR)" >&2; exit 1; }
  tar -C "$root" -czf .gpu/omniglot.tgz omniglot
fi
du -sh .gpu
