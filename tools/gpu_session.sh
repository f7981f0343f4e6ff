#!/usr/bin/env bash
# gpu_session.sh — a GPU session in phases that fit the device tool's limits (../shared/device/README.md,
# cuda/README.md): 15 minutes of device time a session, all calls together, a fresh machine's start (a
# minute or two) counted and none started with under 4 minutes left; 10 minutes a command; 8 files back.
#
#   tools/gpu_session.sh pack       here: build build-dev for the GPU machine's CPU (x86-64-v4, not -march=native),
#                                   pack bench, the CUDA tests and issue 31's commit's bench (bench-then,
#                                   TB_THEN) into .dev and check the 64 MiB that may travel
#   tools/gpu_session.sh first      there*: run this first, as the session's one command: test_cuda_ops,
#                                   test_cuda, issue 26's mnist-mlp batch-1 figure, effnet-b0 fp32 and bf16
#                                   beside PyTorch (one round each), one round of ab in fp32, test_cuda_mirrored,
#                                   test_calibrate_gpu, ipu stages on cuda against cpu and issue 31's
#                                   threads at 1 and all cores if time is left (480 s)
#   tools/gpu_session.sh second     there*: a session's second command, after first's failures were mended: the
#                                   GPU tests again, batch-1 runs persistent vs graph, compute-sanitizer on
#                                   them, effnet-b0 224 b256 per-layer profiles (fp32, bf16), b4 bf16 and
#                                   b0 fp16 compares
#   tools/gpu_session.sh check      there*: a short re-check after kernel changes (a session's last ~4 minutes):
#                                   kernel and GPU tests, batch-1 persistent vs graph, b0 fp32/bf16 compares,
#                                   an fp32 per-layer profile, our b4 bf16 alone
#   tools/gpu_session.sh kernels    there*: each kernel's time in one effnet-b0 224 b256 step (fp32, bf16) by
#                                   Nsight Compute: where the slow layers' time goes
#   tools/gpu_session.sh ab         there*: the kernels this tree changed against the ones they replace (their
#                                   TB_CUDA_* switches), alternating, effnet-b0 224 b256 fp32 and bf16 profiles
#   tools/gpu_session.sh mlp        there*: the persistent batch-1 kernel's chunk rows and cluster against the graph
#   tools/gpu_session.sh tests      there*: test_cuda, test_cuda_ops, test_executor, test_backends (their cuda
#                                   instances), test_cuda_mirrored, test_calibrate_gpu, and runs of steps
#                                   against one step a call on the GPU
#   tools/gpu_session.sh sanitizer  there*: compute-sanitizer memcheck (and racecheck) of short bench runs
#   tools/gpu_session.sh bench      there*: issue 26's figures, beside compare/torch_cuda.py (run_compare.py)
#   tools/gpu_session.sh scaling    there*: tools/scaling.sh's phases (issue 31; weak first, its all-core point
#                                   on issue 31's commit beside this tree's, alternating, and weak again with
#                                   TB_REPLICA_CUT=0; then strong, at all cores again with TB_BN_EVEN_CHUNKS=0
#                                   and TB_SE_CHAIN=0; weak again with TB_STREAM_KB=16384, TB_DW_FORM_DOUT=0,
#                                   TB_SE_ROWS=0 and TB_GRAD_FIRST_WRITE=0), or a line saying it is missing
#   (*: from the repository root, after `source .dev/env.sh`; tests, sanitizer, bench and scaling, about
#   8 minutes each with a machine's start, are for a session with device time left after first)
#
# A phase first asks bench for the GPU (a one-step mnist-mlp inference on --device cuda): where there is
# none it says so in one line and exits 1 with nothing run. Then it runs its steps within one time budget
# (GPU_PHASE_BUDGET seconds, default 480 for first and 450 for the others, so that with the machine's start
# first stays near 10 minutes and the others under 8), each under its own limit; a step that fails or
# times out is recorded and the next one runs. It ends with one line per step (PASS, FAIL with the exit
# status, TIMEOUT, SKIP or MISSING with why, and the step's headline where it has one) on stdout and in
# $OUT/<phase>.log (every step's whole output), and packs the rows, compare summaries and step outputs into
# $OUT/<phase>.tar.gz: two files a phase, within the 8 that come back from a command. Exit status: 0 when
# no step failed, 1 when one did or there is no GPU, 2 for usage. Environment: OUT (default
# build-dev/gpu_session_out here; the device tool sets it there), PYTHON (python3: the one with torch),
# COMPUTE_SANITIZER, GPU_PHASE_BUDGET.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
PHASE=${1:-}
# first is a session's one command (about 10 minutes with the machine's start); the others keep 450 s.
case "$PHASE" in
first) BUDGET=${GPU_PHASE_BUDGET:-480} ;;
*) BUDGET=${GPU_PHASE_BUDGET:-450} ;;
esac
PYTHON=${PYTHON:-python3}
LIMIT=$((64 * 1024 * 1024)) # the device tool's travelling tree, carried paths included
# The tests with cuda code or cuda instances (test_cuda_mirrored, test_calibrate_gpu: issue 26 items 2, 5).
TESTS=(test_cuda test_cuda_ops test_executor test_backends test_cuda_mirrored test_calibrate_gpu)
export PYTHONUNBUFFERED=1 # run_compare's per-round lines reach the log as they happen

