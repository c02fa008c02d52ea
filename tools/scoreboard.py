#!/usr/bin/env python3
"""The scoreboard of the four studies: experiments/results/README.md, generated from the
studies' own result files, never by hand.

    python3 tools/scoreboard.py            # (re)write experiments/results/README.md
    python3 tools/scoreboard.py --check    # exit 1 when the committed page differs from a
                                           # fresh one, or a results.md has no provenance line

What it reads (each study's tool wrote these; nothing here is transcribed by hand):
- Omniglot: the grids' results.json (rows with the grid's verdicts, claims, Kendall's tau) and,
  for the rows beyond the paper, the CPU presets' summary.json / evaluation.json (Lake's 400
  trials) in the preset folders.
- Sampling: the grid's results.json (one entry per cell and seed, the study's numbers beside it).
- LMNN: the Table 1 runs' results.json (cells with their verdicts).
- Pair selection: results.json (mean and sd over folds per evaluation) and the paper's Table 2
  MNIST rows as experiments/pair_selection/report.cpp holds them (paper_table_mnist()).

Where a study's report counted the cells itself (Omniglot, LMNN) its verdicts are used; for
sampling and pair selection they are recomputed here with the one rule of
experiments/common/reproduction.h (the test checks the sampling count against the count its
results.md printed).
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "experiments", "results")
PAGE = os.path.join(RESULTS, "README.md")

PEOPLE, BPL = 95.5, 96.7  # Lake et al. 2015: people's and Bayesian program learning's one-shot accuracy

# The primary runs: the folder each study's verdict is read from (the others are listed below).
OMNIGLOT_GRIDS = [("2026-12-02-paper-length", "the paper's length (1.25 M triplets a row), conv4 at 28 x 28; in progress"),
                  ("2026-11-27-cpu-grid", "4.8 % of the paper's triplets, conv4 at 28 x 28")]
SAMPLING_GRID = "2026-11-26-cpu-grid"
LMNN_RUN = "2026-11-28-table1-protocol-100"
PRESET_FOLDERS = ["2026-11-26-cpu-presets", "2026-11-27-cpu-presets-avx2", "2026-11-28-cpu-presets-cosine",
                  "2026-11-28-cpu-demo-2ranks", "2026-11-29-cpu-hour-ensemble", "2026-11-29-cpu-4h"]


def load(path):
    with open(path) as f:
        return json.load(f)


def rel(path):
    return os.path.relpath(path, RESULTS)


def fmt(v, digits=2):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


class Count:
    """within / above / below (counted), and the cells not counted, as reproduction.h."""

    def __init__(self):
        self.within = self.above = self.below = self.other = 0

    def add(self, verdict):
        if verdict in ("within", "above", "below"):
            setattr(self, verdict, getattr(self, verdict) + 1)
        else:
            self.other += 1

    @property
    def compared(self):
        return self.within + self.above + self.below

    def cells(self):
        return [str(self.compared), str(self.within), str(self.above), str(self.below), str(self.other)]


def compare(paper, mean, sd, n, one_run_tolerance):
    """experiments/common/reproduction.cpp: compare_with_paper."""
    if n == 0 or mean is None or not math.isfinite(mean):
        return "not run"
    if paper is None or paper < 0:
        return "no paper number"
    tol = sd if n >= 2 and sd is not None and math.isfinite(sd) else one_run_tolerance
    if abs(mean - paper) <= tol:
        return "within"
    return "above" if mean > paper else "below"


def mean_sd(values):
    if not values:
        return None, None, 0
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None), len(values)


# ------------------------------------------------------------------ provenance --
def machine_words(m):
    if not m:
        return "not recorded"
    words = m.get("cpu", "?")
    if m.get("cpu_isa"):
        words += f" ({m['cpu_isa']})"
    if m.get("gpu"):
        words += f", {m['gpu']}"
    return words


def provenance_of(folder):
    """(commit, machine) of a results folder, from the files its runs wrote: results.json's own
    fields, else the first summary.json / evaluation.json provenance block below it."""
    rj = os.path.join(folder, "results.json")
    if os.path.exists(rj):
        d = load(rj)
        if isinstance(d, dict) and d.get("commit"):
            return d["commit"].split()[0][:7], d.get("cpu_model", "not recorded")
    for name in ("summary.json", "evaluation.json"):
        for f in sorted(glob.glob(os.path.join(folder, "**", name), recursive=True)):
            p = load(f).get("provenance")
            if isinstance(p, dict) and p.get("commit"):
                return p["commit"][:7], machine_words(p.get("machine"))
    return "not recorded", "not recorded"


# What counts as a provenance line in a results.md: the forms the studies' reports write.
PROVENANCE_LINE = re.compile(r"^(- (commit|Commit|built from commit)\b|## (Provenance|Runs: commit|Cells \(commit)|"
                             r"Provenance:)", re.M)


def results_without_provenance():
    missing = []
    for f in sorted(glob.glob(os.path.join(RESULTS, "**", "results.md"), recursive=True)):
        with open(f) as fh:
            if not PROVENANCE_LINE.search(fh.read()):
                missing.append(rel(f))
    return missing


def provenance_block(folder):
    """The "## Provenance" section for a results.md that has none: from the run's own
    summary.json when it wrote one, else "commit not recorded" and the commit that added the
    folder's files to the repository (git)."""
    f = os.path.join(folder, "summary.json")
    p = load(f).get("provenance") if os.path.exists(f) else None
    if isinstance(p, dict) and p.get("commit"):
        lines = [f"- commit: {p['commit'][:12]}{' (with uncommitted changes)' if p.get('dirty') else ''}, "
                 f"{p.get('build_type', '?')}, {p.get('compiler', '?')} (from summary.json)",
                 f"- machine: {machine_words(p.get('machine'))}, {p.get('machine', {}).get('cores', '?')} cores, "
                 f"{p.get('machine', {}).get('threads', '?')} threads; device {p.get('device', '?')}",
                 f"- command: `{p.get('command', '?')}`",
                 f"- started {p.get('start_utc', '?')}" +
                 (f", wall {p['wall_seconds']} s" if p.get("wall_seconds") is not None else "")]
    else:
        import subprocess
        added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%h %cs", "--", rel(folder)], cwd=RESULTS,
                               capture_output=True, text=True).stdout.split("\n")
        added = [a for a in added if a.strip()]
        lines = ["- commit not recorded (run before provenance existed)" +
                 (f"; its files were committed in {added[-1].split()[0]} ({added[-1].split()[1]})" if added else "")]
    return "\n## Provenance\n\n" + "\n".join(lines) + "\n"


