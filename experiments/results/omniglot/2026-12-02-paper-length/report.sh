#!/usr/bin/env bash
# Regenerates results.md, results.json and Figures 3-7 of the paper-length grid from its finished
# cells, with the CPU grid's claims and taus beside them (which findings change with length).
#   report.sh [GRID_BINARY]   (default build/experiments/omniglot_grid; run from the repository root)
set -euo pipefail
grid=${1:-build/experiments/omniglot_grid}
"$grid" --scale paper-length --out-dir experiments/results/omniglot/2026-12-02-paper-length --device cpu \
  --compare-with experiments/results/omniglot/2026-11-27-cpu-grid --report-only
