#!/bin/sh
# scaling.sh — `make bench-scaling`: issue 31's scaling measurements on this machine, in one run.
#
#   tools/scaling.sh [BUILD] [PHASE...]        PHASE: strong weak mpi ipu sim (default: the first four)
#
#   strong  threads backend, effnet-b0 224x224 batch 16 and 32x32 batch 128, at each thread count
#           (SCALE_THREADS, default 1 2 4 ... up to the cores this process may use), with --profile: the
#           speedup and efficiency per point, and at the largest count the layer types that lose most
#           against one thread (core-seconds lost, idle share = waiting for other threads or a serial layer)
#   weak    mirrored, 128 samples per device at 32x32 (devices = SCALE_THREADS), against one device; its table
#           splits each point's step: the slowest replica's compute, the all-reduce, the longest wait
#   mpi     mirrored over MPI, 2 ranks x C/2 devices (each rank bound to its own C/2 cores) against
#           mirrored with C devices in one process, at the same global batch (128 per device)
#   ipu     effnet-b4-g16 (GroupNorm, LARS), 2 stages x C/2 replicas, micro-batch 3, GA 16 (the seed's
#           per-replica configuration) at SCALE_IPU_RES (default 64) x SCALE_IPU_RES
#   sim     SIMULATED, for machines with fewer cores than the question: how SCALE_SIM (default 16) threads
#           would share each layer on a SCALE_SIM-core machine — work cut as there (TB_PAR_UNITS), run
#           with that many threads here on one core (taskset), each thread's work measured in CPU time
#           (--profile's work_max_s), so oversubscription does not count; per layer the busiest thread
#           against one thread's time: the critical path, imbalance and work inflation (no speed is claimed);
#           the 1x1 convolutions on gemm1x1 in both runs (--conv-algo; the stem's is tuned), since the
#           tuner's timings of 16 threads sharing one core pick algorithms no 16-core machine would
#
# Points alternate within a round (1 2 4 ... 1 2 4 ...) and SCALE_ROUNDS rounds (default 2) are run, so a
# shared machine's drift falls on every point alike; the figures are medians over rounds. Rows go to
# SCALE_OUT (default results/scaling.jsonl, previous run kept as .prev), this machine's ceilings to
# scaling-calibration.json beside it; the summary to stdout and results/scaling.md. Each phase prints a
# line when it starts; a failing run is reported and skipped. Runs write to <SCALE_OUT>.partial.jsonl,
# moved into place only once every phase has run: a run stopped by SIGINT/SIGTERM stops the script, and
# neither that nor Ctrl-C pushes the last complete rows out.
set -u
# Everything given is checked before anything is measured or the previous rows are moved aside.
usage() {
    echo "scaling: $1" >&2
    echo "usage: tools/scaling.sh [BUILD] [PHASE...]   PHASE: strong weak mpi ipu sim; SCALE_ROUNDS, SCALE_SIM, SCALE_IPU_RES: whole numbers >= 1; SCALE_THREADS: such numbers, space-separated" >&2
    exit 2
}
# An option or a phase name is no BUILD directory: say so rather than "<it>/bench not built".
case ${1:-} in
-h | --help) usage "issue 31's scaling measurements on this machine" ;;
-*) usage "unknown option '$1'" ;;
strong | weak | mpi | ipu | sim) usage "'$1' is a phase: the BUILD directory comes first (e.g. tools/scaling.sh build $*)" ;;
esac
BUILD=${1:-build}
[ $# -gt 0 ] && shift
PHASES=${*:-strong weak mpi ipu}
SIM=${SCALE_SIM:-16}
posint() { case $1 in '' | *[!0-9]* | 0*) return 1 ;; esac; } # a whole number >= 1, no leading zero
for phase in $PHASES; do
    case $phase in strong | weak | mpi | ipu | sim) ;; *) usage "unknown phase '$phase'" ;; esac