usage() {
    sed -n '6,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---- pack (here) ----

# Bytes of the files that travel: tracked and untracked-not-ignored ones, then the carried .dev.
tree_bytes() {
    git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
        awk '{s += $1} END {print s + 0}'
}

# The GPU machine has Open MPI's libraries only as bench's dependencies, and no mpirun: the scaling
# phase's 2-rank runs (issue 31) take Debian's launcher along — orterun and orted, the component tree
# (lib/x86_64-linux-gnu/openmpi, as Debian lays it out under the /usr prefix, so OPAL_PREFIX relocates it),
# its help texts and the libraries the components load, less glibc's and those bench's own pack has.
pack_ompi() {
    local orterun
    orterun=$(command -v orterun) || { echo "gpu_session: pack: no orterun here: the mpi scaling phase will be skipped"; return 0; }
    local o=.dev/ompi lib=/usr/lib/x86_64-linux-gnu/openmpi
    mkdir -p "$o/bin" "$o/lib/x86_64-linux-gnu/openmpi" "$o/share" "$o/deps" || return 1
    cp -L "$orterun" "$o/bin/orterun" && ln -sf orterun "$o/bin/mpirun" && cp -L "$(dirname "$orterun")/orted" "$o/bin/" &&
        cp -rL "$lib/lib" "$o/lib/x86_64-linux-gnu/openmpi/" && cp -rL /usr/share/openmpi "$o/share/" || return 1
    local f dep
    for f in "$o/bin/orterun" "$o/bin/orted" "$o"/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so; do
        ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
    done | sort -u | while read -r dep; do
        case "$(basename "$dep")" in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so* | libcudart* | libnccl*) ;;
        *) [ -e ".dev/lib/$(basename "$dep")" ] || cp -L -n "$dep" "$o/deps/" ;;
        esac
    done
}

pack() {
    local packer=${TB_DEVICE_PACK:-$ROOT/../shared/device/pack}
    [ -x "$packer" ] || { echo "gpu_session: pack: $packer is not an executable (set TB_DEVICE_PACK)" >&2; exit 1; }
    # The GPU machine's CPU has AVX-512 but is not this one: no -march=native (TB_NATIVE=OFF).
    cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DTB_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v4 \
        -DTB_CUDA=ON || exit 1
    cmake --build build-dev -j2 --target bench blascalls "${TESTS[@]}" || exit 1
    # Issue 31's own weak-scaling figure (16 devices 7,727 img/s, 71 %) was measured at 36b6a67; the eighteenth
    # session measured 5,585 there with its tree. The commit's bench rides along so that the scaling phase runs
    # both, alternating, and says whether the step regressed or the host differed (scaling_then_now).
    local old=${TB_THEN:-36b6a67} wt
    wt=$(mktemp -d) && rmdir "$wt" && git worktree add -q --detach "$wt" "$old" || exit 1
    # A fresh build directory: the worktree's path is new each time, and CMake refuses a cache made from another.
    rm -rf build-dev-then
    cmake -S "$wt" -B build-dev-then -DCMAKE_BUILD_TYPE=Release -DTB_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v4 \
        -DTB_TESTS=OFF >/dev/null && cmake --build build-dev-then -j2 --target bench >/dev/null &&
        cp build-dev-then/bench build-dev/bench-then || { git worktree remove --force "$wt"; exit 1; }
    git worktree remove --force "$wt"
    local exclude
    exclude=$(git rev-parse --git-path info/exclude) || exit 1
    mkdir -p "$(dirname "$exclude")"
    grep -qx '/.dev/' "$exclude" 2>/dev/null || echo '/.dev/' >>"$exclude"
    rm -rf .dev
    "$packer" .dev build-dev/bench build-dev/bench-then build-dev/blascalls "${TESTS[@]/#/build-dev/}" || exit 1
    pack_ompi || exit 1
    # bin/ and lib/ travel as one gzip archive (68 MB → ~25 MB: libopenblas alone is 36 MB), which also
    # shortens the transfer that device time pays for. env.sh unpacks it outside the tree (a .dev sourced
    # here stays small enough to carry) and points pack's own lines there instead of at .dev.
    tar -czf .dev/payload.tar.gz -C .dev bin lib ompi && rm -rf .dev/bin .dev/lib .dev/ompi || exit 1
    # shellcheck disable=SC2016 # the line as pack writes it, unexpanded
    local here_line='here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)'
    grep -qxF "$here_line" .dev/env.sh || { echo "gpu_session: pack: .dev/env.sh has no '$here_line'" >&2; exit 1; }
    {
        cat <<'ENV'
# tools/gpu_session.sh pack: bin/ and lib/ travel as payload.tar.gz, unpacked once per payload into /tmp
# (not into .dev, which must stay small enough to carry); pack's own lines below read $here, that copy.
tb_dev_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/payload.tar.gz
here=${TMPDIR:-/tmp}/tb-dev-$(stat -c %s-%Y "$tb_dev_src")
[ -d "$here/lib" ] || { mkdir -p "$here" && tar -xzf "$tb_dev_src" -C "$here"; }
unset tb_dev_src
ENV
        grep -vxF "$here_line" .dev/env.sh
        cat <<'ENV'
# Open MPI's launcher, relocated (pack_ompi): mpirun finds its components under OPAL_PREFIX.
export OPAL_PREFIX="$here/ompi" PATH="$here/ompi/bin:$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$here/ompi/deps"
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
    } >.dev/env.sh.new && mv .dev/env.sh.new .dev/env.sh || exit 1
    local dev tree
    dev=$(du -sb .dev | awk '{print $1}')
    tree=$(tree_bytes)
    awk -v d="$dev" -v t="$tree" 'BEGIN { printf "gpu_session: pack: .dev %.1f MiB + working tree %.1f MiB = " \
        "%.1f MiB of the 64 MiB that may travel\n", d / 1048576, t / 1048576, (d + t) / 1048576 }'
    if [ $((dev + tree)) -gt "$LIMIT" ]; then
        echo "gpu_session: pack: over the device tool's 64 MiB: pack fewer executables" >&2
        exit 1
    fi
    echo "gpu_session: pack: done; run phases with carry [\".dev\"] (cuda/README.md, GPU session)"
}

# ---- phases (there) ----

T0=$SECONDS
FAILED=0
SUMMARY=()
LOG=
WORK=

say() { printf '%s\n' "$*" | tee -a "$LOG"; }

