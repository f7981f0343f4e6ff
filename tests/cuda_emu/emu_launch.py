#!/usr/bin/env python3
"""emu_launch.py IN.cu OUT.cpp — a CUDA source made host C++ for the CPU emulation (tests/cuda_emu/emu.h).

The rewrites: each launch `kernel<...><<<grid, block[, smem[, stream]]>>>(args)` becomes
`tbemu::launch(<a lambda calling kernel<...>>, grid, block[, smem[, stream]])(args)`, each kernel's body opens
with TBEMU_KERNEL() (its name and template arguments, for the memory trace), `extern __shared__ T name[];` becomes a pointer to
the launch's dynamic shared memory, each static `__shared__ T a[N], b;` references into the block's own (one per
declarator), cudaLaunchCooperativeKernel and cudaLaunchKernelEx the emulation's typed launches (a kernel's
address cast to const void * loses the type its arguments are unpacked by), threadIdx, blockIdx, blockDim and gridDim the emulation's (tbemu::thread_idx...),
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


def split_declarators(decls):
    """`a[N], b[M * (K, L)]` -> ['a[N]', 'b[M * (K, L)]']: commas outside brackets and parentheses."""
    out, depth, cur = [], 0, ''
    for ch in decls:
        if ch in '[(':
            depth += 1
        elif ch in '])':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    out.append(cur)
    return out


def static_shared(m):
    """One static __shared__ declaration as references into the running block's shared memory (emu.h's
    shared_static), a static tag's address the key every thread of the block asks with."""
    indent, decls = m.group(1), split_declarators(m.group(3))
    first = re.fullmatch(r'\s*(.*?)\s*\b(\w+\s*(?:\[[^\]]*\]\s*)*)', decls[0], flags=re.S)
    if not first or not first.group(1):
        sys.exit('emu_launch: a __shared__ declaration it cannot read: ' + m.group(0))
    typ, decls[0] = first.group(1), first.group(2)
    if '*' in typ and len(decls) > 1:  # `T *a, b;`: b is no pointer, and the rewrite would make it one
        sys.exit('emu_launch: a __shared__ declaration of pointers with several declarators: ' + m.group(0))
    out = []
    for d in decls:
        dm = re.fullmatch(r'\s*(\w+)\s*((?:\[[^\]]*\]\s*)*)', d)
        if not dm:
            sys.exit('emu_launch: a __shared__ declaration it cannot read: ' + m.group(0))
        name, dims = dm.group(1), dm.group(2).strip()
        ref, ptr = ('%s (&%s)%s' % (typ, name, dims), '%s (*)%s' % (typ, dims)) if dims else \
                   ('%s &%s' % (typ, name), typ + ' *')
        out.append('static const char tbemu_shared_%s = 0; %s = *static_cast<%s>(tbemu::shared_static('
                   '&tbemu_shared_%s, sizeof(%s%s)));' % (name, ref, ptr, name, typ, dims))
    return indent + ' '.join(out)


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
    src = re.sub(r'^([ \t]*)__shared__\s+(__align__\(\d+\)\s+)?([^;{}]+);', static_shared, src, flags=re.M)
    # A declaration the rewrite missed would compile as each thread's own local (the toolkit's host headers
    # define __shared__ away): refuse it instead.
    code = re.sub(r'//[^\n]*|/\*.*?\*/', '', src, flags=re.S)
    left = re.search(r'[^\n]*\b__shared__\b[^\n]*', code)
    if left:
        sys.exit('emu_launch: a __shared__ declaration it cannot rewrite (one a line, at its start): ' + left.group(0))
    src = re.sub(r'\bcudaLaunchCooperativeKernel\(\s*(?:\(const void \*\)\s*)?', 'tbemu::launch_cooperative(', src)
    src = re.sub(r'\bcudaLaunchKernelEx\(', 'tbemu::launch_ex(', src)
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