def add_provenance():
    for r in results_without_provenance():
        path = os.path.join(RESULTS, r)
        with open(path) as fh:
            text = fh.read()
        with open(path, "w") as fh:
            fh.write(text.rstrip("\n") + "\n" + provenance_block(os.path.dirname(path)))
        print(f"scoreboard: provenance added to {r}")


# ------------------------------------------------------------------- Omniglot --
def omniglot_grid(name):
    d = load(os.path.join(RESULTS, "omniglot", name, "results.json"))
    groups = {}
    total = Count()
    for row in d["rows"].values():
        v = row["verdict"] if row["verdict"] != "–" else ("not run" if not row["n"] else "no paper number")
        groups.setdefault(row["group"], Count()).add(v)
        total.add(v)
    claims = {}
    for verdict in d["claims"].values():
        claims[verdict] = claims.get(verdict, 0) + 1
    return d, groups, total, claims


def claims_words(claims):
    order = ["holds", "within the spread", "fails", "not run"]
    return ", ".join(f"{claims[k]} {k}" for k in order if claims.get(k)) or "–"


def omniglot_presets():
    """Lake's 400 trials of the CPU presets: per folder and preset (single models from
    summary.json, ensembles from evaluation.json)."""
    rows = []
    for folder in PRESET_FOLDERS:
        base = os.path.join(RESULTS, "omniglot", folder)
        if not os.path.isdir(base):
            continue
        groups = {}
        for f in sorted(glob.glob(os.path.join(base, "*", "summary.json"))):
            s = load(f)
            if not (s.get("lake") or {}).get("accuracy_percent") is not None:
                continue
            preset = (s.get("config") or {}).get("preset", "?")
            preset = "cpu-demo" if preset == "auto" else preset
            groups.setdefault(preset, []).append((s["lake"]["accuracy_percent"], s.get("provenance")))
        for f in sorted(glob.glob(os.path.join(base, "*", "evaluation.json"))):
            e = load(f)
            # "ensemble": the checkpoints scored beside --evaluate's own
            members = len(e["ensemble"]) + 1 if isinstance(e.get("ensemble"), list) else None
            label = "cpu-4h" if "4h" in folder else "cpu-hour" if "hour" in folder else "?"
            label += " ensemble" + (f" of {members}" if members else "")
            groups.setdefault(label, []).append((e["lake"]["accuracy_percent"], e.get("provenance")))
        for label, runs in groups.items():
            m, sd, n = mean_sd([a for a, _ in runs])
            prov = next((p for _, p in runs if isinstance(p, dict) and p.get("commit")), None)
            commit = prov["commit"][:7] if prov else "not recorded"
            rows.append((label, folder, m, sd, n, commit, machine_words(prov.get("machine")) if prov else "not recorded"))
    return rows