# Appends " — text" to the last summary line (a step's headline figure).
note() { [ -n "$1" ] && SUMMARY[${#SUMMARY[@]} - 1]+=" — $1"; }

# Seconds of the phase's budget left, less 10 for its end.
time_left() { echo $((BUDGET - (SECONDS - T0) - 10)); }

# step NAME MAX_S CMD...: runs CMD with at most MAX_S seconds (less when the phase budget has less left),
# its output in WORK/NAME.out and the log; records PASS / FAIL / TIMEOUT. Returns CMD's status.
step() {
    local name=$1 max=$2
    shift 2
    local left
    left=$(time_left)
    if [ "$left" -lt 20 ]; then
        SUMMARY+=("SKIP    $name: out of phase time (GPU_PHASE_BUDGET=$BUDGET s)")
        say "== $name: skipped, out of phase time"
        return 125
    fi
    local t=$max
    [ "$t" -gt "$left" ] && t=$left
    say "== $name (at most $t s): $*"
    local s0=$SECONDS rc
    timeout -k 10 "$t" "$@" >"$WORK/$name.out" 2>&1
    rc=$?
    cat "$WORK/$name.out" >>"$LOG"
    local dt=$((SECONDS - s0)) r
    if [ $rc -eq 0 ]; then
        r="PASS   "
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        r="TIMEOUT" FAILED=1
    else
        r="FAIL   " FAILED=1
    fi
    SUMMARY+=("$r $name (${dt} s$([ $rc -ne 0 ] && echo ", exit $rc"))")
    say "== $name: exit $rc after $dt s"
    [ $rc -ne 0 ] && tail -n 15 "$WORK/$name.out" | sed 's/^/   | /'
    return $rc
}

skip() { # skip NAME WHY
    SUMMARY+=("SKIP    $1: $2")
    say "== $1: skipped: $2"
}

# Starts a phase: the log, a work directory, the GPU check (exits 1 at once where there is none).
begin() {
    OUT=${OUT:-$ROOT/build-dev/gpu_session_out}
    mkdir -p "$OUT" || exit 1
    LOG=$OUT/$PHASE.log
    : >"$LOG"
    if ! command -v bench >/dev/null; then
        say "gpu_session: $PHASE: bench is not on PATH: \`source .dev/env.sh\` first (tools/gpu_session.sh pack)"
        exit 1
    fi
    WORK=$(mktemp -d "/tmp/gpu_session.$PHASE.XXXXXX") || exit 1
    local probe
    probe=$(timeout -k 5 60 bench --device cuda --plan inference --batch 1 --steps 1 --warmup 0 --data synthetic \
        --synthetic-samples 8,8 --out /dev/null --mllog none --quiet 2>&1 >/dev/null)
    local rc=$?
    if printf '%s' "$probe" | grep -q 'no CUDA device'; then
        say "gpu_session: $PHASE: no CUDA device here ($(printf '%s' "$probe" | head -n 1)): nothing run"
        rm -rf "$WORK"
        exit 1
    fi
    say "gpu_session $PHASE: $(date -u +%FT%TZ), budget $BUDGET s, bench $(command -v bench)"
    { bench --version 2>&1 | head -n 3; command -v nvidia-smi >/dev/null && nvidia-smi -L; } >>"$LOG" 2>&1
    # The host's cores as issue 31 needs them: 16 vCPUs may be 8 cores of 2 threads (threads went 2,863 ->
    # 3,095 img/s from 8 to 16 there), and efficiency is then bounded by the physical cores. Its caches
    # set what `make cachesim` should model (CACHESIM_LL) and which tensors stay in cache per replica.
    say "cpu: $(nproc) usable; $(lscpu 2>/dev/null | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L2 cache|L3 cache)' |
        sed 's/  */ /g' | paste -sd ';' -)"
    if [ $rc -ne 0 ]; then # a GPU, but the smoke step failed: said, and the phase goes on
        SUMMARY+=("FAIL    cuda smoke (mnist-mlp inference, one step; exit $rc): $(printf '%s' "$probe" | head -n 1)")
        FAILED=1
    fi
}

finish() {
    say ""
    say "gpu_session $PHASE: ${#SUMMARY[@]} steps in $((SECONDS - T0)) s$([ $FAILED -ne 0 ] && echo ", some failed")"
    local l
    for l in "${SUMMARY[@]}"; do say "  $l"; done
    cp "$LOG" "$WORK/" 2>/dev/null
    tar -czf "$OUT/$PHASE.tar.gz" -C "$WORK" . || say "gpu_session: $PHASE: could not pack $WORK"
    rm -rf "$WORK"
    exit $FAILED
}

# The Criterion synthesis line of a test step's output ("Tested: 9 | Passing: 9 | ...").
synthesis() { grep -h 'Synthesis' "$WORK/$1.out" 2>/dev/null | tail -n 1 | sed 's/.*Synthesis: //'; }

# "images/s X, final loss Y, ..." of the last row in a results file.
row_headline() {
    "$PYTHON" - "$1" <<'PY' 2>/dev/null
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
f = rows[-1].get("figures", {})
parts = ["%s %s" % (k, format(f[k], ".6g") if isinstance(f[k], float) else f[k])
         for k in ("images_per_s", "train_time_s", "final_loss", "test_accuracy", "step_executions") if k in f]
print(", ".join(parts))
PY
}

# The medians and the ratio line of a run_compare.py step's output.
compare_headline() {
    grep -hE '^median|ours / PyTorch|^no ratio|^FAILED' "$WORK/$1.out" 2>/dev/null | sed 's/  */ /g' |
        awk '{printf "%s%s", (NR > 1 ? "; " : ""), $0}'
}

# test_step TEST MAX_S: one packed Criterion test (cuda instances beside the cpu ones), its synthesis noted.
test_step() {
    if ! command -v "$1" >/dev/null; then
        skip "$1" "not in .dev (run pack again)"
        return
    fi
    step "$1" "$2" "$1" --verbose --jobs 8
    note "$(synthesis "$1")"
}

phase_tests() {
    local t
    for t in "${TESTS[@]}"; do
        test_step "$t" 150
    done
    ipu_cuda_steps
    harness_runs
}

# Issue 26 item 2's pipeline stages on the GPU (first run on an H200: within 1e-7): mnist-mlp in 2 stages x 2 replicas
# on --device cuda against the same run on the cpu device (fp32 both, other kernels and summation orders:
# losses within 1e-4 relative, test accuracy within 0.01).
ipu_cuda_steps() {
    local a=$WORK/ipu-cpu.jsonl b=$WORK/ipu-cuda.jsonl
    local run=(bench --backend ipu --workload mnist-mlp --stages 2 --replicas 2 --ga 4 --batch 64 --steps 20
        --data synthetic --synthetic-samples "1280,256" --mllog none)
    step ipu-cpu 60 "${run[@]}" --device cpu --out "$a" && note "$(row_headline "$a")"
    step ipu-cuda 60 "${run[@]}" --device cuda --out "$b" && note "$(row_headline "$b")"
    if [ ! -s "$a" ] || [ ! -s "$b" ]; then
        skip ipu-cuda-vs-cpu "a run above wrote no row"
        return
    fi
    step ipu-cuda-vs-cpu 30 "$PYTHON" - "$a" "$b" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p) if l.strip()][-1]["figures"] for p in sys.argv[1:3])
