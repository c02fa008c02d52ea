#!/usr/bin/env bash
# Regenerates results.md, results.json and Figures 3-7 of the paper-length grid from its finished
# cells, with the CPU grid's claims and taus beside them (which findings change with length).
# Then the scoreboard (experiments/results/README.md), which reads this results.json.
#   report.sh [GRID_BINARY]   (default build/experiments/omniglot_grid; run from the repository root)
set -euo pipefail
grid=${1:-build/experiments/omniglot_grid}
dir=experiments/results/omniglot/2026-12-02-paper-length
# A finished cell (summary.json written) needs no last.safetensors to resume: it leaves the
# working tree (1.45 MB each; git history keeps it), its best.safetensors (what Lake's trials
# scored) stays, as the cpu-4h folder does. The working tree travels with every GPU call
# (64 MiB with the staged build).
for s in "$dir"/*/seed*/summary.json; do
  [[ -f $s ]] && rm -f "$(dirname "$s")/last.safetensors"
done
"$grid" --scale paper-length --out-dir experiments/results/omniglot/2026-12-02-paper-length --device cpu \
  --compare-with experiments/results/omniglot/2026-11-27-cpu-grid --report-only
# The scoreboard reads this grid's results.json: regenerate it too (ctest tools.scoreboard
# fails while it is stale).
python3 tools/scoreboard.py
