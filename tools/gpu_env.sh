# Sourced by tools/gpu_run.sh and tools/gpu_session.sh on the GPU machine, from the
# repository root with the staged .gpu/ folder carried (see tools/gpu_stage.sh).
# Sets G (folder of the staged binaries), OUT (default ./gpu_out), LOG, say(),
# LD_LIBRARY_PATH, MN_DATA_DIR / MN_CACHE_DIR when data was staged, gpu and date.
OUT="${OUT:-gpu_out}"
mkdir -p "$OUT"
LOG="$OUT/run.log"
say() { echo "$*" | tee -a "$LOG"; }

# Unpacks an .xz (or .gz) tar, with Python's tarfile where tar has no xz.
mn_untar() {
  mkdir -p "$2"
  tar -C "$2" -xf "$1" 2>/dev/null ||
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"
}

# `gpu_stage.sh all` packs every binary as .gpu/bin.tar.xz (unpacked once per machine).
G=.gpu
if [[ -f .gpu/bin.tar.xz ]]; then
  G=/tmp/mn_gpu_bin
  [[ -f $G/.unpacked ]] || { mn_untar .gpu/bin.tar.xz $G && touch $G/.unpacked; }
fi

# Shared libraries: the staged ones (libbenchmark; OpenBLAS + libgfortran packed as
# lib/libs.tar.xz), then wherever this machine keeps CUDA, cuBLAS and cuDNN (the
# binaries' RUNPATH is the build machine's /usr/local/cuda/lib).
libdirs="$PWD/.gpu/lib"
if [[ -f .gpu/lib/libs.tar.xz ]]; then
  [[ -f /tmp/mn_gpu_lib/.unpacked ]] || { mn_untar .gpu/lib/libs.tar.xz /tmp/mn_gpu_lib && touch /tmp/mn_gpu_lib/.unpacked; }
  libdirs="$libdirs:/tmp/mn_gpu_lib"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && libdirs="$libdirs:$d"
done
while read -r d; do
  libdirs="$libdirs:$d"
done < <(find /usr/local /opt /usr/lib -maxdepth 9 \( -name 'libcudnn.so.9' -o -name 'libcublas.so.13' \
           -o -name 'libcudart.so.13' \) -printf '%h\n' 2>/dev/null | sort -u)
export LD_LIBRARY_PATH="$libdirs:${LD_LIBRARY_PATH:-}"

[[ -d /usr/local/cuda/bin ]] && export PATH="$PATH:/usr/local/cuda/bin"   # compute-sanitizer

# Omniglot (gpu_stage.sh ... --with-data) and, with `all`, the packed-image cache.
if [[ -f .gpu/omniglot.tgz ]]; then
  [[ -f /tmp/mn_data/.unpacked ]] || { mn_untar .gpu/omniglot.tgz /tmp/mn_data && touch /tmp/mn_data/.unpacked; }
  export MN_DATA_DIR=/tmp/mn_data
fi
if [[ -f .gpu/mnist.tar && ! -d /tmp/mn_data/mnist ]]; then
  mn_untar .gpu/mnist.tar /tmp/mn_data
fi
if [[ -f .gpu/cache.tar.xz ]]; then
  [[ -f /tmp/mn_cache/.unpacked ]] || { mn_untar .gpu/cache.tar.xz /tmp/mn_cache && touch /tmp/mn_cache/.unpacked; }
  export MN_CACHE_DIR=/tmp/mn_cache
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-')
gpu=${gpu:-gpu}
date=$(date +%F)
