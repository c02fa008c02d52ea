#!/usr/bin/env bash
# collect.sh RUN_DIR S: copies seed S's ensemble run folder (RUN_DIR, the --out-dir of
# `omniglot_triplet --preset cpu-4h --seed S`) into cpu-4h-seedS/ beside this script, so that the
# committed folder is itself a run folder: every finished member keeps its best.safetensors (what
# the ensemble's final test reads), an unfinished member its whole folder with last.safetensors
# (what --resume continues). Copy it back out (cp -r cpu-4h-seedS RUN_DIR) to --resume the seed
# or re-score the ensemble on another machine. time.txt is kept by hand.
set -euo pipefail
[[ $# -eq 2 && -f $1/members.json ]] || { echo "usage: $0 RUN_DIR S (RUN_DIR: a --members run folder with members.json)" >&2; exit 2; }
src=$1
dst=$(cd "$(dirname "$0")" && pwd)/cpu-4h-seed$2
mkdir -p "$dst"
for f in members.cfg members.json report.md evaluation.json; do
  if [[ -f $src/$f ]]; then cp "$src/$f" "$dst/"; fi
done
finished=" $(python3 -c 'import json, sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["finished"])))' "$src/members.json") "
for m in "$src"/member-*; do
  k=$(basename "$m")
  rm -rf "${dst:?}/$k"
  mkdir -p "$dst/$k"
  cp -r "$m"/. "$dst/$k/"
  if [[ $finished == *" ${k#member-} "* ]]; then rm -f "$dst/$k/last.safetensors"; fi  # finished: the ensemble reads best
done
du -sh "$dst"