bad = [k for k in ("first_loss", "final_loss", "test_loss")
       if not (isinstance(a.get(k), float) and isinstance(b.get(k), float)) or abs(a[k] - b[k]) > 1e-4 * abs(a[k])]
if abs(a.get("test_accuracy", 0) - b.get("test_accuracy", -1)) > 0.01: bad.append("test_accuracy")
print("ipu on cuda vs cpu:", ", ".join("%s %r vs %r" % (k, b.get(k), a.get(k)) for k in
                                       ("first_loss", "final_loss", "test_loss", "test_accuracy")))
sys.exit(1 if bad else 0)
PY
    note "$(tail -n 1 "$WORK/ipu-cuda-vs-cpu.out" 2>/dev/null)"
}

phase_sanitizer() {
    local cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
    if [ ! -x "$cs" ]; then
        skip memcheck "no compute-sanitizer ($cs; set COMPUTE_SANITIZER)"
        return
    fi
    local san=("$cs" --tool memcheck --error-exitcode 3 --print-limit 20)
    local common=(--data synthetic --mllog none --out "$WORK/rows.jsonl")
    # The batch-1 graph and its runs on the device; the plain passes, update and evaluation; EfficientNet.
    step memcheck-mlp-b1 150 "${san[@]}" bench --backend cuda --workload mnist-mlp --batch 1 --steps 300 \
        --synthetic-samples 1000,100 "${common[@]}"
    step memcheck-mlp-b32 120 "${san[@]}" bench --backend cuda --workload mnist-mlp --batch 32 --steps 10 \
        --synthetic-samples 1000,100 "${common[@]}"
    step memcheck-effnet-b0-r32 200 "${san[@]}" bench --backend cuda --workload effnet-b0 --resolution 32 \
        --batch 4 --steps 2 --synthetic-samples 64,16 "${common[@]}"
    step racecheck-effnet-b0-r32 200 "$cs" --tool racecheck --error-exitcode 3 --print-limit 20 bench \
        --backend cuda --workload effnet-b0 --resolution 32 --batch 4 --steps 1 --synthetic-samples 64,16 "${common[@]}"
}

# The bench flag (e.g. "--precision bf16m") a run_compare.py configuration passes for its precision.
compare_precision_flag() {
    "$PYTHON" - "$1" <<'PY' 2>/dev/null
import sys
sys.path.insert(0, "compare")
import run_compare
a = run_compare.CONFIGS[sys.argv[1]]["bench_args"]
print(" ".join(a[a.index("--precision"):a.index("--precision") + 2]) if "--precision" in a else "")
PY
}

# Side by side: run_compare.py CONFIG in ROUNDS rounds of A B (default 2: A B A B); only the PyTorch side,
# one round, where ours refuses.
compare_step() { # compare_step CONFIG MAX_S ours_ok [ROUNDS]
    local cfg=$1 max=$2 ok=$3 rounds=${4:-2}
    # A side's limit: PyTorch's side is the slow one (import, cuDNN's autotuning of every shape: b0 bf16 took
    # over 45 s, b4 at 380 over 75 s on the H200), ours ~10 s; so each round's PyTorch run may take all but
    # 20 s of the round's share.
    local side=$(((max - 20 * rounds) / rounds))
    [ "$side" -lt 30 ] && side=30
    local cmp=("$PYTHON" compare/run_compare.py "$cfg" --python "$PYTHON" --bench "$(command -v bench)"
        --out-dir "$WORK/$cfg" --timeout "$side")
    if [ "$ok" = 1 ]; then
        step "$cfg" "$max" "${cmp[@]}" --rounds "$rounds"
    else
        step "$cfg-pytorch-only" "$max" "${cmp[@]}" --rounds 1 --only pytorch
    fi
    note "$(compare_headline "${cfg}$([ "$ok" = 1 ] || echo -pytorch-only)")"
}

# bf16_probe MAX_S: whether the cuda backend takes run_compare's bf16 flag, as run_compare.py would pass it,
# on a tiny run (BF16_OK=1 where it does). Not accepted (yet) is an answer, not a failed step: our side of
# the bf16 compares is skipped, the peer's still runs. Capped by the phase time left, as a step is.
BF16_OK=0
bf16_probe() {
    local max=$1 flag out=$WORK/bf16-accepted.out rc left
    left=$(time_left)
    BF16_OK=0
    if [ "$left" -lt 20 ]; then
        skip bf16-accepted "out of phase time (GPU_PHASE_BUDGET=$BUDGET s)"
        return
    fi
    [ "$max" -gt "$left" ] && max=$left
    flag=$(compare_precision_flag cuda-b0-bf16)
    say "== bf16-accepted: bench --backend cuda ... $flag (effnet-b0, 32x32, one step)"
    # shellcheck disable=SC2086 # flag is two words on purpose
    timeout -k 5 "$max" bench --backend cuda --workload effnet-b0 --plan throughput --resolution 32 --batch 2 \
        --steps 1 --warmup 0 --data synthetic --synthetic-samples 8,8 --out /dev/null --mllog none --quiet $flag \
        >"$out" 2>&1
    rc=$?
    cat "$out" >>"$LOG"
    if [ $rc -eq 0 ]; then
        SUMMARY+=("PASS    bf16-accepted: the cuda backend runs '$flag'")
        BF16_OK=1
    else
        SUMMARY+=("SKIP    bf16: the cuda backend does not take '$flag' (exit $rc): $(head -n 1 "$out")")
    fi
}

