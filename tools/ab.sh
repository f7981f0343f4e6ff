#!/bin/sh
# ab.sh — an alternating A/B of two bench binaries on one configuration: A B A B … in one run, so that
# the shared machine's drift hits both sides alike. Prints each round's overall images/s (timed samples
# ÷ timed seconds), the ratio B/A per round and its median, and both sides' final loss (%.17g: equal
# losses say the two builds computed the same bits; "n/a" where the plan records none, e.g. evaluate, tta).
#
# With -l, every run takes --profile too and each layer type's forward + backward ms a step is tabled as well,
# medians over rounds, both sides and B/A: where whole steps drown in a shared host's noise, the layers a change
# touches often still resolve (BENCHMARKS.md, twenty-seventh and twenty-eighth sessions). A side may be a
# wrapper that sets an environment switch (printf '#!/bin/sh\nTB_X=0 exec bench "$@"').
#
#   tools/ab.sh [-r ROUNDS] [-k] [-l] A_BENCH B_BENCH -- BENCH ARGS...
#   tools/ab.sh -r 3 /tmp/base/bench build/bench -- --backend cpu --workload mnist-mlp --batch 128 --steps 200
#   tools/ab.sh -l -r 4 /tmp/base/bench build/bench -- --backend threads --workload effnet-b0 --resolution 32 \
#       --batch 128 --plan throughput --steps 10 --warmup 2 --data synthetic
#
# Rows go to a temporary directory (kept with -k); needs python3 for the JSON.
set -eu
ROUNDS=3
KEEP=0
LAYERS=0
usage() {
    [ -z "${1:-}" ] || echo "ab.sh: $1" >&2
    echo "usage: tools/ab.sh [-r ROUNDS] [-k] [-l] A_BENCH B_BENCH -- BENCH ARGS...   (ROUNDS: a whole number >= 1)" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    -r)
        [ $# -ge 2 ] || usage "-r needs a number of rounds"
        case $2 in '' | *[!0-9]* | 0*) usage "-r '$2' is not a whole number >= 1" ;; esac
        ROUNDS=$2
        shift 2 ;;
    -k) KEEP=1; shift ;;
    -l) LAYERS=1; shift ;;
    *) break ;;
    esac
done
[ $# -ge 3 ] || usage
A=$1 B=$2
shift 2
[ "$1" = "--" ] && shift
for x in "$A" "$B"; do [ -x "$x" ] || { echo "ab.sh: $x is not an executable" >&2; exit 2; }; done
DIR=$(mktemp -d)
[ "$KEEP" = 1 ] || trap 'rm -rf "$DIR"' EXIT
[ "$LAYERS" = 1 ] && set -- "$@" --profile
r=1
while [ "$r" -le "$ROUNDS" ]; do
    "$A" "$@" --quiet --mllog none --out "$DIR/a.jsonl" >/dev/null
    "$B" "$@" --quiet --mllog none --out "$DIR/b.jsonl" >/dev/null
    r=$((r + 1))
done
python3 - "$DIR/a.jsonl" "$DIR/b.jsonl" "$LAYERS" <<'PY'
import collections, json, statistics, sys
rows = [[json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:3]]
ratios = []
for k, (a, b) in enumerate(zip(*rows)):
    ia, ib = a["figures"]["images_per_s"], b["figures"]["images_per_s"]
    ratios.append(ib / ia)
    print("round %d  A %12.2f  B %12.2f  img/s  B/A %.3f" % (k + 1, ia, ib, ib / ia))
print("median B/A %.3f (range %.3f-%.3f)" % (statistics.median(ratios), min(ratios), max(ratios)))
if sys.argv[3] == "1":  # -l: each layer type's ms a step (--profile's layer_times), medians over rounds
    med = []
    for rs in rows:
        per = collections.defaultdict(list)
        for r in rs:
            f, agg = r["figures"], collections.defaultdict(float)
            for l in f.get("layer_times", []):
                agg[l["op"]] += l["forward_s"] + l["backward_s"]
            for k, v in agg.items():
                per[k].append(v)
            per["(all layers)"].append(sum(agg.values()))
            per["(step)"].append(f["step_time_median_s"])
        med.append({k: statistics.median(v) for k, v in per.items()})
    print("%-14s %9s %9s %7s   (ms a step, medians over rounds)" % ("layer type", "A", "B", "B/A"))
    for k in sorted(med[0], key=lambda k: -med[0][k]):
        a, b = med[0][k], med[1].get(k, 0.0)
        if a > 0:
            print("%-14s %9.3f %9.3f %7.3f" % (k, 1e3 * a, 1e3 * b, b / a))
for side, rs in zip("AB", rows):
    # Plans without training (evaluate, tta) record no final_loss: "n/a", not a nan that looks computed.
    losses = [r["figures"].get("final_loss") for r in rs]
    print("final loss %s %s" % (side, " ".join("n/a" if not isinstance(v, (int, float)) else "%.17g" % v
                                                   for v in losses)))
PY
