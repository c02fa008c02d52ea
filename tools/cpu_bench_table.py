#!/usr/bin/env python3
"""Markdown tables from one tools/cpu_bench.sh session folder: ours beside each
reference, with the speed ratio (reference time / ours; > 1: ours faster).

  tools/cpu_bench_table.py bench/results/<date>-cpu-session
"""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def gbench(path, stat="median"):
    """name -> (real_time in ms, label) of a Google Benchmark JSON (aggregate `stat` if present)."""
    out = {}
    for b in load(path)["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != stat:
            continue
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        name = b.get("run_name", b["name"])
        out[name] = (b["real_time"] * unit, b.get("label", ""), b)
    return out


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(d):
    p = lambda n: os.path.join(d, n)  # noqa: E731
    print(f"Session `{d}`: " + open(p("machine.txt")).read().replace("\n", "; "))
    # SGEMM
    g = gbench(p("gemm.json"))
    a2 = gbench(p("gemm-forced-avx2.json")) if os.path.exists(p("gemm-forced-avx2.json")) else {}
    print("\n| SGEMM (2 threads, median of 3) | ours GFLOP/s | ours forced AVX2 | OpenBLAS | ratio (ours / OpenBLAS) |")
    print("|---|---:|---:|---:|---:|")
    for name, (t, _, b) in sorted(g.items()):
        if not name.startswith("BM_cpu_ours/"):
            continue
        shape = name.split("/")[1]
        ref = g.get(name.replace("BM_cpu_ours", "BM_cpu_openblas"))
        avx2 = a2.get(name)
        gf = lambda x: x[2].get("GFLOP/s", 0) / 1e9 if x[2].get("GFLOP/s", 0) > 1e6 else x[2].get("GFLOP/s", 0)  # noqa: E731
        if ref:
            print(f"| {shape} | {gf(g[name]):.1f} | {gf(avx2) if avx2 else float('nan'):.1f} | {gf(ref):.1f} | "
                  f"{ref[0] / t:.2f} |")
    # Convolutions
    c = gbench(p("conv.json"))
    torch = {}
    for f in ("conv-torch-koch.json", "conv-torch-studies.json"):
        if os.path.exists(p(f)):
            torch.update(load(p(f))["layers"])
    print("\n| conv layer, pass (2 threads) | ours ms (median of 3) | PyTorch ms (median) | speed ratio |")
    print("|---|---:|---:|---:|")
    for key in sorted(torch, key=lambda k: (int(k.split("/")[0]), int(k.split("/")[1]))):
        li, pi = key.split("/")
        bench = "BM_ConvCpu" if int(li) < 4 else "BM_ConvCpuStudy"
        ours = c.get(f"{bench}/{li}/{pi}/real_time")
        if ours:
            ref = torch[key]["median_ms"]
            print(f"| {ours[1]} | {ours[0]:.2f} | {ref:.2f} | {ref / ours[0]:.2f} |")
    # Training steps
    t = gbench(p("train-step.json"))
    print("\n| Koch triplet train step (2 threads) | ours img/s | PyTorch reused heap img/s | as installed | ratio reused / installed |")
    print("|---|---:|---:|---:|---:|")
    for b in (4, 16, 50):
        ours = next((v for k, v in t.items() if k.startswith(f"BM_TrainStepCpu/{b}/")), None)
        if not ours:
            continue
        oi = ours[2].get("images_per_s")
        r = load(p(f"train-step-torch-b{b}-reused.json"))
        i = load(p(f"train-step-torch-b{b}-installed.json"))
        print(f"| {b} triplets | {oi:.1f} | {r['images_per_s']:.1f} | {i['images_per_s']:.1f} | "
              f"{oi / r['images_per_s']:.2f} / {oi / i['images_per_s']:.2f} |")
    for name, ours_file, ref_stem, key in (
            ("conv4 step (Omniglot CPU presets)", "conv4-step.json", "conv4-step-torch", None),
            ("pair-selection epoch (batch 16)", "pair-selection-epoch.json", "pair-selection-epoch-torch", None)):
        if not os.path.exists(p(ours_file)):
            continue
        o = list(gbench(p(ours_file)).values())[0][2]
        rate = o.get("images_per_s") or o.get("pairs_per_s")
        r = load(p(ref_stem + "-reused.json"))
        i = load(p(ref_stem + "-installed.json"))
        r = r["runs"][0] if "runs" in r else r
        i = i["runs"][0] if "runs" in i else i
        rr = r.get("images_per_s") or r.get("pairs_per_s")
        ii = i.get("images_per_s") or i.get("pairs_per_s")
        print(f"\n{name}: ours {rate:.0f}/s, PyTorch reused heap {rr:.0f}/s, as installed {ii:.0f}/s: "
              f"ratio {rate / rr:.2f} / {rate / ii:.2f}")
    if os.path.exists(p("sampling-step.json")):
        s = gbench(p("sampling-step.json"))
        r = jsonl(p("sampling-step-torch-reused.jsonl"))
        i = jsonl(p("sampling-step-torch-installed.jsonl"))
        print("\n| sampling-study step | ours img/s | PyTorch reused | as installed | ratio |")
        print("|---|---:|---:|---:|---:|")
        for k, (name, (tm, lab, b)) in enumerate(sorted(s.items())):
            o = b.get("images_per_s")
            if k < len(r):
                print(f"| {lab or name} | {o:.0f} | {r[k]['images_per_s']:.0f} | {i[k]['images_per_s']:.0f} | "
                      f"{o / r[k]['images_per_s']:.2f} / {o / i[k]['images_per_s']:.2f} |")
    # Small kernels
    print("\n| small kernels (median of 5) | 1 thread | 2 threads |")
    print("|---|---:|---:|")
    l1, l2 = gbench(p("losses-150x128-1thread.json")), gbench(p("losses-150x128-2thread.json"))
    for name in sorted(l1):
        if name in l2:
            print(f"| {name} | {l1[name][0] * 1e3:.1f} us | {l2[name][0] * 1e3:.1f} us |")
    par = gbench(p("parallel.json"))
    for name in sorted(par):
        print(f"| {name} | {par[name][0] * 1e3:.2f} us | |")


if __name__ == "__main__":
    main(sys.argv[1])
