#!/usr/bin/env bash
# Installs the Debian packages MetricNet needs that are missing on this machine.
#   tools/install-deps.sh           build + test dependencies
#   tools/install-deps.sh --bench   also the benchmark references (OpenBLAS, PyTorch, CVXOPT) and gnuplot
# nvcc is expected at /usr/local/cuda (the CUDA toolkit is not a Debian package here);
# without it the build is CPU-only.
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libgtest-dev libbenchmark-dev libstb-dev zlib1g-dev gnuplot-nox libcli11-dev
      nlohmann-json3-dev libboost-math-dev)
# Hardening: xxHash (content keys of the Omniglot cache), clang + compiler-rt
# for the sanitizer stage of .ci/run and the libFuzzer targets (tools/fuzz.sh).
pkgs+=(libxxhash-dev clang libclang-rt-dev)
# Data-parallel training over MPI (mpirun -np N; runtime/comm.h) and its 2-rank tests.
pkgs+=(libopenmpi-dev openmpi-bin)
# data/fetch.sh downloads a data set that is not found locally (README command (a)).
pkgs+=(curl ca-certificates)
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=(libopenblas-dev python3-torch python3-numpy python3-cvxopt)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "install-deps: all ${#pkgs[@]} packages present"
fi
