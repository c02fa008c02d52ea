#!/usr/bin/env python3
"""Data-parallel runs of omniglot_triplet through the harness (ctest distributed.harness_*).

  harness_ranks.py kill   MPIRUN BIN OUT   a rank killed mid-run ends every rank within 30 s
  harness_ranks.py resume MPIRUN BIN OUT   --resume with another world size is refused, naming both
  harness_ranks.py stop   MPIRUN BIN OUT   a rank stopped (SIGSTOP) mid-run: the others' collective watchdog
                                           (--collective-timeout 10) ends the job, naming the silent rank
  harness_ranks.py throw  MPIRUN BIN OUT   a rank whose setup throws (a missing --data-dir on rank 1 only)
                                           ends every rank, its error line naming the rank
  harness_ranks.py dropout MPIRUN BIN OUT  with dropout (cpu-demo's conv4, its masks from a stream per rank):
                                           2 ranks stopped after 3 steps and resumed end bit for bit where
                                           6 uninterrupted steps end (each rank's stream restored)
  harness_ranks.py equal  MPIRUN BIN OUT   5 steps of the main binary (cpu-demo without batch-norm, SGD):
                                           2 ranks with the global miner == 1 process, to float rounding;
                                           --mine-locally (another objective) differs; with batch-norm,
                                           2 ranks with --sync-bn == 1 process, per-rank statistics differ;
                                           offline random triplets (each rank loading its shard) == 1 process;
                                           the siamese binary's 2 ranks == 1 process

MPIRUN is the launcher with its flags, ';'-separated (CMake's list). The runs use the
Omniglot data where the study looks for it ($MN_DATA_DIR, ...); without it the test
skips (exit 77) with a message.
"""
import array
import json
import os
import shutil
import struct
import signal
import subprocess
import sys
import time

SMALL = ["--preset", "cpu-demo", "--epochs", "1", "--val-tasks", "20", "--val-triplets", "100"]


def data_or_skip():
    # The study's own lookup (data/fetch.sh): $MN_DATA_DIR, $DATA_DIR, ./datasets, ../shared/datasets.
    roots = [os.environ.get("MN_DATA_DIR"), os.environ.get("DATA_DIR"), "datasets", "../shared/datasets"]
    if not any(r and os.path.isdir(os.path.join(r, "omniglot")) for r in roots):
        print("Omniglot data not found ($MN_DATA_DIR, $DATA_DIR, ./datasets, ../shared/datasets): skipped "
              "(data/fetch.sh gets it)")
        sys.exit(77)


