#!/bin/sh
# check_gpusim_py.sh — ctest `gpusim_py`: tools/gpusim.py's arithmetic on two made-up traces (make gpusim's
# tables, whose traces take minutes to make): the per-request ratios, the projection to batch N (linear per
# count: a fixed part and a part per sample), its DRAM floor, the per-request columns taken from the second trace,
# and a usage error for a malformed call.
set -eu
SRC=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
H='kernel	launches	blocks	threads	ld_req	ld_sectors	ld_bytes	st_req	st_sectors	st_bytes	uniq_rd_bytes	uniq_wr_bytes	sh_req	sh_wavefronts	sh_bytes'
# k_a: 10 requests of 4 sectors, all 128 bytes used (batch 1); twice that, plus a fixed 1 MB read, at batch 2
printf '%s\nk_a\t1\t1\t32\t10\t40\t1280\t10\t40\t1280\t2000000\t1000000\t2\t4\t256\n' "$H" >"$T/b1.tsv"
printf '%s\nk_a\t1\t1\t64\t20\t80\t2560\t20\t80\t2560\t3000000\t2000000\t4\t8\t512\n' "$H" >"$T/b2.tsv"
fail() { echo "gpusim_py: $*" >&2; exit 1; }
out=$(python3 "$SRC/tools/gpusim.py" "$T/b2.tsv")
echo "$out" | grep -q '^| k_a | 1 | 0.0 | 100.0 % | 5.0 | 4.00 | 1.00 | 4.00 | 1.00 | 2.00 |$' || fail "one trace's row: $out"
out=$(python3 "$SRC/tools/gpusim.py" "$T/b1.tsv" "$T/b2.tsv" --batches 1,2 --to 256)
# DRAM at 256: read 2e6 + 255·1e6, written 1e6 + 255·1e6 = 513 MB; at 4300 GB/s 0.119 ms
echo "$out" | grep -q '^| k_a | 1 | .* | 513.0 | 0.12 | 4.00 | 1.00 | 4.00 | 1.00 | 2.00 |$' || fail "projection: $out"
echo "$out" | grep -q '^| all | 1 | .* | 513.0 | 0.12 |' || fail "projection's total: $out"
if python3 "$SRC/tools/gpusim.py" "$T/b1.tsv" "$T/b2.tsv" >/dev/null 2>&1; then fail "two traces without --batches accepted"; fi
echo "gpusim_py: ok"
