#!/usr/bin/env python3
"""PyTorch reference for bench_sampling_step: one training step of the sampling
study's net (Bielski's EmbeddingNet with a 2-d embedding), as the study's code
trains it, with the tuple selection vectorised (the reference at its best: the
study's selectors loop in numpy on the host, which is slower).

Same steps as bench/bench_sampling_step.cpp, on fixed random 1x28x28 images:
  0  Random Offline Pair: 128 pairs (256 images), contrastive y D + (1-y) max(0, 1 - D)
  1  All Positive Online Pair: 9 x 25 = 225 images, all 2,700 positive pairs + 2,700
     random negative pairs (mined on squared distances), the same contrastive loss
  2  All Positive Online Triplet: 225 images, all 540,000 triplets (unordered
     anchor-positive pairs x negatives), max(0, d_ap - d_an + 1), weight decay 1e-4
Adam lr 1e-3; zero_grad (set to zero, as ours). Prints one JSON object per step kind.
  /usr/bin/python3 bench/references/sampling_train_torch.py --threads 2
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.nn as nn


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 32, 5), nn.PReLU(), nn.MaxPool2d(2, stride=2),
                                     nn.Conv2d(32, 64, 5), nn.PReLU(), nn.MaxPool2d(2, stride=2))
        self.fc = nn.Sequential(nn.Linear(64 * 4 * 4, 256), nn.PReLU(), nn.Linear(256, 256), nn.PReLU(),
                                nn.Linear(256, 2))

    def forward(self, x):
        return self.fc(self.convnet(x).view(x.size(0), -1))


def contrastive(d, y, m=1.0):
    return (y * d + (1 - y) * torch.relu(m - d)).mean()


def make_step(kind, net, opt, x, labels):
    same = (labels[:, None] == labels[None, :])
    iu = torch.triu_indices(len(labels), len(labels), 1)
    pos_mask = same[iu[0], iu[1]]
    pos = iu[:, pos_mask]
    neg = iu[:, ~pos_mask]
    # all triplets: unordered (a, p) pairs x every negative of a
    neg_of = [torch.nonzero(labels != labels[a]).flatten() for a in range(len(labels))]
    ta = pos[0].repeat_interleave(torch.tensor([len(neg_of[a]) for a in pos[0].tolist()]))
    tp = pos[1].repeat_interleave(torch.tensor([len(neg_of[a]) for a in pos[0].tolist()]))
    tn = torch.cat([neg_of[a] for a in pos[0].tolist()])
    g = torch.Generator().manual_seed(5)
    half = torch.arange(128)

    def step():
        e = net(x)
        if kind == 0:
            d = (e[half] - e[128 + half]).pow(2).sum(1).sqrt()
            loss = contrastive(d, (half % 2).float())
        elif kind == 1:
            with torch.no_grad():
                sel = torch.randperm(neg.shape[1], generator=g)[:pos.shape[1]]
            i = torch.cat([pos[0], neg[0, sel]])
            j = torch.cat([pos[1], neg[1, sel]])
            y = torch.cat([torch.ones(pos.shape[1]), torch.zeros(pos.shape[1])])
            loss = contrastive((e[i] - e[j]).pow(2).sum(1).sqrt(), y)
        else:
            dap = (e[ta] - e[tp]).pow(2).sum(1).sqrt()
            dan = (e[ta] - e[tn]).pow(2).sum(1).sqrt()
            loss = torch.relu(dap - dan + 1.0).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    names = ["random_offline_pair_128", "all_positive_online_pair_225", "all_positive_online_triplet_225"]
    for kind in range(3):
        torch.manual_seed(1)
        net = EmbeddingNet()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4 if kind == 2 else 0.0)
        n = 256 if kind == 0 else 225
        x = torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(11))
        labels = torch.arange(n) // 25
        step = make_step(kind, net, opt, x, labels)
        loss0 = float(step())
        assert torch.isfinite(torch.tensor(loss0)), "non-finite loss"
        for _ in range(3):
            step()
        times = []
        t_end = time.perf_counter() + args.seconds
        while time.perf_counter() < t_end or len(times) < 5:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        mean = sum(times) / len(times)
        print(json.dumps({
            "benchmark": "sampling_train_step_cpu_" + names[kind],
            "framework": "pytorch " + torch.__version__,
            "device": platform.processor() or platform.machine(),
            "images_per_iteration": n,
            "threads": torch.get_num_threads(),
            "iterations": len(times),
            "first_loss": loss0,
            "mean_ms": round(mean * 1e3, 3),
            "min_ms": round(min(times) * 1e3, 3),
            "images_per_s": round(n / mean, 2),
            "best_images_per_s": round(n / min(times), 2),
            "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"),
        }))


if __name__ == "__main__":
    main()
