#!/usr/bin/env python3
"""Compares two metrics.jsonl files field by field, ignoring timings.

    tools/compare_metrics.py BASELINE/metrics.jsonl NEW/metrics.jsonl

Keys containing "seconds" or ending in "per_second" are timings and skipped.
Every other field must be present in both lines and equal: numbers are compared
exactly as parsed (36 and 36.0 are the same number; metrics.jsonl writes 10
significant digits, so a changed computation shows). Exit status 0 when the
files agree, 1 with a list of differences otherwise.
"""
import json
import sys


def is_timing(key):
    return "seconds" in key or key.endswith("per_second")


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        a = [json.loads(l) for l in f if l.strip()]
    with open(argv[2]) as f:
        b = [json.loads(l) for l in f if l.strip()]
    diffs = []
    if len(a) != len(b):
        diffs.append(f"{len(a)} lines vs {len(b)} lines")
    compared = 0
    for i, (la, lb) in enumerate(zip(a, b)):
        keys = [k for k in la if not is_timing(k)] + [k for k in lb if not is_timing(k) and k not in la]
        for k in keys:
            if k not in la or k not in lb:
                diffs.append(f"line {i + 1}: '{k}' only in {'the second' if k not in la else 'the first'} file")
            elif la[k] != lb[k]:
                diffs.append(f"line {i + 1}: '{k}': {la[k]!r} vs {lb[k]!r}")
            else:
                compared += 1
    for d in diffs:
        print(d)
    print(f"{compared} non-timing values equal, {len(diffs)} differences "
          f"({len(a)} and {len(b)} lines)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
