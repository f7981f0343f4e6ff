#!/bin/sh
# run_device_tests.sh — ctest's runner for the cuda device's own test binaries (test_cuda*): a machine without
# the device runs their host-side tests and skips the rest ("no CUDA device: <the runtime's reason>"), which
# Criterion counts as neither passed nor failed, so ctest said Passed. Here: the binary's own status when it
# failed; else exit 77 (SKIP_RETURN_CODE: ctest's Skipped) when any test skipped for want of the device, with
# a line saying how many and why; else 0. Other skips (one GPU where a test wants two) leave the status alone.
#
#   sh tests/run_device_tests.sh BINARY [criterion options...]
set -u
[ $# -ge 1 ] || { echo "usage: sh tests/run_device_tests.sh BINARY [criterion options...]" >&2; exit 2; }
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$@" --verbose >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || exit "$rc"
nodev='^\[SKIP\] [^ ]*: no CUDA device' # Criterion's line for a test skipped for want of the device
n=$(grep -c "$nodev" "$out")
if [ "$n" -gt 0 ]; then
    why=$(grep -m1 "$nodev" "$out" | sed 's/^\[SKIP\] [^ ]*: //')
    ran=$(sed -n 's/.*Synthesis: Tested: \([0-9]*\) | Passing: \([0-9]*\).*/\2 of \1/p' "$out")
    echo "run_device_tests.sh: $n tests skipped, $why; the host-side tests passed (${ran:-0 of 0}): reported as skipped"
    exit 77
fi
exit 0