# Issue 26's headline: mnist-mlp batch 1, 100,000 steps (runs of steps on the device: --steps-per-execution
# auto); bench and first both run it.
MLP_B1_100K=(bench --backend cuda --workload mnist-mlp --batch 1 --steps 100000 --data synthetic)
# Issue 26's effnet-b0 configuration (run_compare.py's cuda-b0-*): 224x224, batch 256, synthetic, SGD momentum.
B0_224_B256=(bench --backend cuda --workload effnet-b0 --plan throughput --resolution 224 --batch 256 --data synthetic
    --classes 1000 --optimizer sgd --momentum 0.9 --mllog none)

# mlp_step NAME MAX_S [VAR=VALUE...]: MLP_B1_100K as one step with those variables, its row's headline noted.
mlp_step() {
    local name=$1 max=$2
    shift 2
    step "$name" "$max" env "$@" "${MLP_B1_100K[@]}" --out "$WORK/$name.jsonl" && note "$(row_headline "$WORK/$name.jsonl")"
    # A refused cluster (grid barriers instead) or a chain the persistent kernel does not take (the graph
    # instead) is said on stderr only: on the summary line, so a fallback's figure is not read as the switch's.
    note "$(grep -h -m 2 -E 'TB_CUDA_MLP_SYNC=cluster:|persistent kernel does not take' "$WORK/$name.out" 2>/dev/null |
        tr '\n' ' ')" || true
}

# b0_profile_step NAME MAX_S PRECISION [VAR=VALUE...]: B0_224_B256 for 10 steps with --profile (the per-layer
# times), with those variables.
b0_profile_step() {
    step "$1" "$2" env "${@:4}" "${B0_224_B256[@]}" --steps 10 --warmup 3 --precision "$3" --profile \
        --out "$WORK/$1.jsonl"
    note "$(row_headline "$WORK/$1.jsonl")"
}

torch_version() {
    timeout -k 5 60 "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' \
        >>"$LOG" 2>&1
}

# A session's one command (15 minutes of device time, a machine's start included): the checks and figures
# in the order they are worth, each capped so that a hang leaves the ones after it their time.
phase_first() {
    local t s0
    # The kernels against their CPU references first: every figure after them rests on these.
    for t in test_cuda_ops test_cuda; do
        test_step "$t" 120
    done
    mlp_step mlp-b1-100k 90
    mlp_step mlp-b1-100k-cluster 40 TB_CUDA_MLP_SYNC=cluster # the nineteenth session's cluster barriers
    torch_version
    # One round each (PyTorch, ours): two do not fit beside the rest.
    compare_step cuda-b0-fp32 150 1 1
    # The probe and the bf16 compare share their 120 s.
    s0=$SECONDS
    bf16_probe 30
    compare_step cuda-b0-bf16 $((120 - (SECONDS - s0))) "$BF16_OK" 1
    # One round of the ab phase in fp32 (the changed kernels against the ones they replace), when 100 s are left.
    if [ "$(time_left)" -ge 100 ]; then
        b0_profile_step ab-new-fp32-r1 45 fp32
        b0_profile_step ab-old-fp32-r1 45 fp32 "${AB_OLD[@]}"
    else
        skip ab-fp32 "needs 100 s, $(time_left) s left (tools/gpu_session.sh ab)"
    fi
    for t in test_cuda_mirrored test_calibrate_gpu; do
        test_step "$t" 60
    done
    ipu_cuda_steps
    # Issue 31 on the machine's cores, if time is left: threads at 1 and all cores (effnet-b0 224 b16 and
    # 32 b128, one round, per-layer profile), the check of the work split the 2-core sessions simulated.
    # Optional: run only with its whole 150 s left, so that being cut short is never the phase's failure.
    local left
    left=$(time_left)
    if [ ! -f tools/scaling.sh ]; then
        skip scaling-strong "tools/scaling.sh is not in this tree"
    elif [ "$left" -lt 150 ]; then
        skip scaling-strong "needs 150 s, $left s left (tools/gpu_session.sh scaling with time left)"
    else
        scaling_step strong 150 SCALE_THREADS="1 $(nproc)"
    fi
}

