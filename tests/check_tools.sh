#!/bin/sh
# check_tools.sh — ctest `tools`: the scripts and helpers around bench, with stubs in place of the long runs
# (no suite, calibration or PyTorch run is made):
#   1. make demo / bench-mlp / seeds / bench-scaling keep the last COMPLETE run's rows: a run stopped by a
#      signal (bench exits 130) moves nothing, so `bench compare X.prev.jsonl X.jsonl` still compares two
#      complete runs; a complete run rotates;
#   2. tools/profile.sh refuses --out/--run-id/--mllog (its own) and a missing bench before perf runs;
#   3. tools/fit_seed001.sh stops with one line on a missing or failing bench, a missing rate or rates that
#      do not bracket the target (it printed a fit of 0.000 and exit 0);
#   4. membw refuses more threads than this process's CPUs and a PARAMS no memory holds (was a SIGSEGV);
#   5. the PyTorch peers without torch: one line naming the module and the Debian package, exit 1;
#      run_compare's "train s" for bench's throughput rows (timed_s); the docstrings name files that exist;
#   6. usage lines (exit 2) of ab_seam.sh, cachesim_check.sh, check_mpi.sh and scaling.sh --help.
#
#   tests/check_tools.sh SRC BUILD      (BUILD: where membw is; its checks are skipped without it)
set -u
SRC=$1 BUILD=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
# python3: Debian's (the interpreter the compare scripts name), else python3 resolved once to the one it
# runs (a version manager's shim, pyenv's, costs a second a call).
mkdir -p "$T/bin"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(python3 -c 'import sys; print(sys.executable)') || exit 1
ln -s "$PY" "$T/bin/python3" || exit 1
PATH=$T/bin:$PATH
fails=0
fail() { echo "tools: FAIL: $*" >&2; fails=$((fails + 1)); }

# A bench stub: logs each call; with --out, appends a row tagged $STUB_TAG-1, then (unless STUB_STOP: exit
# 130, as a suite stopped by SIGINT does) a second row and exit 0.
mkdir -p "$T/stub"
cat >"$T/stub/bench" <<'EOF'
#!/bin/sh
echo "$*" >>"$STUB_LOG"
case $1 in --calibrate-if-needed | --calibrate | report | compare | --version) exit 0 ;; esac
out= id=stub prev=
for a in "$@"; do
    case $prev in --out) out=$a ;; --run-id) id=$a ;; esac
    prev=$a
