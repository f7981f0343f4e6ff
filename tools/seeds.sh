#!/bin/sh
# seeds.sh — `make seeds`: calibrate this machine if needed, run suites/seed-001.suite (the B4-G16 pipeline
# whose stage times check the device model here) and suites/seed-002.suite (issue 30's seed 002 on every
# backend), and write the report with its Seeds section beside the published figures
# (devices/seed001.published, plots/seed-002.published.tsv) and the device model's projections.
#
#   tools/seeds.sh [BUILD]        environment: SEED_DATA=DIR (MNIST IDX files; default Debian's
#                                 Fashion-MNIST), SEED_EPOCHS=N (a shorter check; default the suite's 50)
#
# Rows go to results/seeds.jsonl (the previous run's to results/seeds.prev.jsonl), event logs to
# results/mllog/, the report to results/REPORT.md and results/charts/ (all git-ignored). The report reads
# the last demo's rows too when there are any (results/demo.jsonl), so its other sections stay. A failed
# run is reported and the rest still run; the report is written either way and the exit status says so.
# The suites write to results/seeds.partial.jsonl, moved into place only once both have run to their end:
# an interrupted or crashed run (bench exits 128 + signal) stops here and never pushes the last complete
# rows out.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bench
# SEED_EPOCHS and SEED_DATA are checked before anything is moved, written or run.
usage() {
    echo "seeds: $1" >&2
    echo "usage: [SEED_DATA=DIR] [SEED_EPOCHS=N] tools/seeds.sh [BUILD]   (DIR: MNIST IDX files; N: 1..100000)" >&2
    exit 2
}
if [ -n "${SEED_EPOCHS:-}" ]; then
    case $SEED_EPOCHS in
    *[!0-9]* | 0* | ??????*[0-9]) usage "SEED_EPOCHS=$SEED_EPOCHS is not a whole number in 1..100000" ;;
    esac
    [ "$SEED_EPOCHS" -le 100000 ] || usage "SEED_EPOCHS=$SEED_EPOCHS is not a whole number in 1..100000"
fi
if [ -n "${SEED_DATA:-}" ]; then
    [ -d "$SEED_DATA" ] || usage "SEED_DATA=$SEED_DATA is not a directory"
    # The IDX files bench's loader looks for (workloads/dataset_idx.c): <train|t10k>-<images-idx3|labels-idx1>-ubyte,
    # with '.' for the second '-' also accepted, plain or .gz.
    for f in train-images-idx3 train-labels-idx1 t10k-images-idx3 t10k-labels-idx1; do
        found=0
        for g in "$f" "${f%-idx?}.${f##*-}"; do
            for ext in "" .gz; do [ -f "$SEED_DATA/$g-ubyte$ext" ] && found=1; done
        done
        [ "$found" = 1 ] || usage "SEED_DATA=$SEED_DATA holds no MNIST IDX set: no $f-ubyte[.gz] (or ${f%-idx?}.${f##*-}-ubyte[.gz])"
    done
fi
[ -x "$B" ] || { echo "seeds: $B not built (make build)" >&2; exit 1; }
start=$(date +%s)
SUITE=suites/seed-002.suite
if [ -n "${SEED_EPOCHS:-}" ]; then
    # The same runs, shorter: a copy with every epochs=50 replaced (the rows name the copy and their epochs).
    SUITE=$BUILD/seed-002.suite
    sed "s/\bepochs=50\b/epochs=$SEED_EPOCHS/g" suites/seed-002.suite > "$SUITE" || exit 1
fi
set --
[ -z "${SEED_DATA:-}" ] || set -- --data "$SEED_DATA"
. tools/rows_partial.sh
rows_partial_start seeds
# step CMD...: runs CMD unless an earlier step was stopped by a signal (status >= 128).
step() { [ "$status" -ge 128 ] || "$@" || status=$?; }
# Seed 001's validation compares the cpu-this model (from the calibration the row carries) with measured
# stage times: the calibration must be this machine's.
step "$B" --calibrate-if-needed
step "$B" --suite suites/seed-001.suite --out "$PART"
step "$B" --suite "$SUITE" --out "$PART" "$@"
rows_partial_finish seeds seeds
rows=results/seeds.jsonl
if [ -f results/demo.jsonl ]; then
    rows=$BUILD/report-rows.jsonl
    cat results/demo.jsonl results/seeds.jsonl > "$rows" || exit 1
fi
"$B" report --in "$rows" --out-dir results || status=$?
echo "seeds: $(( $(date +%s) - start )) s in all; the Seeds section is in results/REPORT.md"
exit $status
