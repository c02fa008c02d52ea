#!/usr/bin/env bash
# Registers, spills and stack of the tensor-core kernels for sm_90 (ptxas -v), and the
# instruction mix of each kernel's main loop, for tools/gpu_model
# (its --ptxas file). No GPU needed: it compiles kernels/cuda/mma_conv.cu and
# mma_gemm.cu once more, for sm_90 alone, with the compile command of a configured
# CUDA build folder (ninja -t commands), -Xptxas -v added and the object written to a
# scratch folder (the build folder's own objects are left alone).
#
#   tools/gpu_model_ptxas.sh BUILD_DIR OUT_FILE
#     BUILD_DIR  a CUDA build folder configured with Ninja
#                (cmake -S . -B BUILD_DIR -G Ninja -DCMAKE_BUILD_TYPE=Release)
#     OUT_FILE   e.g. bench/results/2026-12-02-ptxas-sm90.txt
#
# OUT_FILE holds, per kernel, ptxas's own lines with the names demangled (cu++filt):
#   ptxas info    : Compiling entry function '<name>' for 'sm_90'
#       N bytes stack frame, N bytes spill stores, N bytes spill loads
#   ptxas info    : Used N registers, ...
# then one line per kernel for its main loop (the backward branch whose body holds the
# most MMAs): from the SASS when cuobjdump is found (CUDA_BIN or PATH), else from the PTX
# the same compile kept (ptxas still schedules and folds it: an approximation of the
# instructions the SMs issue, labelled ptx):
#   sass|<name>|loop_instr=N hmma=N inner_instr=N inner_hmma=N ldsm=N lds=N ldgsts=N bar=N
# (or ptx|...; static counts of the main loop's body, its inner loop counted once).
# About a minute per file for sm_90 alone on a 2-core machine; run it niced (nice -n 10 ...).
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,22p' "$0"
  exit 2
