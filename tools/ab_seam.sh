#!/bin/sh
# ab_seam.sh — issue 25's before/after check of two bench builds: the final loss of fixed configurations
# (%.17g; equal means the same bits) and an alternating throughput A/B (tools/ab.sh) of mnist-mlp batch 1
# and 128, effnet-b0 32×32 batch 128 and 224×224 batch 16 on cpu and threads.
#
#   tools/ab_seam.sh [-l] A_BENCH B_BENCH [B_EXTRA]
#   tools/ab_seam.sh /tmp/base/build/bench build/bench "--bn-eps 1e-3"
#   tools/ab_seam.sh -l -i build/bench -   (the stage rows' losses only, of one build: B = "-")
#
# -l: the losses only, no throughput A/B; -i: only the rows of the ipu stages and the optimizer's
# initial state (the seam-ipu change), not the cpu/threads ones. The ipu rows (issue 25's stage executors) pin the split
# (--split) so that no per-layer timing chooses it.
#
# Real Fashion-MNIST, so that both builds read the same pixels; --conv-algo im2col for the losses (auto
# times each shape and may pick differently from run to run). B_EXTRA is passed to B's EfficientNet runs
# only (a newer build's flags that restore the older defaults).
set -u
LOSSES_ONLY=0
STAGES_ONLY=0
usage() {
    [ -z "${1:-}" ] || echo "ab_seam: $1" >&2
    echo "usage: tools/ab_seam.sh [-l] [-i] A_BENCH B_BENCH|- [B_EXTRA]   (relative paths from the repository root; B = -: A's losses only, with -l)" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    -l) LOSSES_ONLY=1; shift ;;
    -i) STAGES_ONLY=1; shift ;;
    -*) usage "unknown option '$1'" ;;
    *) break ;;
    esac
done
{ [ $# -ge 2 ] && [ $# -le 3 ]; } || usage
A=$1 B=$2 BX=${3:-}
cd "$(dirname "$0")/.." || exit 1
# Checked from the repository root, where the runs start.
[ -x "$A" ] || usage "$A is not an executable"
[ "$B" = - ] || [ -x "$B" ] || usage "$B is not an executable"
# B = "-" is one build: there is no throughput A/B to run, so it comes with -l.
[ "$B" != - ] || [ "$LOSSES_ONLY" = 1 ] || usage "B = - (one build) needs -l: there is no second build for the throughput A/B"
DATA=/usr/share/datasets/fashion-mnist
D="--data $DATA --no-eval --mllog none --quiet"
loss() {
    bin=$1; shift; out=$(mktemp)
    # mnist-mlp has no convolutions: bench refuses an algorithm for them
    case "$*" in *effnet*) ca="--conv-algo im2col" ;; *) ca="" ;; esac
    if "$bin" $D $ca "$@" --out "$out" >/dev/null 2>&1; then
        python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print('%.17g' % r['figures']['final_loss'])" "$out"
    else echo "failed"; fi
    rm -f "$out"
}
# One row: backend | configuration | A's loss | B's loss | same or DIFF (B = "-": A's loss only).
row() {
    a=$(loss "$A" --backend $1 $2)
    if [ "$B" = - ]; then echo "$1 | $2 | $a"; return; fi
    b=$(loss "$B" --backend $1 $2 $3)
    echo "$1 | $2 | $a | $b | $([ "$a" = "$b" ] && echo same || echo DIFF)"
}
echo "== final loss"
for be in cpu threads; do
    [ "$STAGES_ONLY" = 1 ] && break
    for cfg in "--workload effnet-b0 --resolution 224 --batch 16 --steps 2 --optimizer sgd --lr 0.01" \
               "--workload effnet-b0 --resolution 32 --batch 128 --steps 3 --optimizer sgd --lr 0.01" \
               "--workload effnet-b0 --resolution 32 --batch 128 --steps 3 --optimizer sgd --lr 0.01 --no-fuse" \
               "--workload mnist-mlp --batch 1 --steps 200" "--workload mnist-mlp --batch 128 --steps 20"; do
        case "$cfg" in *effnet*) x=$BX ;; *) x="" ;; esac
        row $be "$cfg" "$x"
    done
done
E="--workload effnet-b0 --resolution 32 --steps 3 --optimizer sgd --lr 0.01 --split 8"
P="$E --batch 16 --stages 2 --micro-batch 4 --ga 4"
for cfg in "--optimizer rmsprop --lr 0.001 --workload effnet-b0 --resolution 32 --batch 16 --steps 3" \
           "--optimizer rmsprop --lr 0.001 --workload mnist-mlp --batch 16 --steps 20"; do
    row cpu "$cfg" ""
done
for cfg in "$P" "$P --recompute" "$P --precision bf16" "$P --precision bf16 --recompute" \
           "$P --precision fp16" "$P --precision fp16 --recompute" "$P --precision bf16m" "$P --precision fp16m" \
           "$P --precision fp16 --loss-scale 8" "$P --precision fp16 --loss-scale 8 --recompute" \
           "$P --precision fp16m --loss-scale 8" "$P --precision bf16m --recompute" \
           "$P --schedule gpipe" "$P --schedule gpipe --precision bf16 --recompute" \
           "$E --batch 32 --stages 2 --micro-batch 4 --ga 4 --replicas 2" \
           "$E --batch 32 --stages 2 --micro-batch 4 --ga 4 --replicas 2 --precision bf16" \
           "$E --batch 32 --stages 2 --micro-batch 4 --ga 4 --replicas 2 --precision fp16 --recompute" \
           "$E --batch 24 --stages 3 --split 4,10 --micro-batch 4 --ga 6" \
           "$P --optimizer rmsprop --lr 0.001" "$P --optimizer rmsprop --lr 0.001 --precision bf16" \
           "$P --optimizer lars --lr 0.1 --precision fp16m" "$P --optimizer adam --lr 0.001 --precision fp16 --no-fuse" \
           "$P --optimizer lars --lr 0.1 --precision fp16m --loss-scale 8" \
           "$P --optimizer adam --lr 0.001 --precision fp16 --loss-scale 8 --recompute" \
           "$E --batch 32 --stages 2 --micro-batch 4 --ga 4 --replicas 2 --precision fp16 --loss-scale 8" \
           "--workload mnist-mlp --batch 16 --stages 2 --micro-batch 4 --ga 4 --steps 20" \
           "--workload mnist-mlp --batch 16 --stages 2 --micro-batch 4 --ga 4 --steps 20 --precision bf16 --optimizer rmsprop --lr 0.001" \
           "--workload mnist-mlp --batch 16 --stages 1 --micro-batch 16 --ga 1 --steps 20"; do
    row ipu "$cfg" ""
done
[ "$LOSSES_ONLY" = 1 ] && exit 0
T="--data $DATA --plan throughput"
for be in cpu threads; do
    echo "== mnist-mlp b1 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload mnist-mlp --batch 1 --warmup 2000 --steps 20000
    echo "== mnist-mlp b128 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload mnist-mlp --batch 128 --warmup 20 --steps 300
    echo "== effnet-b0 32 b128 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload effnet-b0 --resolution 32 --batch 128 --optimizer rmsprop --lr 0.001 --warmup 2 --steps 10
    echo "== effnet-b0 224 b16 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload effnet-b0 --resolution 224 --batch 16 --optimizer rmsprop --lr 0.001 --warmup 1 --steps 4
done
