#!/bin/sh
# profile.sh — `make profile BACKEND=… WORKLOAD=… [ARGS="…"]`: perf stat and perf record -g of one
# throughput run, a sidecar JSON with the counters and the top functions next to its result row.
#
#   tools/profile.sh BUILD BACKEND WORKLOAD [bench options...]
#
# Only the timed phase is recorded: perf starts with its events disabled (--delay=-1) and bench turns
# them on and off around the steps of each measurement through perf's control fifo (--control
# fifo:CTL,ACK; bench finds the fifos in TB_PERF_CTL, see harness/perfctl.h), so data generation,
# model set-up and row writing stay out of the counters and samples (the 10 warm-up steps of 2010 are
# in). A perf without --control (before Linux 5.10) records the whole process instead and says so.
# The plan must be throughput (the default here): other plans never enable the events, so they are refused (exit 2).
# Hardware counters are used when the machine exposes them; in a VM that reports them as
# <not supported> (check: perf stat -e instructions true) it falls back to software events and says
# so in the sidecar and on stdout. Rows go to $OUT (results/profile.jsonl); the sidecar to
# <dir of $OUT>/profile/<run id>.json, where `bench report --in $OUT` finds it.
set -eu
[ $# -ge 3 ] || { echo "usage: tools/profile.sh BUILD BACKEND WORKLOAD [bench options...]" >&2; exit 2; }
BUILD=$1 BACKEND=$2 WORKLOAD=$3
shift 3
# The plan bench will run: the last --plan among the options (as getopt_long reads them), else throughput.
# --out, --run-id and --mllog are this script's own (bench takes an option's last value, so the user's would
# send the perf-record run's row into the row file and name the row apart from its sidecar): refused,
# with the unambiguous prefixes getopt_long also takes.
PLAN=throughput
prev=
for a in "$@"; do
    case $prev in --plan) PLAN=$a ;; esac
    case $a in
    --plan=*) PLAN=${a#--plan=} ;;
    --ou | --out | --ou=* | --out=* | --ru | --run | --run- | --run-i | --run-id | --ru=* | --run=* | --run-=* | \
        --run-i=* | --run-id=* | --ml | --mll | --mllo | --mllog | --ml=* | --mll=* | --mllo=* | --mllog=*)
        echo "profile: ${a%%=*} is set by the script (--out from OUT=FILE; --run-id and --mllog pair the row with its sidecar): leave it out of the options" >&2
        exit 2 ;;
    esac
    prev=$a
done
if [ "$PLAN" != throughput ]; then
    echo "profile.sh records the throughput plan only (got --plan $PLAN: other plans never enable the events)" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
B=$BUILD/bench
[ -x "$B" ] || { echo "profile: $B not built (make build)" >&2; exit 1; }
OUT=${OUT:-results/profile.jsonl}
DIR=$(dirname "$OUT")/profile
mkdir -p "$DIR"
ID="profile-$(date -u +%Y%m%dT%H%M%SZ)-$BACKEND-$WORKLOAD"
# 2000 timed steps by default; options given after WORKLOAD override it.
RUN="$B --backend $BACKEND --workload $WORKLOAD --plan throughput --steps 2000 --quiet"

if ! command -v perf >/dev/null 2>&1; then
    echo "profile: perf is not installed (Debian: linux-perf); running the benchmark without counters"
    $RUN --run-id "$ID" --out "$OUT" "$@"
    exit 0
fi

if perf stat -e instructions true 2>&1 | grep -q "<not supported>"; then
    KIND=software
    EVENTS=task-clock,cpu-clock,context-switches,cpu-migrations,page-faults,minor-faults,major-faults
    REC_EVENT=cpu-clock
    NOTE="Software events only: this machine reports hardware counters as <not supported> (perf stat -e instructions true), so no cycles, instructions or cache misses (make cachesim simulates each layer's memory traffic instead). Sampling on cpu-clock."
else
    KIND=hardware
    EVENTS=cycles,instructions,branches,branch-misses,cache-references,cache-misses,task-clock,context-switches,cpu-migrations,page-faults
    REC_EVENT=cycles
    NOTE="Hardware counters. Sampling on cycles."
