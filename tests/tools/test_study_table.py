#!/usr/bin/env python3
"""ctest: tools/study_table.py on made-up run folders (a finished run, a run stopped early
and scored from its best checkpoint, a second seed), checked against values computed here."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tool = os.path.join(root, "tools", "study_table.py")


def make_run(base, name, vals, planned, lake=None, eval_lake=None):
    d = os.path.join(base, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.txt"), "w") as f:
        f.write(f"epochs = {planned}\nloss = global\n")
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for i, v in enumerate(vals):
            f.write(json.dumps({"epoch": i + 1, "val_one_shot_percent": v, "images_per_second": 100 + i,
                                "train_seconds": 30}) + "\n")
    if lake is not None:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"lake": {"accuracy_percent": lake, "trials": 400}}, f)
    if eval_lake is not None:
        os.makedirs(os.path.join(d, "eval-best"))
        with open(os.path.join(d, "eval-best", "evaluation.json"), "w") as f:
            json.dump({"lake": {"accuracy_percent": eval_lake, "trials": 400}}, f)
    return d


with tempfile.TemporaryDirectory() as base:
    a = make_run(base, "global-s1", [40.0, 71.5, 65.0], 3, lake=70.25)
    b = make_run(base, "global-s2", [30.0, 50.0], 50, eval_lake=55.5)
    out = subprocess.run([sys.executable, tool, a, b], check=True, capture_output=True, text=True).stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| global-s")}
    fails = []
    def expect(cond, what):
        if not cond:
            fails.append(what)
    expect(rows["global-s1"][0] == "3/3", "epochs done/planned of the finished run")
    expect(rows["global-s1"][1] == "71.50 (2)", "best validation accuracy and its epoch")
    expect(rows["global-s1"][2] == "65.00", "last validation accuracy")
    expect(rows["global-s1"][3] == "70.25", "Lake's accuracy from summary.json")
    expect(rows["global-s2"][0] == "2/50", "epochs of the run stopped early")
    expect(rows["global-s2"][3].startswith("55.50 (partial"), "partial Lake's accuracy from eval-best")
    expect(rows["global-s1"][4] == "101", "mean images/s")
    sd = statistics.stdev([70.25, 55.5])
    expect(f"| global | 2 | {statistics.mean([71.5, 50.0]):.2f} ± {statistics.stdev([71.5, 50.0]):.2f}" in out,
           "seed summary of the best validation accuracy")
    expect(f"{statistics.mean([70.25, 55.5]):.2f} ± {sd:.2f}" in out, "seed summary of Lake's accuracy")

    # --results on two ensembles (--members): member rows named by their path in natural order,
    # the members' Lake mean, the ensemble's score and the mean over the seeds.
    res = os.path.join(base, "results")
    ens = {"hour-seed1": ([90.0, 92.0, 94.0], 96.0), "hour-seed2": ([91.0, 93.0, 89.0], 95.0)}
    for name, (lakes, e) in ens.items():
        d = os.path.join(res, name)
        for k, v in zip([1, 2, 10], lakes):
            make_run(d, f"member-{k}", [80.0], 1, lake=v)
        with open(os.path.join(d, "members.json"), "w") as f:
            json.dump({"members": 10, "seed": 1, "finished": [1, 2, 10]}, f)
        with open(os.path.join(d, "evaluation.json"), "w") as f:
            json.dump({"lake": {"accuracy_percent": e, "accuracy_ci95_percent": [93.0, 97.5], "trials": 400}}, f)
    subprocess.run([sys.executable, tool, "--results", res], check=True, capture_output=True, text=True)
    md = open(os.path.join(res, "results.md")).read()
    expect(md.index("| hour-seed1/member-2 |") < md.index("| hour-seed1/member-10 |"), "natural order of members")
    expect(f"| hour-seed1 | 3/10 | {statistics.mean([90.0, 92.0, 94.0]):.2f} (90.00-94.00) | **96.00** (93.0-97.5) |"
           in md, "an ensemble's row")
    expect(f"**{statistics.mean([96.0, 95.0]):.2f} ± {statistics.stdev([96.0, 95.0]):.2f}**" in md,
           "the ensembles' mean over seeds")
    if fails:
        print(out)
        print("FAILED:", "; ".join(fails))
        sys.exit(1)
    print("study_table: all checks passed")
