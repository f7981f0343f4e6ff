#!/bin/sh
# check_layers.sh — ctest `layers`: no layer uses a layer above it.
#
# Layers, lowest first: util ← core ← workloads ← backends ← harness (then bench and the tests).
# The build already makes a higher layer's header a compile error in a lower layer's .c file (each
# library sees only its own folder and those below it); this check also covers what the compiler
# cannot see:
#   1. includes in every .c and .h of a layer folder and its subfolders (backends/ipu), headers included by nothing among them, and
#      quoted includes with a path ("../harness/json.h"), which would bypass the include directories;
#   2. the archives' symbols: a function or variable a layer uses but does not define (declared by
#      hand, without a header) must not be defined by a higher layer;
#   3. the executor seam (issue 25): the schedules (backends/, backends/ipu/) reach devices through
#      executor.h only — no .c file there includes exec.h, exec_priv.h, arena.h, executor_cpu.h or
#      stage_engine.h, and libtb_backends.a calls no exec_*, arena_* or local_engine_* function
#      (backends/local_engine.h, which includes executor_cpu.h, is the white-box tests' helper).
#   4. the cuda device (cuda/, built with TB_CUDA): a layer beside core that may use util and core only
#      (its .c, .cu and .h files include no header of workloads, backends or harness, and libtb_cuda.a
#      uses no symbol they define); core uses nothing of it but the registry's members (executor_cuda_create,
#      _probe, _count, and _info, _calibrate, _memory of core/device_info.h); no other layer uses a symbol of libtb_cuda.a or
#      includes a cuda/ header — schedules reach the GPU through executor.h. Skipped when not built.
# Usage: check_layers.sh SOURCE_DIR ARCHIVE_DIR [NM]. Exits 1 naming every violation.
set -u

src=$1
lib=$2
nm=${3:-nm}
command -v "$nm" >/dev/null 2>&1 || { echo "check_layers: no symbol lister '$nm': cannot check the layers' symbols"; exit 1; }
layers="util core workloads backends harness"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Every file name in a layer's folder (or a folder inside it, such as backends/ipu) with the index of the
# lowest layer holding it, once: a lookup per include line forked a subshell and globbed every folder (the
# check took 7 s alone, 19 s beside the other tests).
j=0
for l in $layers; do
    for f in "$src/$l"/* "$src/$l"/*/*; do
        [ -f "$f" ] && echo "${f##*/} $j"
    done
    j=$((j + 1))
done >"$tmp/hmap"