# A session's second command, after first's failures were mended: the GPU tests again, the runs of batch-1
# steps (the persistent kernel) against the captured graph A B A B, compute-sanitizer on the persistent
# kernel, a per-layer profile of effnet-b0 at 224 batch 256 (fp32, bf16), first's missing compare (b4 bf16), and
# b0 fp16 beside PyTorch.
phase_second() {
    local t
    for t in test_cuda test_cuda_mirrored test_calibrate_gpu; do test_step "$t" 90; done
    harness_runs
    local r
    for r in 1 2; do
        mlp_step "mlp-b1-100k-persistent-r$r" 40
        mlp_step "mlp-b1-100k-graph-r$r" 40 TB_CUDA_LOOP=graph
        # the forty-third session's last layer in every block (5 grid barriers a step) against its owners (7)
        mlp_step "mlp-b1-100k-last-apart-r$r" 40 TB_CUDA_MLP_LAST=apart
    done
    local cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
    local tool
    for tool in memcheck racecheck synccheck; do
        step "$tool-mlp-b1-persistent" 60 "$cs" --tool "$tool" --error-exitcode 3 --print-limit 20 bench --backend cuda \
            --workload mnist-mlp --batch 1 --steps 300 --synthetic-samples 1000,100 --data synthetic --mllog none \
            --out "$WORK/rows.jsonl"
    done
    local prec
    for prec in fp32 bf16m; do b0_profile_step "profile-b0-224-b256-$prec" 60 "$prec"; done
    torch_version
    compare_step cuda-b4-bf16 150 1 1
    # fp16 with loss scaling (fifty-seventh stop, never run before): one round beside PyTorch's GradScaler.
    compare_step cuda-b0-fp16 120 1 1
    # Issue 31's other phases on the machine's cores (first ran strong), each only with its whole time left.
    local p need
    for p in weak:90 mpi:70 ipu:70; do
        need=${p#*:}
        if [ "$(time_left)" -lt "$need" ]; then
            skip "scaling-${p%%:*}" "needs $need s, $(time_left) s left"
        else
            scaling_step "${p%%:*}" "$need" SCALE_THREADS="1 $(nproc)"
        fi
    done
}

# A short re-check after kernel changes (fits a session's last ~4 minutes): the kernel and GPU tests, batch-1
# persistent (twice) vs graph, effnet-b0 224 b256 fp32 and bf16 beside PyTorch (one round each), an fp32
# per-layer profile, our b4 bf16 alone (PyTorch's b4 needs more than such a call has).
phase_check() {
    local t
    for t in test_cuda_ops test_cuda; do test_step "$t" 60; done
    mlp_step mlp-b1-100k-persistent-r1 30
    mlp_step mlp-b1-100k-graph 30 TB_CUDA_LOOP=graph
    mlp_step mlp-b1-100k-last-apart 30 TB_CUDA_MLP_LAST=apart
    mlp_step mlp-b1-100k-persistent-r2 30
    torch_version
    compare_step cuda-b0-fp32 90 1 1
    compare_step cuda-b0-bf16 90 1 1
    b0_profile_step profile-b0-224-b256-fp32 40 fp32
    step ours-b4-380-b64-bf16 40 bench --backend cuda --workload effnet-b4 --plan throughput --resolution 380 \
        --batch 64 --steps 20 --warmup 5 --data synthetic --classes 1000 --optimizer sgd --momentum 0.9 \
        --precision bf16m --mllog none --out "$WORK/b4-bf16.jsonl"
    note "$(row_headline "$WORK/b4-bf16.jsonl")"
}

# Each kernel's time in one effnet-b0 224 batch-256 training step (fp32, then bf16), from Nsight Compute (one
# metric, the kernel's duration, so one replay a kernel; --clock-control none: the clocks as they run): the
# per-layer profile (--profile) says which layers are slow, this says which of their kernels. The eighteenth
# session's profile put 35 of 121 ms in the depthwise backward, with the backward-data kernel not the cause.
phase_kernels() {
    local ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)} prec
    if [ ! -x "$ncu" ]; then
        skip ncu "no Nsight Compute ($ncu; set NCU)"
        return
    fi
    for prec in fp32 bf16m; do
        step "ncu-b0-224-b256-$prec" 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
            --print-summary per-kernel --csv "${B0_224_B256[@]}" --steps 1 --warmup 0 --precision "$prec" \
            --out "$WORK/ncu-$prec.jsonl"
        step "ncu-top-$prec" 20 "$PYTHON" - "$WORK/ncu-b0-224-b256-$prec.out" <<'PY'
# The per-kernel summary as a ranking: each kernel name's total time (average × invocations) and its share.
import csv, sys
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
table = list(csv.reader(rows))
head = next((r for r in table if "Kernel Name" in r and "Average" in r), None)
if not head:
    print("ncu summary: no per-kernel table in the output"); sys.exit(0)
k, avg = head.index("Kernel Name"), head.index("Average")
inv = head.index("Invocations") if "Invocations" in head else None
unit = head.index("Metric Unit") if "Metric Unit" in head else None
tot, count, scale = {}, {}, {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
for r in table:
    if r is head or len(r) <= max(k, avg):
        continue
    try:
        a = float(r[avg].replace(",", ""))
    except ValueError:
        continue
    n = int(r[inv]) if inv is not None and r[inv].isdigit() else 1
    ms = a * n * scale.get(r[unit] if unit is not None else "nsecond", 1e-6)
    name = r[k].split("(")[0].split("<")[0].strip()
    name = name[5:] if name.startswith("void ") else name
    tot[name] = tot.get(name, 0.0) + ms
    count[name] = count.get(name, 0) + n
all_ms = sum(tot.values())
print("ncu: %.1f ms of kernels in the run" % all_ms)
for name, ms in sorted(tot.items(), key=lambda x: -x[1])[:25]:
    print("%8.2f ms %5.1f%% %5d x  %s" % (ms, 100.0 * ms / all_ms if all_ms else 0.0, count[name], name))
PY
    done
}

# The kernels a tree changed against the ones they replace, on one binary through their switches
# (TB_CUDA_DW=old: the earlier depthwise kernels; TB_CUDA_CONV_ALGO=im2col: the stem by im2col and GEMMs;
# TB_CUDA_NARROW=1: one channel a thread in the depthwise and elementwise kernels; TB_CUDA_GRAD_ZERO=memset:
# every gradient zeroed and accumulated into; TB_CUDA_GRAD_LAYOUT=full TB_CUDA_EVAL_ARENA=own: a slot per
# gradient and an evaluation arena of its own; TB_CUDA_CUBLAS_WS_MIB=4: cuBLAS's 4 MiB workspace, not Hopper's
# 32; TB_CUDA_WGRAD=gemm: the 1×1 weight gradient as one GEMM, not split over rows; TB_CUDA_CHANNEL_ROWS=scalar:
# BatchNorm's apply passes, the SE scale and the pool's backward reading their per-channel rows a float a load
# (under NARROW=1 they do anyway; alone, GPU_AB_OLD=TB_CUDA_CHANNEL_ROWS=scalar); TB_CUDA_BN_DW=apart: every
# BatchNorm writes its output, none applied in its depthwise reader's loads), alternating new old new
# old on effnet-b0 224 batch 256, fp32 then bf16, each run with its per-layer profile; then the ratio of the
# medians (new / old images/s) per precision, and each side's peak GPU memory.
# GPU_AB_OLD (words VAR=VALUE) replaces the old side's switches, to measure one change alone.
read -r -a AB_OLD <<<"${GPU_AB_OLD:-TB_CUDA_DW=old TB_CUDA_CONV_ALGO=im2col TB_CUDA_NARROW=1 TB_CUDA_GRAD_ZERO=memset \
TB_CUDA_GRAD_LAYOUT=full TB_CUDA_EVAL_ARENA=own TB_CUDA_CUBLAS_WS_MIB=4 TB_CUDA_WGRAD=gemm TB_CUDA_CHANNEL_ROWS=scalar \
TB_CUDA_BN_DW=apart}"
phase_ab() {
    local prec r
    for prec in fp32 bf16m; do
        for r in 1 2; do
            b0_profile_step "ab-new-$prec-r$r" 50 "$prec"
            b0_profile_step "ab-old-$prec-r$r" 50 "$prec" "${AB_OLD[@]}"
        done
    done
    step ab-ratio 20 "$PYTHON" - "$WORK" <<'PY'
import glob, json, os, statistics, sys
def fig(p, key):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    return rows[-1]["figures"].get(key) if rows else None
bad = 0
for prec in ("fp32", "bf16m"):
    got, mem = {}, {}
    for side in ("new", "old"):
        runs = sorted(glob.glob(os.path.join(sys.argv[1], "ab-%s-%s-r*.jsonl" % (side, prec))))
        got[side] = [v for v in (fig(p, "images_per_s") for p in runs) if v]
        mem[side] = [v for v in (fig(p, "gpu_mem_peak_mib") for p in runs) if v]
    if got["new"] and got["old"]:
        n, o = statistics.median(got["new"]), statistics.median(got["old"])
        print("%s: new %s, old %s images/s; new / old %.3f; peak MiB new %s, old %s" %
              (prec, got["new"], got["old"], n / o, mem["new"], mem["old"]))
    else:
        print("%s: a side wrote no row" % prec)
        bad = 1
sys.exit(bad)
PY
    note "$(tr '\n' ' ' <"$WORK/ab-ratio.out" 2>/dev/null)"
}

