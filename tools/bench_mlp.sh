#!/bin/sh
# bench_mlp.sh — `make bench-mlp`: training throughput of mnist-mlp on every backend at batch 1, 32
# and 256 (5 repeats each, synthetic data), then a comparison with the previous run of this target.
#
#   tools/bench_mlp.sh [BUILD]
#
# Rows: results/bench-mlp.jsonl (the previous run's: results/bench-mlp.prev.jsonl). The suite writes to
# results/bench-mlp.partial.jsonl, moved into place only once the suite has run to its end, so an
# interrupted or crashed run (bench exits 128 + signal) never pushes the last complete rows out.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bench
[ -x "$B" ] || { echo "bench-mlp: $B not built (make build)" >&2; exit 1; }
SUITE=$(mktemp)
trap 'rm -f "$SUITE"' EXIT
cat > "$SUITE" <<'SUITE'
plan=throughput backend=* workload=mnist-mlp batch=1 warmup=200 steps=2000 repeat=5
plan=throughput backend=* workload=mnist-mlp batch=32,256 steps=200 repeat=5
SUITE
. tools/rows_partial.sh
rows_partial_start bench-mlp
"$B" --suite "$SUITE" --out "$PART" || status=$?
rows_partial_finish bench-mlp bench-mlp
# A failed run in the suite (the rest still ran): its rows are kept, the comparison is not made.
[ "$status" -eq 0 ] || exit "$status"
if [ -f results/bench-mlp.prev.jsonl ]; then
    "$B" compare results/bench-mlp.prev.jsonl results/bench-mlp.jsonl
fi
