#!/usr/bin/env python3
"""The pair-selection study's front page (experiments/results/pair_selection/results.md, issue 54):
the six methods at the reading fitted on a validation split, beside the independent PyTorch
reference at the same reading, the settled reading and the paper, then the chosen run's own
report. Generated from the runs' files, never by hand:

  tools/pair_selection_front_page.py --chosen RUN --settled RUN --reference A.jsonl[,B.jsonl] \\
      --fit FITDIR --out experiments/results/pair_selection [--check]

RUN: a pair_selection --out-dir (results.json, results.md, figure2.png; the settled one may
have runs.jsonl instead of metrics.jsonl). FITDIR: tools/pair_selection_base_fit.py's --out
(grid.md). Writes OUT/results.md and OUT/front_page.json (which runs it shows) and copies the
chosen run's results.json and figure2.png to OUT (the scoreboard reads OUT/results.json).
"""
import argparse
import json
import math
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pair_selection_base_fit as fit  # noqa: E402  (PAPER, claims(), T95)

LABELS = {"base": "BASE", "base-ordered": "BASE*", "dyne": "DynE", "dyne-ordered": "DynE*", "dynee": "DynEE",
          "dynee-ordered": "DynEE*"}
CHECKPOINTS = [25, 50, 75, 100]


def paper_table():
    """The paper's Table 2 MNIST rows as the study's code holds them (tools/scoreboard.py reads the same)."""
    import scoreboard  # noqa: E402
    return scoreboard.pair_selection_paper()


def load_run(d):
    with open(os.path.join(d, "results.json")) as f:
        return json.load(f)


def reading(cfg):
    opt = cfg.get("optimizer", "sgd")
    lr = f"{cfg['lr']:.3g}" if cfg["lr"] >= 1e-3 else f"{cfg['lr']:.3g}".replace("e-0", "e-")
    if "e" not in lr and cfg["lr"] < 1e-3:
        lr = f"{cfg['lr']:.2e}".replace("e-0", "e-")
    s = f"{opt.upper() if opt == 'sgd' else ('RMSprop' if opt == 'rmsprop' else opt.capitalize())} lr {lr}"
    if opt == "sgd":
        s += f", momentum {cfg.get('momentum', 0.8):g}"
    for k, default in (("init", "glorot"), ("prototype", "input-centroid"), ("inputs", "unit")):
        if cfg.get(k, default) != default:
            s += f", {k} {cfg[k]}"
    return s


def reference_curves(paths):
    """{label: {epoch: [accuracy % per fold]}} from the PyTorch reference's JSON lines."""
    out = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                label = r["method"] if r["method"] in LABELS.values() else LABELS.get(r["method"], r["method"])
                out.setdefault(label, {}).setdefault(int(r["epoch"]), {})[int(r["fold"])] = 100.0 * r["accuracy"]
    return {m: {e: [v[k] for k in sorted(v)] for e, v in by.items()} for m, by in out.items()}


def ms(values):
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def welch_t(m1, s1, n1, m2, s2, n2):
    se = math.sqrt((s1 * s1) / n1 + (s2 * s2) / n2) if n1 and n2 else 0.0
    return (m1 - m2) / se if se > 0 else float("nan")


def fmt(m, s=None):
    if m is None:
        return "–"
    return f"{m:.2f}" if s is None else f"{m:.2f} ± {s:.2f}"


def comparison_table(chosen, settled, ref, paper):
    methods = [m["method"] for m in chosen["methods"]]
    ours = {m["method"]: m for m in chosen["methods"]}
    sett = {m["method"]: m for m in settled["methods"]}
    lines = ["| epoch | method | ours, chosen reading | PyTorch reference | ours − ref | Welch t | folds (ours / ref) "
             "| ours, settled reading | paper |", "|---:|---|---:|---:|---:|---:|---|---:|---:|"]
    worst, tmax = 0.0, 0.0
    for e in CHECKPOINTS:
        for i, name in enumerate(methods):
            o = ours[name]
            k = o["epochs"].index(e)
            om, osd, on = o["mean"][k], o["sd"][k], len(o["per_fold"][k])
            rm, rsd = ms(ref.get(name, {}).get(e, []))
            rn = len(ref.get(name, {}).get(e, []))
            d = None if rm is None else om - rm
            t = None if rm is None else welch_t(om, osd, on, rm, rsd, rn)
            if d is not None:
                worst = max(worst, abs(d))
            if t is not None and math.isfinite(t):
                tmax = max(tmax, abs(t))
            s = sett[name]
            sk = s["epochs"].index(e)
            lines.append(f"| {e} | {name} | {fmt(om, osd)} | {fmt(rm, rsd)} | {'–' if d is None else f'{d:+.2f}'} | "
                         f"{'–' if t is None else f'{t:.2f}'} | {on} / {rn} | {fmt(s['mean'][sk], s['sd'][sk])} | "
                         f"{paper[e][i]:.2f} |")
    return "\n".join(lines), worst, tmax


