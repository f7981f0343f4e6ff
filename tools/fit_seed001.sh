#!/bin/sh
# fit_seed001.sh — the one constant of devices/ipu-bow.spec fitted to a published figure: the per-kernel
# overhead (kernel_overhead_us), on Bow Pod16 ONLY (seed 001: 8,936 images/s). Pod64 and Pod256 stay
# out-of-sample. Bisection on the projected Pod16 rate, every other spec number as the file has it.
# Usage: tools/fit_seed001.sh [bench]   (from the repository root; prints the fitted value in us)
set -eu
BENCH=${1:-build/bench}
target=$(awk '/^point *= *16 /{print $6}' devices/seed001.published)
rate() {
    "$BENCH" --backend ipu --workload effnet-b4-g16 --classes 1000 --project-device ipu-bow --precision fp16 --recompute \
        --project-devices 16 --device-set "kernel_overhead_us=$1" |
        awk '$1 == 16 && $2 == 8 {print $8; exit}'
}
lo=0; hi=20
i=0
while [ $i -lt 30 ]; do
    mid=$(awk -v a=$lo -v b=$hi 'BEGIN{printf "%.6f", (a+b)/2}')
    r=$(rate "$mid")
    if awk -v r="$r" -v t="$target" 'BEGIN{exit !(r > t)}'; then lo=$mid; else hi=$mid; fi
    i=$((i+1))
done
echo "kernel_overhead_us = $(awk -v a=$lo -v b=$hi 'BEGIN{printf "%.3f", (a+b)/2}') (Pod16 published $target images/s)"
