#!/usr/bin/env bash
# Locates MetricNet's data sets and, when absent, downloads them from their
# public sources with SHA-256 checks. Never leaves partial data in place: every
# download lands in a staging folder, is verified, and only then is moved to
# <dest>/<name>; a failed check removes the staging folder and exits non-zero.
#
#   data/fetch.sh locate NAME        print the folder holding NAME (exit 1 if none)
#   data/fetch.sh verify NAME        check the located copy against the checksums
#   data/fetch.sh get NAME...        locate, else download into $MN_FETCH_DEST
#                                    (default ./datasets); NAME=all for every set
#
# NAME: omniglot mnist fashion-mnist kmnist iris orl_faces
# Search order (the C++ loader's and the README's): $MN_DATA_DIR/NAME, $DATA_DIR/NAME,
# ./datasets/NAME, ../shared/datasets/NAME.
#
# Environment (for tests and mirrors):
#   MN_FETCH_BASE_URL  replaces every source URL by $MN_FETCH_BASE_URL/NAME/<file>
#                      (e.g. file:///tmp/fixture), so the script runs on a local fixture
#   MN_FETCH_SUMS      checksum file to use instead of data/datasets.sha256
#   MN_FETCH_DEST      where downloads go (default ./datasets)
#
# Checksums known: every MNIST/Fashion-MNIST/KMNIST file present here (KMNIST's
# full training-image file is not among them: it is checked by its IDX header,
# 60,000 x 28 x 28, and reported as unverified), iris.csv, each ORL image, and
# tree hashes of Omniglot's images_background/ and all_runs/. The Omniglot zips
# themselves have no published checksum; their extracted trees are checked.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUMS="${MN_FETCH_SUMS:-$HERE/datasets.sha256}"
DEST="${MN_FETCH_DEST:-./datasets}"
ALL="omniglot mnist fashion-mnist kmnist iris orl_faces"

die() { echo "fetch.sh: error: $*" >&2; exit 1; }
say() { echo "fetch.sh: $*" >&2; }

# Files that must exist for a copy to count as complete.
required_files() {
  case "$1" in
    mnist|fashion-mnist)
      echo train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz ;;
    kmnist)
      echo train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz ;;
    iris) echo iris.csv ;;
    orl_faces) for s in $(seq 1 40); do for k in $(seq 1 10); do echo "s$s/$k.pgm"; done; done ;;
    omniglot) echo images_background images_evaluation all_runs ;;
    *) die "unknown data set '$1' (known: $ALL)" ;;
  esac
}

complete_at() {  # complete_at NAME DIR
  local f
  for f in $(required_files "$1"); do [ -e "$2/$f" ] || return 1; done
  if [ "$1" = kmnist ]; then
    [ -e "$2/train-images-idx3-ubyte.gz" ] || ls "$2"/partial/train-images-first*-idx3-ubyte.gz >/dev/null 2>&1 || return 1
  fi
  return 0
}

locate() {
  local name="$1" base
  for base in "${MN_DATA_DIR:-}" "${DATA_DIR:-}" ./datasets ../shared/datasets; do
    [ -n "$base" ] || continue
    if [ -d "$base/$name" ]; then
      if complete_at "$name" "$base/$name"; then echo "$base/$name"; return 0; fi
      say "'$base/$name' exists but is incomplete: not used"
    fi
  done
  return 1
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }
known_sum() { awk -v k="$1" '$2 == k { print $1; exit }' "$SUMS"; }

tree_hash() {  # tree_hash ROOT SET -> sha256 over sorted "SET/path sha"
  (cd "$1" && LC_ALL=C find "$2" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
     awk '{ print $2 " " $1 }' | sha256sum | cut -d' ' -f1)
}