done
posint "${SCALE_ROUNDS:-2}" || usage "SCALE_ROUNDS='${SCALE_ROUNDS:-}' is not a whole number >= 1"
posint "$SIM" || usage "SCALE_SIM='$SIM' is not a whole number >= 1"
posint "${SCALE_IPU_RES:-64}" || usage "SCALE_IPU_RES='${SCALE_IPU_RES:-}' is not a whole number >= 1"
if [ -n "${SCALE_THREADS:-}" ]; then
    n=0
    for t in $SCALE_THREADS; do
        posint "$t" || usage "SCALE_THREADS entry '$t' is not a whole number >= 1"
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] || usage "SCALE_THREADS='$SCALE_THREADS' names no thread count"
fi
cd "$(dirname "$0")/.." || exit 1
B=$BUILD/bench
[ -x "$B" ] || { echo "scaling: $B not built (make build)" >&2; exit 1; }
C=$(nproc) # the cores this process may use, as bench counts them
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -z "${SCALE_THREADS:-}" ]; then
    SCALE_THREADS=1 t=2
    while [ "$t" -lt "$C" ]; do SCALE_THREADS="$SCALE_THREADS $t"; t=$((t * 2)); done
    [ "$C" -gt 1 ] && SCALE_THREADS="$SCALE_THREADS $C"
fi
ROUNDS=${SCALE_ROUNDS:-2}
OUT=${SCALE_OUT:-results/scaling.jsonl}
RES=${SCALE_IPU_RES:-64}
# sim runs all its threads on one core (the first this process may use): with the other core's traffic and
# cache out of the way, the critical path repeated within 1 % between runs on a 2-core Zen 5, against about
# 10 % when 16 threads shared two cores.
PIN1=
if command -v taskset >/dev/null; then
    core=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | cut -d, -f1 | cut -d- -f1)
    [ -n "$core" ] && PIN1="taskset -c $core"
fi
mkdir -p "$(dirname "$OUT")"
PART=${OUT%.jsonl}.partial.jsonl
rm -f "$PART" # bench appends: an earlier stopped run's rows must not join this one's
COMMON="--data synthetic --plan throughput --mllog none --quiet --out $PART"
fails=0

# run LABEL ARGS...: one point; its row is tagged with --run-id LABEL-rROUND.
run() {
    label=$1
    shift
    # shellcheck disable=SC2086 # COMMON is a list of options
    "$@" $COMMON --run-id "$label-r$round" 2>"/tmp/scaling.$$.err"
    st=$?
    if [ "$st" -eq 130 ] || [ "$st" -eq 143 ]; then
        # bench stopped by SIGINT/SIGTERM: the measurement is abandoned, not one point skipped.
        echo "scaling: $label (round $round) stopped (exit $st): $OUT is as the last complete run left it; this run's rows so far are in $PART" >&2
        rm -f "/tmp/scaling.$$.err"
        exit "$st"
    elif [ "$st" -ne 0 ]; then
        echo "scaling: $label (round $round) failed: $(tail -n 1 /tmp/scaling.$$.err)"
        fails=$((fails + 1))
    fi
    rm -f "/tmp/scaling.$$.err"
}

