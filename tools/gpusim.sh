#!/bin/sh
# gpusim.sh — `make gpusim [ARGS="…"]`: what the cuda device's kernels would ask of a GPU's memory, counted on
# the CPU emulation (no GPU needed; tests/cuda_emu/emu_memtrace.cpp says what is modelled).
#
#   tools/gpusim.sh BUILD [bench options...]     (default: effnet-b0 at 224×224, fp32)
#
# Runs BUILD/bench_gpusim (bench on the emulated device, its kernels' loads and stores traced) for one training
# step at batch GPUSIM_B1 and one at GPUSIM_B2 (default 1 and 2), then tools/gpusim.py tables each kernel at
# GPUSIM_B2 and projects both to batch GPUSIM_TO (default 256: issue 26's benchmark) with the DRAM floor of each
# kernel family at GPUSIM_GBPS (default 4300). Deterministic: the same tree and options give the same counts,
# so a kernel change's effect needs one run a side (TB_CUDA_* switches in the environment reach the run).
# About 2 minutes at 224×224 batches 1 and 2. Output: stdout and $OUT_DIR/<id>.md, the traces beside it.
set -eu
[ $# -ge 1 ] || { echo "usage: tools/gpusim.sh BUILD [bench options...]" >&2; exit 2; }
BUILD=$1
shift
cd "$(dirname "$0")/.."
if [ ! -x "$BUILD/bench_gpusim" ]; then
    echo "gpusim.sh: no $BUILD/bench_gpusim (make gpusim builds it where nvcc is)" >&2
    exit 1
fi
B1=${GPUSIM_B1:-1} B2=${GPUSIM_B2:-2} TO=${GPUSIM_TO:-256} GBPS=${GPUSIM_GBPS:-4300}
OUT_DIR=${OUT_DIR:-results/gpusim}
mkdir -p "$OUT_DIR"
[ $# -gt 0 ] || set -- --workload effnet-b0 --resolution 224
for a in "$@"; do
    case $a in
    --batch | --batch=*)
        echo "gpusim.sh: the batches are GPUSIM_B1 and GPUSIM_B2 (the projection needs two), not --batch" >&2
        exit 2
        ;;
    esac
done
ID="gpusim-$(date -u +%Y%m%dT%H%M%SZ)-$$"
for b in "$B1" "$B2"; do
    echo "gpusim: one step at batch $b: bench_gpusim --backend cuda $* (the run's options after the defaults win)" >&2
    TB_GPUSIM_OUT="$OUT_DIR/$ID-b$b.tsv" "$BUILD/bench_gpusim" --backend cuda --plan throughput --steps 1 --warmup 0 \
        --data synthetic --batch "$b" "$@" --quiet --out "$OUT_DIR/$ID-b$b.jsonl"
done
{
    echo "# make gpusim: $* (batches $B1 and $B2; $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo
    echo "Batch $B2 as traced:"
    echo
    python3 tools/gpusim.py "$OUT_DIR/$ID-b$B2.tsv"
    echo
    python3 tools/gpusim.py "$OUT_DIR/$ID-b$B1.tsv" "$OUT_DIR/$ID-b$B2.tsv" --batches "$B1,$B2" --to "$TO" \
        --gbps "$GBPS"
    echo
    echo "Shared-memory hazards (racecheck on the emulation: two threads of a block on one 2-byte unit between the"
    echo "same two barriers, one writing), batches $B1 and $B2:"
    echo
    if [ -s "$OUT_DIR/$ID-b$B1.tsv.races" ] || [ -s "$OUT_DIR/$ID-b$B2.tsv.races" ]; then
        echo "| batch | kernel | hazards | the first |"
        echo "|---:|---|---:|---|"
        for b in "$B1" "$B2"; do
            [ -f "$OUT_DIR/$ID-b$b.tsv.races" ] &&
                awk -F'\t' -v b="$b" '{printf "| %s | %s | %s | %s |\n", b, $1, $2, $3}' "$OUT_DIR/$ID-b$b.tsv.races"
        done
    else
        echo "none"
    fi
} | tee "$OUT_DIR/$ID.md"
echo "gpusim: $OUT_DIR/$ID.md" >&2
