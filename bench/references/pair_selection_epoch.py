#!/usr/bin/env python3
"""PyTorch reference for bench/bench_pair_selection.cpp: one training epoch of the
informed-pair-selection study's siamese MLP on the CPU.

Same epoch as the C++ benchmark:
  600 inputs of 784 values (MNIST-like: ~19 % non-zero, uniform in (0, 1]), 1,200 pairs
  (each input once with a genuine and once with an impostor partner), shuffled;
  batches of 16 pairs (75 steps); both members of a pair go through the shared branch as
  one batch of 32: Linear(784, 300) ReLU Dropout(0.2) Linear(300, 300) ReLU Dropout(0.2)
  Linear(300, 300) ReLU (Glorot-uniform weights, zero biases, as Keras);
  Hadsell's contrastive loss, mean over the batch, margin 1, Y = 1 impostor:
    (1 - Y) D^2 + Y max(0, 1 - D)^2, D = sqrt(max(|e1 - e2|^2, 1e-12));
  SGD lr 1e-3, momentum 0.8; zero_grad (set to zero).
Prints one JSON object: per-epoch times (median, min) and pairs per second.
  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    /usr/bin/python3 bench/references/pair_selection_epoch.py --threads 2
"""
import argparse
import json
import platform
import time

import torch
import torch.nn as nn


def branch():
    net = nn.Sequential(nn.Linear(784, 300), nn.ReLU(), nn.Dropout(0.2),
                        nn.Linear(300, 300), nn.ReLU(), nn.Dropout(0.2),
                        nn.Linear(300, 300), nn.ReLU())
    with torch.no_grad():
        for m in net:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                m.bias.zero_()
    return net


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads")
    ap.add_argument("--epochs", type=int, default=20, help="timed epochs (after 2 warm-up epochs)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(11)
    n, d, batch = 600, 784, 16
    u = torch.rand(n, d, generator=g)
    x = torch.where(torch.rand(n, d, generator=g) < 0.19, u, torch.zeros_like(u))
    y = torch.arange(n) % 10
    a_idx, b_idx, imp = [], [], []
    for i in range(n):
        same = torch.nonzero((y == y[i]) & (torch.arange(n) != i)).flatten()
        diff = torch.nonzero(y != y[i]).flatten()
        a_idx += [i, i]
        b_idx += [int(same[torch.randint(len(same), (1,), generator=g)]),
                  int(diff[torch.randint(len(diff), (1,), generator=g)])]
        imp += [0.0, 1.0]
    a_idx, b_idx, imp = torch.tensor(a_idx), torch.tensor(b_idx), torch.tensor(imp)
    P = len(imp)
    net = branch()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.8)

    def epoch():
        perm = torch.randperm(P, generator=g)
        total = 0.0
        for s in range(0, P, batch):
            idx = perm[s:s + batch]
            nb = len(idx)
            e = net(torch.cat([x[a_idx[idx]], x[b_idx[idx]]], 0))
            diff = e[:nb] - e[nb:]
            dist = torch.sqrt(torch.clamp((diff * diff).sum(1), min=1e-12))
            t = imp[idx]
            loss = ((1 - t) * dist * dist + t * torch.clamp(1.0 - dist, min=0.0) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
            total += float(loss) * nb
        return total / P

    w0 = net[0].weight.detach().clone()
    loss0 = epoch()
    assert loss0 == loss0 and abs(loss0) != float("inf"), "non-finite loss"
    assert not torch.equal(w0, net[0].weight.detach()), "the SGD step did not change the weights"
    epoch()  # warm-up
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        epoch()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "benchmark": "pair_selection_epoch_cpu",
        "framework": "pytorch " + torch.__version__,
        "device": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "pairs_per_epoch": P,
        "batch_pairs": batch,
        "epochs": len(times),
        "first_loss": loss0,
        "median_ms": round(median * 1e3, 3),
        "min_ms": round(times[0] * 1e3, 3),
        "pairs_per_s": round(P / median, 1),
        "best_pairs_per_s": round(P / times[0], 1),
    }))


if __name__ == "__main__":
    main()
