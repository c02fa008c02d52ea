#!/usr/bin/env python3
"""Fit the informed-pair-selection protocol's open choices on BASE alone (issue 34).

Runs `pair_selection --method base` (10 folds, 100 epochs) once per configuration of the
grid below and scores each by the RMS distance between our BASE curve and the paper's BASE
row of Table 2 at 25 / 50 / 75 / 100 % of training (57.50 / 68.24 / 72.03 / 75.51). The
second criterion, BASE* (29.19 / 52.96 / 63.47 / 70.74), is run with --base-star for the
named configurations only (`--method base-ordered`). DynE, DynEE and their ordered
variants are never run here: the reading is chosen without looking at the methods being
compared.

A configuration whose metrics.jsonl already holds all its runs is not rerun (the script can
be stopped and started again). Writes OUT/grid.md and OUT/grid.json.

  tools/pair_selection_base_fit.py --binary build-cpu/experiments/pair_selection \\
      --out experiments/results/pair_selection/2026-11-28-base-fit [--only A,B] [--base-star A,F]
  tools/pair_selection_base_fit.py ... --score-on validation    # the fit on a split held out of the
      training images (issue 54): the test set is scored only by the chosen reading's final run
  tools/pair_selection_base_fit.py --claims RUN/results.json   # the paper's claims on a six-method run
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

PAPER = {"BASE": [57.50, 68.24, 72.03, 75.51], "BASE*": [29.19, 52.96, 63.47, 70.74]}
CHECKPOINTS = [25, 50, 75, 100]

# name -> flags beyond the protocol's defaults (SGD lr 1e-3 momentum 0.8, Glorot, dropout 0.2,
# prototype = embedded class-mean image). Stage 1: the single changes and a few pairs of
# them; stage 2 (S*) was added after stage 1 from the BASE scores alone.
GRID = {
    "A": [],
    "B": ["--prototype", "embedding-centroid"],
    "C": ["--init", "torch"],
    "D": ["--dropout", "0"],
    "E": ["--lr", "1e-2"],
    "I": ["--optimizer", "rmsprop", "--lr", "1e-4"],
    "K": ["--optimizer", "adam", "--lr", "1e-4"],
    "J": ["--optimizer", "adam", "--lr", "1e-3"],
    "L": ["--init", "torch", "--dropout", "0", "--prototype", "embedding-centroid"],
    "F": ["--lr", "1e-2", "--prototype", "embedding-centroid"],
    # stage 2, chosen from the BASE scores alone. S1 after E (SGD lr 1e-2) came out closest of
    # A-E: 6 points above the paper at epoch 25 and 4 below at 100, so a lower rate. S3 after I
    # (RMSprop lr 1e-4: +2.9 / -3.4 / -3.3 / -2.7) overtook it: a little more rate for the late
    # checkpoints. (A bracket of E at lr 1.5e-2 was started and stopped for time once I led.)
    # H (RMSprop lr 1e-3, Keras's mnist_siamese example) was left out for time: the
    # 2026-11-27-pace run (2 folds) and the reference put its BASE at 76-83 % from
    # epoch 25 on, far above the paper's early checkpoints.
    "S1": ["--lr", "5e-3"],
    "S3": ["--optimizer", "rmsprop", "--lr", "1.5e-4"],
    # S4 after S3 (lr 1.5e-4: +6.8 / +4.5 / +4.3 / +3.5) bracketed I from above: the rate between.
    # Run after the six-method run (too late to change the reading that run used).
    "S4": ["--optimizer", "rmsprop", "--lr", "1.2e-4"],
    # S4's neighbours (issue 54), for the fit on the validation split: the rate either side of it
    # between I and S3, and S4 with the embedded-centroid prototype.
    "S5": ["--optimizer", "rmsprop", "--lr", "1.1e-4"],
    "S6": ["--optimizer", "rmsprop", "--lr", "1.35e-4"],
    "S7": ["--optimizer", "rmsprop", "--lr", "1.2e-4", "--prototype", "embedding-centroid"],
    # G's BASE rows are not rerun: they are the 10-fold run of 2026-11-27-pace/full_lr2e-2
    # (the same code path, seed and folds), copied to G/base/metrics.jsonl (BASE lines only).
    "G": ["--lr", "2e-2"],
}


def read_curve(path, label):
    """{epoch: [per-fold accuracy %]} of one method from a metrics.jsonl."""
    by_epoch = {}
    if not os.path.exists(path):
        return by_epoch
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("method") == label:
                by_epoch.setdefault(int(r["epoch"]), []).append(100.0 * float(r["accuracy"]))
    return by_epoch


def score(curve, label):
    means = [statistics.mean(curve[e]) for e in CHECKPOINTS]
    sds = [statistics.stdev(curve[e]) if len(curve[e]) > 1 else 0.0 for e in CHECKPOINTS]
    d = [m - p for m, p in zip(means, PAPER[label])]
    return dict(means=means, sds=sds, diffs=d, rms=math.sqrt(sum(x * x for x in d) / len(d)),
                max_abs=max(abs(x) for x in d))


def run(binary, out_dir, flags, method, folds, threads):
    log = os.path.join(out_dir, "metrics.jsonl")
    label = "BASE" if method == "base" else "BASE*"
    curve = read_curve(log, label)
    if curve and all(len(curve.get(e, [])) == folds for e in CHECKPOINTS):
        return 0.0
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    cmd = ["nice", "-n", "5", binary, "--method", method, "--folds", str(folds), "--threads", str(threads),
           "--out-dir", out_dir] + flags
    t0 = time.time()
    with open(out_dir + ".log", "w") as f:
        res = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, MN_NUM_THREADS=str(threads)))
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}); see {out_dir}.log")
    return time.time() - t0


def fmt(s):
    return " / ".join(f"{m:.1f}" for m in s["means"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma list of grid names to run (default: all)")
    ap.add_argument("--base-star", default="", help="comma list of grid names to also run BASE* for")
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--score-on", choices=["test", "validation"], default="test",
                    help="validation: every run scores a split held out of MNIST's training images "
                         "(pair_selection --score-on validation), so the fit never looks at the test set")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(GRID)
    star = [n for n in args.base_star.split(",") if n]
    for n in names + star:
        if n not in GRID:
            sys.exit(f"--only/--base-star: unknown grid name '{n}' (known: {', '.join(GRID)})")
    os.makedirs(args.out, exist_ok=True)
    extra = ["--score-on", "validation"] if args.score_on == "validation" else []
    for n in names:
        t = run(args.binary, os.path.join(args.out, n, "base"), GRID[n] + extra, "base", args.folds, args.threads)
        print(f"{n}: BASE done ({t:.0f} s)", flush=True)
    for n in star:
        t = run(args.binary, os.path.join(args.out, n, "base_star"), GRID[n] + extra, "base-ordered", args.folds,
                args.threads)
        print(f"{n}: BASE* done ({t:.0f} s)", flush=True)
    write_tables(args.out, args.folds)


def write_tables(out, folds):
    rows, js = [], {}
    for n, flags in GRID.items():
        base = read_curve(os.path.join(out, n, "base", "metrics.jsonl"), "BASE")
        if not base or any(len(base.get(e, [])) != folds for e in CHECKPOINTS):
            continue
        s = score(base, "BASE")
        st = read_curve(os.path.join(out, n, "base_star", "metrics.jsonl"), "BASE*")
        ss = score(st, "BASE*") if st and all(len(st.get(e, [])) == folds for e in CHECKPOINTS) else None
        js[n] = dict(flags=flags, base=s, base_star=ss)
        rows.append((s["rms"], n, flags, s, ss))
    rows.sort()
    lines = ["| rank | name | flags (beyond the settled reading) | BASE 25 / 50 / 75 / 100 | sd at 100 | "
             "RMS to paper | max abs diff | BASE* 25 / 50 / 75 / 100 | BASE* RMS |", "|---" * 9 + "|"]
    for i, (_, n, flags, s, ss) in enumerate(rows, 1):
        lines.append(f"| {i} | {n} | `{' '.join(flags) or '(none)'}` | {fmt(s)} | {s['sds'][3]:.1f} | "
                     f"{s['rms']:.2f} | {s['max_abs']:.2f} | {fmt(ss) if ss else '-'} | "
                     f"{ss['rms']:.2f} |" if ss else
                     f"| {i} | {n} | `{' '.join(flags) or '(none)'}` | {fmt(s)} | {s['sds'][3]:.1f} | "
                     f"{s['rms']:.2f} | {s['max_abs']:.2f} | - | - |")
    head = (f"Paper BASE {' / '.join(map(str, PAPER['BASE']))}; BASE* {' / '.join(map(str, PAPER['BASE*']))}. "
            f"Mean over {folds} folds, % at epochs 25 / 50 / 75 / 100; RMS over the four checkpoints.\n\n")
    with open(os.path.join(out, "grid.md"), "w") as f:
        f.write(head + "\n".join(lines) + "\n")
    with open(os.path.join(out, "grid.json"), "w") as f:
        json.dump(js, f, indent=1)
    print(head + "\n".join(lines))


# Student t, one-tailed 5 %, for df = 1..30 (paired tests over the folds).
T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761,
       1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701,
       1.699, 1.697]


def claims(results_json):
    """The paper's MNIST claims checked on a six-method results.json (the binary's)."""
    with open(results_json) as f:
        res = {m["method"]: m for m in json.load(f)["methods"]}
    pairs = [("DynEE", "DynE"), ("DynE", "BASE"), ("DynEE", "BASE"), ("BASE", "BASE*"), ("DynE", "DynE*"),
             ("DynEE", "DynEE*")]
    lines = ["| claim (paper) | " + " | ".join(f"epoch {e}" for e in CHECKPOINTS) + " |", "|---" * 5 + "|"]
    for hi, lo in pairs:
        cells = []
        for e in CHECKPOINTS:
            i = res[hi]["epochs"].index(e)
            d = [a - b for a, b in zip(res[hi]["per_fold"][i], res[lo]["per_fold"][i])]
            n = len(d)
            m = statistics.mean(d)
            sd = statistics.stdev(d) if n > 1 else 0.0
            t = m / (sd / math.sqrt(n)) if sd > 0 else float("inf") * (1 if m > 0 else -1)
            sig = n > 1 and t > T95[min(n - 1, 30) - 1]
            cells.append(f"{'holds' if m > 0 else 'FAILS'} {m:+.2f} (t {t:.1f}{', sig.' if sig else ''})")
        lines.append(f"| {hi} > {lo} | " + " | ".join(cells) + " |")
    i100 = res["DynEE"]["epochs"].index(100)
    lines.append(f"\nDynEE at epoch 100: {res['DynEE']['mean'][i100]:.2f} ± {res['DynEE']['sd'][i100]:.2f} % "
                 f"(paper 90.05; claim DynEE >= 90: {'holds' if res['DynEE']['mean'][i100] >= 90 else 'FAILS'}).")
    lines.append("Differences in points, mean over folds of the paired difference; t = paired t over the folds; "
                 f"'sig.' = one-tailed p < 0.05 (t > {T95[8]} at 10 folds).")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--claims":
        print(claims(sys.argv[2]))
        sys.exit(0)
    main()
