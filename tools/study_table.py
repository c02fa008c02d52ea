#!/usr/bin/env python3
"""Markdown table of Omniglot study runs (experiments/omniglot_triplet|siamese run folders).

  python3 tools/study_table.py RUN_DIR [RUN_DIR ...]

One row per run: epochs done (of those planned), best validation one-shot accuracy and its
epoch, the last epoch's, Lake's 400 trials (summary.json of a finished run, or
eval-best/evaluation.json of a run stopped early: marked "partial"), mean training
images/s and training time. Then, for runs whose folder names differ only in a trailing
-sN (seeds), the mean and the sample standard deviation of Lake's accuracy and of the best
validation accuracy. Standard library only.
"""
import json
import os
import re
import statistics
import sys


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_config(run):
    cfg = {}
    try:
        with open(os.path.join(run, "config.txt")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.split("=", 1)
                    cfg[k.strip()] = v.strip()
    except OSError:
        pass
    return cfg


def describe(run):
    epochs = []
    try:
        with open(os.path.join(run, "metrics.jsonl")) as f:
            epochs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        pass
    cfg = read_config(run)
    summary = read_json(os.path.join(run, "summary.json"))
    row = {"name": os.path.basename(os.path.normpath(run)), "done": len(epochs),
           "planned": cfg.get("epochs", "?"), "partial": False, "lake": None}
    if epochs:
        best = max(epochs, key=lambda e: e.get("val_one_shot_percent", -1))
        row["best"] = best.get("val_one_shot_percent")
        row["best_epoch"] = best.get("epoch")
        row["last"] = epochs[-1].get("val_one_shot_percent")
        row["img_s"] = statistics.mean(e.get("images_per_second", 0) for e in epochs)
        row["train_s"] = sum(e.get("train_seconds", 0) for e in epochs)
    if summary and "lake" in summary:
        row["lake"] = summary["lake"]["accuracy_percent"]
    else:
        ev = read_json(os.path.join(run, "eval-best", "evaluation.json"))
        if ev and "lake" in ev:
            row["lake"], row["partial"] = ev["lake"]["accuracy_percent"], True
    return row


def fmt(v, nd=2):
    return "–" if v is None else f"{v:.{nd}f}"


def main(runs):
    rows = [describe(r) for r in runs if os.path.isdir(r)]
    print("| run | epochs | best val one-shot % (epoch) | last val one-shot % | Lake's 400 trials % "
          "| train img/s | train time |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        lake = fmt(r["lake"]) + (" (partial: best checkpoint so far)" if r["partial"] else "")
        best = f"{fmt(r.get('best'))} ({r.get('best_epoch', '–')})"
        t = r.get("train_s")
        print(f"| {r['name']} | {r['done']}/{r['planned']} | {best} | {fmt(r.get('last'))} | {lake} "
              f"| {fmt(r.get('img_s'), 0)} | {'–' if t is None else f'{t / 60:.1f} min'} |")
    groups = {}
    for r in rows:
        m = re.match(r"(.*)-s\d+$", r["name"])
        if m:
            groups.setdefault(m.group(1), []).append(r)
    lines = []
    for g, rs in sorted(groups.items()):
        if len(rs) < 2:
            continue
        def stat(key):
            v = [r[key] for r in rs if r.get(key) is not None]
            if len(v) < 2:
                return "–"
            return f"{statistics.mean(v):.2f} ± {statistics.stdev(v):.2f} (min {min(v):.2f}, max {max(v):.2f})"
        lines.append(f"| {g} | {len(rs)} | {stat('best')} | {stat('lake')} |")
    if lines:
        print()
        print("| runs | seeds | best val one-shot %: mean ± sd | Lake's 400 trials %: mean ± sd |")
        print("|---|---|---|---|")
        print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    main(sys.argv[1:])
