#!/usr/bin/env python3
"""PyTorch reference for bench/bench_losses.cpp: the same computations from torch ops.

  schroff   mean(relu(||a-p||^2 - ||a-n||^2 + m)), forward + backward to a, p, n
  global    Var(dp) + Var(dn) + l * relu(mean(dp) - mean(dn) + t) (biased var), fwd + bwd
  bh_miner  torch.cdist + batch-hard mining (hardest positive / negative per anchor)
B in {150, 1024}, D in {4096, 128}, float32, torch.set_num_threads(2).
Prints JSON: {"name/B/D": microseconds}.   python3 losses_torch.py [cpu|cuda]
"""
import json
import sys
import time

import torch

torch.set_num_threads(2)
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
if dev == "cuda":  # FP32 comparison: no TF32 in cdist's matmul
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def timeit(f, reps=None):
    f()
    if dev == "cuda":
        torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while True:
        f()
        n += 1
        if dev == "cuda":
            torch.cuda.synchronize()
        el = time.perf_counter() - t0
        if el > 0.5 and n >= 3:
            return el / n * 1e6


res = {}
for B in (150, 1024):
    for D in (4096, 128):
        g = torch.Generator().manual_seed(0)
        a, p, n = (torch.randn(B, D, generator=g).to(dev).requires_grad_() for _ in range(3))

        def schroff():
            dp = ((a - p) ** 2).sum(1)
            dn = ((a - n) ** 2).sum(1)
            loss = torch.relu(dp - dn + 0.2 * D).mean()
            torch.autograd.grad(loss, (a, p, n))

        def glob():
            dp = ((a - p) ** 2).sum(1)
            dn = ((a - n) ** 2).sum(1)
            loss = dp.var(unbiased=False) + dn.var(unbiased=False) + 0.8 * torch.relu(
                dp.mean() - dn.mean() + 0.4)
            torch.autograd.grad(loss, (a, p, n))

        e = a.detach()
        lab = (torch.arange(B) % 10).to(dev)

        def miner():
            d = torch.cdist(e, e)
            same = lab[:, None] == lab[None, :]
            eye = torch.eye(B, dtype=torch.bool, device=dev)
            hp = torch.where(same & ~eye, d, torch.full_like(d, -1)).argmax(1)
            hn = torch.where(~same, d, torch.full_like(d, float("inf"))).argmin(1)
            return torch.stack([torch.arange(B, device=dev), hp, hn], 1)

        res[f"schroff/{B}/{D}"] = timeit(schroff)
        res[f"global/{B}/{D}"] = timeit(glob)
        res[f"bh_miner/{B}/{D}"] = timeit(miner)
print(json.dumps({"device": dev, "torch": torch.__version__, "threads": 2, "us": res}))