# ------------------------------------------------------------------- sampling --
SAMPLING_COLUMNS = [("study_acc_test10", "Test10"), ("study_acc_test9", "Test9"), ("study_acc_train", "Train")]


def sampling_cells(name):
    """(dataset, strategy, column) -> (ours mean, sd, n, paper, verdict), as grid_report.cpp."""
    d = load(os.path.join(RESULTS, "sampling", name, "results.json"))
    by = {}
    for c in d:
        by.setdefault((c["dataset"], c["strategy"]), []).append(c)
    out = {}
    for (ds, strat), cells in sorted(by.items()):
        for key, col in SAMPLING_COLUMNS:
            m, sd, n = mean_sd([c["sampling"][key] for c in cells if c["sampling"].get(key) is not None])
            paper = cells[0]["paper"][key]
            # cannot_fail() of grid_report.cpp: the offline pairs' and the semi-hard miner's test
            # accuracies are fixed by the test set's size or 100 % by construction.
            degenerate = col != "Train" and strat in ("random-offline-pair", "semi-hard-negative-online-triplet")
            v = "degenerate" if degenerate and n else compare(paper, m, sd, n, 1.0)
            out[(ds, strat, col)] = (m, sd, n, paper, v)
    return out


# --------------------------------------------------------------------- LMNN --
LMNN_VERDICT = {"reproduced": "within", "paper below": "above", "paper above": "below"}


def lmnn_cells(name):
    d = load(os.path.join(RESULTS, "lmnn", name, "results.json"))
    return d, [(c["dataset"], "hierarchical" if c["hierarchical"] else "flat", c["mining"], c["accuracy_mean"],
                c["accuracy_sd"], c["paper_accuracy"], LMNN_VERDICT.get(c["verdict"], c["verdict"])) for c in d["cells"]]


# ------------------------------------------------------------- pair selection --
def pair_selection_paper():
    """The paper's Table 2 MNIST rows as the study's code holds them (report.cpp)."""
    src = open(os.path.join(ROOT, "experiments", "pair_selection", "report.cpp")).read()
    block = src[src.index("paper_table_mnist()"):]
    block = block[:block.index("return rows;")]
    rows = {}
    for epoch, values in re.findall(r"\{(\d+), \{([0-9., ]+)\}", block):
        rows[int(epoch)] = [float(v) for v in values.split(",")]
    return rows