# The persistent batch-1 kernel's chunk rows (TB_CUDA_MLP_ROWS: 16 is the default, 49 blocks for mnist-mlp; 8, 24
# and 32 give 98, 33 and 25 blocks: cheaper barriers or more work a block) and its blocks as one thread-block
# cluster (TB_CUDA_MLP_SYNC=cluster: 16 blocks, hardware barriers; beside it rows 49, the same 16 chunks with
# grid barriers), alternating with the graph: where its 32 µs a step (eighteenth session) goes. A size whose shared memory does not fit falls back to the graph
# and says so on stderr.
phase_mlp() {
    local r rows
    for r in 1 2; do
        mlp_step "mlp-b1-100k-graph-r$r" 30 TB_CUDA_LOOP=graph
        # one thread-block cluster of 16 blocks (hardware barriers), and the same 16 chunks with grid barriers
        mlp_step "mlp-b1-100k-cluster-r$r" 30 TB_CUDA_MLP_SYNC=cluster
        mlp_step "mlp-b1-100k-rows49-r$r" 30 TB_CUDA_MLP_ROWS=49
        mlp_step "mlp-b1-100k-last-apart-r$r" 30 TB_CUDA_MLP_LAST=apart # 7 grid barriers a step, not 5
        for rows in 8 16 24 32; do mlp_step "mlp-b1-100k-rows$rows-r$r" 30 TB_CUDA_MLP_ROWS=$rows; done
    done
}

# The harness's runs of steps on the GPU against one step a call: the same losses and accuracy.
harness_runs() {
    local a=$WORK/runs-auto.jsonl b=$WORK/runs-one.jsonl
    local mlp=(bench --backend cuda --workload mnist-mlp --batch 1 --steps 3000 --steps-per-epoch 1000 --data synthetic
        --synthetic-samples "3000,500" --mllog none)
    local ra=1 rb=1
    step harness-runs-auto 60 "${mlp[@]}" --out "$a" && ra=0 && note "$(row_headline "$a")"
    step harness-runs-one 120 "${mlp[@]}" --steps-per-execution 1 --out "$b" && rb=0 && note "$(row_headline "$b")"
    # Only whole runs: a run stopped by its time limit still writes a row (of the steps it made), and two such
    # rows could agree or differ for that reason alone (the forty-third session's rehearsal compared two).
    if [ "$ra" = 0 ] && [ "$rb" = 0 ] && [ -s "$a" ] && [ -s "$b" ]; then
        step harness-runs-same-bits 30 "$PYTHON" - "$a" "$b" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p) if l.strip()][-1]["figures"] for p in sys.argv[1:3])
keys = ("first_loss", "final_loss", "test_loss", "test_accuracy")
diff = [k for k in keys if a.get(k) != b.get(k)]
print("runs of steps vs one step a call:", ", ".join("%s %r vs %r" % (k, a.get(k), b.get(k)) for k in keys))
sys.exit(1 if diff else 0)
PY
    else
        skip harness-runs-same-bits "a run above did not finish or wrote no row"
    fi
}

phase_bench() {
    torch_version
    mlp_step mlp-b1-100k 150
    compare_step cuda-b0-fp32 300 1
    bf16_probe 60
    compare_step cuda-b0-bf16 240 "$BF16_OK"
    compare_step cuda-b4-bf16 300 "$BF16_OK"
    # What the runs buy: the same 100,000 steps one step a call (the fused step, one round trip a step).
    step mlp-b1-100k-per-step 150 "${MLP_B1_100K[@]}" --steps-per-execution 1 --out "$WORK/mlp-b1-per-step.jsonl"
    note "$(row_headline "$WORK/mlp-b1-per-step.jsonl")"
}

