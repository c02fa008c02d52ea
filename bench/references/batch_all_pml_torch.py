#!/usr/bin/env python3
"""Reference for bench_batch_all: pytorch-metric-learning's batch-all triplet
loss, written out in PyTorch as pml computes it (pml is not packaged in Debian):
TripletMarginLoss(margin=0.05, triplets_per_anchor="all") with its
get_all_triplets_indices (a B x B x B mask, then torch.where), LpDistance(p=2,
normalize_embeddings=False) via torch.cdist, and AvgNonZeroReducer.
B = 1024 embeddings of 128 dimensions, 64 classes x 16. One iteration =
distances, loss, backward. Prints one JSON object.
  /usr/bin/python3 bench/references/batch_all_pml_torch.py --threads 2
"""
import argparse
import json
import os
import platform
import time

import torch


def get_all_triplets_indices(labels):
    matches = (labels.unsqueeze(1) == labels.unsqueeze(0)).byte()
    diffs = matches ^ 1
    matches.fill_diagonal_(0)
    triplets = matches.unsqueeze(2) * diffs.unsqueeze(1)
    return torch.where(triplets)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 128, generator=g)
    labels = torch.arange(1024) // 16

    def step():
        e = x.clone().requires_grad_(True)
        a, p, n = get_all_triplets_indices(labels)
        mat = torch.cdist(e, e, p=2)
        violation = mat[a, p] - mat[a, n] + 0.05
        losses = torch.relu(violation)
        nz = losses[losses > 0]
        loss = nz.mean() if len(nz) else losses.sum() * 0
        loss.backward()
        return float(loss), len(a)

    value, trips = step()
    times = []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    mean = sum(times) / len(times)
    print(json.dumps({
        "benchmark": "batch_all_triplet_pml_1024x128_cpu",
        "framework": "pytorch " + torch.__version__ + " (pml's computation)",
        "device": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "triplets": trips,
        "loss": value,
        "iterations": len(times),
        "mean_ms": round(mean * 1e3, 2),
        "min_ms": round(min(times) * 1e3, 2),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"),
    }))


if __name__ == "__main__":
    main()