def pair_selection_cells():
    d = load(os.path.join(RESULTS, "pair_selection", "results.json"))
    paper = pair_selection_paper()
    folds = int(d["config"].get("folds", 0))
    cells = []
    for epoch, values in sorted(paper.items()):
        for i, m in enumerate(d["methods"]):
            k = m["epochs"].index(epoch) if epoch in m["epochs"] else None
            mean = m["mean"][k] if k is not None else None
            sd = m["sd"][k] if k is not None else None
            cells.append((epoch, m["method"], mean, sd, values[i], compare(values[i], mean, sd, folds, 1.0)))
    return d, cells


# ------------------------------------------------------------------- the page --
def link(path, text=None):
    return f"[{text or path}]({path})"


def is_number(text):
    return re.fullmatch(r"[-+]?[0-9.]+( ± [0-9.]+)?|–|", str(text)) is not None


def table(header, rows):
    """A markdown table: numeric columns right-aligned, text left."""
    numeric = [all(is_number(r[i]) for r in rows) for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def at_a_glance(om, samp, lmnn, ps):
    rows = []
    for name, what, (d, groups, total, claims) in om:
        t1 = d["rows"].get("t1-global", {})
        head = (f"global loss: validation {fmt(t1.get('ours_val_mean'))} % (paper {fmt(t1.get('paper_val'))}), "
                f"Lake {fmt(t1.get('lake_mean'))} %; claims: {claims_words(claims)}")
        c, m = provenance_of(os.path.join(RESULTS, "omniglot", name))
        rows.append(["Omniglot (G81): Tables 1-2 and the ablations", link(f"omniglot/{name}/results.md", name) +
                     f" ({what})", *total.cells(), head, c, m])
    count = Count()
    for v in samp.values():
        count.add(v[4])
    c, m = provenance_of(os.path.join(RESULTS, "sampling", SAMPLING_GRID))
    rows.append(["Sampling (Srivastava & Breuer): Table 2", link(f"sampling/{SAMPLING_GRID}/results.md", SAMPLING_GRID) +
                 " (3 seeds, CPU)", *count.cells(), "the study's accuracies on KMNIST, MNIST, Fashion-MNIST", c, m])
    d, cells = lmnn
    count = Count()
    for cell in cells:
        count.add(cell[6])
    rows.append(["LMNN (Poorheravi et al.): Table 1", link(f"lmnn/{LMNN_RUN}/results.md", LMNN_RUN) + " (10 seeds)",
                 *count.cells(), "k-NN accuracy on Iris, ORL, MNIST", d.get("commit", "?").split()[0][:7],
                 d.get("cpu_model", "not recorded")])
    d, cells = ps
    count = Count()
    for cell in cells:
        count.add(cell[5])
    by = {(e, meth): mean for e, meth, mean, _, _, _ in cells}
    paper = pair_selection_paper()
    # The run the front page shows (tools/pair_selection_front_page.py records it), else the
    # settled reading's rerun with provenance.
    fp = os.path.join(RESULTS, "pair_selection", "front_page.json")
    run = load(fp)["run"] if os.path.exists(fp) else "2026-11-28-protocol-provenance"
    c, m = provenance_of(os.path.join(RESULTS, "pair_selection", run))
    rows.append(["Pair selection (Martin et al.): Table 2, MNIST", link("pair_selection/results.md", "results.md") +
                 f" ({d['config'].get('folds')} folds, {reading_of(d['config'])})", *count.cells(),
                 f"DynEE at 100 epochs {fmt(by.get((100, 'DynEE')))} % (paper {fmt(paper[100][4])})",
                 c + f" (`{run}/`)", m])
    return table(["study", "primary run", "compared", "within", "above", "below", "not counted", "headline",
                  "commit", "machine"], rows)


def counts_table(keys, verdicts):
    """One row per key (in first-seen order) counting its (key, verdict) pairs."""
    by = {}
    for key, v in verdicts:
        by.setdefault(key, Count()).add(v)
    return table([*keys, "compared", "within", "above", "below", "not counted"], [[*k, *c.cells()] for k, c in by.items()])


def omniglot_section(om):
    out = ["## Omniglot: triplet vs siamese (G81)\n",
           "Each row of the paper's Tables 1-2 and of its ablation tables (Figures 3-7) is a cell; a row that "
           "another row's runs answer (the default model is Table 1's Kumar row) is counted in each table it "
           "appears in, as the grid's own report does. Claims: the paper's 12 qualitative claims as the grid "
           "judges them.\n"]
    for name, what, (d, groups, total, claims) in om:
        out.append(f"### {link(f'omniglot/{name}/results.md', name)}: {what}\n")
        rows = [[g, *c.cells(), fmt(d["kendall_tau"].get(g))] for g, c in groups.items()]
        rows.append(["all", *total.cells(), ""])
        out.append(table(["table", "compared", "within", "above", "below", "not counted", "Kendall's tau"], rows))
        out.append(f"Claims: {claims_words(claims)}.\n")
    return "\n".join(out)


def presets_section(rows):
    out = ["## Beyond the papers: Omniglot CPU presets on Lake's 400 one-shot trials\n",
           f"Not in any paper: our CPU presets (conv4 at 28 x 28, hours on 2 cores) held against people's "
           f"{PEOPLE} % and Bayesian program learning's {BPL} % (Lake et al. 2015). Mean ± sd over the runs "
           "of the folder (each run scored once on the trials).\n"]
    body = []
    for label, folder, m, sd, n, c, mach in rows:
        body.append([label, link(f"omniglot/{folder}/results.md", folder) if os.path.exists(
            os.path.join(RESULTS, "omniglot", folder, "results.md")) else link(f"omniglot/{folder}/README.md", folder),
            str(n), f"{fmt(m)}" + (f" ± {fmt(sd)}" if sd is not None else ""),
            f"{m - PEOPLE:+.2f}", f"{m - BPL:+.2f}", c, mach])
    out.append(table(["preset", "folder", "runs", "Lake %", "vs people", "vs BPL", "commit", "machine"], body))
    return "\n".join(out)


def sampling_section(cells):
    out = ["## Sampling (Srivastava & Breuer): Table 2\n",
           f"From {link(f'sampling/{SAMPLING_GRID}/results.md', SAMPLING_GRID)}: the study's accuracy as its code "
           "computes it, ours (mean over seeds) against the study's; within = the study's value within our mean "
           "± sd (± 1 point with one seed); degenerate cells cannot fail and are not counted.\n"]
    out.append(counts_table(["data set", "column"], sorted(((ds, col), v[4]) for (ds, _, col), v in cells.items())))
    return "\n".join(out)


def lmnn_section(lmnn):
    d, cells = lmnn
    out = ["## LMNN with triplet mining (Poorheravi et al.): Table 1\n",
           f"From {link(f'lmnn/{LMNN_RUN}/results.md', LMNN_RUN)}: k-NN test accuracy, 10 seeds; within = the "
           "paper's value within our mean ± sd (widened by the paper's rounding); cells the paper gives no number "
           "for are not counted.\n"]
    out.append(counts_table(["data set", "approach"], [((ds, ap), v) for ds, ap, *_rest, v in cells]))
    return "\n".join(out)


def reading_of(cfg):
    """Which reading of the protocol a pair_selection run used (its config)."""
    opt = cfg.get("optimizer", "sgd")
    if opt == "sgd" and float(cfg.get("lr", 0)) == 1e-3:
        return f"the settled reading: SGD, lr {cfg.get('lr')}"
    name = {"sgd": "SGD", "rmsprop": "RMSprop", "adam": "Adam"}.get(opt, opt)
    return f"the reading fitted on a validation split: {name}, lr {cfg.get('lr')}"


def pair_selection_section(ps):
    d, cells = ps
    out = ["## Pair selection (Martin et al.): Table 2, MNIST rows\n",
           f"From {link('pair_selection/results.md', 'results.md')} ({reading_of(d['config'])}, "
           f"{d['config'].get('folds')} folds): ours mean ± sd over folds (paper), "
           "within = the paper's value within our mean ± sd.\n"]
    methods = [m["method"] for m in d["methods"]]
    by = {(e, m): (mean, sd, p, v) for e, m, mean, sd, p, v in cells}
    rows = []
    for epoch in sorted({e for e, *_ in cells}):
        row = [str(epoch)]
        for m in methods:
            mean, sd, p, v = by[(epoch, m)]
            row.append(f"{fmt(mean)} ± {fmt(sd)} ({fmt(p)}) {v}")
        rows.append(row)
    out.append(table(["epoch", *methods], rows))
    return "\n".join(out)


def folders_section():
    out = ["## Every results folder\n", "Commit and machine as the folder's own files record them (results.json, "
           "a run's summary.json or evaluation.json); \"not recorded\": the run predates provenance (its "
           "results.md says so).\n"]
    rows = []
    for study in sorted(os.listdir(RESULTS)):
        sdir = os.path.join(RESULTS, study)
        if not os.path.isdir(sdir):
            continue
        for folder in sorted(os.listdir(sdir)):
            fdir = os.path.join(sdir, folder)
            if not os.path.isdir(fdir):
                continue
            page = next((p for p in ("results.md", "README.md", "report.md") if os.path.exists(os.path.join(fdir, p))),
                        None)
            c, m = provenance_of(fdir)
            rows.append([study, link(f"{study}/{folder}/{page}", folder) if page else folder, c, m])
    out.append(table(["study", "folder", "commit", "machine"], rows))
    return "\n".join(out)


def page():
    om = [(name, what, omniglot_grid(name)) for name, what in OMNIGLOT_GRIDS]
    samp = sampling_cells(SAMPLING_GRID)
    lmnn = lmnn_cells(LMNN_RUN)
    ps = pair_selection_cells()
    parts = [
        "# Scoreboard: what reproduces\n",
        "Generated by `python3 tools/scoreboard.py` from the studies' own result files; do not edit by hand "
        "(`ctest -R tools.scoreboard` regenerates it and fails when this page differs). Each study's protocol and "
        "its settled ambiguities: [docs/study-protocols.md](../../docs/study-protocols.md).\n",
        "How a cell is counted, in every study (`experiments/common/reproduction.h`): **within** when the paper's "
        "value lies within our mean ± sd over seeds or folds (± a stated tolerance for a single run: 1 point); "
        "otherwise **above** or **below** (ours higher or lower) — each a difference to explain, counted both "
        "ways. Not counted: cells that cannot fail (degenerate), cells the paper gives no number for, cells not "
        "run yet.\n",
        "## At a glance\n",
        at_a_glance(om, samp, lmnn, ps),
        omniglot_section(om),
        presets_section(omniglot_presets()),
        sampling_section(samp),
        lmnn_section(lmnn),
        pair_selection_section(ps),
        folders_section(),
    ]
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed page; write nothing")
    ap.add_argument("--out", default=PAGE, help="where to write the page (default: experiments/results/README.md)")
    ap.add_argument("--page", default=PAGE, help="--check: the page to compare (default: the committed one)")
    ap.add_argument("--add-provenance", action="store_true",
                    help="append a provenance section to every results.md that has none (from its summary.json, "
                         "else 'commit not recorded'), then stop")
    args = ap.parse_args()
    if args.add_provenance:
        add_provenance()
        return 0
    text = page()
    if args.check:
        ok = True
        committed = open(args.page).read() if os.path.exists(args.page) else ""
        if committed != text:
            print(f"scoreboard: {os.path.relpath(args.page)} differs from a fresh one: run `python3 tools/scoreboard.py` and commit it",
                  file=sys.stderr)
            ok = False
        missing = results_without_provenance()
        if missing:
            print("scoreboard: results.md without a provenance line (commit, or 'commit not recorded'): " +
                  ", ".join(missing), file=sys.stderr)
            ok = False
        return 0 if ok else 1
    with open(args.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    print(f"scoreboard: wrote {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
