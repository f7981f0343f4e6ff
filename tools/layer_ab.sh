#!/bin/sh
# layer_ab.sh — an alternating A/B of two bench binaries by layer type: A B A B … in one run, each with
# --profile, then per layer type the median over rounds of its forward + backward ms a step, both sides and
# B/A, with the whole step's median beside them. Where tools/ab.sh's whole steps drown in a shared host's
# noise, the layers a change touches often still resolve (BENCHMARKS.md, twenty-seventh and twenty-eighth
# sessions). Prints both sides' final losses (%.17g): equal losses say the two computed the same bits.
#
#   tools/layer_ab.sh [-r ROUNDS] A_BENCH B_BENCH -- BENCH ARGS...
#   tools/layer_ab.sh -r 4 /tmp/a/bench build/bench -- --backend threads --workload effnet-b0 --resolution 32 \
#       --batch 128 --plan throughput --steps 10 --warmup 2 --data synthetic
#
# A side may be a wrapper that sets an environment switch (printf '#!/bin/sh\nTB_X=0 exec bench "$@"').
# Rows go to a temporary directory, removed at the end; needs python3.
set -eu
ROUNDS=4
if [ "${1:-}" = "-r" ]; then ROUNDS=$2; shift 2; fi
[ $# -ge 3 ] && [ "$3" = "--" ] || { sed -n '7,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
case $ROUNDS in '' | *[!0-9]* | 0) echo "layer_ab: -r needs a whole number >= 1" >&2; exit 2 ;; esac
A=$1 B=$2
shift 3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for side in A B; do
        if [ $side = A ]; then bin=$A; else bin=$B; fi
        "$bin" "$@" --profile --out "$DIR/$side-$r.jsonl" >"$DIR/$side-$r.log" 2>&1 ||
            { echo "layer_ab: side $side, round $r failed:" >&2; tail -n 3 "$DIR/$side-$r.log" >&2; exit 1; }
    done
    r=$((r + 1))
done
python3 - "$DIR" "$ROUNDS" <<'PY'
import collections, json, statistics, sys
d, R = sys.argv[1], int(sys.argv[2])
res, loss = {}, {}
for side in "AB":
    per, loss[side] = collections.defaultdict(list), []
    for r in range(1, R + 1):
        f = [json.loads(l) for l in open(f"{d}/{side}-{r}.jsonl")][-1]["figures"]
        agg = collections.defaultdict(float)
        for l in f.get("layer_times", []):
            agg[l["op"]] += l["forward_s"] + l["backward_s"]
        for k, v in agg.items():
            per[k].append(v)
        per["(all layers)"].append(sum(agg.values()))
        per["(step)"].append(f["step_time_median_s"])
        loss[side].append("%.17g" % f["final_loss"] if f.get("final_loss") is not None else "n/a")
    res[side] = {k: statistics.median(v) for k, v in per.items()}
print(f"{'layer type':<14} {'A ms':>9} {'B ms':>9} {'B/A':>7}   (medians over {R} rounds, a step)")
for k in sorted(res["A"], key=lambda k: -res["A"][k]):
    a, b = res["A"][k], res["B"].get(k, 0.0)
    if a > 0:
        print(f"{k:<14} {a * 1e3:9.3f} {b * 1e3:9.3f} {b / a:7.3f}")
for side in "AB":
    print(f"final loss {side} " + " ".join(loss[side]))
PY
