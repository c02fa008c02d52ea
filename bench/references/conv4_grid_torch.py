#!/usr/bin/env python3
"""PyTorch reference for BM_Conv4GridStepCpu (bench/bench_conv4_step.cpp): one
iteration of the Omniglot grid's CPU scales (omniglot_grid --scale cpu / paper-length).

  conv4 trunk on 1x28x28 inputs: 4 x [Conv2d(3x3, 64, padding 1), BatchNorm2d, ReLU,
  MaxPool2d(2)] -> flatten (64) -> Linear(64, 128) -> sigmoid (Koch's head);
  50 fixed random triplets in [0, 1], full sharing: one forward of the 150 images;
  the row's triplet loss with the paper's parameters (squared distances for Kumar,
  Schroff and the global losses, plain L2 for the softmax ratio; m 0.01, l 0.8, t 0.4,
  g 1, biased variances), mean over the triplets;
  Adam lr 1e-4, weight_decay (L2 added to the gradient) 2e-4 on the convolutions and
  batch-norms, 1e-3 on the dense layer; zero_grad (set to zero, as ours).
Prints one JSON object per loss.
  /usr/bin/python3 bench/references/conv4_grid_torch.py --threads 2
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

M, L, T, G = 0.01, 0.8, 0.4, 1.0


def conv4_koch_head():
    layers = []
    for i in range(4):
        layers += [nn.Conv2d(1 if i == 0 else 64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64, 128), nn.Sigmoid())


def sq(x, y):
    return ((x - y) ** 2).sum(1)


def kumar(a, p, n):
    return F.relu(1 - sq(a, n) / (sq(a, p) + M)).mean()  # Kumar et al.: the study's kumar (kernels/losses.h)


def schroff(a, p, n):
    return F.relu(sq(a, p) - sq(a, n) + M).mean()


def softmax_ratio(a, p, n):
    dp, dn = sq(a, p).clamp_min(1e-12).sqrt(), sq(a, n).clamp_min(1e-12).sqrt()
    s = torch.softmax(torch.stack([dp, dn], 1), 1)
    return (s[:, 0] ** 2 + (s[:, 1] - 1) ** 2).mean()


def global_loss(a, p, n):
    dp, dn = sq(a, p), sq(a, n)
    return dp.var(unbiased=False) + dn.var(unbiased=False) + L * F.relu(dp.mean() - dn.mean() + T)


def global_triplet(a, p, n):
    return G * kumar(a, p, n) + global_loss(a, p, n)


LOSSES = {"kumar": kumar, "schroff": schroff, "softmax": softmax_ratio, "global": global_loss,
          "global-triplet": global_triplet}


def bench(loss_name, args):
    torch.manual_seed(1)
    net = conv4_koch_head()
    dense = [q for name, q in net.named_parameters() if name.startswith("13.")]
    conv = [q for name, q in net.named_parameters() if not name.startswith("13.")]
    opt = torch.optim.Adam([{"params": conv, "weight_decay": 2e-4}, {"params": dense, "weight_decay": 1e-3}], lr=1e-4)
    g = torch.Generator().manual_seed(11)
    a, p, n = (torch.rand(args.triplets, 1, 28, 28, generator=g) for _ in range(3))
    loss_fn = LOSSES[loss_name]
    B = args.triplets

    def step():
        e = net(torch.cat([a, p, n], 0))
        loss = loss_fn(e[:B], e[B:2 * B], e[2 * B:])
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
    images = 3 * B
    return {
        "benchmark": "conv4_grid_train_step_cpu/" + loss_name,
        "framework": "pytorch " + torch.__version__,
        "device": platform.processor() or platform.machine(),
        "images_per_iteration": images,
        "threads": torch.get_num_threads(),
        "iterations": len(times),
        "first_loss": loss0,
        "mean_ms": round(mean * 1e3, 3),
        "median_ms": round(sorted(times)[len(times) // 2] * 1e3, 3),
        "min_ms": round(min(times) * 1e3, 3),
        "images_per_s": round(images / mean, 2),
        "best_images_per_s": round(images / min(times), 2),
        "cpu_ms_per_step": round(1e3 * sum(cpu_times) / len(cpu_times), 3),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--triplets", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--losses", default=",".join(LOSSES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.losses.split(","):
        print(json.dumps(bench(name, args)), flush=True)


if __name__ == "__main__":
    main()
