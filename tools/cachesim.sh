#!/bin/sh
# cachesim.sh — `make cachesim [WORKLOAD=…] [ARGS="…"]`: the memory traffic of each layer of one training
# step, from callgrind's cache model, where the machine gives no hardware counters.
#
#   tools/cachesim.sh BUILD_VG [bench options...]      (default: effnet-b0 at 32×32, batch 32, on cpu)
#
# Runs BUILD_VG/bench (a build valgrind can run: no AVX-512) for one warm-up and two timed steps with
# --profile under `valgrind --tool=callgrind --cache-sim=yes`; bench's layer marks (core/cachesim.c) dump
# the counters at each layer boundary of the second step (the first runs uninstrumented), and
# tools/cachesim.py tables them: MB read and written a step by layer type and the passes that move most,
# against the row's analytic estimate. One core's cache is modelled: CACHESIM_LL (bytes, default 2 MiB,
# 16-way: the L2 of a core of the 16-core Xeon, whose shared L3 is split 16 ways in issue 31's runs), D1
# 48 KiB 12-way. Reads are last-level read misses, writes its write misses (lines first touched by a
# store); dirty write-backs are not modelled. A run takes about 8 minutes at 32×32 batch 32 (~1000×
# native). Deterministic: the same build and options give the same bytes, so a change's effect on traffic
# needs no repeats (the 2-core machines' timings need many).
# Output: the tables on stdout and in $OUT_DIR/<id>.txt, every layer pass in $OUT_DIR/<id>.tsv
# (OUT_DIR default results/cachesim).
set -eu
[ $# -ge 1 ] || { echo "usage: tools/cachesim.sh BUILD_VG [bench options...]" >&2; exit 2; }
BUILD=$1
shift
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "cachesim.sh: valgrind is not installed (make deps)" >&2; exit 1; }
[ -x "$BUILD/bench" ] || { echo "cachesim.sh: no $BUILD/bench (make cachesim builds it)" >&2; exit 1; }
LL=${CACHESIM_LL:-2097152}
OUT_DIR=${OUT_DIR:-results/cachesim}
mkdir -p "$OUT_DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
[ $# -gt 0 ] || set -- --workload effnet-b0 --resolution 32 --batch 32
# The 1x1 convolutions on gemm1x1, as tools/scaling.sh's runs: `auto` would time the algorithms under
# valgrind, whose costs are not the machine's.
# (Not on mnist-mlp, which has no convolutions: bench refuses an algorithm for them.) The workload bench
# runs: its last --workload, spelt as getopt_long takes it (--workload NAME, --workload=NAME, or a prefix
# such as --work), else bench's default, mnist-mlp.
wl=mnist-mlp next=
for a in "$@"; do
    if [ -n "$next" ]; then wl=$a next=; continue; fi
    case $a in
    --wo=* | --wor=* | --work=* | --workl=* | --worklo=* | --workloa=* | --workload=*) wl=${a#*=} ;;
    --wo | --wor | --work | --workl | --worklo | --workloa | --workload) next=1 ;;
    esac
done
[ "$wl" = mnist-mlp ] || set -- --conv-algo gemm1x1 "$@"
ID="cachesim-$(date -u +%Y%m%dT%H%M%SZ)-$$" # the pid: two runs started together (an A/B, one a core) keep both tables
# Options given after the defaults win (getopt_long keeps the last); the two steps and --profile are forced
# after them. Valgrind runs the AVX2 kernels, so OpenBLAS's Haswell set is named (its auto pick may be
# an AVX-512 one).
TB_CACHESIM=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} valgrind -q --tool=callgrind --cache-sim=yes \
    --LL="$LL,16,64" --D1=49152,12,64 --I1=32768,8,64 --instr-atstart=no \
    --callgrind-out-file="$TMP/cg.%p" \
    "$BUILD/bench" --backend cpu --plan throughput --data synthetic --blas-core env "$@" \
    --warmup 1 --steps 2 --repeat 1 --profile --quiet --out "$TMP/row.jsonl" >"$TMP/bench.log" 2>&1 || {
    echo "cachesim.sh: the run failed:" >&2
    tail -n 5 "$TMP/bench.log" >&2
    exit 1
}
CACHESIM_LL_DESC="LL $LL B 16-way, D1 48 KiB" python3 tools/cachesim.py "$TMP" "$TMP/row.jsonl" \
    --tsv "$OUT_DIR/$ID.tsv" | tee "$OUT_DIR/$ID.txt"
echo "  every layer pass: $OUT_DIR/$ID.tsv"