def within_counts(run, paper):
    """Cells (4 checkpoints x 6 methods) within / above / below the paper by the scoreboard's rule
    (scoreboard.compare: |ours - paper| <= our sd over folds)."""
    import scoreboard  # noqa: E402
    n = {"within": 0, "above": 0, "below": 0}
    folds = int(run["config"].get("folds", 0))
    for i, m in enumerate(run["methods"]):
        for e in CHECKPOINTS:
            k = m["epochs"].index(e)
            v = scoreboard.compare(paper[e][i], m["mean"][k], m["sd"][k], folds, 1.0)
            n[v] = n.get(v, 0) + 1
    return n["within"], n["above"], n["below"]


def provenance(run_dir):
    p = os.path.join(run_dir, "summary.json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        s = json.load(f).get("provenance", {})
    m = s.get("machine", {})
    return (f"`{s.get('command', '?')}`, commit `{str(s.get('commit', '?'))[:7]}`"
            f"{' (dirty)' if s.get('dirty') else ''}, {m.get('cpu', '?')} ({m.get('cores', '?')} cores, "
            f"{m.get('cpu_isa', '?')}), started {s.get('start_utc', '?')}, wall {s.get('wall_seconds', 0):.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chosen", required=True)
    ap.add_argument("--settled", required=True)
    ap.add_argument("--reference", required=True, help="comma list of the PyTorch reference's JSON lines")
    ap.add_argument("--fit", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true",
                    help="write nothing: exit 1 when OUT/results.md differs from what the runs give (ctest)")
    a = ap.parse_args()
    chosen, settled = load_run(a.chosen), load_run(a.settled)
    ref = reference_curves([p for p in a.reference.split(",") if p])
    paper = paper_table()
    rel = lambda p: os.path.relpath(p, a.out)  # noqa: E731
    table, worst, tmax = comparison_table(chosen, settled, ref, paper)
    wc, ac, bc = within_counts(chosen, paper)
    ws, as_, bs = within_counts(settled, paper)
    prov = provenance(a.chosen)
    with open(os.path.join(a.chosen, "results.md")) as f:
        body = f.read()
    body = body.replace("\n## ", "\n### ").replace("# Informed pair selection on MNIST: results", "", 1).strip()
    out = [
        "# Informed pair selection on MNIST: results at the reading fitted on a validation split\n",
        f"**Reading:** {reading(chosen['config'])} (the other choices the settled reading's: "
        f"{chosen['config'].get('init')} init, dropout {chosen['config'].get('dropout')}, prototype "
        f"{chosen['config'].get('prototype')}, inputs {chosen['config'].get('inputs')}), chosen among the base "
        f"fit's configurations by the RMS distance of BASE's curve (10 folds) to the paper's BASE at 25/50/75/100 % "
        f"of training, every run scored on {rel(os.path.join(a.fit, 'grid.md'))}'s validation split (10,000 of "
        "MNIST's training images held out, the folds drawn from the rest): the test set was scored once, by the run "
        "below. The settled reading (SGD lr 1e-3, momentum 0.8: the protocol's defaults) is kept beside it "
        f"([{rel(os.path.join(a.settled, 'results.md'))}]({rel(os.path.join(a.settled, 'results.md'))})).\n",
        f"**Provenance:** {prov or 'commit not recorded (run before provenance existed)'}; run folder "
        f"[{rel(a.chosen)}/]({rel(a.chosen)}/).\n",
        f"**Against the paper** (the paper's value within our mean ± sd over folds; 24 cells: 6 methods x 4 "
        f"checkpoints): chosen reading {wc} within, {ac} above, {bc} below; settled reading {ws} within, {as_} above, "
        f"{bs} below.\n",
        "## Table 2 at 25 / 50 / 75 / 100 % of training: ours, the PyTorch reference, the settled reading, the paper\n",
        "Vote accuracy on MNIST's 10,000 test images (%), mean ± sd over folds. The PyTorch reference "
        "(`bench/references/pair_selection_torch.py`, torch from Debian's python3-torch) is written from the "
        "protocol, not from our code; it trains on the same folds and first pair sets (exported by the binary) with "
        "its own weights, dropout, shuffles and later pair sets. Welch t of ours against it; |t| > 2.1 "
        "(two-sided 5 % at ~18 df) would mark a difference beyond the fold spread.\n",
        table + "\n",
        f"Largest |ours − reference| over the table: {worst:.2f} points; largest |Welch t| {tmax:.2f}: "
        f"{'every cell within the fold spread (|t| < 2.1)' if tmax < 2.1 else 'some cells beyond the fold spread'}.\n",
        "## The paper's claims at the chosen reading (ours, paired over folds)\n",
        fit.claims(os.path.join(a.chosen, "results.json")) + "\n",
        "## The chosen reading's run in full\n",
        body + "\n",
    ]
    text = "\n".join(out)
    if a.check:
        with open(os.path.join(a.out, "results.md")) as f:
            same = f.read() == text
        print(f"{os.path.join(a.out, 'results.md')}: {'as generated' if same else 'DIFFERS from what the runs give'}")
        return 0 if same else 1
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(text)
    for name in ("results.json", "figure2.png"):
        shutil.copyfile(os.path.join(a.chosen, name), os.path.join(a.out, name))
    # Which runs the page shows (tools/scoreboard.py reads the run's provenance from here).
    with open(os.path.join(a.out, "front_page.json"), "w") as f:
        json.dump({"run": rel(a.chosen), "settled": rel(a.settled), "fit": rel(a.fit),
                   "reference": [rel(p) for p in a.reference.split(",") if p]}, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.join(a.out, 'results.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
