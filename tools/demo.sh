#!/bin/sh
# demo.sh — `make demo`: calibrate the machine (once per machine), run the default suite, write the report.
#
#   tools/demo.sh [BUILD]
#
# Rows go to results/demo.jsonl (the previous demo's to results/demo.prev.jsonl, so
# `bench compare results/demo.prev.jsonl results/demo.jsonl` shows what changed), MLPerf-style logs to
# results/mllog/, the report to results/REPORT.md and results/charts/. A failed run in the suite is
# reported and the rest still run; the report is written either way and the exit status says so.
# The suite writes to results/demo.partial.jsonl, which replaces results/demo.jsonl only once the suite
# has run to its end: an interrupted or crashed demo (bench exits 128 + signal) leaves the last complete
# demo's rows and its .prev where they were, and its own rows in the .partial file.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bench
[ -x "$B" ] || { echo "demo: $B not built (make build)" >&2; exit 1; }
start=$(date +%s)
# Ceilings of this machine only: a calibration of another CPU, core count or OpenBLAS kernel set is
# measured again, never reused.
"$B" --calibrate-if-needed || exit 1
. tools/rows_partial.sh
rows_partial_start demo
"$B" --suite suites/default.suite --out "$PART" || status=$?
rows_partial_finish demo demo
"$B" report --in results/demo.jsonl --out-dir results || status=$?
echo "demo: $(( $(date +%s) - start )) s in all; report in results/REPORT.md"
[ -f results/demo.prev.jsonl ] && echo "demo: compare with the previous demo: $B compare results/demo.prev.jsonl results/demo.jsonl"
exit $status