fi
BUILD=$(cd "$1" && pwd)
OUT=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
CUDA_BIN=${CUDA_BIN:-/usr/local/cuda/bin}
FILT=$CUDA_BIN/cu++filt
[ -x "$FILT" ] || FILT=c++filt
OBJDUMP=$CUDA_BIN/cuobjdump
[ -x "$OBJDUMP" ] || OBJDUMP=$(command -v cuobjdump || true)
TMP=$(mktemp -d /tmp/gpu_model_ptxas.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

for f in mma_conv mma_gemm; do
  obj=$(ninja -C "$BUILD" -t targets all | grep -oE "^[^:]*kernels/cuda/${f}\.cu\.o" | head -1)
  [ -n "$obj" ] || { echo "gpu_model_ptxas: no object for kernels/cuda/$f.cu in $BUILD (a CUDA build?)" >&2; exit 1; }
  cmd=$(ninja -C "$BUILD" -t commands "$obj" | tail -1)
  # sm_90 only, ptxas verbose, no depfile, the object into the scratch folder, no ccache.
  cmd=$(printf '%s' "$cmd" | sed -E \
    -e 's#^[^ ]*ccache +##' \
    -e 's#--generate-code=[^ ]+##g' -e 's#-gencode[= ][^ ]+##g' \
    -e 's# -MD -MT [^ ]+ -MF [^ ]+##' \
    -e "s# -o [^ ]+\$# -o $TMP/$f.o#")
  mkdir -p "$TMP/keep-$f"
  cmd="$cmd --generate-code=arch=compute_90,code=sm_90 -Xptxas -v --keep --keep-dir $TMP/keep-$f"
  echo "gpu_model_ptxas: compiling kernels/cuda/$f.cu for sm_90 ..." >&2
  (cd "$BUILD" && eval "$cmd") > "$TMP/$f.log" 2>&1 || { cat "$TMP/$f.log" >&2; exit 1; }
  grep -E "Compiling entry function|bytes stack frame|Used [0-9]+ registers" "$TMP/$f.log" | "$FILT" > "$TMP/$f.ptxas"
  if [ -n "$OBJDUMP" ]; then
    "$OBJDUMP" -sass "$TMP/$f.o" | "$FILT" > "$TMP/$f.listing"
    echo sass > "$TMP/$f.kind"
  else
    cat "$TMP"/keep-$f/*.ptx > "$TMP/$f.listing"
    echo ptx > "$TMP/$f.kind"
  fi
done

{
  echo "# ptxas -v (sm_90) and the main loop ($(cat "$TMP/mma_conv.kind")) of kernels/cuda/mma_conv.cu and mma_gemm.cu"
  echo "# written by tools/gpu_model_ptxas.sh on $(date -u +%Y-%m-%dT%H:%MZ), $("$CUDA_BIN/nvcc" --version | tail -1)"
  echo "# source: $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$SRC" diff --quiet -- kernels 2>/dev/null || echo ' + uncommitted kernels/ changes')"
  cat "$TMP/mma_conv.ptxas" "$TMP/mma_gemm.ptxas"
  python3 - "$FILT" "$(cat "$TMP/mma_conv.kind")" "$TMP/mma_conv.listing" "$TMP/mma_gemm.listing" <<'EOF'
# Per function: the backward branch whose range holds the most MMAs is the main k loop;
# count the instructions in that range. SASS (cuobjdump -sass, names demangled) or PTX
# (.entry names mangled: demangled here with the filter given).
import re, subprocess, sys
filt, kind, paths = sys.argv[1], sys.argv[2], sys.argv[3:]

def report(name, insts, is_mma, count):
    # insts: (position, opcode, branch target position or None). Loops: backward branches.
    # The main loop holds the most MMAs (ties: the outermost, the k-tile loop); its inner
    # loop holding as many (the k-steps, when not unrolled) is reported beside it, so
    # that per k-tile = loop + (trips - 1) x inner, trips = MMAs per k-tile / inner's.
    loops = []
    for pos, op, target in insts:
        if target is None or target >= pos:
            continue
        body = [x for x in insts if target <= x[0] <= pos]
        loops.append((target, pos, body, sum(1 for x in body if is_mma(x[1]))))
    loops = [l for l in loops if l[3] > 0]
    if not loops:
        return
    main = max(loops, key=lambda l: (l[3], len(l[2])))
    inner = [l for l in loops if l is not main and main[0] <= l[0] and l[1] <= main[1] and l[3] == main[3]]
    inner = max(inner, key=lambda l: len(l[2])) if inner else None
    body, n = main[2], main[3]
    c = lambda f: sum(1 for x in body if f(x[1]))
    print("%s|%s|loop_instr=%d hmma=%d inner_instr=%d inner_hmma=%d ldsm=%d lds=%d ldgsts=%d bar=%d" % (
        kind, name, len(body), n, len(inner[2]) if inner else 0, inner[3] if inner else 0,
        c(count["ldsm"]), c(count["lds"]), c(count["ldgsts"]), c(count["bar"])))

def sass(path):
    name, insts = None, []
    is_mma = lambda op: op.startswith("HMMA")
    count = {"ldsm": lambda op: op.startswith("LDSM"), "lds": lambda op: op == "LDS" or op.startswith("LDS."),
             "ldgsts": lambda op: op.startswith("LDGSTS"), "bar": lambda op: op.startswith("BAR")}
    def flush():
        if name is not None:
            report(name, insts, is_mma, count)
    for line in open(path, errors="replace"):
        m = re.match(r"\s*Function : (.*)$", line)
        if m:
            flush()
            name, insts = m.group(1).strip(), []
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and name is not None:
            text = m.group(2).strip()
            op = re.sub(r"^@!?U?P[T0-9]+\s+", "", text).split()[0] if text else ""
            if op == "NOP":
                continue
            t = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", text)
            insts.append((int(m.group(1), 16), op, int(t.group(1), 16) if t and op.startswith("BRA") else None))
    flush()

def ptx(path):
    is_mma = lambda op: op.startswith("mma.")
    count = {"ldsm": lambda op: op.startswith("ldmatrix"), "lds": lambda op: op.startswith("ld.shared"),
             "ldgsts": lambda op: op.startswith("cp.async.c"), "bar": lambda op: op.startswith("bar") and "sync" in op}
    funcs, name, lines = [], None, []
    for line in open(path, errors="replace"):
        m = re.match(r"\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([^\s(]+)", line)
        if m:
            name, lines = m.group(1), []
            continue
        if name is None:
            continue
        if line.startswith("}"):
            funcs.append((name, lines))
            name = None
            continue
        lines.append(line.strip())
    names = [f[0] for f in funcs]
    demangled = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    for (mangled, body), dname in zip(funcs, demangled + names[len(demangled):]):
        labels, insts = {}, []
        for ln in body:
            if not ln or ln.startswith("//") or ln.startswith("."):
                continue
            m = re.match(r"^(\$?[\w$]+):$", ln)
            if m:
                labels[m.group(1)] = len(insts)
                continue
            if not ln.endswith(";") or ln in ("{", "}"):
                continue
            text = re.sub(r"^@!?%\w+\s+", "", ln.rstrip(";").strip())
            op = text.split()[0] if text else ""
            if not op or op.startswith(".") or op in ("{", "}", "ret", "exit"):
                continue
            t = re.match(r"bra(?:\.uni)?\s+(\$?[\w$]+)", text)
            insts.append([len(insts), op, t.group(1) if t else None])
        for x in insts:
            x[2] = labels.get(x[2]) if x[2] is not None else None
        report(dname.strip() or mangled, [tuple(x) for x in insts], is_mma, count)

for p in paths:
    (sass if kind == "sass" else ptx)(p)
EOF
} > "$OUT"
echo "gpu_model_ptxas: wrote $OUT ($(grep -c 'Compiling entry' "$OUT") kernels, $(grep -cE '^(sass|ptx)\|' "$OUT") loops from the $(cat "$TMP/mma_conv.kind"))" >&2