# Threads a core: where 2 (SMT), C vCPUs are C/2 cores and a compute-bound layer gains little past C/2.
TPC=$(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core:[[:space:]]*//p')
echo "scaling: $C cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1); ${TPC:-?} threads a core); points: $SCALE_THREADS; $ROUNDS rounds; rows in $OUT"
# The ceilings a perfect schedule would hit: sgemm and triad on one thread and on all (compute-bound layers
# can gain the first ratio, memory-bound ones — BatchNorm, depthwise, elementwise — at most the second).
CAL=$(dirname "$OUT")/scaling-calibration.json
"$B" --calibrate --calibration "$CAL" 2>&1 | grep -E '^  (sgemm|triad|barrier)' || echo "scaling: calibration failed"
for phase in $PHASES; do
    round=1
    case $phase in
    strong) echo "scaling: strong (threads; effnet-b0 224x224 b16 and 32x32 b128)" ;;
    weak) echo "scaling: weak (mirrored, 128 samples per device, 32x32)" ;;
    mpi) echo "scaling: mpi (2 ranks x $((C / 2)) devices against mirrored $C devices)" ;;
    ipu) echo "scaling: ipu (effnet-b4-g16 ${RES}x$RES, 2 stages x $((C / 2)) replicas, micro-batch 3, GA 16)" ;;
    sim) echo "scaling: sim (SIMULATED: $SIM threads cut for a $SIM-core machine, per-thread CPU time)" ;;
    *) echo "scaling: unknown phase $phase (strong weak mpi ipu sim)" >&2; exit 2 ;;
    esac
    while [ "$round" -le "$ROUNDS" ]; do
        case $phase in
        strong)
            for t in $SCALE_THREADS; do
                run "strong-224-$t" "$B" --backend threads --threads "$t" --workload effnet-b0 --resolution 224 \
                    --batch 16 --warmup 2 --steps 8 --profile
                run "strong-32-$t" "$B" --backend threads --threads "$t" --workload effnet-b0 --resolution 32 \
                    --batch 128 --warmup 2 --steps 12 --profile
            done ;;
        weak)
            for d in $SCALE_THREADS; do
                run "weak-$d" "$B" --backend mirrored --devices "$d" --workload effnet-b0 --resolution 32 \
                    --batch $((128 * d)) --warmup 2 --steps 8
            done ;;
        mpi)
            [ "$C" -ge 2 ] || { echo "scaling: mpi needs 2 cores"; break; }
            h=$((C / 2))
            run "mpi-shm-$C" "$B" --backend mirrored --devices $((2 * h)) --workload effnet-b0 --resolution 32 \
                --batch $((256 * h)) --warmup 2 --steps 8
            run "mpi-2x$h" mpirun -np 2 --map-by "slot:PE=$h" --bind-to core "$B" --backend mirrored \
                --transport mpi --devices "$h" --workload effnet-b0 --resolution 32 --batch $((256 * h)) \
                --warmup 2 --steps 8 ;;
        sim)
            for t in 1 "$SIM"; do
                # shellcheck disable=SC2086 # PIN1 is a command and its arguments, or nothing
                TB_PAR_UNITS=$SIM run "sim-224-$t" $PIN1 "$B" --backend threads --threads "$t" --workload effnet-b0 \
                    --resolution 224 --batch 16 --warmup 1 --steps 3 --profile --conv-algo gemm1x1
                # shellcheck disable=SC2086
                TB_PAR_UNITS=$SIM run "sim-32-$t" $PIN1 "$B" --backend threads --threads "$t" --workload effnet-b0 \
                    --resolution 32 --batch 128 --warmup 1 --steps 6 --profile --conv-algo gemm1x1
            done ;;
        ipu)
            h=$((C / 2 > 0 ? C / 2 : 1))
            run "ipu-2x$h" "$B" --backend ipu --workload effnet-b4-g16 --resolution "$RES" --stages 2 \
                --replicas "$h" --micro-batch 3 --ga 16 --batch $((48 * h)) --warmup 1 --steps 3 ;;
        esac
        round=$((round + 1))
    done
done

if [ ! -s "$PART" ]; then
    rm -f "$PART"
    echo "scaling: no run wrote a row; $OUT is as the last complete run left it" >&2
    exit 1
fi
[ -f "$OUT" ] && mv "$OUT" "${OUT%.jsonl}.prev.jsonl"
mv "$PART" "$OUT" || exit 1
/usr/bin/env python3 - "$OUT" "$C" "$CAL" <<'PY' | tee results/scaling.md
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cores = int(sys.argv[2])
pts = {}
for r in rows:
    rid = r.get("run_id", "")
    if r.get("status") != "ok" or "-r" not in rid:
        continue
    pts.setdefault(rid.rsplit("-r", 1)[0], []).append(r)
def ips(label):
    rs = pts.get(label, [])
    return statistics.median(r["figures"]["images_per_s"] for r in rs) if rs else None
m = rows[0]["machine"] if rows else {}
print(f"# Scaling on {m.get('cpu_model', '?')}, {cores} cores (tools/scaling.sh; medians over rounds)\n")
cal = {}
try:
    cal = json.load(open(sys.argv[3]))
    t = cal["all_threads"]
    print(f"Ceilings (bench --calibrate): sgemm {cal['sgemm_1t_gflops']:.1f} GFLOP/s on 1 thread, "
          f"{cal['sgemm_all_gflops']:.1f} on {t} ({cal['sgemm_all_gflops'] / cal['sgemm_1t_gflops']:.2f}x); triad "
          f"{cal['triad_1t_gbs']:.2f} GB/s on 1 thread, {cal['triad_all_gbs']:.2f} on {t} "
          f"({cal['triad_all_gbs'] / cal['triad_1t_gbs']:.2f}x: the most a memory-bound layer can gain).\n")
except (OSError, KeyError, ValueError, ZeroDivisionError):
    print("No calibration (bench --calibrate failed): no ceilings.\n")
