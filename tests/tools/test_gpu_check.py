#!/usr/bin/env python3
"""ctest tools.gpu_check (no GPU, seconds): tools/gpu_check.sh's plan of its two device calls
keeps within the device tool's limits (600 s a call with the machine's start and the transfers,
900 s in all, 2,000 characters a command) and names the targets; a plan over a limit is
refused; the median-vs-target table reads Google Benchmark JSON (median aggregates, plain
iteration rows, other time units, a file cut short, errors) and says PASS, MISS and NO DATA
where it must; --collect writes only under bench/results/ and experiments/results/omniglot/."""
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tool = os.path.join(root, "tools", "gpu_check.sh")
failures = []
KNOBS = ("BUDGET1", "BUDGET2", "START_S", "XFER_S", "TEST_WINDOW", "TARGET_STEP_TF32_MS",
         "TARGET_STEP_BF16_MS", "TARGET_CONV_RATIO", "COLLECT_ROOT")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, **env):
    e = {k: v for k, v in os.environ.items() if k not in KNOBS}
    e.update(env)
    return subprocess.run(["bash", tool, *args], capture_output=True, text=True, env=e, timeout=120)


# 1. The default plan: within every limit, both run lines usable as they are, the targets named.
r = run("--dry-run")
out = r.stdout
check(r.returncode in (0, 2), f"--dry-run exit {r.returncode} (0 ready, 2 stage first): {r.stderr[-400:]}")
check("OVER" not in out, "the default plan breaks no limit:\n" + "\n".join(l for l in out.splitlines() if "OVER" in l))
calls = [int(m) for m in re.findall(r"^  device time: .* = (\d+) s", out, re.M)]
check(len(calls) == 2, f"two calls with their device time, found {calls}")
check(all(c <= 600 for c in calls), f"each call within 600 s: {calls}")
check(sum(calls) <= 900, f"both calls within 900 s: {sum(calls)}")
for m in re.findall(r"^  steps: (\d+) s of the (\d+) s command budget", out, re.M):
    check(int(m[0]) <= int(m[1]), f"steps {m[0]} s within the command budget {m[1]} s")
runs = [json.loads(j) for j in re.findall(r"^  run: (\{.*\})$", out, re.M)]
check(len(runs) == 2, f"two run lines, found {len(runs)}")
for i, j in enumerate(runs, 1):
    check(len(j["command"]) <= 2000, f"call {i}'s command within 2000 characters")
    check(f"call{i}" in j["command"], f"call {i}'s command runs call{i}")
    check(1 <= j["timeout_s"] <= 600, f"call {i}'s timeout_s within 1..600")
    check(1 <= len(j["carry"]) <= 8 and ".gpu" in j["carry"], f"call {i} carries .gpu")
for target in ("BM_TrainStepGpuTf32/50 <= 8 ms", "BM_TrainStepGpuBf16/50 <= 5 ms", "<= 1.5x cuDNN",
               "fwd, bwd_data", "bwd_weight", "FP32, TF32, BF16", "4 and 16 triplets", "PyTorch"):
    check(target in out, f"the plan names the target {target!r}")
check("omniglot_grid --scale full" in out, "call 2 runs the full-protocol cell")
check(re.search(r"last\.safetensors .*\n.*~\d+ MB", out) is not None, "the plan says how large call 2's checkpoint is")
check("staged build" in out and ("ready" in out or "NOT READY" in out), "the plan says whether .gpu is ready")

# 2. A plan over a limit is refused: a call over 600 s, both over 900 s, steps over the budget.
r = run("--dry-run", BUDGET2="520")
check(r.returncode == 1 and "OVER" in r.stdout, "a 520 s command (a call of 625 s) must be refused")
r = run("--dry-run", BUDGET1="400")
check(r.returncode == 1 and re.search(r"total device time: .*OVER", r.stdout) is not None,
      "two calls over 900 s in all must be refused")
r = run("--dry-run", TEST_WINDOW="400")
check(r.returncode == 1 and re.search(r"steps: \d+ s of the \d+ s command budget OVER", r.stdout) is not None,
      "steps longer than the command budget must be refused")


# 3. The table: fake Google Benchmark files as the device writes them.
def agg(name, median, unit="ms", mean=None):
    return [{"name": f"{name}_{a}", "run_name": name, "run_type": "aggregate", "aggregate_name": a,
             "real_time": v, "time_unit": unit} for a, v in (("mean", mean or median * 3), ("median", median),
                                                            ("stddev", 0.01))]


def gbench(rows):
    return json.dumps({"context": {}, "benchmarks": rows}, indent=2)


