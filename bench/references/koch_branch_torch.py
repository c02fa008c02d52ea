#!/usr/bin/env python3
"""PyTorch CPU reference for bench_conv's BM_KochBranchCpu.

Times the whole Koch et al. (2015) siamese branch, forward + backward, at batch 12
on 2 CPU threads, float32:
  1x105x105 -> conv 64@10x10 -> ReLU -> maxpool 2 -> conv 128@7x7 -> ReLU -> maxpool 2
  -> conv 128@4x4 -> ReLU -> maxpool 2 -> conv 256@4x4 -> ReLU -> flatten 9216
  -> linear 4096 -> sigmoid;  backward with a ones gradient (as the C++ benchmark).
Prints one JSON object (images/s, per-step milliseconds). Uses Debian's python3-torch:
  /usr/bin/python3 bench/references/koch_branch_torch.py [--batch 12 --threads 2 --seconds 10]
"""
import argparse
import json
import platform
import time

import torch
import torch.nn as nn


def branch():
    return nn.Sequential(
        nn.Conv2d(1, 64, 10), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 7), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 4), nn.ReLU(), nn.Flatten(),
        nn.Linear(9216, 4096), nn.Sigmoid())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0, help="minimum timed duration")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = branch()
    x = torch.rand(args.batch, 1, 105, 105)

    def step():
        net.zero_grad(set_to_none=False)
        out = net(x)
        out.backward(torch.ones_like(out))

    for _ in range(2):  # warm-up
        step()
    times = []
    t_end = time.perf_counter() + args.seconds
    while time.perf_counter() < t_end or len(times) < 5:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "benchmark": "koch_branch_fwd_bwd_cpu",
        "framework": "pytorch " + torch.__version__,
        "batch": args.batch,
        "threads": torch.get_num_threads(),
        "iterations": len(times),
        "median_ms": round(median * 1e3, 2),
        "min_ms": round(times[0] * 1e3, 2),
        "images_per_s": round(args.batch / median, 2),
        "machine": platform.processor() or platform.machine(),
    }))


if __name__ == "__main__":
    main()