def table(title, prefix, base_label, goal):
    counts = sorted({int(k.rsplit("-", 1)[1]) for k in pts if k.startswith(prefix)})
    if not counts:
        return
    base = ips(base_label)
    # mirrored rows carry each step's split (the slowest replica's compute, the longest all-reduce and wait,
    # means over the steps): where the time of the points past one device goes.
    split = any("step_split" in r["figures"] for k in pts if k.startswith(prefix) for r in pts[k])
    head = " compute (slowest replica) | all-reduce | longest wait for it |" if split else ""
    print(f"## {title}\n\n| threads/devices | img/s | speedup | efficiency |{head}\n|---:|---:|---:|---:|" +
          ("---:|---:|---:|" if split else ""))
    def ms(label, key):
        v = [r["figures"]["step_split"][key] for r in pts[label] if "step_split" in r["figures"]]
        return f" {1e3 * statistics.median(v):.1f} ms |" if v else " |"
    for n in counts:
        v = ips(f"{prefix}{n}")
        if v is None or not base:
            continue
        cols = "".join(ms(f"{prefix}{n}", k) for k in ("compute_s", "allreduce_s", "idle_s")) if split else ""
        print(f"| {n} | {v:,.1f} | {v / base:.2f}x | {100 * v / base / n:.0f} % |{cols}")
    print(f"\nGoal: {goal}\n")
table("Strong scaling, threads, effnet-b0 224x224 batch 16", "strong-224-", "strong-224-1", ">= 70 % at 16 threads")
table("Strong scaling, threads, effnet-b0 32x32 batch 128", "strong-32-", "strong-32-1", ">= 50 % at 16 threads")
table("Weak scaling, mirrored, 128 samples per device, 32x32", "weak-", "weak-1", ">= 90 % at 16 devices")
# Where the time goes: per layer type at the largest thread count against one thread.
for res in ("224", "32"):
    counts = sorted({int(k.rsplit("-", 1)[1]) for k in pts if k.startswith(f"strong-{res}-")})
    if len(counts) < 2 or 1 not in counts:
        continue
    top = counts[-1]
    def types(label):
        acc = {}
        for r in pts[label]:
            steps = r["figures"].get("layer_times_steps") or 1
            for t in r["figures"].get("layer_types", []):
                a = acc.setdefault(t["op"], [0.0, 0.0, 0])
                a[0] += t["seconds"] / steps
                a[1] += t.get("idle_share", 0.0)
                a[2] += 1
        return {k: (v[0] / v[2], v[1] / v[2]) for k, v in acc.items()}
    one, many = types(f"strong-{res}-1"), types(f"strong-{res}-{top}")
    lost = sorted(((top * many[k][0] - one[k][0], k) for k in one if k in many), reverse=True)
    print(f"## Where {top} threads lose against 1 (effnet-b0 {res}x{res}, per step, --profile)\n")
    print(f"| layer type | 1 thread (ms) | {top} threads (ms) | efficiency | idle at {top} | core-ms lost |")
    print("|---|---:|---:|---:|---:|---:|")
    for l, k in lost[:8]:
        t1, (tn, idle) = one[k][0], many[k]
        print(f"| {k} | {1e3 * t1:.1f} | {1e3 * tn:.1f} | {100 * t1 / (top * tn) if tn else 0:.0f} % | {100 * idle:.0f} % | {1e3 * l:.1f} |")
    print()
    # Barriers: a count a step (figures.barriers_per_step) times the calibrated cost of one at all cores.
    rs = pts[f"strong-{res}-{top}"]
    nb = statistics.median(r["figures"].get("barriers_per_step", 0) for r in rs)
    us = cal.get("barrier_all_us", 0) if isinstance(cal, dict) else 0
    step_ms = 1e3 * statistics.median(sum(l["forward_s"] + l["backward_s"] for l in r["figures"].get("layer_times", []))
                                      for r in rs)
    if nb and us and step_ms and top == cal.get("all_threads"):
        print(f"Barriers at {top} threads: {nb:.0f} a step x {us:.2f} us (bench --calibrate, a pool of {top}) = "
              f"{nb * us / 1e3:.2f} ms of synchronisation, {100 * nb * us / 1e3 / step_ms:.1f} % of the "
              f"{step_ms:.1f} ms the layers took; the rest of the idle share is waiting for late threads.\n")
    elif nb:
        print(f"Barriers at {top} threads: {nb:.0f} a step (no calibrated cost of one for {top} threads).\n")
