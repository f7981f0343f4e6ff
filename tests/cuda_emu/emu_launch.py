#!/usr/bin/env python3
"""emu_launch.py IN.cu OUT.cpp — a CUDA source made host C++ for the CPU emulation (tests/cuda_emu/emu.h).

The rewrites: each launch `kernel<...><<<grid, block[, smem[, stream]]>>>(args)` becomes
`tbemu::launch(<a lambda calling kernel<...>>, grid, block[, smem[, stream]])(args)`, each kernel's body opens
with TBEMU_KERNEL() (its name and template arguments, for the memory trace), `extern __shared__ T name[];` becomes a pointer to
the launch's dynamic shared memory, threadIdx, blockIdx, blockDim and gridDim the emulation's (tbemu::thread_idx...),
<cooperative_groups.h> its shim (emu_cg.h). A #include of another .cu file (ops_dwconv_fp16.cu includes
ops_dwconv.cu) is rewritten too, to the generated .cpp beside OUT, so each unit sees rewritten code.
"""
import os
import re
import sys


def kernel_start(src, end):
    """Index where the kernel expression ending just before src[end] starts (identifier, ::, <...>)."""
    i = end
    while i > 0 and src[i - 1].isspace():
        i -= 1
    if i > 0 and src[i - 1] == '>':  # template arguments: back to the matching '<'
        depth = 0
        while i > 0:
            i -= 1
            if src[i] == '>':
                depth += 1
            elif src[i] == '<':
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and src[i - 1].isspace():
            i -= 1
    while i > 0 and (src[i - 1].isalnum() or src[i - 1] in '_:'):
        i -= 1
    return i


def mark_kernels(src):
    """Each kernel's body opens with TBEMU_KERNEL(), which names the kernel to the memory trace (emu.h)."""
    out, pos = [], 0
    for m in re.finditer(r'__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?\w+\s*\(', src):
        i, depth = m.end(), 1
        while depth:
            depth += {'(': 1, ')': -1}.get(src[i], 0)
            i += 1
        while src[i].isspace():
            i += 1
        if src[i] == '{':  # a definition, not a declaration
            out.append(src[pos:i + 1] + ' TBEMU_KERNEL();')
            pos = i + 1
    out.append(src[pos:])
    return ''.join(out)


def rewrite(src):
    src = mark_kernels(src)
    out, pos = [], 0
    while True:
        a = src.find('<<<', pos)
        if a < 0:
            out.append(src[pos:])
            break
        b = src.find('>>>', a)
        if b < 0:
            sys.exit('emu_launch: <<< without >>>')
        k = kernel_start(src, a)
        if k < pos:
            sys.exit('emu_launch: a launch inside the previous one')
        out.append(src[pos:k])
        # A lambda, not the kernel's address: a template kernel's arguments are deduced from the call's,
        # as nvcc deduces them, and each thread calls it with the arguments the launch copied once.
        out.append('tbemu::launch([](auto &...tbemu_a) { %s(tbemu_a...); }, %s)' % (src[k:a].strip(),
                                                                                   src[a + 3:b].strip()))
        pos = b + 3
    src = ''.join(out)
    src = re.sub(r'extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;',
                 r'\1 *\2 = static_cast<\1 *>(tbemu::dynamic_shared());', src)
    src = re.sub(r'#include\s+"([\w./]+)\.cu"', r'#include "\1.cpp"', src)
    src = src.replace('#include <cooperative_groups.h>', '#include "emu_cg.h"')
    # The built-in positions, where they are not a field (cudaLaunchConfig_t's blockDim and gridDim).
    for name, emu in (('threadIdx', 'thread_idx'), ('blockIdx', 'block_idx'), ('blockDim', 'block_dim'),
                      ('gridDim', 'grid_dim')):
        src = re.sub(r'(?<![.>\w])%s\b' % name, 'tbemu::' + emu, src)
    return src


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: emu_launch.py IN.cu OUT.cpp')
    with open(sys.argv[1]) as f:
        src = f.read()
    text = '#line 1 "%s"\n' % os.path.abspath(sys.argv[1]) + rewrite(src)
    tmp = sys.argv[2] + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, sys.argv[2])


if __name__ == '__main__':
    main()
