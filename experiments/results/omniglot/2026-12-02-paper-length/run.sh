#!/usr/bin/env bash
# The paper-length grid (issue 52) in two lanes of one thread each: on 2 cores two
# 1-thread processes train ~1,900 images/s together against ~1,450 for one 2-thread
# process (BM_Conv4GridStepCpu, 2026-12-02, AMD EPYC VM). Each lane runs its rows in the
# issue's order -- (a) Table 1 and the siamese row, seed 1; (b) seeds 2-3 of them; then
# (c) the ablation rows whose claim failed or sat within the spread at the CPU scale --
# one omniglot_grid invocation a cell list, so the same command continues a half-done
# grid on any machine (finished cells are skipped, a stopped one resumes from its
# last.safetensors, committed with the folder).
#
#   run.sh LANE UNTIL [GRID_BINARY]
#     LANE         a or b
#     UNTIL        a wall-clock time `date -d` reads ("03:05", "+2 hours"): the lane stops
#                  resumably before it
#     GRID_BINARY  default build/experiments/omniglot_grid (a saved copy keeps a
#                  rebuild from changing the binary under a running lane)
# Run from the repository root; the data are found as by omniglot_triplet.
set -euo pipefail
lane=${1:?lane a or b}
until_s=$(date -d "${2:?until when}" +%s)
grid=${3:-build/experiments/omniglot_grid}
out=experiments/results/omniglot/2026-12-02-paper-length
case $lane in
  a) table=(t1-kumar t1-softmax t1-hard-positive)
     ablations=(drop-0.1 drop-0.1-global drop-0.1-gt act-elu act-selu samp-hard-negative norm-input norm-bn) ;;
  b) table=(t1-global t2-siamese t1-global-triplet t1-schroff)
     ablations=(act-global-elu act-gt-elu act-dropout-elu norm-input-bn norm-lrn norm-lrn-input) ;;
  *) echo "run.sh: lane must be a or b, not '$lane'" >&2; exit 2 ;;
esac
cell() {  # row, seeds (1..N)
  local left=$((until_s - $(date +%s)))
  if ((left < 60)); then echo "[lane $lane] time is up before $1 seed $2"; exit 3; fi
  MN_NUM_THREADS=1 "$grid" --scale paper-length --rows "^$1\$" --seeds "$2" --ablation-seeds "$2" \
    --close-points 0 --device cpu --out-dir "$out" --time-limit "$left"
}
for seed in 1 2 3; do
  for row in "${table[@]}"; do cell "$row" "$seed"; done
done
for row in "${ablations[@]}"; do cell "$row" 1; done
echo "[lane $lane] every cell of the lane is finished"