fi
# Only the timed phase: perf's control fifos, which bench writes "enable"/"disable" to (TB_PERF_CTL).
FIFOS=$(mktemp -d)
trap 'rm -rf "$FIFOS"' EXIT
mkfifo "$FIFOS/ctl" "$FIFOS/ack"
CONTROL="--delay=-1 --control fifo:$FIFOS/ctl,$FIFOS/ack"
if perf stat $CONTROL -e task-clock true >/dev/null 2>&1; then
    SCOPE="timed phase only (the steps of each measurement; data generation and set-up not recorded)"
    export TB_PERF_CTL="$FIFOS/ctl,$FIFOS/ack"
else
    CONTROL=""
    SCOPE="whole process, set-up included (this perf has no --control fifo:)"
fi
NOTE="$NOTE Scope: $SCOPE."
echo "profile: $KIND events ($EVENTS); recording the $SCOPE"

# 1. Counters over one run (its result row carries the run id the sidecar is named after).
# (perf says "Events enabled/disabled" on stderr at every switch: kept out of the terminal.)
# A failed run (bench's usage error is 2) ends here with bench's status and leaves no counters file behind.
perf stat -x, -o "$DIR/$ID.stat.csv" -e "$EVENTS" $CONTROL -- $RUN --run-id "$ID" --out "$OUT" "$@" \
    2>"$FIFOS/stat.err" || {
    st=$?
    grep -v '^Events [a-z]*abled$' "$FIFOS/stat.err" >&2 || true
    rm -f "$DIR/$ID.stat.csv"
    exit "$st"
}
grep -v '^Events [a-z]*abled$' "$FIFOS/stat.err" >&2 || true
# 2. Call-graph samples over a second, identical run (its row goes beside the samples, not into $OUT).
perf record -q -g -F 999 -e "$REC_EVENT" -o "$DIR/$ID.perf.data" $CONTROL -- \
    $RUN --run-id "$ID-record" --out "$DIR/$ID.record.jsonl" --mllog none "$@" 2>/dev/null
perf report -i "$DIR/$ID.perf.data" --stdio --no-children -g none --sort dso,symbol -F overhead,dso,sym \
    --percent-limit 0.5 2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$' | sort -rn > "$DIR/$ID.top.txt" || true

# 3. The sidecar: counters (value, unit, event) and the functions with the most self time.
esc() { sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
    printf '{"schema_version":1,"kind":"profile","run_id":"%s","backend":"%s","workload":"%s",' "$ID" "$BACKEND" "$WORKLOAD"
    printf '"perf_version":"%s","events_kind":"%s","events_note":"%s",' "$(perf --version | esc)" "$KIND" "$(echo "$NOTE" | esc)"
    printf '"counters":['
    grep -v '^#' "$DIR/$ID.stat.csv" | grep -v '^[[:space:]]*$' | awk -F, '
        { gsub(/"/, "", $0); v = $1; sep = (n++ ? "," : "");
          if (v ~ /^[0-9.]+$/) printf "%s{\"event\":\"%s\",\"value\":%s,\"unit\":\"%s\"}", sep, $3, v, $2;
          else printf "%s{\"event\":\"%s\",\"value\":\"%s\",\"unit\":\"%s\"}", sep, $3, v, $2 }'
    printf '],"top_functions":['
    awk '{ p = $1; sub(/%/, "", p); dso = $2; sym = $4;
           gsub(/\\/, "\\\\", sym); gsub(/"/, "\\\"", sym);
           printf "%s{\"percent\":%s,\"dso\":\"%s\",\"symbol\":\"%s\"}", (n++ ? "," : ""), p, dso, sym }' "$DIR/$ID.top.txt" | head -c 20000
    printf ']}\n'
} > "$DIR/$ID.json"

echo "profile: run $ID ($BACKEND, $WORKLOAD); recorded: $SCOPE"
echo "  row       $OUT"
echo "  sidecar   $DIR/$ID.json"
echo "  samples   $DIR/$ID.perf.data (perf report -i $DIR/$ID.perf.data)"
echo "  counters ($KIND):"
grep -v '^#' "$DIR/$ID.stat.csv" | grep -v '^[[:space:]]*$' | awk -F, '{ printf "    %-18s %s %s\n", $3, $1, $2 }'
echo "  top functions (self time):"
head -15 "$DIR/$ID.top.txt" | awk '{ printf "    %7s  %-26s %s\n", $1, $2, $4 }'
echo "  report    $B report --in $OUT --out-dir $(dirname "$OUT")/profile-report"
