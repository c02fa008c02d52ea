#!/usr/bin/env python3
"""PyTorch CPU reference for bench_conv's BM_ConvCpu/<layer>/<pass>: each Koch
conv layer at batch 12, float32, forward / backward-data / backward-weight timed
separately (aten.convolution_backward with one output mask at a time, as
oneDNN runs them during a training step).

Layers (as bench/bench_conv.cpp): 0: 1->64 10x10 on 105x105, 1: 64->128 7x7 on
48x48, 2: 128->128 4x4 on 21x21, 3: 128->256 4x4 on 9x9; stride 1, no padding.
--set studies: layers 4..9 at batch 128 (BM_ConvCpuStudy): the sampling study's
1->32 5x5 on 28x28 and 32->64 5x5 on 12x12, the conv4 preset's 3x3 padding-1
convolutions 1->64 on 28x28 and 64->64 on 14, 7 and 3.
Passes: 0 forward, 1 backward-data, 2 backward-weight (bench_conv's numbering).
Prints one JSON object: median and min milliseconds per layer and pass over
--reps timed calls (after warm-up), and the median process CPU time per call
(with --threads 1 a load-independent measure on a shared machine, comparable
with the CPU column of bench_conv run with MN_NUM_THREADS=1). Run it with the project's thread count and,
for the fair reference, a reused heap:
  GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \\
    /usr/bin/python3 bench/references/koch_conv_layers_torch.py --threads 2
"""
import argparse
import json
import os
import platform
import statistics
import time

import torch

LAYERS = [(1, 64, 10, 105, 0), (64, 128, 7, 48, 0), (128, 128, 4, 21, 0), (128, 256, 4, 9, 0)]
# --set studies: bench_conv's BM_ConvCpuStudy/<4..9>/<pass> at batch 128: the sampling
# study's two convolutions, then the conv4 preset's four (3x3, padding 1).
STUDY_LAYERS = [(1, 32, 5, 28, 0), (32, 64, 5, 12, 0), (1, 64, 3, 28, 1), (64, 64, 3, 14, 1), (64, 64, 3, 7, 1),
                (64, 64, 3, 3, 1)]
PASSES = ["forward", "backward_data", "backward_weight"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=["koch", "studies"], default="koch")
    ap.add_argument("--batch", type=int, default=None, help="default: 12 (koch), 128 (studies)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    if args.batch is None:
        args.batch = 12 if args.set == "koch" else 128
    layers, first = (LAYERS, 0) if args.set == "koch" else (STUDY_LAYERS, 4)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = {"torch": torch.__version__, "threads": args.threads, "batch": args.batch,
           "mkldnn": torch.backends.mkldnn.is_available(), "cpu": platform.processor(),
           "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", "(unset)"), "set": args.set, "layers": {}}
    for li, (c, k, r, hw, pad) in enumerate(layers, start=first):
        x = torch.rand(args.batch, c, hw, hw)
        w = torch.randn(k, c, r, r) * 0.01
        b = torch.zeros(k)
        y = torch.nn.functional.conv2d(x, w, b, padding=pad)
        dy = torch.randn_like(y)
        fns = {
            "forward": lambda: torch.nn.functional.conv2d(x, w, b, padding=pad),
            "backward_data": lambda: torch.ops.aten.convolution_backward(
                dy, x, w, [k], [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, [True, False, False]),
            "backward_weight": lambda: torch.ops.aten.convolution_backward(
                dy, x, w, [k], [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, [False, True, False]),
        }
        for pi, name in enumerate(PASSES):
            f = fns[name]
            for _ in range(3):
                f()
            ts, cs = [], []
            for _ in range(args.reps):
                c0, t0 = time.process_time(), time.perf_counter()
                f()
                ts.append((time.perf_counter() - t0) * 1e3)
                cs.append((time.process_time() - c0) * 1e3)
            out["layers"][f"{li}/{pi}"] = {"pass": name, "median_ms": statistics.median(ts),
                                           "min_ms": min(ts),
                                           "median_cpu_ms": statistics.median(cs)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