done
[ -n "$out" ] || exit 0
row() { printf '{"run_id":"%s","status":"ok","tag":"%s","figures":{"images_per_s":1000.0,"timed_s":0.256,"final_loss":4.5},"machine":{}}\n' "$id" "$1" >>"$out"; }
row "$STUB_TAG-1"
[ -z "${STUB_STOP:-}" ] || exit 130
row "$STUB_TAG-2"
EOF
chmod +x "$T/stub/bench"
export STUB_LOG="$T/stub.log"
# tags FILE: the tags of FILE's rows on one line ("-" for no file); shell built-ins only, as this runs often.
tags() {
    [ -f "$1" ] || { echo -; return; }
    while IFS= read -r l; do l=${l#*'"tag":"'}; printf '%s ' "${l%%'"'*}"; done <"$1"
}

# 1. Rotation only after a complete run. Each script runs from a copy of the tree's tools/ (it works in the
#    directory above its own), so nothing is written to the source tree.
mkdir -p "$T/tree/tools" "$T/tree/results" "$T/tree/suites"
for s in demo bench_mlp seeds scaling rows_partial; do cp "$SRC/tools/$s.sh" "$T/tree/tools/"; done
# rotation NAME SCRIPT ROWS STOPPED [ARGS...]: complete run A, the runs STOPPED (B, or B C) stopped, then
# complete run D; ARGS follow BUILD.
rotation() {
    name=$1 script=$2 rows=$3 stopped=$4
    shift 4
    prev=${rows%.jsonl}.prev.jsonl
    rm -f "$rows" "$prev"
    STUB_TAG=A sh "$T/tree/tools/$script" "$T/stub" "$@" >/dev/null 2>&1 || fail "$name: complete run A exit $?"
    a=$(tags "$rows")
    case $a in "A-1 A-2 "*) ;; *) fail "$name: complete run A wrote: $a" ;; esac
    for t in $stopped; do
        STUB_TAG=$t STUB_STOP=1 sh "$T/tree/tools/$script" "$T/stub" "$@" >/dev/null 2>"$T/err"
        st=$?
        [ "$st" -eq 130 ] || fail "$name: stopped run $t exit $st, not 130"
        grep -q 'did not finish\|stopped' "$T/err" || fail "$name: stopped run $t said nothing: $(cat "$T/err")"
    done
    [ "$(tags "$rows")" = "$a" ] || fail "$name: after stopped runs $rows holds: $(tags "$rows")"
    [ ! -f "$prev" ] || fail "$name: after stopped runs $prev exists: $(tags "$prev")"
    STUB_TAG=D sh "$T/tree/tools/$script" "$T/stub" "$@" >/dev/null 2>&1 || fail "$name: complete run D exit $?"
    [ "$(tags "$rows")|$(tags "$prev")" = "$(echo "$a" | tr A D)|$a" ] ||
        fail "$name: after a complete run: $rows: $(tags "$rows"), $prev: $(tags "$prev")"
}
# Two stops for the demo (the case that lost the last complete rows); one shows the rest (the old scripts
# left a stopped run's rows in place of A's after one).
rotation demo demo.sh "$T/tree/results/demo.jsonl" "B C"
# A second demo beside a running one (here: its lock held) is refused and touches nothing: it removed the first's
# partial rows and rotated the last complete demo out.
if command -v flock >/dev/null 2>&1; then
    before=$(tags "$T/tree/results/demo.jsonl")
    (flock 9 && STUB_TAG=E sh "$T/tree/tools/demo.sh" "$T/stub" >/dev/null 2>"$T/err"; echo $? >"$T/st") \
        9>"$T/tree/results/demo.lock"
    [ "$(cat "$T/st")" = 1 ] || fail "demo beside a running demo: exit $(cat "$T/st"), not 1"
    grep -q 'another demo is running in this checkout' "$T/err" || fail "demo beside a running demo said: $(cat "$T/err")"
    [ "$(tags "$T/tree/results/demo.jsonl")" = "$before" ] || fail "demo beside a running demo changed demo.jsonl"
fi
rotation bench-mlp bench_mlp.sh "$T/tree/results/bench-mlp.jsonl" B
grep -q "^compare results/bench-mlp.prev.jsonl results/bench-mlp.jsonl" "$STUB_LOG" ||
    fail "bench-mlp: no comparison of the two complete runs"
: >"$STUB_LOG"
rotation seeds seeds.sh "$T/tree/results/seeds.jsonl" B
# A stopped seed-001 suite ends the run: seed-002's is not started after it (2 complete runs, 1 stopped).
n1=$(grep -c -- '--suite suites/seed-001' "$STUB_LOG") n2=$(grep -c -- '--suite suites/seed-002' "$STUB_LOG")
[ "$n1|$n2" = "3|2" ] || fail "seeds: $n1 seed-001 and $n2 seed-002 suites run, not 3 and 2"
export SCALE_THREADS=1 SCALE_ROUNDS=1
rotation scaling scaling.sh "$T/tree/results/scaling.jsonl" B strong

# 2. profile.sh: its own options refused before anything runs; a missing bench before perf runs it.
: >"$STUB_LOG"
for o in "--out x.jsonl" --out=x.jsonl "--run-id mine" --run-i=mine "--mllog none" "--mll none"; do
    # shellcheck disable=SC2086 # o is an option and its value
    err=$(OUT="$T/p.jsonl" sh "$SRC/tools/profile.sh" "$T/stub" cpu mnist-mlp --steps 2 $o 2>&1 >/dev/null)
    st=$?
    { [ "$st" -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]; } || fail "profile.sh $o: exit $st: $err"
