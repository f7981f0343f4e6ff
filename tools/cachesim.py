#!/usr/bin/env python3
"""cachesim.py — tables of the bytes each layer moved in a cache-simulated step (tools/cachesim.sh).

    tools/cachesim.py DUMP_DIR ROW_JSONL [--tsv FILE]

DUMP_DIR holds callgrind's counter dumps of one `bench --profile` run, one per layer mark of its second step
(core/cachesim.c: "L<layer> F|B"; the last, "L-1 F" at the third step's start, holds the second's optimizer
update and the third's data). Bytes
are the last-level cache's simulated misses times the line: reads are read misses, writes are write misses
(a store's line first touched); write-backs of dirty lines are not modelled, so they are a lower bound on
what memory moves. Layer names and types come from the run's row (figures.layer_times).
"""
import glob
import json
import os
import re
import sys


def read_dumps(d):
    """[(part, trigger, {event: count})] of every dump in d, in the order callgrind wrote them."""
    out = []
    for path in glob.glob(os.path.join(d, "cg.*")):
        part, trig, ev, summ = 0, None, None, None
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("part: "):
                    part = int(line.split()[1])
                elif line.startswith("desc: Trigger: "):
                    trig = line[len("desc: Trigger: "):].strip()
                elif line.startswith("events: "):
                    ev = line.split()[1:]
                elif line.startswith("summary: "):
                    summ = [int(x) for x in line.split()[1:]]
                elif line.startswith("fn=") or line.startswith("ob="):
                    break  # the header is over
        if ev and summ:
            out.append((part, trig or "", dict(zip(ev, summ + [0] * (len(ev) - len(summ))))))
    out.sort(key=lambda t: t[0])
    return out


def step_marks(dumps):
    """The layer marks' dumps: the second step's (core/cachesim.c), ending with the third's forward start."""
    marks = []
    for part, trig, ev in dumps:
        m = re.fullmatch(r"Client Request: L(-?\d+) ([FB])", trig)
        if m:
            marks.append((int(m.group(1)), m.group(2), ev))
    if not marks or marks[-1][:2] != (-1, "F"):
        sys.exit("cachesim: no whole step in the dumps (bench needs --profile, TB_CACHESIM=1 and 3 steps)")
    return marks


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    tsv = argv[argv.index("--tsv") + 1] if "--tsv" in argv else None
    dumps = read_dumps(argv[1])
    rows = [json.loads(l) for l in open(argv[2]) if l.strip()]
    if not rows:
        sys.exit("cachesim: no result row in " + argv[2])
    row = rows[-1]
    layers = row.get("figures", {}).get("layer_times") or []
    cfg = row.get("config", {})
    line = 64
    step = step_marks(dumps)
    per = {}  # (layer, phase) -> [read B, write B, instructions]
    for l, ph, ev in step:
        key = (l, ph) if l >= 0 else (-1, "gap " + ph)
        acc = per.setdefault(key, [0, 0, 0])
        acc[0] += ev.get("DLmr", 0) * line
        acc[1] += ev.get("DLmw", 0) * line
        acc[2] += ev.get("Ir", 0)

    def name_op(l):
        if l < 0:
            return "(between passes)", "update+data"
        if l < len(layers):
            return layers[l].get("name", "?"), layers[l].get("op", "?")
        return "L%d" % l, "?"

    tot_r = sum(v[0] for v in per.values())
    tot_w = sum(v[1] for v in per.values())
    batch = cfg.get("batch", 0)
    flops = (cfg.get("train_flops_per_sample") or 0) * batch
    intensity = row.get("figures", {}).get("est_intensity_flop_per_byte")
    mb = 1e6
    print("cache-simulated step of %s, batch %s, %s (%s)" % (cfg.get("workload"), batch, cfg.get("backend"),
                                                           os.environ.get("CACHESIM_LL_DESC", "")))
    print("  memory traffic  %.1f MB read + %.1f MB written = %.1f MB a step (LL misses x %d B; write-backs"
          " not modelled)" % (tot_r / mb, tot_w / mb, (tot_r + tot_w) / mb, line))
    if flops and intensity:
        est = flops / intensity
        print("  the row's estimate (measure_train_bytes_per_step)  %.1f MB: simulated / estimate %.2f" %
              (est / mb, (tot_r + tot_w) / est))
    by = {}
    for (l, ph), v in per.items():
        op = name_op(l)[1]
        b = by.setdefault(op, [0, 0, 0, 0, 0])
        i = 2 if ph == "B" else 0  # the between-passes dumps count as forward
        b[i] += v[0]
        b[i + 1] += v[1]
        b[4] += 1 if l >= 0 and ph == "F" else 0
    print("\n  by layer type (MB a step)")
    print("  %-12s %6s %9s %9s %9s %9s %9s %6s" % ("type", "layers", "fwd read", "fwd write", "bwd read",
                                                 "bwd write", "total", "share"))
    for op, b in sorted(by.items(), key=lambda kv: -sum(kv[1][:4])):
        t = sum(b[:4])
        print("  %-12s %6d %9.1f %9.1f %9.1f %9.1f %9.1f %5.1f%%" % (op, b[4], b[0] / mb, b[1] / mb, b[2] / mb,
                                                                   b[3] / mb, t / mb, 100 * t / (tot_r + tot_w)))
    top = sorted(per.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:15]
    print("\n  the 15 layer passes that move most (MB a step)")
    print("  %-5s %-28s %-11s %5s %9s %9s" % ("layer", "name", "type", "pass", "read", "write"))
    for (l, ph), v in top:
        name, op = name_op(l)
        print("  %-5s %-28s %-11s %5s %9.2f %9.2f" % (l if l >= 0 else "-", name[:28], op, ph, v[0] / mb, v[1] / mb))
    if tsv:
        with open(tsv, "w") as f:
            f.write("layer\tname\ttype\tpass\tread_bytes\twrite_bytes\tinstructions\n")
            for (l, ph), v in sorted(per.items()):
                name, op = name_op(l)
                f.write("%d\t%s\t%s\t%s\t%d\t%d\t%d\n" % (l, name, op, ph, v[0], v[1], v[2]))


if __name__ == "__main__":
    main(sys.argv)
