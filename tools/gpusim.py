#!/usr/bin/env python3
"""gpusim.py TRACE.tsv [TRACE2.tsv --batches B1,B2 --to N] [--gbps G] [--top K] — the cuda device's kernels as the
memory trace saw them (make gpusim; tests/cuda_emu/emu_memtrace.cpp says what it counts). Modelled, not measured.

One trace: a markdown table, one row a kernel, the most L1 traffic first:
  L1 MB       the 32-byte sectors its global loads and stores asked of L1, request by request
  DRAM MB     the distinct sectors each launch read and wrote (the least DRAM moves if L2 keeps what a launch
              reuses, and nothing from one launch to the next)
  ld s/req    sectors a warp's load request touched (4: a coalesced fp32 warp; 16: a float4 one; 32: one a lane)
  ld B/sec    bytes the lanes asked for per byte of the sectors touched (1.00: nothing fetched unused; above 1:
              lanes sharing bytes)
  st s/req, st B/sec  the same for stores
  sh wf/req   shared-memory wavefronts a request (1 for 4-byte lanes, 2 for 8-byte ones: no bank conflict)
Two traces of one run at batches B1 and B2: every count projected linearly to batch N (a kernel's traffic is a
part that grows with the batch and a part that does not: weights, optimizer state), the table for batch N, its
floor in ms (DRAM MB at G GB/s, default 4300: what the H200's HBM gave a copy) and the sums by kernel family.
"""
import csv
import re
import sys

COUNTS = ('launches', 'blocks', 'threads', 'ld_req', 'ld_sectors', 'ld_bytes', 'st_req', 'st_sectors', 'st_bytes',
          'uniq_rd_bytes', 'uniq_wr_bytes', 'sh_req', 'sh_wavefronts', 'sh_bytes')
FAMILIES = (('BatchNorm', r'^k_bn_'), ('GroupNorm', r'^k_gn_'), ('depthwise', r'^k_dw_|^k_parts_finish'),
            ('grouped conv', r'^k_gc_'), ('stem / im2col', r'^k_conv_|^k_im2col|^k_col2im'),
            ('SE, pool', r'^k_se_|^k_gap_|^k_sigmoid'), ('activations, dropout', r'^k_silu|^k_drop|^bias_'),
            ('optimizer', r'update_k|^k_adam|^k_sgd|^k_lars|^k_rms'), ('precision', r'to_half|to_float|^k_cast'))


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter='\t'))
    if not rows:
        sys.exit('gpusim.py: %s has no kernels (did the run launch any?)' % path)
    return {r['kernel']: {k: int(r[k]) for k in COUNTS} for r in rows}


def family(name):
    for fam, pat in FAMILIES:
        if re.search(pat, name):
            return fam
    return 'other'


def ratio(a, b):
    return '%.2f' % (a / b) if b else '-'


def table(rows, top, gbps, shape=None):
    """rows' table; the per-request columns from shape's rows where given (a projection's counts are sums
    projected one by one, whose ratios need not be any batch's)."""
    shape = shape or rows
    for r in rows.values():
        r['l1'] = 32 * (r['ld_sectors'] + r['st_sectors'])
        r['dram'] = r['uniq_rd_bytes'] + r['uniq_wr_bytes']
    order = sorted(rows, key=lambda k: -rows[k]['l1'])
    tot_l1 = sum(r['l1'] for r in rows.values())
    floor = gbps is not None
    print('| kernel | launches | L1 MB | share | DRAM MB |%s ld s/req | ld B/sec | st s/req | st B/sec | sh wf/req |'
          % (' floor ms |' if floor else ''))
    print('|---|---:|---:|---:|---:|%s---:|---:|---:|---:|---:|' % ('---:|' if floor else ''))
    for k in order[:top]:
        r, q = rows[k], shape.get(k, dict.fromkeys(COUNTS, 0))
        print('| %s | %d | %.1f | %.1f %% | %.1f |%s %s | %s | %s | %s | %s |' % (
            k, r['launches'], r['l1'] / 1e6, 100.0 * r['l1'] / tot_l1 if tot_l1 else 0.0, r['dram'] / 1e6,
            ' %.2f |' % (r['dram'] / gbps / 1e6) if floor else '',
            ratio(q['ld_sectors'], q['ld_req']), ratio(q['ld_bytes'], 32 * q['ld_sectors']),
            ratio(q['st_sectors'], q['st_req']), ratio(q['st_bytes'], 32 * q['st_sectors']),
            ratio(q['sh_wavefronts'], q['sh_req'])))
    if len(order) > top:
        print('| (%d more) |' % (len(order) - top))
    dram = sum(r['dram'] for r in rows.values())
    print('| all | %d | %.1f | | %.1f |%s |' % (sum(r['launches'] for r in rows.values()), tot_l1 / 1e6, dram / 1e6,
                                             ' %.2f |' % (dram / gbps / 1e6) if floor else ''))
    return tot_l1, dram


def families(rows, gbps):
    sums = {}
    for k, r in rows.items():
        s = sums.setdefault(family(k), [0, 0])
        s[0] += r['l1']
        s[1] += r['dram']
    print()
    print('| family | L1 MB | DRAM MB | floor ms at %g GB/s |' % gbps)
    print('|---|---:|---:|---:|')
    for fam in sorted(sums, key=lambda f: -sums[f][1]):
        print('| %s | %.1f | %.1f | %.2f |' % (fam, sums[fam][0] / 1e6, sums[fam][1] / 1e6, sums[fam][1] / gbps / 1e6))


def main():
    args = sys.argv[1:]
    opts = {'--top': '40', '--batches': None, '--to': None, '--gbps': '4300'}
    for o in list(opts):
        if o in args:
            i = args.index(o)
            if i + 1 >= len(args):
                sys.exit('gpusim.py: %s needs a value' % o)
            opts[o] = args[i + 1]
            del args[i:i + 2]
    if len(args) not in (1, 2) or (len(args) == 2) != (opts['--batches'] is not None and opts['--to'] is not None):
        sys.exit('usage: gpusim.py TRACE.tsv [TRACE2.tsv --batches B1,B2 --to N] [--gbps G] [--top K]')
    top, gbps = int(opts['--top']), float(opts['--gbps'])
    a = load(args[0])
    if len(args) == 1:
        table(a, top, None)
        return
    b = load(args[1])
    b1, b2 = (int(x) for x in opts['--batches'].split(','))
    n = int(opts['--to'])
    if b1 == b2:
        sys.exit('gpusim.py: the two batches must differ')
    proj = {}
    for k in set(a) | set(b):
        ra, rb = a.get(k, dict.fromkeys(COUNTS, 0)), b.get(k, dict.fromkeys(COUNTS, 0))
        proj[k] = {c: max(0, round(ra[c] + (rb[c] - ra[c]) * (n - b1) / (b2 - b1))) for c in COUNTS}
    print('Projected to batch %d from batches %d and %d (linear per kernel; the per-request columns are batch %d\'s;'
          ' modelled, not measured):' % (n, b1, b2, b2))
    print()
    table(proj, top, gbps, b)
    families(proj, gbps)


if __name__ == '__main__':
    main()
