#!/bin/sh
# check_fuzz_build.sh — ctest `fuzz_build`: the reader fuzz targets (tools/fuzz: IDX, CIFAR-10, safetensors)
# still build and run a few hundred inputs each, so that `make fuzz` cannot rot unseen (it once stopped
# linking when the readers began to use core/regular_file.c). The suite target, which builds a whole
# library tree, is left to `make fuzz`. Exit 77 (ctest: skipped) without clang's libFuzzer.
#   tests/check_fuzz_build.sh SOURCE_DIR WORK_DIR
set -u
src=$1 work=$2
cc=${CC_FUZZ:-clang}
mkdir -p "$work"
probe="$work/probe.c"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe" -o "$work/probe" >/dev/null 2>&1; then
    echo "fuzz_build: skipped: $cc cannot build libFuzzer targets here"
    exit 77
fi
TB_FUZZ_TARGETS="idx cifar safetensors" TB_FUZZ_RUNS=300 TB_FUZZ_BUILD="$work" CC_FUZZ="$cc" \
    sh "$src/tools/fuzz/run.sh" 20
