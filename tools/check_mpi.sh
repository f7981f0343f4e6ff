#!/bin/sh
# check_mpi.sh BUILD — the 2-rank MPI jobs CI runs: mirrored over MPI (2 ranks on this machine, one device
# each, then 2 devices each: the ring within a rank, MPI between ranks, each rank bound to its own core)
# must train like cpu: first-step and final losses equal within 1e-5 relative, and only rank 0 writes a row.
# Then every rank runs rank 0's convolution algorithms: rank 1 given a tuning file of other choices than rank
# 0's (an MPMD launch) must give rank 0's bits.
set -eu
[ $# -eq 1 ] || { echo "usage: tools/check_mpi.sh BUILD   (a build with bench)" >&2; exit 2; }
B=$1/bench
[ -x "$B" ] || { echo "check_mpi: $B not built (make build)" >&2; exit 1; }
command -v mpirun >/dev/null 2>&1 || { echo "check_mpi: no mpirun (Debian: openmpi-bin)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
O="--workload mnist-mlp --data synthetic --synthetic-samples 1024,128 --batch 16 --steps 20 --quiet"
"$B" --backend cpu $O --out "$out/cpu.jsonl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -np 2 "$B" --backend mirrored --transport mpi $O --out "$out/mpi.jsonl"
mpirun -np 2 --map-by slot:PE=1 --bind-to core "$B" --backend mirrored --transport mpi --devices 2 $O \
  --out "$out/mpi2.jsonl"
field() { grep -o "\"$2\":[-0-9.eE+]*" "$1" | head -n 1 | cut -d: -f2; }
for run in "mpi:2 ranks" "mpi2:2 ranks x 2 devices"; do
  f=$out/${run%%:*}.jsonl what=${run#*:}
  rows=$(wc -l < "$f")
  [ "$rows" -eq 1 ] || { echo "check_mpi: $what: expected 1 row from rank 0, got $rows"; exit 1; }
  for k in first_loss final_loss; do
    a=$(field "$out/cpu.jsonl" $k); b=$(field "$f" $k)
    awk -v a="$a" -v b="$b" -v k="$k" -v w="$what" 'BEGIN { d = a - b; if (d < 0) d = -d; s = a < 0 ? -a : a;
      if (a == "" || b == "" || d > 1e-5 * s) { printf "check_mpi: %s cpu %s vs mpi (%s) %s\n", k, a, w, b; exit 1 }
      printf "check_mpi: %s cpu %s, mpi (%s) %s\n", k, a, w, b }'
  done
done

# Rank 0's choices on every rank. T: what a timed run chose (rank 0 writes it); I: the same, im2col for every
# shape. Both ranks reading I, then rank 0 reading I and rank 1 T: the same final loss, bitwise.
E="--workload effnet-b0 --resolution 16 --data synthetic --synthetic-samples 64,16 --batch 8 --plan throughput \
  --steps 2 --warmup 1 --quiet --mllog none"
mpirun --oversubscribe -np 2 "$B" --backend mirrored --transport mpi $E --tuning "$out/t.json" --out "$out/e0.jsonl"
grep -q '"algo":"gemm1x1"' "$out/t.json" || { echo "check_mpi: no gemm1x1 choice in $out/t.json"; exit 1; }
sed 's/"algo":"[a-z0-9]*"/"algo":"im2col"/g' "$out/t.json" > "$out/i.json"
mpirun --oversubscribe -np 2 "$B" --backend mirrored --transport mpi $E --tuning "$out/i.json" --out "$out/e1.jsonl"
mpirun --oversubscribe -np 1 "$B" --backend mirrored --transport mpi $E --tuning "$out/i.json" --out "$out/e2.jsonl" : \
  -np 1 "$B" --backend mirrored --transport mpi $E --tuning "$out/t.json" --out "$out/e2.jsonl"
a=$(field "$out/e1.jsonl" final_loss) b=$(field "$out/e2.jsonl" final_loss) c=$(field "$out/e0.jsonl" final_loss)
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "check_mpi: rank 1 ran its own algorithms: final loss $b, rank 0's $a"; exit 1; }
echo "check_mpi: effnet-b0, rank 1 given other algorithms than rank 0: final loss $b, both ranks rank 0's $a (timed: $c)"