# check_includes FILES MODE: each line of FILES is "INDEX PATH"; every quoted include of PATH is checked
# against the layer holding the header. MODE layers: a header of a layer above INDEX; MODE cuda: a header
# of a layer above core (cuda may use util and core only). Both: an include with a path. Prints each
# violation; exits 1 if any.
check_includes() {
    awk -v src="$src/" -v layers="$layers" -v mode="$2" '
        BEGIN { split(layers, L, " ") }
        FILENAME == ARGV[1] { if (!($1 in lay)) lay[$1] = $2; next }
        {
            i = $1; f = substr($0, index($0, " ") + 1); rel = substr(f, length(src) + 1)
            while ((getline line < f) > 0) {
                if (line !~ /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) continue
                h = line; sub(/^[^"]*"/, "", h); sub(/".*/, "", h)
                if (h ~ /\//) {
                    if (mode == "cuda") print rel ": includes \"" h "\", a path"
                    else print rel ": includes \"" h "\", a path (include by name; the build says which folders are visible)"
                    bad = 1
                } else if ((h in lay) && lay[h] > i) {
                    if (mode == "cuda") print rel ": includes " L[lay[h] + 1] "/" h ": cuda may use util and core only"
                    else print rel ": includes " L[lay[h] + 1] "/" h ", a layer above " L[i + 1]
                    bad = 1
                }
            }
            close(f)
        }
        END { exit bad }' "$tmp/hmap" "$1"
}

# 1. Includes.
i=0
for l in $layers; do
    for f in "$src/$l"/*.c "$src/$l"/*.h "$src/$l"/*/*.c "$src/$l"/*/*.h; do
        [ -f "$f" ] && echo "$i $f"
    done
    i=$((i + 1))
done >"$tmp/files"
check_includes "$tmp/files" layers || fail=1

# 2. Symbols.
for l in $layers; do
    a="$lib/libtb_$l.a"
    [ -f "$a" ] || { echo "missing archive $a"; exit 1; }
    "$nm" -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/def_$l"
    "$nm" -g --undefined-only "$a" 2>/dev/null | awk 'NF >= 2 { print $NF }' | sort -u >"$tmp/und_$l"
    # A pipeline hides nm's failure: an archive that defines nothing means the listing failed, not a clean layer.
    [ -s "$tmp/def_$l" ] || { echo "check_layers: $nm listed no symbols defined in $a"; exit 1; }
done
i=0
for l in $layers; do
    comm -23 "$tmp/und_$l" "$tmp/def_$l" >"$tmp/need"
    j=0
    for h in $layers; do
        if [ "$j" -gt "$i" ]; then
            for s in $(comm -12 "$tmp/need" "$tmp/def_$h"); do
                echo "libtb_$l.a uses $s, defined in libtb_$h.a, a layer above $l"
                fail=1
            done
        fi
        j=$((j + 1))
    done
    i=$((i + 1))
done

# 3. The executor seam.
for f in "$src"/backends/*.c "$src"/backends/ipu/*.c "$src"/backends/ipu/*.h; do
    [ -f "$f" ] || continue
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $h in
        exec.h | exec_priv.h | arena.h | executor_cpu.h | stage_engine.h)
            echo "${f#"$src/"}: includes $h: a schedule reaches a device through executor.h only"
            fail=1 ;;
        esac
    done
done
for s in $(grep -E '^(exec_|arena_|local_engine_)' "$tmp/und_backends"); do
    echo "libtb_backends.a uses $s: a schedule reaches a device through executor.h only"
    fail=1
done

# 4. The cuda device.
cuda_note=""
if [ -d "$src/cuda" ]; then
    for f in "$src"/cuda/*.c "$src"/cuda/*.cu "$src"/cuda/*.h; do
        [ -f "$f" ] && echo "1 $f"
    done >"$tmp/cuda_files"
    check_includes "$tmp/cuda_files" cuda || fail=1
    # No other layer includes a cuda/ header (one awk over all their files, not a sed each).
    (cd "$src/cuda" && ls *.h 2>/dev/null) >"$tmp/cuda_headers"
    for l in core workloads backends harness; do
        for f in "$src/$l"/*.c "$src/$l"/*.h "$src/$l"/*/*.c "$src/$l"/*/*.h; do
            [ -f "$f" ] && echo "$f"
        done
    done >"$tmp/upper_files"
    awk -v src="$src/" '
        FILENAME == ARGV[1] { cuda[$0] = 1; next }
        {
            f = $0
            while ((getline line < f) > 0) {
                if (line !~ /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) continue
                h = line; sub(/^[^"]*"/, "", h); sub(/".*/, "", h)
                if (h in cuda) { print substr(f, length(src) + 1) ": includes cuda/" h ": reach the cuda device through executor.h"; bad = 1 }
            }
            close(f)
        }
        END { exit bad }' "$tmp/cuda_headers" "$tmp/upper_files" || fail=1
fi
a="$lib/libtb_cuda.a"
if [ -f "$a" ]; then
    "$nm" -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/def_cuda"
    "$nm" -g --undefined-only "$a" 2>/dev/null | awk 'NF >= 2 { print $NF }' | sort -u >"$tmp/und_cuda"
    [ -s "$tmp/def_cuda" ] || { echo "check_layers: $nm listed no symbols defined in $a"; exit 1; }
    comm -23 "$tmp/und_cuda" "$tmp/def_cuda" >"$tmp/need"
    for h in workloads backends harness; do
        for s in $(comm -12 "$tmp/need" "$tmp/def_$h"); do
            echo "libtb_cuda.a uses $s, defined in libtb_$h.a: cuda may use util and core only"
            fail=1
        done
    done
    for l in core workloads backends harness; do
        comm -23 "$tmp/und_$l" "$tmp/def_$l" >"$tmp/need"
        for s in $(comm -12 "$tmp/need" "$tmp/def_cuda"); do
            if [ "$l" = core ]; then
                case $s in executor_cuda_create | executor_cuda_probe | executor_cuda_info | executor_cuda_calibrate | \
                    executor_cuda_memory | executor_cuda_count) continue ;; esac
            fi
            echo "libtb_$l.a uses $s, defined in libtb_cuda.a: only core's registry names the cuda device"
            fail=1
        done
    done
    cuda_note="; cuda beside core (util and core only, reached through the registry)"
fi

[ $fail -eq 0 ] && echo "layers: util <- core <- workloads <- backends <- harness, no upward use;" \
    "schedules use executors only$cuda_note"
exit $fail
