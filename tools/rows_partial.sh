# rows_partial.sh — sourced by demo.sh, seeds.sh and bench_mlp.sh: a run's rows go to results/NAME.partial.jsonl
# and replace results/NAME.jsonl (the old one becoming NAME.prev.jsonl) only once the run reached its end, so an
# interrupted or crashed run (bench exits 128 + signal) never pushes the last complete rows out.
#
#   rows_partial_start NAME        sets PART and an empty status; removes an earlier stopped run's partial rows
#   rows_partial_finish WHO NAME   after the run: exits with a line where it did not finish, else rotates

rows_partial_start() {
    PART=results/$1.partial.jsonl
    # One at a time in a checkout: a second `make demo` beside the first removed its partial rows and rotated the
    # last complete demo out (results/NAME.lock, held by this shell until it exits; util-linux's flock).
    mkdir -p results
    if command -v flock >/dev/null 2>&1; then
        exec 9>"results/$1.lock"
        if ! flock -n 9; then
            echo "$1: another $1 is running in this checkout (it holds results/$1.lock); wait for it to end" >&2
            exit 1
        fi
    fi
    rm -f "$PART" # bench appends: an earlier stopped run's rows must not join this one's
    status=0
}

# A suite that ran to its end with some failed runs is complete (their rows say so); one stopped by a signal,
# or that wrote no row, is not.
rows_partial_finish() {
    if [ "$status" -ge 128 ] || [ ! -s "$PART" ]; then
        if [ -s "$PART" ]; then kept="; this run's rows so far are in $PART"; else kept=; rm -f "$PART"; fi
        echo "$1: the run did not finish (exit $status): no report; results/$2.jsonl and $2.prev.jsonl are as the last complete run left them$kept" >&2
        [ "$status" -ne 0 ] || status=1
        exit "$status"
    fi
    [ -f "results/$2.jsonl" ] && mv "results/$2.jsonl" "results/$2.prev.jsonl"
    mv "$PART" "results/$2.jsonl" || exit 1
}