done
[ -s "$STUB_LOG" ] && fail "profile.sh ran bench although its options were refused: $(cat "$STUB_LOG")"
err=$(OUT="$T/p.jsonl" sh "$SRC/tools/profile.sh" "$T/nobuild" cpu mnist-mlp --steps 2 2>&1 >/dev/null)
st=$?
case "$st|$err" in "1|profile: $T/nobuild/bench not built (make build)") ;; *) fail "profile.sh, no bench: exit $st: $err" ;; esac

# 3. fit_seed001.sh (run from the source root, where it reads devices/seed001.published): a missing or failing
#    bench, a projection without the Pod16 row, or rates that do not bracket the published 8936 images/s stop
#    it at its first projections with one line. (The 30-step bisection itself is left to a real bench: 1.106.)
cat >"$T/stub/fit" <<'EOF'
#!/bin/sh
case $FIT in fail) echo "bench: something broke" >&2; exit 3 ;; norow) echo "devices replicas images/s"; exit 0 ;; esac
echo "devices replicas ga micro s/step a b images/s"
echo "16 8 256 8 0 0 0 9000.5"
EOF
chmod +x "$T/stub/fit"
for mode in missing fail norow flat; do
    b=$T/stub/fit
    [ "$mode" = missing ] && b=$T/nobuild/bench
    err=$(cd "$SRC" && FIT=$mode sh tools/fit_seed001.sh "$b" 2>&1)
    st=$?
    { [ "$st" -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]; } || fail "fit_seed001.sh, bench $mode: exit $st: $err"
done

# 4. membw's arguments (its timing is not checked: a test has no fixed machine).
if [ -x "$BUILD/membw" ]; then
    M=$BUILD/membw
    for args in "1000 $(($(nproc) + 1))" "99999999999999999999 1" "12x 1" "-8 1" "1000 0" "1000 2x"; do
        # shellcheck disable=SC2086 # args are two arguments
        err=$("$M" $args 2>&1 >/dev/null)
        st=$?
        { [ "$st" -eq 2 ] && [ -n "$err" ]; } || fail "membw $args: exit $st: $err"
    done
    out=$("$M" 1000 1) || fail "membw 1000 1: exit $?"
    case $out in *"on 1 thread: best pass"*"GB/s"*) ;; *) fail "membw 1000 1: $out" ;; esac
else
    echo "tools: no $BUILD/membw: its checks skipped"
fi

# 5. The PyTorch peers with torch hidden (a None in sys.modules is an import that fails as a missing module),
#    so the check runs alike where torch is installed.
for s in torch_mlp torch_effnet torch_cuda; do
    err=$(python3 -c 'import runpy, sys
sys.modules["torch"] = None
sys.path.insert(0, sys.argv[1])
sys.argv = [sys.argv[2], "--steps", "1"]
runpy.run_path(sys.argv[0], run_name="__main__")' "$SRC/compare" "$SRC/compare/$s.py" 2>&1)
    st=$?
    case "$st|$err" in "1|$s: no torch module for "*" (Debian: python3-torch)") ;; *) fail "$s.py without torch: exit $st: $err" ;; esac
done
# shellcheck disable=SC2013 # the words are file names
for f in $(grep -ho 'compare/[A-Za-z0-9_]*\.[a-z]*' "$SRC"/compare/*.py | sort -u); do
    [ -f "$SRC/$f" ] || fail "compare/*.py name $f, which does not exist"
done
out=$(cd "$T" && python3 "$SRC/compare/run_compare.py" effnet-32 --only ours --rounds 1 --steps 2 --bench "$T/stub/bench" \
    --out-dir "$T/cmp" 2>/dev/null)
printf '%s\n' "$out" | grep -Eq '^1 +ours +1000\.0 +0\.256 ' || fail "run_compare: no train s from timed_s: $out"

# 6. Usage lines, exit 2.
for c in tools/ab_seam.sh tools/cachesim_check.sh tools/check_mpi.sh "tools/scaling.sh --help"; do
    # shellcheck disable=SC2086 # c is a script and its arguments
    err=$(cd "$SRC" && sh $c 2>&1 >/dev/null)
    st=$?
    case "$st|$err" in 2*usage:*) ;; *) fail "$c: exit $st: $err" ;; esac
done

[ "$fails" -eq 0 ] || { echo "tools: $fails failure(s)" >&2; exit 1; }
echo "tools: ok"
