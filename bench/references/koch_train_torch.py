#!/usr/bin/env python3
"""PyTorch reference for bench_train_step: one full training iteration of the
Omniglot study's triplet CNN (forward, global loss, backward, Adam step).

Same iteration as bench/bench_train_step.cpp:
  Koch branch, 1x105x105 -> conv 64@10x10 -> ReLU -> maxpool 2 -> conv 128@7x7 -> ReLU
  -> maxpool 2 -> conv 128@4x4 -> ReLU -> maxpool 2 -> conv 256@4x4 -> ReLU -> flatten
  9216 -> linear 4096 -> sigmoid, shared by anchor, positive and negative (one batch of 3B);
  the study's initialisation: conv weights N(0, 0.002), dense weights N(0, 0.2), all
  biases N(0.5, 0.01);
  Kumar et al.'s global loss from ops, on squared L2 distances d+ = |a-p|^2, d- = |a-n|^2:
    var(d+) + var(d-) + l * max(0, mean(d+) - mean(d-) + t),  biased variances, l 0.8, t 0.4;
  Adam lr 1e-4 with L2 weight decay (added to the gradient, as ours) 2e-4 on the
  convolutions and 1e-3 on the dense layer; zero_grad (set to zero, as ours).
Inputs: fixed binary images, ink 255 / paper 0 (the driver's raw scale), ~15 % ink.

Times the iteration on CUDA (CUDA events, TF32 off unless --tf32; --bf16 runs the
forward under torch.autocast("cuda", dtype=torch.bfloat16): bf16 convolutions and
matmuls, FP32 master weights and Adam state, the loss in FP32 as autocast keeps
reductions) when available,
else on the CPU with torch.set_num_threads(--threads). Prints one JSON object.
  /usr/bin/python3 bench/references/koch_train_torch.py --device cpu --batch 4 --threads 2
  python3 bench/references/koch_train_torch.py --device cuda --batch 50
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.nn as nn


def koch_branch(embedding=4096):
    net = nn.Sequential(
        nn.Conv2d(1, 64, 10), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 7), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 4), nn.ReLU(), nn.Flatten(),
        nn.Linear(9216, embedding), nn.Sigmoid())
    with torch.no_grad():
        for m in net:
            if isinstance(m, nn.Conv2d):
                m.weight.normal_(0.0, 0.002)
                m.bias.normal_(0.5, 0.01)
            elif isinstance(m, nn.Linear):
                m.weight.normal_(0.0, 0.2)
                m.bias.normal_(0.5, 0.01)
    return net


def global_loss(a, p, n, l=0.8, t=0.4):
    dp = (a - p).pow(2).sum(1)
    dn = (a - n).pow(2).sum(1)
    var_p = dp.var(unbiased=False)
    var_n = dn.var(unbiased=False)
    return var_p + var_n + l * torch.clamp(dp.mean() - dn.mean() + t, min=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=None, help="triplets (default: 50 on CUDA, 4 on the CPU)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads")
    ap.add_argument("--seconds", type=float, default=10.0, help="minimum timed duration")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in convolutions and matmuls (CUDA)")
    ap.add_argument("--bf16", action="store_true", help="autocast(bfloat16) forward (CUDA)")
    args = ap.parse_args()
    if args.bf16 and args.device == "cpu":
        ap.error("--bf16 is for CUDA (autocast bfloat16)")
    dev = args.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    batch = args.batch or (50 if dev == "cuda" else 4)
    if dev == "cpu":
        torch.set_num_threads(args.threads)
    else:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    net = koch_branch().to(dev)
    convs = [p for m in net if isinstance(m, nn.Conv2d) for p in m.parameters()]
    dense = [p for m in net if isinstance(m, nn.Linear) for p in m.parameters()]
    opt = torch.optim.Adam([{"params": convs, "weight_decay": 2e-4},
                            {"params": dense, "weight_decay": 1e-3}], lr=1e-4)
    g = torch.Generator().manual_seed(11)
    imgs = [((torch.rand(batch, 1, 105, 105, generator=g) < 0.15).float() * 255.0).to(dev) for _ in range(3)]

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16 and dev == "cuda"):
            e = net(torch.cat(imgs, 0))
        e = e.float()  # the loss in FP32 (ours: distances and losses always FP32)
        a, p, n = e[:batch], e[batch:2 * batch], e[2 * batch:]
        loss = global_loss(a, p, n)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    # Check before timing: finite loss, and the step changes the weights.
    w0 = net[0].weight.detach().clone()
    loss0 = float(step())
    assert torch.isfinite(torch.tensor(loss0)), "non-finite loss"
    assert not torch.equal(w0, net[0].weight.detach()), "the Adam step did not change conv1.weight"
    for _ in range(3):  # warm-up (cuDNN autotuning, allocator)
        step()

    times, cpu_times = [], []
    t_end = time.perf_counter() + args.seconds
    if dev == "cuda":
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while time.perf_counter() < t_end or len(times) < 5:
        if dev == "cuda":
            e0.record()
            step()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3)
        else:
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    times.sort()
    median = times[len(times) // 2]
    mean = sum(times) / len(times)
    print(json.dumps({
        "benchmark": "koch_triplet_train_step_" + dev,
        "framework": "pytorch " + torch.__version__,
        "device": torch.cuda.get_device_name() if dev == "cuda" else (platform.processor() or platform.machine()),
        "batch_triplets": batch,
        "images_per_iteration": 3 * batch,
        "threads": torch.get_num_threads() if dev == "cpu" else None,
        "tf32": bool(args.tf32) if dev == "cuda" else None,
        "bf16_autocast": bool(args.bf16) if dev == "cuda" else None,
        "iterations": len(times),
        "first_loss": loss0,
        "median_ms": round(median * 1e3, 3),
        "mean_ms": round(mean * 1e3, 3),
        "min_ms": round(times[0] * 1e3, 3),
        "images_per_s": round(3 * batch / median, 2),
        # process CPU time per step (all threads): comparable with bench_train_step's
        # cpu_ms_per_step, less sensitive to other processes on a shared machine
        "cpu_ms_per_step": round(1e3 * sum(cpu_times) / len(cpu_times), 3) if cpu_times else None,
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"),
    }))


if __name__ == "__main__":
    main()
