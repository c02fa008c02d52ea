#!/usr/bin/env python3
"""ctest tools.scoreboard: experiments/results/README.md is what tools/scoreboard.py writes
from the studies' files today, every results.md has a provenance line, and the tool's counts
agree with the counts the studies' own reports printed."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tool = os.path.join(root, "tools", "scoreboard.py")
spec = importlib.util.spec_from_file_location("scoreboard", tool)
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)


# 1. The committed page is a fresh one, and every results.md names its provenance.
r = run("--check")
check(r.returncode == 0, "scoreboard --check on the repository: " + r.stderr.strip())

# 2. A page that differs by one number fails the check.
with tempfile.TemporaryDirectory() as tmp:
    page = open(sb.PAGE).read()
    m = re.search(r"\| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", page)
    check(m is not None, "the page has count columns")
    tampered = os.path.join(tmp, "README.md")
    with open(tampered, "w") as f:
        f.write(page[:m.start(1)] + str(int(m.group(1)) + 1) + page[m.end(1):])
    r = run("--check", "--page", tampered)
    check(r.returncode == 1 and "differs" in r.stderr, "a tampered page must fail --check")

# 3. The rule of reproduction.h.
check(sb.compare(50.0, 51.0, 1.5, 3, 1.0) == "within", "within the sd")
check(sb.compare(50.0, 52.0, 1.5, 3, 1.0) == "above", "above the sd")
check(sb.compare(50.0, 48.9, None, 1, 1.0) == "below", "one run: the tolerance")
check(sb.compare(50.0, 49.0, None, 1, 1.0) == "within", "one run: at the tolerance")
check(sb.compare(None, 49.0, 1.0, 3, 1.0) == "no paper number", "no paper number")
check(sb.compare(50.0, None, None, 0, 1.0) == "not run", "not run")

# 4. The counts agree with the studies' own reports.
samp = sb.sampling_cells(sb.SAMPLING_GRID)
count = sb.Count()
degenerate = 0
for v in samp.values():
    count.add(v[4])
    degenerate += v[4] == "degenerate"
md = open(os.path.join(sb.RESULTS, "sampling", sb.SAMPLING_GRID, "results.md")).read()
m = re.search(r"(\d+) within, (\d+) above, (\d+) below of (\d+) compared; (\d+) degenerate", md)
check(m is not None and [int(g) for g in m.groups()] == [count.within, count.above, count.below, count.compared,
                                                          degenerate],
      f"sampling counts {count.cells()} (degenerate {degenerate}) vs its results.md: {m and m.group(0)}")
for name, _ in sb.OMNIGLOT_GRIDS:
    d, groups, total, claims = sb.omniglot_grid(name)
    check({"within": total.within, "above": total.above, "below": total.below} == d["verdicts"],
          f"omniglot {name}: {total.cells()} vs the grid's verdicts {d['verdicts']}")
d, cells = sb.lmnn_cells(sb.LMNN_RUN)
md = open(os.path.join(sb.RESULTS, "lmnn", sb.LMNN_RUN, "results.md")).read()
rows = re.findall(r"^\| \w+ \| (?:non-hierarchical|hierarchical) \| \d+ \| \d+ \| (\d+) \| (\d+) \| (\d+) \|", md, re.M)
check(len(rows) == 6, f"lmnn results.md has 6 data-set rows (found {len(rows)})")
within, above_paper, below_paper = (sum(int(r[i]) for r in rows) for i in range(3))
count = sb.Count()
for c in cells:
    count.add(c[6])
check((count.within, count.below, count.above) == (within, above_paper, below_paper),
      f"lmnn counts {count.cells()} vs its results.md ({within} reproduced, {above_paper} paper above, "
      f"{below_paper} paper below)")
paper = sb.pair_selection_paper()
check(sorted(paper) == [25, 50, 75, 100] and paper[100][4] == 90.05, f"the paper's Table 2 from report.cpp: {paper}")

# 5. A results.md without a provenance line is found; with one it is not.
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "study", "run"))
    with open(os.path.join(tmp, "study", "run", "results.md"), "w") as f:
        f.write("# A run\n\n| a | b |\n")
    saved = sb.RESULTS
    sb.RESULTS = tmp
    check(sb.results_without_provenance() == ["study/run/results.md"], "a results.md without provenance is found")
    with open(os.path.join(tmp, "study", "run", "results.md"), "a") as f:
        f.write("\n## Provenance\n\n- commit not recorded (run before provenance existed)\n")
    check(sb.results_without_provenance() == [], "a results.md with a provenance section passes")
    sb.RESULTS = saved

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
