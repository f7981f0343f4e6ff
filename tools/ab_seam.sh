#!/bin/sh
# ab_seam.sh — issue 25's before/after check of two bench builds: the final loss of fixed configurations
# (%.17g; equal means the same bits) and an alternating throughput A/B (tools/ab.sh) of mnist-mlp batch 1
# and 128, effnet-b0 32×32 batch 128 and 224×224 batch 16 on cpu and threads.
#
#   tools/ab_seam.sh A_BENCH B_BENCH [B_EXTRA]
#   tools/ab_seam.sh /tmp/base/build/bench build/bench "--bn-eps 1e-3"
#
# Real Fashion-MNIST, so that both builds read the same pixels; --conv-algo im2col for the losses (auto
# times each shape and may pick differently from run to run). B_EXTRA is passed to B's EfficientNet runs
# only (a newer build's flags that restore the older defaults).
set -u
A=$1 B=$2 BX=${3:-}
cd "$(dirname "$0")/.."
DATA=/usr/share/datasets/fashion-mnist
D="--data $DATA --no-eval --mllog none --quiet --conv-algo im2col"
loss() {
    bin=$1; shift; out=$(mktemp)
    if "$bin" $D "$@" --out "$out" >/dev/null 2>&1; then
        python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print('%.17g' % r['figures']['final_loss'])" "$out"
    else echo "failed"; fi
    rm -f "$out"
}
echo "== final loss"
for be in cpu threads; do
    for cfg in "--workload effnet-b0 --resolution 224 --batch 16 --steps 2 --optimizer sgd --lr 0.01" \
               "--workload effnet-b0 --resolution 32 --batch 128 --steps 3 --optimizer sgd --lr 0.01" \
               "--workload effnet-b0 --resolution 32 --batch 128 --steps 3 --optimizer sgd --lr 0.01 --no-fuse" \
               "--workload mnist-mlp --batch 1 --steps 200" "--workload mnist-mlp --batch 128 --steps 20"; do
        case "$cfg" in *effnet*) x=$BX ;; *) x="" ;; esac
        a=$(loss "$A" --backend $be $cfg); b=$(loss "$B" --backend $be $cfg $x)
        echo "$be | $cfg | $a | $b | $([ "$a" = "$b" ] && echo same || echo DIFF)"
    done
done
T="--data $DATA --plan throughput"
for be in cpu threads; do
    echo "== mnist-mlp b1 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload mnist-mlp --batch 1 --warmup 2000 --steps 20000
    echo "== mnist-mlp b128 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload mnist-mlp --batch 128 --warmup 20 --steps 300
    echo "== effnet-b0 32 b128 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload effnet-b0 --resolution 32 --batch 128 --optimizer rmsprop --lr 0.001 --warmup 2 --steps 10
    echo "== effnet-b0 224 b16 $be"; tools/ab.sh -r 3 "$A" "$B" -- $T --backend $be --workload effnet-b0 --resolution 224 --batch 16 --optimizer rmsprop --lr 0.001 --warmup 1 --steps 4
done
