#!/bin/sh
# cachesim_check.sh — the check `make test-valgrind` runs on tools/cachesim.sh: one simulated step of
# mnist-mlp (784-128-256-128-10) at batch 64 with a 64 KiB last-level cache, where nothing stays cached
# between layers; each dense layer's forward must then read at least its weight matrix (in·out floats).
# A mark attributed to the wrong layer (a shift by one: the input layer's 0.05 MB) or a parse that
# loses passes fails it.
set -eu
[ $# -eq 1 ] || { echo "usage: tools/cachesim_check.sh BUILD_VG   (a build with bench, as make test-valgrind makes)" >&2; exit 2; }
BUILD=$1
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
CACHESIM_LL=65536 OUT_DIR=$T ./tools/cachesim.sh "$BUILD" --workload mnist-mlp --batch 64 >"$T/out.txt"
awk -F'\t' '
    BEGIN { need["dense_0"] = 784 * 128 * 4; need["dense_1"] = 128 * 256 * 4; need["dense_2"] = 256 * 128 * 4
            need["dense_3"] = 128 * 10 * 4 }
    NR > 1 && $4 == "F" && ($2 in need) { seen[$2] = 1
        if ($5 + 0 < need[$2]) { printf "cachesim: %s forward read %d B, less than its weights (%d B)\n", $2, $5, need[$2]; bad = 1 } }
    END { for (k in need) if (!(k in seen)) { printf "cachesim: no forward pass of %s in the table\n", k; bad = 1 }
          exit bad }' "$T"/cachesim-*.tsv
echo "cachesim: every dense forward read at least its weights"
