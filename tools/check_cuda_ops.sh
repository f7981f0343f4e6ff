#!/bin/sh
# check_cuda_ops.sh — the build check of the CUDA EfficientNet kernels on a machine without a GPU: each
# cuda/ops_*.cu (and calibrate_kernels.cu, bench --calibrate's) with nvcc for sm_90 as CMake builds
# tb_cuda (C++17, -O3, every warning an error, register spills warned), ops_effnet.h as C11 with -pedantic, and tests/test_cuda_ops.c without CUDA (its skip
# path) and, when cuda/cuda_util.h is there (the executor's tree), with TB_HAVE_CUDA.
# Usage: tools/check_cuda_ops.sh [NVCC]. Exits 1 at the first failure; objects go to a temp folder.
set -eu
cd "$(dirname "$0")/.."
nvcc=${1:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in cuda/ops_*.cu cuda/calibrate_kernels.cu; do
    "$nvcc" -std=c++17 -O3 -arch=sm_90 -Icore -Icuda --Werror all-warnings -Xptxas --warn-on-spills \
        -Xcompiler -Wall,-Wextra -c "$f" -o "$tmp/$(basename "$f" .cu).o"
    echo "ok  $f"
done
printf '#include "ops_effnet.h"\n' >"$tmp/h.c"
gcc -std=c11 -Wall -Wextra -Werror -pedantic -Icore -Icuda -fsyntax-only "$tmp/h.c"
echo "ok  cuda/ops_effnet.h (C11)"
crit=$(pkg-config --cflags criterion 2>/dev/null || true)
cc="gcc -std=c11 -O2 -Wall -Wextra -Werror -Itests -Iutil -Icore -Icuda $crit -c tests/test_cuda_ops.c"
$cc -o "$tmp/t0.o"
echo "ok  tests/test_cuda_ops.c (without CUDA: every test skips)"
if [ -f cuda/cuda_util.h ]; then
    $cc -DTB_HAVE_CUDA=1 -I"$(dirname "$nvcc")/../include" -o "$tmp/t1.o"
    echo "ok  tests/test_cuda_ops.c (TB_HAVE_CUDA)"
else
    echo "--  tests/test_cuda_ops.c with TB_HAVE_CUDA: needs cuda/cuda_util.h (the executor's tree)"
fi
