#!/usr/bin/env bash
# Regenerates results.md, results.json and Figures 3-7 of the paper-length grid from its finished
# cells, with the CPU grid's claims and taus beside them (which findings change with length).
# Then the scoreboard (experiments/results/README.md), which reads this results.json.
#   report.sh [GRID_BINARY]   (default build/experiments/omniglot_grid; run from the repository root)
set -euo pipefail
grid=${1:-build/experiments/omniglot_grid}
"$grid" --scale paper-length --out-dir experiments/results/omniglot/2026-12-02-paper-length --device cpu \
  --compare-with experiments/results/omniglot/2026-11-27-cpu-grid --report-only
# The scoreboard reads this grid's results.json: regenerate it too (ctest tools.scoreboard
# fails while it is stale).
python3 tools/scoreboard.py