# verify_dir NAME DIR: every file of NAME with a known checksum must match.
verify_dir() {
  local name="$1" dir="$2" bad=0 n=0 key want got f set
  if [ "$name" = omniglot ]; then
    for set in images_background all_runs; do
      want="$(known_sum "tree:omniglot/$set")"
      [ -n "$want" ] || { say "no known tree hash for omniglot/$set"; continue; }
      got="$(tree_hash "$dir" "$set")"
      if [ "$got" != "$want" ]; then say "omniglot/$set: tree hash mismatch"; bad=1; else n=$((n+1)); fi
    done
    local nev
    nev=$(find "$dir/images_evaluation" -name '*.png' | wc -l)
    say "omniglot/images_evaluation: $nev PNGs (counts only; no checksum known for the full set)"
  else
    while read -r want key; do
      case "$key" in "$name"/*) ;; *) continue ;; esac
      f="$dir/${key#"$name"/}"
      [ -e "$f" ] || continue
      got="$(sha_of "$f")"
      if [ "$got" != "$want" ]; then say "checksum mismatch: $f"; bad=1; else n=$((n+1)); fi
    done < <(grep -v '^#' "$SUMS")
  fi
  [ "$bad" = 0 ] || return 1
  say "$name: $n checksums verified in $dir"
}

url_for() {  # url_for NAME FILE
  if [ -n "${MN_FETCH_BASE_URL:-}" ]; then echo "$MN_FETCH_BASE_URL/$1/$2"; return; fi
  case "$1" in
    mnist) echo "https://ossci-datasets.s3.amazonaws.com/mnist/$2" ;;
    fashion-mnist) echo "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/$2" ;;
    kmnist) echo "http://codh.rois.ac.jp/kmnist/dataset/kmnist/$2" ;;
    iris) echo "https://raw.githubusercontent.com/mwaskom/seaborn-data/master/iris.csv" ;;
    orl_faces) echo "https://www.cl.cam.ac.uk/Research/DTG/attarchive/pub/data/att_faces.zip" ;;
    omniglot)
      case "$2" in
        all_runs.zip) echo "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/one-shot-classification/all_runs.zip" ;;
        *) echo "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/$2" ;;
      esac ;;
  esac
}

download() {  # download URL OUT
  say "downloading $1"
  curl -fsSL --retry 2 -o "$2" "$1" || { rm -f "$2"; return 1; }
}

unzip_to() {  # unzip_to ZIP DIR
  if command -v unzip >/dev/null; then unzip -q -o "$1" -d "$2"
  else python3 -m zipfile -e "$1" "$2"; fi
}

fetch_one() {
  local name="$1" stage
  mkdir -p "$DEST"
  stage="$(mktemp -d "$DEST/.staging-$name.XXXXXX")"
  if fetch_into "$name" "$stage"; then
    [ -e "$DEST/$name" ] && { rm -rf "$stage"; die "'$DEST/$name' exists but is incomplete; remove it first"; }
    mv "$stage" "$DEST/$name"
    say "$name: ready in $DEST/$name"
    echo "$DEST/$name"
  else
    rm -rf "$stage"
    return 1
  fi
}

fetch_into() {  # fetch_into NAME STAGE: download and verify everything into STAGE
  local name="$1" stage="$2" f want got
  case "$name" in
    mnist|fashion-mnist|kmnist)
      local files="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"
      for f in $files; do
        download "$(url_for "$name" "$f")" "$stage/$f" || { say "download failed: $f"; return 1; }
        want="$(known_sum "$name/$f")"
        if [ -n "$want" ]; then
          got="$(sha_of "$stage/$f")"
          [ "$got" = "$want" ] || { say "checksum mismatch for $name/$f (got $got, expected $want)"; return 1; }
        else
          # No published checksum here (KMNIST's full training images): check the IDX header.
          local hdr
          hdr="$(gzip -dc "$stage/$f" | head -c 16 | od -An -tx1 | tr -d ' \n')"
          [ "$hdr" = "000008030000ea600000001c0000001c" ] ||
            { say "$name/$f: not a 60000x28x28 IDX image file"; return 1; }
          [ "$(gzip -dc "$stage/$f" | wc -c)" = 47040016 ] || { say "$name/$f: truncated"; return 1; }
          say "$name/$f: no known SHA-256; IDX header and size checked only (unverified content)"
        fi
      done ;;
    iris)
      download "$(url_for iris iris.csv)" "$stage/iris.csv" || return 1
      want="$(known_sum iris/iris.csv)"; got="$(sha_of "$stage/iris.csv")"
      [ "$got" = "$want" ] || { say "checksum mismatch for iris/iris.csv"; return 1; } ;;
    orl_faces)
      download "$(url_for orl_faces att_faces.zip)" "$stage/att_faces.zip" || return 1
      unzip_to "$stage/att_faces.zip" "$stage/x" && rm -f "$stage/att_faces.zip"
      local src; src="$(dirname "$(find "$stage/x" -name 1.pgm -path '*s1/*' | head -1)")/.."
      mkdir -p "$stage/out"; cp -r "$src"/s* "$stage/out/"; rm -rf "$stage/x"
      mv "$stage/out"/* "$stage/" && rmdir "$stage/out"
      complete_at orl_faces "$stage" || { say "orl_faces: archive incomplete"; return 1; }
      verify_dir orl_faces "$stage" || return 1 ;;
    omniglot)
      for f in images_background.zip images_evaluation.zip all_runs.zip; do
        download "$(url_for omniglot "$f")" "$stage/$f" || return 1
        unzip_to "$stage/$f" "$stage" && rm -f "$stage/$f"
      done
      # all_runs.zip may unpack its run folders at the top level.
      if [ ! -d "$stage/all_runs" ] && [ -d "$stage/run01" ]; then
        mkdir "$stage/all_runs" && mv "$stage"/run[0-9]* "$stage/all_runs/"
      fi
      complete_at omniglot "$stage" || { say "omniglot: archives incomplete"; return 1; }
      local nbg; nbg=$(find "$stage/images_background" -name '*.png' | wc -l)
      [ "$nbg" = 19280 ] || { say "omniglot: images_background holds $nbg PNGs, expected 19280"; return 1; }
      verify_dir omniglot "$stage" || return 1 ;;
  esac
  complete_at "$name" "$stage" || { say "$name: incomplete after download"; return 1; }
}

cmd="${1:-}"; shift || true
[ -n "$cmd" ] || { sed -n '2,30p' "${BASH_SOURCE[0]}"; exit 2; }
[ -r "$SUMS" ] || die "checksum file '$SUMS' not readable"
names="$*"; [ "$names" = all ] && names="$ALL"
[ -n "$names" ] || die "no data set named (known: $ALL)"
rc=0
for n in $names; do
  required_files "$n" >/dev/null
  case "$cmd" in
    locate) locate "$n" || { say "$n: not found"; rc=1; } ;;
    verify) d="$(locate "$n")" || die "$n: not found"; verify_dir "$n" "$d" || rc=1 ;;
    get)
      if d="$(locate "$n")"; then say "$n: found at $d"; echo "$d"
      else fetch_one "$n" || { say "$n: FAILED (nothing installed)"; rc=1; }; fi ;;
    *) die "unknown command '$cmd' (locate, verify, get)" ;;
  esac
done
exit $rc
