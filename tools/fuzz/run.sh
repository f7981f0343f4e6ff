#!/bin/sh
# run.sh — builds the reader fuzz targets (IDX, CIFAR-10, safetensors, suite files) with libFuzzer + ASan +
# UBSan and runs each for a bounded time. Usage: tools/fuzz/run.sh [seconds per target, default 60]
#
# Seeds in tools/fuzz/corpus/<target>/ are read, never written: new inputs go to a working corpus
# in the build directory ($TB_FUZZ_BUILD, default build-fuzz/ at the top of the tree), and so do
# crash artifacts. Each seed's first byte is the target's mode byte (see the comment at the top
# of fuzz_idx.c / fuzz_cifar.c). Exits non-zero if a target crashes or fails to build.
set -eu

secs=${1:-60}
# TB_FUZZ_RUNS=N stops each target after N executions (make fuzz: 10^6), $1 seconds being the cap.
runs=${TB_FUZZ_RUNS:--1}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${TB_FUZZ_BUILD:-$root/build-fuzz}
cc=${CC_FUZZ:-clang}
mkdir -p "$out"

status=0
# TB_FUZZ_TARGETS="suite idx" runs a subset.
for t in ${TB_FUZZ_TARGETS:-idx cifar safetensors suite}; do
    exe="$out/fuzz_$t"
    case $t in
    safetensors)
        srcs="$root/core/checkpoint.c $root/core/model.c $root/core/regular_file.c $root/util/json.c $root/util/status.c"
        # A valid file for the target's own model is written at start-up into seed_safetensors; the
        # committed corpus holds that file and its broken variants (truncations, bad header length,
        # JSON, dtype, shape, offsets, a missing tensor).
        mkdir -p "$out/seed_$t"
        cp "$root"/tools/fuzz/corpus/safetensors/* "$out/seed_$t/"
        seeds="$out/seed_$t" ;;
    suite)
        # The suite reader validates every run through the option table, the backend and workload
        # registries and bench_config_finish, so it links every layer's library. clang 14 cannot build the
        # library (no _Float16 on x86), so a plain gcc build of it supplies the rest, and only the
        # reader (suite.c) and the option parser (options.c) are compiled here, instrumented: the
        # harness archive's copies of those two are never pulled in.
        lib="$out/lib"
        # -DTB_CUDA=OFF: the archives are linked by hand below, without the cuda layer and its runtime.
        # -O1 and Ninja where installed: only compile time matters for these archives (make fuzz; fuzz_build skips this target).
        gen=""; command -v ninja >/dev/null 2>&1 && [ ! -f "$lib/CMakeCache.txt" ] && gen="-G Ninja"
        # shellcheck disable=SC2086
        cmake $gen -S "$root" -B "$lib" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE=-O1 -DTB_CUDA=OFF >/dev/null
        cmake --build "$lib" -j2 --target tb_harness >/dev/null
        srcs="$root/harness/suite.c $root/harness/options.c -I$root/backends -I$lib
              $lib/libtb_harness.a $lib/libtb_backends.a $lib/libtb_workloads.a $lib/libtb_core.a $lib/libtb_util.a
              $(pkg-config --libs openblas fftw3f gsl) -lpthread"
        # With Open MPI installed the library holds the MPI transport.
        srcs="$srcs $(pkg-config --libs ompi-c 2>/dev/null || true)"
        seeds="$root/tools/fuzz/corpus/$t" ;;
    *)
        # The synthetic set (a dataset*.c file) makes large sets on a pool (core/tpool.c).
        srcs="$root/util/status.c $root/util/rng.c $root/core/regular_file.c $root/core/tpool.c $root/core/fpenv.c
              $(ls "$root"/workloads/dataset*.c) -lpthread"
        seeds="$root/tools/fuzz/corpus/$t" ;;
    esac
    # util/rng.c draws normals with glibc's vector log and cosine (libmvec, x86-64).
    if [ "$(uname -m)" = x86_64 ]; then srcs="$srcs -lmvec"; fi
    # shellcheck disable=SC2086
    "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$root/util" -I"$root/core" -I"$root/workloads" -I"$root/harness" \
        "$root/tools/fuzz/fuzz_$t.c" $srcs -lz -lm -o "$exe"
    mkdir -p "$out/corpus_$t" "$out/artifacts_$t"
    log="$out/fuzz_$t.log"
    set +e
    # Each input loads at most a few files of a few KB, so a 2 GB RSS cap and 10 s per input are
    # generous; anything above them is a finding, not noise.
    TB_FUZZ_SEED_DIR="$out/seed_$t" "$exe" -max_total_time="$secs" -runs="$runs" -print_final_stats=1 -rss_limit_mb=2048 \
        -timeout=10 -artifact_prefix="$out/artifacts_$t/" "$out/corpus_$t" "$seeds" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        echo "fuzz_$t: ${execs:-?} executions in ${secs} s, no crash (log: $log)"
    else
        echo "fuzz_$t: CRASH or error (exit $rc) after ${execs:-?} executions; see $log and $out/artifacts_$t/"
        tail -n 30 "$log"
        status=1
    fi
done
exit $status
