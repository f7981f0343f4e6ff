#!/bin/sh
# run_filtered.sh — ctest's runner for an entry that runs chosen tests of a Criterion binary (--filter): passed
# only when the binary exits 0 AND the N chosen tests ran and passed (a test that skips says why). A PASS_REGULAR_EXPRESSION alone made ctest
# ignore the exit status (a sanitizer report after the synthesis line passed), and a filter that matches
# nothing (a renamed test) runs none and exits 0. When the N tests were skipped (a tool the test needs is not
# installed) and none ran, exit 77 (ctest's Skipped) with Criterion's reason, not a pass.
#
#   sh tests/run_filtered.sh N BINARY [criterion options...]
set -u
[ $# -ge 2 ] || { echo "usage: sh tests/run_filtered.sh N BINARY [criterion options...]" >&2; exit 2; }
n=$1
shift
out=$(mktemp) || exit 1
trap 'rm -f "$out" "$out.skip"' EXIT
"$@" --verbose >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || exit "$rc"
syn=$(sed -n 's/.*Synthesis: Tested: \([0-9]*\) | Passing: \([0-9]*\) | Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2 \3 \4/p' "$out")
set -- $syn
[ $# -eq 4 ] || { echo "run_filtered.sh: no Criterion synthesis line in the output"; exit 1; }
# Filtered-out tests print "[SKIP] NAME: Test is disabled": only the others are skips of the chosen tests.
grep '^\[SKIP\]' "$out" | grep -v ': Test is disabled$' >"$out.skip"
skipped=$(grep -c . "$out.skip")
# Passed: every chosen test ran and passed or skipped saying why (a test may skip where its case cannot arise).
[ "$1" -gt 0 ] && [ "$2" -eq "$1" ] && [ $(($1 + skipped)) -eq "$n" ] && exit 0
if [ "$1" -eq 0 ] && [ "$skipped" -eq "$n" ]; then
    echo "run_filtered.sh: skipped: $(sed -n '1s/^\[SKIP\] //p' "$out.skip")"
    exit 77
fi
echo "run_filtered.sh: expected $n tests run (or skipped) and passed, got $1 run, $2 passed, $skipped skipped"
exit 1
