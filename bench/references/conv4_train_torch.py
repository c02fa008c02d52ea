#!/usr/bin/env python3
"""PyTorch reference for bench_conv4_step: one training iteration of the
Omniglot CPU presets (omniglot_triplet --preset cpu-demo / cpu-hour).

Same iteration as bench/bench_conv4_step.cpp:
  conv4 trunk on 1x28x28 inputs: 4 x [Conv2d(3x3, 64, padding 1), BatchNorm2d, ReLU,
  MaxPool2d(2)] -> flatten (64 features);
  a P x K batch of 32 x 4 = 128 fixed random images in [0, 1];
  the Multi-Similarity loss with its pair miner from ops, on the cosine similarity of
  L2-normalised embeddings (alpha 2, beta 50, base 0.5, epsilon 0.1: pml's defaults),
  mean over anchors;
  Adam lr 1e-3; zero_grad (set to zero, as ours).
Prints one JSON object.
  /usr/bin/python3 bench/references/conv4_train_torch.py --threads 2
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv4():
    layers = []
    for i in range(4):
        layers += [nn.Conv2d(1 if i == 0 else 64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.Flatten())


def multi_similarity(e, labels, alpha=2.0, beta=50.0, base=0.5, eps=0.1):
    e = F.normalize(e, dim=1)
    s = e @ e.t()
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos = same & ~eye
    neg = ~same
    sd = s.detach()
    min_pos = torch.where(pos, sd, torch.full_like(sd, float("inf"))).min(1, keepdim=True).values
    max_neg = torch.where(neg, sd, torch.full_like(sd, float("-inf"))).max(1, keepdim=True).values
    keep_neg = neg & (sd + eps > min_pos)
    keep_pos = pos & (sd - eps < max_neg)
    zero = torch.zeros(len(labels), 1)
    pos_x = torch.where(keep_pos, -alpha * (s - base), torch.full_like(s, float("-inf")))
    neg_x = torch.where(keep_neg, beta * (s - base), torch.full_like(s, float("-inf")))
    pos_l = torch.logsumexp(torch.cat([zero, pos_x], 1), 1) / alpha
    neg_l = torch.logsumexp(torch.cat([zero, neg_x], 1), 1) / beta
    return (pos_l + neg_l).mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    net = conv4()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(11)
    x = torch.rand(args.images, 1, 28, 28, generator=g)
    labels = torch.arange(args.images) // 4

    def step():
        loss = multi_similarity(net(x), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    loss0 = float(step())
    assert torch.isfinite(torch.tensor(loss0)), "non-finite loss"
    for _ in range(3):
        step()
    times, cpu_times = [], []
    t_end = time.perf_counter() + args.seconds
    while time.perf_counter() < t_end or len(times) < 5:
        c0, t0 = time.process_time(), time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    mean = sum(times) / len(times)
    print(json.dumps({
        "benchmark": "conv4_multi_similarity_train_step_cpu",
        "framework": "pytorch " + torch.__version__,
        "device": platform.processor() or platform.machine(),
        "images_per_iteration": args.images,
        "threads": torch.get_num_threads(),
        "iterations": len(times),
        "first_loss": loss0,
        "mean_ms": round(mean * 1e3, 3),
        "median_ms": round(sorted(times)[len(times) // 2] * 1e3, 3),
        "min_ms": round(min(times) * 1e3, 3),
        "images_per_s": round(args.images / mean, 2),
        "best_images_per_s": round(args.images / min(times), 2),
        "cpu_ms_per_step": round(1e3 * sum(cpu_times) / len(cpu_times), 3),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"),
    }))


if __name__ == "__main__":
    main()
