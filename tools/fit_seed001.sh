#!/bin/sh
# fit_seed001.sh — the one constant of devices/ipu-bow.spec fitted to a published figure: the per-kernel
# overhead (kernel_overhead_us), on Bow Pod16 ONLY (seed 001: 8,936 images/s). Pod64 and Pod256 stay
# out-of-sample. Bisection on the projected Pod16 rate, every other spec number as the file has it.
# Usage: tools/fit_seed001.sh [bench]   (from the repository root; prints the fitted value in us)
# A projection that fails or prints no Pod16 rate, or a target the bracket [0, 20] us does not hold, stops
# it with one line and exit 1: a bisection on missing rates would walk to 0 and print that as the fit.
set -eu
BENCH=${1:-build/bench}
die() { echo "fit_seed001: $*" >&2; exit 1; }
[ -x "$BENCH" ] || die "$BENCH is not an executable (make build, or pass the bench to use)"
target=$(awk '/^point *= *16 /{print $6}' devices/seed001.published 2>/dev/null) || true
case $target in '' | *[!0-9.]*) die "no Pod16 figure (a 'point = 16 ...' line) in devices/seed001.published (run from the repository root)" ;; esac
# rate US: the projected Pod16 (16 devices, 8 replicas) images/s with kernel_overhead_us = US. Called as
# $(rate ...): die ends that subshell, and set -e the script with it.
rate() {
    out=$("$BENCH" --backend ipu --workload effnet-b4-g16 --classes 1000 --project-device ipu-bow --precision fp16 \
        --recompute --project-devices 16 --device-set "kernel_overhead_us=$1" 2>&1) ||
        die "$BENCH failed (exit $?) projecting kernel_overhead_us=$1: $(printf '%s\n' "$out" | tail -n 1)"
    r=$(printf '%s\n' "$out" | awk '$1 == 16 && $2 == 8 {print $8; exit}')
    case $r in
    '' | *[!0-9.eE+-]*) die "no Pod16 rate (the '16 8' row's 8th column) in bench's projection at kernel_overhead_us=$1" ;;
    esac
    echo "$r"
}
lo=0; hi=20
r_lo=$(rate "$lo")
r_hi=$(rate "$hi")
awk -v a="$r_lo" -v b="$r_hi" -v t="$target" 'BEGIN{exit !(a > t && t >= b)}' ||
    die "the published $target images/s is not between the projections at $lo us ($r_lo) and $hi us ($r_hi)"
i=0
while [ $i -lt 30 ]; do
    mid=$(awk -v a="$lo" -v b="$hi" 'BEGIN{printf "%.6f", (a+b)/2}')
    r=$(rate "$mid")
    if awk -v r="$r" -v t="$target" 'BEGIN{exit !(r > t)}'; then lo=$mid; else hi=$mid; fi
    i=$((i+1))
done
echo "kernel_overhead_us = $(awk -v a="$lo" -v b="$hi" 'BEGIN{printf "%.3f", (a+b)/2}') (Pod16 published $target images/s)"