def children(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def start_training(mpirun, binary, out, extra):
    """mpirun of the binary until training runs (rank 0 wrote config.txt, then 5 s); returns
    (process, the two rank pids)."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, MN_NUM_THREADS="1")
    cmd = mpirun + [binary] + SMALL + ["--iters", "100000", "--out-dir", out] + extra
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    t0 = time.time()
    while not os.path.exists(os.path.join(out, "config.txt")):
        if p.poll() is not None or time.time() - t0 > 300:
            p.kill()
            sys.exit("training did not start within 300 s:\n" + p.stdout.read())
        time.sleep(0.5)
    time.sleep(5)
    ranks = children(p.pid)
    if len(ranks) < 2:
        p.kill()
        sys.exit(f"expected 2 rank processes under mpirun (pid {p.pid}), found {ranks}")
    return p, ranks


def kill_test(mpirun, binary, out):
    p, ranks = start_training(mpirun, binary, out, [])
    victim = max(ranks)  # a rank's process (the later-started one), not mpirun itself
    os.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    try:
        rest, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit("HANG: the other rank was still running 60 s after a rank was killed")
    took = time.time() - killed_at
    text = rest
    print(text[-3000:])
    print(f"mpirun status {p.returncode}, {took:.1f} s after the kill")
    if p.returncode == 0:
        sys.exit("the run with a killed rank ended with status 0")
    if took > 30:
        sys.exit(f"the other rank took {took:.1f} s to end (limit 30 s)")
    if "signal 9" not in text and "Killed" not in text:
        sys.exit("mpirun did not say which rank died")


def stop_test(mpirun, binary, out):
    timeout = 10
    p, ranks = start_training(mpirun, binary, out, ["--collective-timeout", str(timeout)])
    victim = max(ranks)
    os.kill(victim, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        text, _ = p.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        for r in ranks:
            os.kill(r, signal.SIGKILL)
        p.kill()
        sys.exit(f"HANG: the job was still running {timeout + 60} s after a rank was stopped")
    finally:
        try:
            os.kill(victim, signal.SIGKILL)  # never leave a stopped process behind
        except ProcessLookupError:
            pass
    took = time.time() - stopped_at
    print(text[-3000:])
    print(f"mpirun status {p.returncode}, {took:.1f} s after the stop (--collective-timeout {timeout})")
    if p.returncode == 0:
        sys.exit("the run with a stopped rank ended with status 0")
    if took > timeout + 30:
        sys.exit(f"the job took {took:.1f} s to end after the stop (timeout {timeout} s + 30 s)")
    if "did not answer a ping" not in text or not any(f"rank(s) {r} did not answer" in text for r in (0, 1)):
        sys.exit("the watchdog's error does not name the stopped rank")


def throw_test(mpirun, binary, out):
    # MPMD: rank 0 as usual, rank 1 with a data folder that does not exist (its set-up throws).
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, MN_NUM_THREADS="1")
    launcher = [a for a in mpirun if a not in ("-np", "2")]
    args = SMALL + ["--iters", "100000", "--out-dir", out]
    cmd = launcher + ["-np", "1", binary] + args + [":", "-np", "1", binary] + args + ["--data-dir", out + "/none"]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        sys.exit("HANG: a rank threw and the job was still running after 120 s")
    took = time.time() - t0
    text = r.stdout + r.stderr
    print(text[-3000:])
    print(f"mpirun status {r.returncode} after {took:.1f} s")
    if r.returncode == 0:
        sys.exit("the run with a throwing rank ended with status 0")
    if "[rank 1 of 2]" not in text or "none" not in text:
        sys.exit("the error line does not name rank 1 and its missing data folder")


def resume_test(mpirun, binary, out):
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, MN_NUM_THREADS="1")
    first = subprocess.run(mpirun + [binary] + SMALL + ["--iters", "50", "--stop-after", "3", "--out-dir", out],
                           capture_output=True, text=True, env=env, timeout=300)
    print(first.stdout[-1500:], first.stderr[-1500:])
    if first.returncode == 0 or not os.path.exists(os.path.join(out, "last.safetensors")):
        sys.exit(f"the 2-rank run should stop resumably (status 3) and save: status {first.returncode}")
    one = subprocess.run([binary, "--resume", "--out-dir", out], capture_output=True, text=True, env=env,
                         timeout=300)
    print(one.stderr)
    if one.returncode == 0 or "mpirun -np 2" not in one.stderr or "1" not in one.stderr:
        sys.exit(f"a 1-process --resume of a 2-rank run should be refused naming mpirun -np 2 "
                 f"(status {one.returncode})")
    again = subprocess.run(mpirun + [binary, "--resume", "--out-dir", out, "--stop-after", "2"],
                           capture_output=True, text=True, env=env, timeout=300)
    print(again.stdout[-800:], again.stderr[-800:])
    if again.returncode != 3:
        sys.exit(f"the 2-rank --resume should continue and stop resumably again (status 3), got {again.returncode}")


def dropout_test(mpirun, binary, out):
    # cpu-demo's conv4 with dropout 0.3: its masks are drawn by every rank from a stream of
    # its own. A stop after 3 steps and a resume must continue every rank's stream where it
    # was: the final weights then equal an uninterrupted run's bit for bit.
    args = ["--preset", "cpu-demo", "--dropout", "0.3", "--epochs", "1", "--iters", "8", "--val-tasks", "20",
            "--val-triplets", "100"]
    env = dict(os.environ, MN_NUM_THREADS="1")
    for name in ("straight", "resumed"):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    def run(name, extra, want):
        r = subprocess.run(mpirun + [binary] + args + ["--out-dir", os.path.join(out, name)] + extra,
                           capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != want:
            sys.exit(f"{name} {extra}: expected status {want}, got {r.returncode}:\n{r.stderr[-2000:]}")
    run("straight", ["--stop-after", "6"], 3)
    run("resumed", ["--stop-after", "3"], 3)
    run("resumed", ["--resume", "--stop-after", "3"], 3)
    a, b = (weights(os.path.join(out, n, "last.safetensors")) for n in ("straight", "resumed"))
    differ = [k for k in a if list(a[k]) != list(b[k])]
    print(f"{len(a)} tensors compared, {len(differ)} differ")
    if differ:
        sys.exit(f"the resumed 2-rank run left the uninterrupted one: {differ[:5]}")


def weights(path):
    """The float tensors of a safetensors file, name -> array."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__" or v["dtype"] not in ("F32", "F64"):
            continue
        a, b = v["data_offsets"]
        arr = array.array("f" if v["dtype"] == "F32" else "d")
        arr.frombytes(data[a:b])
        out[k] = arr
    return out


def worst_ratio(ref, got, atol, rtol):
    """max |ref - got| / (atol + rtol |ref|) over the model's tensors (<= 1: equal within the tolerance)."""
    a, b = weights(ref), weights(got)
    return max(abs(x - y) / (atol + rtol * abs(x)) for k in a if k.startswith("branch.") for x, y in zip(a[k], b[k]))


def equal_test(mpirun, binary, out):
    # No batch-norm (its statistics are per rank) and SGD (Adam's first steps turn a gradient
    # that cancels to rounding noise into a full step of either sign); --stop-after 5 of 6
    # steps: a resumable stop saves last.safetensors before any validation or test.
    args = ["--preset", "cpu-demo", "--no-conv4-bn", "--optimizer", "sgd", "--lr", "0.01", "--epochs", "1",
            "--iters", "6", "--stop-after", "5"]
    env = dict(os.environ, MN_NUM_THREADS="1")
    # With batch-norm (conv4's default): per-rank statistics differ from one process;
    # --sync-bn's global-batch statistics do not.
    bn = [a for a in args if a != "--no-conv4-bn"]
    offline = ["--sampling", "random", "--loss", "kumar"]
    runs = {"one": [binary] + args, "two": mpirun + [binary] + args,
            "two_local": mpirun + [binary] + args + ["--mine-locally"],
            "one_bn": [binary] + bn, "two_bn": mpirun + [binary] + bn, "two_sync_bn": mpirun + [binary] + bn + ["--sync-bn"],
            # offline random triplets (the loader's path, each rank building only its shard)
            "one_offline": [binary] + args + offline, "two_offline": mpirun + [binary] + args + offline}
    for name, cmd in runs.items():
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        r = subprocess.run(cmd + ["--out-dir", os.path.join(out, name)], capture_output=True, text=True, env=env,
                           timeout=300)
        if r.returncode != 3:
            sys.exit(f"{name}: expected a resumable stop (status 3), got {r.returncode}:\n{r.stderr[-2000:]}")
    last = lambda name: os.path.join(out, name, "last.safetensors")
    # float32, 5 steps: the two ranks' gradients are two half sums added instead of one sum
    # (measured worst 0.005 of this tolerance on 2026-11-28).
    same = worst_ratio(last("one"), last("two"), 1e-6, 1e-5)
    other = worst_ratio(last("one"), last("two_local"), 1e-6, 1e-5)
    print(f"2 ranks (global miner) vs 1 process: worst {same:.4g} of the tolerance; --mine-locally: {other:.4g}")
    if same > 1:
        sys.exit("the 2-rank run left the 1-process weights")
    if other <= 1:
        sys.exit("--mine-locally gave the 1-process weights too: the comparison cannot tell the objectives apart")
    offl = worst_ratio(last("one_offline"), last("two_offline"), 1e-6, 1e-5)
    print(f"offline random triplets (sharded loader): 2 ranks vs 1 process: worst {offl:.4g} of the tolerance")
    if offl > 1:
        sys.exit("the 2-rank run with offline triplets left the 1-process weights")
    # The siamese binary beside it: each rank builds its shard of the batch's triplets and
    # scores its genuine and impostor pairs.
    siamese = os.path.join(os.path.dirname(binary), "omniglot_siamese")
    sargs = ["--trunk", "conv4", "--image-size", "28", "--embedding", "64", "--batch", "16", "--optimizer", "sgd",
             "--lr", "0.01", "--epochs", "1", "--iters", "6", "--stop-after", "5", "--val-tasks", "20",
             "--no-conv4-bn"]
    for name, cmd in (("one_siamese", [siamese] + sargs), ("two_siamese", mpirun + [siamese] + sargs)):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        r = subprocess.run(cmd + ["--out-dir", os.path.join(out, name)], capture_output=True, text=True, env=env,
                           timeout=300)
        if r.returncode != 3:
            sys.exit(f"{name}: expected a resumable stop (status 3), got {r.returncode}:\n{r.stderr[-2000:]}")
    pairs = worst_ratio(last("one_siamese"), last("two_siamese"), 1e-6, 1e-5)
    print(f"siamese pairs (sharded loader): 2 ranks vs 1 process: worst {pairs:.4g} of the tolerance")
    if pairs > 1:
        sys.exit("the 2-rank siamese run left the 1-process weights")
    sync = worst_ratio(last("one_bn"), last("two_sync_bn"), 1e-6, 1e-5)
    per_rank = worst_ratio(last("one_bn"), last("two_bn"), 1e-6, 1e-5)
    print(f"with batch-norm: 2 ranks --sync-bn vs 1 process: worst {sync:.4g} of the tolerance; per-rank "
          f"statistics: {per_rank:.4g}")
    if sync > 1:
        sys.exit("the 2-rank --sync-bn run left the 1-process weights")
    if per_rank <= 1:
        sys.exit("per-rank batch-norm gave the 1-process weights too: the comparison cannot tell them apart")


def main():
    tests = {"kill": kill_test, "stop": stop_test, "throw": throw_test, "resume": resume_test, "equal": equal_test,
             "dropout": dropout_test}
    if len(sys.argv) != 5 or sys.argv[1] not in tests:
        sys.exit(__doc__)
    mode, mpirun, binary, out = sys.argv[1], sys.argv[2].split(";"), sys.argv[3], sys.argv[4]
    data_or_skip()
    tests[mode](mpirun, binary, out)
    print("ok")


if __name__ == "__main__":
    main()