# SIMULATED: the busiest thread's CPU work per layer at SIM threads (work_max_s) against one thread's time.
for res in ("224", "32"):
    ks = sorted({int(k.rsplit("-", 1)[1]) for k in pts if k.startswith(f"sim-{res}-")})
    if len(ks) < 2 or 1 not in ks:
        continue
    T = ks[-1]
    def per_layer(label):
        acc = {}
        for r in pts[label]:
            for i, l in enumerate(r["figures"].get("layer_times", [])):
                a = acc.setdefault(i, [l["name"], l["op"], 0.0, 0.0, 0.0, 0])
                t = l["forward_s"] + l["backward_s"]
                a[2] += t
                a[3] += t - l.get("idle_s", 0.0)
                a[4] += l.get("work_max_s", t)
                a[5] += 1
        return {i: (v[0], v[1], v[2] / v[5], v[3] / v[5], v[4] / v[5]) for i, v in acc.items()}
    one, many = per_layer(f"sim-{res}-1"), per_layer(f"sim-{res}-{T}")
    t1 = sum(v[2] for v in one.values())
    crit = sum(v[4] for v in many.values())
    work = sum(v[3] for v in many.values()) * T
    print(f"## SIMULATED: {T} threads cut for a {T}-core machine (effnet-b0 {res}x{res}, CPU time per thread)\n")
    print(f"Not a speed: the busiest thread's work summed over layers {1e3 * crit:.1f} ms against one thread's "
          f"{1e3 * t1:.1f} ms — at most {100 * t1 / (T * crit):.0f} % efficiency from the work split alone "
          f"(no barrier, bandwidth or cache effects); all threads' work {work / t1:.2f}x one thread's.\n")
    print("| layer | op | 1 thread (ms) | busiest of T (ms) | mean of T (ms) | imbalance | core-ms lost |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rows_ = sorted(((T * many[i][4] - one[i][2], i) for i in one if i in many), reverse=True)
    for lost, i in rows_[:12]:
        n_, op, a1, _, _ = one[i]
        _, _, _, mean, mx = many[i]
        print(f"| {n_} | {op} | {1e3 * a1:.2f} | {1e3 * mx:.3f} | {1e3 * mean:.3f} | {mx / mean if mean > 0 else 0:.1f} | {1e3 * lost:.2f} |")
    print()
    # The same by layer type: where a schedule change moves the critical path (the totals above drift with
    # the host between runs; a type's busiest-thread sum against its own mean resolves more).
    by = {}
    for i in one:
        if i not in many:
            continue
        b = by.setdefault(one[i][1], [0.0, 0.0, 0.0])
        b[0] += one[i][2]
        b[1] += many[i][4]
        b[2] += many[i][3]
    print("| layer type | 1 thread (ms) | busiest of T, summed (ms) | mean of T, summed (ms) | imbalance | core-ms lost |")
    print("|---|---:|---:|---:|---:|---:|")
    for op, (a1, mx, mean) in sorted(by.items(), key=lambda kv: -(T * kv[1][1] - kv[1][0])):
        print(f"| {op} | {1e3 * a1:.2f} | {1e3 * mx:.3f} | {1e3 * mean:.3f} | {mx / mean if mean > 0 else 0:.2f} | {1e3 * (T * mx - a1):.2f} |")
    print()
a, b = [(k, ips(k)) for k in pts if k.startswith("mpi-shm-")], [(k, ips(k)) for k in pts if k.startswith("mpi-2x")]
if a and b:
    print(f"## MPI\n\n{b[0][0]}: {b[0][1]:,.1f} img/s against {a[0][0]} {a[0][1]:,.1f}: {100 * b[0][1] / a[0][1]:.0f} % (goal >= 90 %)\n")
for k in pts:
    if k.startswith("ipu-"):
        r = pts[k][0]
        print(f"## ipu\n\n{k}: {ips(k):,.2f} img/s — {r['config'].get('backend_desc', '')} (effnet-b4-g16 at "
              f"{r['config'].get('resolution')}x{r['config'].get('resolution')}; the seed: 380x380, 2 stages, micro-batch 3, up to 128 replicas on IPU-PODs)\n")
PY
[ "$fails" -eq 0 ] || { echo "scaling: $fails run(s) failed (above)"; exit 1; }