with tempfile.TemporaryDirectory() as d:
    # Train step: TF32 passes (7.9 <= 8; its mean, 23.7, would miss), BF16 misses (5.2 > 5) from
    # three plain iteration rows (median 5.2), FP32 errored (no target: no failure).
    rows = agg("BM_TrainStepGpuTf32/50/min_time:2.000/manual_time", 7.9)
    rows += [{"name": "BM_TrainStepGpuBf16/50/min_time:2.000/manual_time", "run_type": "iteration",
              "real_time": t, "time_unit": "ms"} for t in (9.0, 5.2, 4.0)]
    rows += [{"name": "BM_TrainStepGpu/50/min_time:2.000/manual_time", "run_type": "iteration",
              "error_occurred": True, "error_message": "out of memory", "real_time": 0, "time_unit": "ms"}]
    open(os.path.join(d, "x-train_step.json"), "w").write(gbench(rows))
    # Conv: FP32 layer 1 fwd at 1.5x (PASS, at the limit), layer 2 fwd at 1.6x (MISS) in
    # microseconds; TF32 layer 1 fwd ours in us vs cuDNN in ms; the rest missing (NO DATA).
    rows = agg("BM_ConvGpuOurs/0/0/manual_time", 1500.0, "us") + agg("BM_ConvGpuCudnn/0/0/0/manual_time", 1.0)
    rows += agg("BM_ConvGpuOurs/1/0/manual_time", 1.6) + agg("BM_ConvGpuCudnn/1/0/0/manual_time", 1.0)
    rows += agg("BM_ConvGpuOursTf32/0/0/manual_time", 500.0, "us") + agg("BM_ConvGpuCudnn/0/0/1/manual_time", 0.4)
    # A file cut short by a timeout: the BF16 layer 1 fwd pair is whole, the last entry is not.
    cut = gbench(agg("BM_ConvGpuOursBf16/0/0/manual_time", 0.3) + agg("BM_ConvGpuCudnn/0/0/2/manual_time", 0.3)
                 + agg("BM_ConvGpuOursBf16/0/1/manual_time", 0.3))
    cut = cut[:cut.rfind('"BM_ConvGpuOursBf16/0/1/manual_time_median"')]
    open(os.path.join(d, "x-conv.json"), "w").write(gbench(rows))
    open(os.path.join(d, "x-conv-bf16.json"), "w").write(cut)
    open(os.path.join(d, "x-train_step-torch.jsonl"), "w").write(
        json.dumps({"benchmark": "koch_triplet_train_step_cuda", "batch_triplets": 50, "tf32": True,
                    "bf16_autocast": False, "median_ms": 11.3}) + "\nnot json\n")
    r = run("--targets", d)
    t = r.stdout
    check(r.returncode == 0, f"--targets exit {r.returncode}: {r.stderr[-400:]}")

    def row(*cells):
        pat = r"^\| " + r" \| ".join(re.escape(c) for c in cells)
        m = re.search(pat + r".*$", t, re.M)
        return m.group(0) if m else ""

    check(row("tf32", "50", "7.900", "11.300").endswith("| <= 8 ms | PASS |"), "TF32 step 7.9 ms: PASS (median, not mean)")
    check(row("bf16", "50", "5.200").endswith("| <= 5 ms | MISS |"), "BF16 step 5.2 ms (median of rows): MISS")
    check(row("fp32", "50", "—").endswith("| — | not measured (out of memory) |"),
          "FP32 step errored, no target: its error, no status")
    check(row("fp32", "1", "fwd", "1.500", "1.000", "1.50x").endswith("PASS |"), "conv 1.5x cuDNN (us to ms): PASS")
    check(row("fp32", "2", "fwd", "1.600", "1.000", "1.60x").endswith("MISS |"), "conv 1.6x cuDNN: MISS")
    check(row("tf32", "1", "fwd", "0.500", "0.400", "1.25x").endswith("PASS |"), "TF32 conv, mixed units: PASS")
    check(row("bf16", "1", "fwd", "0.300", "0.300", "1.00x").endswith("PASS |"), "a file cut short is read to its last whole entry")
    check(row("bf16", "1", "bwd_data").endswith("NO DATA |"), "a missing median: NO DATA")
    m = re.search(r"^targets: (\d+) rows: (\d+) PASS, (\d+) MISS, (\d+) NO DATA$", t, re.M)
    check(m is not None and m.groups() == ("38", "4", "2", "32"), f"the summary counts: {m.groups() if m else t[-300:]}")
    r = run("--targets", d, TARGET_STEP_BF16_MS="5.5")
    check(re.search(r"^\| bf16 \| 50 \| 5\.200 .*\| <= 5\.5 ms \| PASS \|$", r.stdout, re.M) is not None,
          "the BF16 target is a knob (5.2 <= 5.5: PASS)")

# 4. --collect: the returned archive into the repository paths, nothing elsewhere.
with tempfile.TemporaryDirectory() as d:
    files, repo = os.path.join(d, "files"), os.path.join(d, "repo")
    os.makedirs(files)
    os.makedirs(repo)

    def archive(name, members):
        with tarfile.open(os.path.join(files, name), "w:gz") as tf:
            for n, data in members:
                info = tarfile.TarInfo(n)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))

    archive("results.tgz", [("./bench/results/2026-01-01-NVIDIA-H200-conv.json", b"{}"),
                            ("./experiments/results/omniglot/x-full-protocol/t1-global/seed1/metrics.jsonl", b"{}\n")])
    r = run("--collect", files, COLLECT_ROOT=repo)
    check(r.returncode == 0, f"--collect exit {r.returncode}: {r.stdout}{r.stderr}")
    check(os.path.isfile(os.path.join(repo, "bench/results/2026-01-01-NVIDIA-H200-conv.json")), "collected the JSON")
    check(os.path.isfile(os.path.join(repo, "experiments/results/omniglot/x-full-protocol/t1-global/seed1/metrics.jsonl")),
          "collected the run folder")
    archive("results.tgz", [("../escape.txt", b"x"), ("kernels/evil.cu", b"x"),
                            ("bench/results/../../tools/evil.sh", b"x")])
    r = run("--collect", files, COLLECT_ROOT=repo)
    check(r.returncode == 1 and r.stdout.count("refused") == 3, f"--collect refuses paths outside the results: {r.stdout}")
    check(not os.path.exists(os.path.join(d, "escape.txt")) and not os.path.exists(os.path.join(repo, "kernels"))
          and not os.path.exists(os.path.join(repo, "tools")), "nothing written outside the results")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("tools.gpu_check: all checks passed")