# tools/scaling.sh (issue 31: `tools/scaling.sh BUILD [PHASE...]`, make bench-scaling) on the GPU
# machine's cores, one of its phases a step so that each gets the time left; its rows and tables kept.
phase_scaling() {
    if [ ! -f tools/scaling.sh ]; then
        SUMMARY+=("MISSING tools/scaling.sh: issue 31's scaling runner is not in this tree; nothing run")
        say "== scaling: tools/scaling.sh is missing (issue 31)"
        return
    fi
    # Weak scaling first (the goal furthest off: 45 % against 90 %), with what says most about it: issue 31's
    # commit beside this tree on the 16-device point, and the replicas' cut.
    scaling_step weak $((BUDGET / 2))
    # OpenBLAS's buffer lock (thirty-second session): every sgemm past its small-matrix path took and gave back a
    # buffer under one process-wide mutex (3,162 locks a step at the 16-core cut); buffers are per thread now.
    # First the lock alone (T threads, one sgemm each, then a barrier: µs a phase, shared table vs per-thread),
    # then weak scaling with OpenBLAS's table again.
    blascalls_step 60
    scaling_step weak $((BUDGET / 2)) TB_BLAS_BUFFERS=shared
    # Mirrored's replicas share one copy of the parameters (thirty-second session): no all-gather after the
    # sharded update (15 ring steps and barriers at 16 devices), one copy of the weights in the caches. Off:
    scaling_step weak $((BUDGET / 2)) TB_SHARED_PARAMS=0
    scaling_then_now 240
    # Mirrored's one-thread replicas cut their work as a 2-core machine does (thirty-first session); before, as
    # the 16-core machine (more GEMM tiles, weight-gradient row chunks, depthwise (row, channel) items, fused
    # BatchNorm passes off where chunks fill too few cores): weak scaling again with that cut.
    scaling_step weak $((BUDGET / 2)) TB_REPLICA_CUT=0
    scaling_step strong $((BUDGET / 2))
    scaling_step strong $((BUDGET / 2)) SCALE_THREADS="$(nproc)" TB_BLAS_BUFFERS=shared
    # The thirty-third session's even BatchNorm chunks (14 of 224 rows at 14×14 batch 16, on whole image rows, so
    # strong scaling's 224×224 layers there take the fused depthwise paths), off: 16 unequal chunks, 16 threads busy.
    scaling_step strong $((BUDGET / 2)) SCALE_THREADS="$(nproc)" TB_BN_EVEN_CHUNKS=0
    # The twenty-eighth session's SE chain (each thread's row tiles through fc1, SiLU, fc2, sigmoid; same bits),
    # off: all threads only, against the step above.
    scaling_step strong $((BUDGET / 2)) SCALE_THREADS="$(nproc)" TB_SE_CHAIN=0
    # The twenty-seventh session's non-temporal stores from 1 MiB a thread (Intel), against the old 16 MiB: weak
    # scaling's one-thread replicas are where they change anything (strong's 16 threads keep 16 MiB).
    scaling_step weak $((BUDGET / 2)) TB_STREAM_KB=16384
    # The twenty-sixth's formed depthwise dout (4.8 % fewer bytes a replica step, simulated), off.
    scaling_step weak $((BUDGET / 2)) TB_DW_FORM_DOUT=0
    # The twenty-ninth's SE scale formed in the projection's rows (5.0 % fewer bytes, simulated), off.
    scaling_step weak $((BUDGET / 2)) TB_SE_ROWS=0
    # The thirtieth's parameter gradients written by their first backward (no zeroing pass), off.
    scaling_step weak $((BUDGET / 2)) TB_GRAD_FIRST_WRITE=0
    scaling_step mpi $((BUDGET / 2))
    scaling_step ipu $((BUDGET / 2))
    # The ipu's stages with 8 replicas cut as one-core devices since the thirty-first session: its old cut.
    scaling_step ipu $((BUDGET / 2)) TB_REPLICA_CUT=0
}

# blascalls_step MAX_S: build/blascalls (make bench-blascalls) on 1 thread and all cores, 3 rounds alternating.
blascalls_step() {
    command -v blascalls >/dev/null || {
        SUMMARY+=("MISSING blascalls: pack did not carry it; nothing run")
        return
    }
    step blascalls "$1" blascalls 3 1 "$(nproc)"
    note "$(grep -h 'median' "$WORK/blascalls.out" 2>/dev/null | grep -v '^T=1 ' | tr '\n' ';' | cut -c1-300)"
}

# scaling_then_now MAX_S: weak scaling's 16-device point (mirrored, 128 a device, 32×32) on pack's bench-then
# (issue 31's commit, TB_THEN), on this tree's bench with the replicas cut as the machine (TB_REPLICA_CUT=0, the
# eighteenth session's way) and on this tree's bench, alternating, two rounds: the same host, one run.
scaling_then_now() {
    local then_bench
    then_bench=$(command -v bench-then) || {
        SUMMARY+=("MISSING bench-then: pack did not build issue 31's commit; nothing run")
        return
    }
    local d
    d=$(nproc)
    step scaling-then-now "$1" bash -c 'for r in 1 2; do for side in then machine-cut now; do
        b=bench cut=1
        [ "$side" = then ] && b=$0
        [ "$side" = machine-cut ] && cut=0
        printf "%s round %s: " "$side" "$r"
        TB_REPLICA_CUT=$cut "$b" --backend mirrored --devices "$1" --workload effnet-b0 --resolution 32 \
            --batch $((128 * $1)) --warmup 2 --steps 8 --data synthetic --plan throughput --out "$2" 2>&1 |
            grep -E "^  images/s" | tail -n 1
    done; done' "$then_bench" "$d" "$WORK/scaling-then-now.jsonl"
    note "$(grep -h "round" "$WORK/scaling-then-now.out" 2>/dev/null | tr '\n' ';' | cut -c1-300)"
}

# scaling_step PHASE MAX_S [ENV...]: tools/scaling.sh's PHASE as one step (one round unless SCALE_ROUNDS says
# otherwise: two rounds of every phase do not fit one budget), its summary kept beside its rows. A TB_* setting
# among ENV names the step after it too (scaling-weak-TB_STREAM_KB_16384), so an A/B's two sides keep their files.
scaling_step() {
    local p=$1 max=$2 build tag=$1 e
    shift 2
    for e in "$@"; do
        case $e in TB_*) tag="$tag-$(printf '%s' "$e" | tr -c 'A-Za-z0-9_.-' '_')" ;; esac
    done
    build=$(dirname "$(command -v bench)")
    step "scaling-$tag" "$max" env SCALE_ROUNDS="${SCALE_ROUNDS:-1}" SCALE_OUT="$WORK/scaling-$tag.jsonl" "$@" \
        sh tools/scaling.sh "$build" "$p"
    note "$(grep -h 'failed' "$WORK/scaling-$tag.out" 2>/dev/null | head -n 2 |
        awk '{printf "%s%s", (NR > 1 ? "; " : ""), $0}')"
    cp results/scaling.md "$WORK/scaling-$tag.md" 2>/dev/null
}

case "$PHASE" in
pack) pack ;;
first | second | check | kernels | ab | mlp | tests | sanitizer | bench | scaling)
    begin
    "phase_$PHASE"
    finish
    ;;
*) usage ;;
esac
