#!/usr/bin/python3
"""Side-by-side driver: trainbench (build/bench) against its PyTorch peer, alternating runs in one go.

What it is: for one configuration (mlp-b1, mlp-b128, effnet-32, effnet-224) it runs the two sides
ALTERNATELY, A B A B ..., --rounds times, so that machine noise (other jobs on the 2 shared cores, the
host's clock) hits both alike; then prints every round's figures, the median of each side, the ratio
ours/PyTorch of the median images/s, the target ratio, and the exact commands (environment included).
What it is not: a statistics package or a results writer: bench writes its own rows (one file per run,
kept under --out-dir); this script only reads the LAST row of each, skipping a torn last line (it says so).

PyTorch runs at its best settings: glibc malloc tunables that keep freed memory (PyTorch 1.13 loses up
to 3x to page faults without them), OpenBLAS's presets removed from the environment (OPENBLAS_CORETYPE
and OPENBLAS_L2_SIZE; they force Haswell kernels and halve sgemm) and its kernel set the one bench's
`--blas-core auto` runs (`bench --version` says which): OpenBLAS's own detection, or on a CPU newer than
the OpenBLAS build knows, where it falls back to Prescott kernels at a fifth of the speed, the best set
for the CPU's ISA. OMP/MKL/OpenBLAS threads = --threads. Our side gets the same OpenBLAS and thread
variables (so both link the same BLAS kernels) but not the malloc tunables (bench allocates its arenas
once).

Exit status: 0 when every run succeeded (whether or not the target is met; --require-target makes a
missed target exit 3), 1 when a run failed or printed no result, 2 for usage errors.
Run with any Python 3; the PyTorch side uses --python (default /usr/bin/python3, Debian's torch 1.13).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The configurations. "bench_args" are bench's workload flags (--ours-args replaces them). The MLP runs
# are training runs timed over every step; the EfficientNet runs use bench's throughput plan, which
# excludes the warm-up steps exactly as the PyTorch script does.
CONFIGS = {
    "mlp-b1": {
        "what": "MNIST MLP (Fashion-MNIST), batch 1, 100,000 steps (the Keras loop: 50 x 2000)",
        "kind": "mlp", "batch": 1, "steps": 100000, "target": 10.0,
        "bench_args": ["--workload", "mnist-mlp"],
    },
    "mlp-b128": {
        # 60000 // 128 = 468 full batches per epoch; the last partial batch (96 images) is dropped, so
        # 5 epochs = 2340 steps (299,520 images), not ceil(5 * 60000 / 128) = 2344. The PyTorch side
        # reshuffles after 468 batches; bench streams its permutations back to back (a batch may span
        # two epochs): same steps and images either way, which is what throughput counts.
        "what": "MNIST MLP (Fashion-MNIST), batch 128, 5 epochs x 468 = 2340 steps (last partial batch "
                "of 96 dropped each epoch)",
        "kind": "mlp", "batch": 128, "steps": 2340, "target": 1.5,
        "bench_args": ["--workload", "mnist-mlp"],
    },
    "effnet-32": {
        "what": "EfficientNet-B0, 32x32, batch 128, synthetic data, 3 warm-up + 20 timed steps",
        "kind": "effnet", "size": 32, "batch": 128, "warmup": 3, "steps": 20, "channels_last": False,
        "target": 5.0,
        "bench_args": ["--workload", "effnet-b0", "--plan", "throughput", "--warmup", "3", "--data", "synthetic",
                       "--resolution", "32", "--classes", "10", "--optimizer", "sgd", "--momentum", "0.9"],
    },
    "effnet-224": {
        "what": "EfficientNet-B0, 224x224, batch 16, synthetic data, 2 warm-up + 10 timed steps "
                "(PyTorch channels-last)",
        "kind": "effnet", "size": 224, "batch": 16, "warmup": 2, "steps": 10, "channels_last": True,
        "target": 2.0,
        "bench_args": ["--workload", "effnet-b0", "--plan", "throughput", "--warmup", "2", "--data", "synthetic",
                       "--resolution", "224", "--classes", "10", "--optimizer", "sgd", "--momentum", "0.9"],
    },
}


def _cuda_config(model, size, batch, precision, ours_precision):
    """An issue-26 GPU configuration: bench --backend cuda against compare/torch_cuda.py, both NHWC."""
    return {
        "what": "EfficientNet-%s, %dx%d, batch %d, %s, synthetic data, 5 warm-up + 20 timed steps, one GPU "
                "(PyTorch channels-last%s)" % (model.upper(), size, size, batch, precision,
                                               ", TF32 off" if precision == "fp32" else " autocast"),
        "kind": "effnet-cuda", "model": model, "size": size, "batch": batch, "warmup": 5, "steps": 20,
        "precision": precision, "backend": "cuda", "target": 1.0,
        "bench_args": ["--workload", "effnet-" + model, "--plan", "throughput", "--warmup", "5", "--data",
                       "synthetic", "--resolution", str(size), "--classes", "1000", "--optimizer", "sgd",
                       "--momentum", "0.9"] + (["--precision", ours_precision] if ours_precision else []),
    }


# Issue 26 item 4. The bf16 rows pass bench the ipu's --precision name (bf16m: bf16 storage, fp32 master
# weights); the cuda executor is to accept the same value.
CONFIGS["cuda-b0-fp32"] = _cuda_config("b0", 224, 256, "fp32", None)
CONFIGS["cuda-b0-bf16"] = _cuda_config("b0", 224, 256, "bf16", "bf16m")
CONFIGS["cuda-b4-bf16"] = _cuda_config("b4", 380, 64, "bf16", "bf16m")
# fp16 autocast with loss scaling on both sides (PyTorch's GradScaler; ours core/loss_scale.h's dynamic scale).
CONFIGS["cuda-b0-fp16"] = _cuda_config("b0", 224, 256, "fp16", "fp16m")

# glibc tunables (read by malloc at start-up) that keep freed memory in the heap: no munmap/trim, so a
# tensor freed in one step is reused in the next instead of being faulted in again.
TORCH_MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "10000000000",
    "MALLOC_TRIM_THRESHOLD_": "10000000000",
    "MALLOC_TOP_PAD_": "1073741824",
}
OPENBLAS_PRESETS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
FIGURES = ("images_per_s", "train_time_s", "test_accuracy", "final_loss")


def parse_args():
    p = argparse.ArgumentParser(
        description="Run trainbench and PyTorch alternately and compare images/s.",
        epilog="configurations: " + "; ".join("%s = %s (target ours/PyTorch >= %gx)"
                                               % (k, v["what"], v["target"]) for k, v in CONFIGS.items()))
    p.add_argument("config", choices=sorted(CONFIGS))
    p.add_argument("--rounds", type=int, default=3, help="A B pairs (default 3)")
    p.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    p.add_argument("--seed", type=int, default=1, help="seed of round 1; round k uses seed + k - 1 on both sides")
    p.add_argument("--steps", type=int, default=None,
                   help="override the configuration's (timed) steps on both sides, for quick checks")
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "bench"), help="our executable")
    p.add_argument("--ours-backend", default=None,
                   help="bench backend (default: cpu for 1 thread, threads for more)")
    p.add_argument("--ours-args", default=None,
                   help="replace the configuration's bench workload flags (one shell-quoted string)")
    p.add_argument("--ours-extra", default="", help="extra bench flags, appended (shell-quoted string)")
    p.add_argument("--torch-extra", default="", help="extra PyTorch-script flags, appended")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch (default Debian's)")
    p.add_argument("--first", choices=["pytorch", "ours"], default="pytorch", help="side that runs first in a round")
    p.add_argument("--only", choices=["pytorch", "ours"], default=None, help="run one side only (no ratio)")
    p.add_argument("--out-dir", default=None,
                   help="where bench's row files and summary.json go (default build/compare/<config>-<UTC time>)")
    p.add_argument("--timeout", type=float, default=7200.0, help="seconds allowed per run (default 7200)")
    p.add_argument("--require-target", action="store_true", help="exit 3 when the median ratio misses the target")
    p.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    a = p.parse_args()
    if a.rounds < 1 or a.threads < 1 or (a.steps is not None and a.steps < 1):
        p.error("--rounds, --threads and --steps must be >= 1")
    return a


def env_prefix(env_set, env_unset):
    """The `env -u X A=b` prefix that reproduces a side's environment from the caller's."""
    parts = ["env"] + ["-u %s" % k for k in env_unset] + ["%s=%s" % (k, v) for k, v in env_set.items()]
    return " ".join(parts) if len(parts) > 1 else ""


def blas_kernels(bench):
    """The OpenBLAS kernel set bench's --blas-core auto runs on this machine, from `bench --version`."""
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_PRESETS}
    try:
        out = subprocess.run([bench, "--version"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.startswith("OpenBLAS kernels: "):
            return (line.split(": ", 1)[1].split() or [None])[0]
    return None


def build_sides(a, cfg, out_dir):
    """Returns {side: (argv builder(seed, round) -> (argv, out_file or None), env_set, env_unset)}."""
    threads_env = {"OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads),
                   "OPENBLAS_NUM_THREADS": str(a.threads)}
    steps = a.steps or cfg["steps"]

    def torch_argv(seed, rnd):
        if cfg["kind"] == "mlp":
            argv = [a.python, os.path.join(HERE, "torch_mlp.py"), "--batch", str(cfg["batch"]),
                    "--steps", str(steps), "--threads", str(a.threads), "--seed", str(seed)]
        elif cfg["kind"] == "effnet-cuda":
            argv = [a.python, os.path.join(HERE, "torch_cuda.py"), "--model", cfg["model"], "--size",
                    str(cfg["size"]), "--batch", str(cfg["batch"]), "--warmup", str(cfg["warmup"]), "--steps",
                    str(steps), "--seed", str(seed), "--precision", cfg["precision"], "--channels-last"]
        else:
            argv = [a.python, os.path.join(HERE, "torch_effnet.py"), "--size", str(cfg["size"]),
                    "--batch", str(cfg["batch"]), "--warmup", str(cfg["warmup"]), "--steps", str(steps),
                    "--threads", str(a.threads), "--seed", str(seed)]
            if cfg["channels_last"]:
                argv.append("--channels-last")
        return argv + shlex.split(a.torch_extra), None

    backend = a.ours_backend or cfg.get("backend") or ("cpu" if a.threads == 1 else "threads")
    workload = shlex.split(a.ours_args) if a.ours_args is not None else cfg["bench_args"]

    def ours_argv(seed, rnd):
        out = os.path.join(out_dir, "ours-r%d.jsonl" % rnd)
        argv = [a.bench, "--backend", backend]
        # --threads is the threads backend's option; mirrored and ipu take --devices instead.
        if backend == "threads":
            argv += ["--threads", str(a.threads)]
        elif backend in ("mirrored", "ipu"):
            argv += ["--devices", str(a.threads)]
        argv += workload + ["--batch", str(cfg["batch"]), "--steps", str(steps), "--seed", str(seed),
                            "--out", out]
        return argv + shlex.split(a.ours_extra), out

    torch_env = dict(TORCH_MALLOC_ENV)
    torch_env.update(threads_env)
    kernels = blas_kernels(a.bench)
    if kernels:
        torch_env["OPENBLAS_CORETYPE"] = kernels
    return {
        "pytorch": (torch_argv, torch_env, OPENBLAS_PRESETS),
        "ours": (ours_argv, dict(threads_env), OPENBLAS_PRESETS),
    }


def figure_value(v):
    """A figure is a number, or an object with a "value" (and a unit); returns the number or None."""
    if isinstance(v, dict):
        v = v.get("value")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_last_row(path):
    """The last complete JSON row of a JSON Lines file; a torn (unparsable) last line is skipped, noisily."""
    with open(path, "r", encoding="utf-8") as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        try:
            row = json.loads(lines[i])
        except ValueError:
            if i == len(lines) - 1:
                sys.stderr.write("run_compare: %s: torn last line skipped\n" % path)
                continue
            raise ValueError("%s: line %d is not JSON" % (path, i + 1))
        if isinstance(row, dict):
            return row
        raise ValueError("%s: last row is not a JSON object" % path)
    raise ValueError("%s: no rows" % path)


def run_one(side, argv, out_file, env_set, env_unset, timeout):
    """Runs one side once; returns (figures dict, row) or raises RuntimeError with the reason."""
    env = {k: v for k, v in os.environ.items() if k not in env_unset}
    env.update(env_set)
    if out_file and os.path.exists(out_file):
        os.remove(out_file)  # our own file from an earlier attempt: never read a stale row
    t = time.time()
    try:
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, universal_newlines=True)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s: timed out after %.0f s" % (side, timeout))
    except OSError as e:
        raise RuntimeError("%s: cannot start %s: %s" % (side, argv[0], e))
    wall = time.time() - t
    if proc.returncode != 0:
        raise RuntimeError("%s: exit status %d\n--- stderr (tail) ---\n%s" % (
            side, proc.returncode, "\n".join(proc.stderr.splitlines()[-20:])))
    try:
        if out_file:
            row = read_last_row(out_file)
            figs = row.get("figures", {})
        else:
            lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
            if not lines:
                raise ValueError("no JSON line on stdout")
            row = json.loads(lines[-1])
            figs = row
    except (OSError, ValueError) as e:
        raise RuntimeError("%s: no result: %s\n--- stderr (tail) ---\n%s" % (
            side, e, "\n".join(proc.stderr.splitlines()[-20:])))
    out = {k: figure_value(figs.get(k)) for k in FIGURES}
    if out["train_time_s"] is None:
        # bench's throughput rows time their timed steps (warm-up excluded) as timed_s, what the PyTorch
        # scripts' train_time_s covers; its training rows have train_time_s itself.
        out["train_time_s"] = figure_value(figs.get("timed_s"))
    if out["images_per_s"] is None or out["images_per_s"] <= 0:
        raise RuntimeError("%s: result has no positive images_per_s: %s" % (side, json.dumps(figs)[:400]))
    out["wall_s"] = wall
    # Peak GPU memory where the side reports it (issue 26: beside PyTorch's): bench's gpu_mem_peak_mib, the
    # PyTorch script's max_memory_allocated.
    peak = figure_value(figs.get("gpu_mem_peak_mib"))
    if peak is None and figure_value(figs.get("peak_gpu_memory_bytes")) is not None:
        peak = figure_value(figs.get("peak_gpu_memory_bytes")) / 1048576.0
    if peak is not None:
        out["gpu_peak_mib"] = peak
    return out, row


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def median_of(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main():
    a = parse_args()
    cfg = CONFIGS[a.config]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out_dir = a.out_dir or os.path.join(ROOT, "build", "compare", "%s-%s" % (a.config, stamp))
    sides = build_sides(a, cfg, out_dir)
    order = ["pytorch", "ours"] if a.first == "pytorch" else ["ours", "pytorch"]
    if a.only:
        order = [a.only]

    def shown(side, seed, rnd):
        build, env_set, env_unset = sides[side]
        argv, _ = build(seed, rnd)
        pre = env_prefix(env_set, env_unset)
        return (pre + " " if pre else "") + " ".join(shlex.quote(x) for x in argv)

    if a.dry_run:
        for rnd in range(1, a.rounds + 1):
            for side in order:
                print("round %d %-7s %s" % (rnd, side, shown(side, a.seed + rnd - 1, rnd)))
        return 0
    if "ours" in order and not os.access(a.bench, os.X_OK):
        sys.stderr.write("run_compare: %s: not an executable (build it first, or pass --bench)\n" % a.bench)
        return 1
    os.makedirs(out_dir, exist_ok=True)

    results = {side: [] for side in order}
    extra = {}
    commands = []
    failed = None
    for rnd in range(1, a.rounds + 1):
        seed = a.seed + rnd - 1
        for side in order:
            build, env_set, env_unset = sides[side]
            argv, out_file = build(seed, rnd)
            commands.append("round %d %-7s %s" % (rnd, side, shown(side, seed, rnd)))
            sys.stderr.write("run_compare: %s round %d/%d: %s ...\n" % (a.config, rnd, a.rounds, side))
            try:
                figs, row = run_one(side, argv, out_file, env_set, env_unset, a.timeout)
            except RuntimeError as e:
                failed = str(e)
                break
            figs["round"] = rnd
            results[side].append(figs)
            if side == "pytorch":
                extra["torch"] = row.get("torch")
                extra["openblas_core"] = row.get("openblas_core")
            sys.stderr.write("run_compare:   %s: %.1f images/s (%.1f s wall)\n"
                             % (side, figs["images_per_s"], figs["wall_s"]))
        if failed:
            break

    print_table(a, cfg, order, results, extra, out_dir)
    print("\ncommands (run from %s):" % os.getcwd())
    for c in commands:
        print("  " + c)
    if failed:
        print("\nFAILED: " + failed)
        return 1

    summary = summarize(a, cfg, results, commands, extra, stamp)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(summary) + "\n")
    print("\nsummary: %s" % os.path.join(out_dir, "summary.json"))
    if a.require_target and summary.get("target_met") is False:
        return 3
    return 0


def print_table(a, cfg, order, results, extra, out_dir):
    steps = a.steps or cfg["steps"]
    print("compare %s: %s" % (a.config, cfg["what"]))
    print("threads %d, %d round(s), alternating %s; steps %d%s; PyTorch %s, OpenBLAS core %s; rows in %s"
          % (a.threads, a.rounds, " ".join(order), steps, " (OVERRIDDEN, not the full config)" if a.steps else "",
             extra.get("torch"), extra.get("openblas_core"), out_dir))
    head = "%-7s %-8s %12s %11s %9s %11s %8s" % ("round", "side", "images/s", "train s", "test acc",
                                                 "final loss", "ratio")
    print(head)
    print("-" * len(head))
    by_round = {}
    for side in order:
        for r in results[side]:
            by_round.setdefault(r["round"], {})[side] = r
    for rnd in sorted(by_round):
        for side in order:
            r = by_round[rnd].get(side)
            if not r:
                continue
            ratio = None
            if side == "ours" and "pytorch" in by_round[rnd]:
                ratio = r["images_per_s"] / by_round[rnd]["pytorch"]["images_per_s"]
            print("%-7d %-8s %12s %11s %9s %11s %8s" % (
                rnd, side, fmt(r["images_per_s"], ".1f"), fmt(r["train_time_s"], ".3f"),
                fmt(r["test_accuracy"], ".4f"), fmt(r["final_loss"], ".4f"),
                (fmt(ratio, ".2f") + "x") if ratio else ""))
    print("-" * len(head))
    med = {}
    for side in order:
        if results[side]:
            med[side] = {k: median_of(results[side], k) for k in FIGURES}
            m = med[side]
            print("%-7s %-8s %12s %11s %9s %11s" % ("median", side, fmt(m["images_per_s"], ".1f"),
                                                    fmt(m["train_time_s"], ".3f"), fmt(m["test_accuracy"], ".4f"),
                                                    fmt(m["final_loss"], ".4f")))
    peaks = []
    for side in order:
        got = [r["gpu_peak_mib"] for r in results[side] if "gpu_peak_mib" in r]
        if got:
            peaks.append("%s %.0f MiB" % (side, max(got)))
    if peaks:
        print("peak GPU memory: " + ", ".join(peaks))
    if "ours" in med and "pytorch" in med:
        ratio = med["ours"]["images_per_s"] / med["pytorch"]["images_per_s"]
        print("\nours / PyTorch (median images/s): %.2fx   target >= %gx   %s"
              % (ratio, cfg["target"], "MET" if ratio >= cfg["target"] else "NOT MET"))
    else:
        print("\nno ratio: only %s ran (target ours/PyTorch >= %gx)" % (", ".join(med) or "nothing", cfg["target"]))


def summarize(a, cfg, results, commands, extra, stamp):
    s = {"kind": "compare", "config": a.config, "what": cfg["what"], "utc": stamp, "threads": a.threads,
         "rounds": a.rounds, "steps": a.steps or cfg["steps"], "steps_overridden": a.steps is not None,
         "target_ratio": cfg["target"], "torch": extra.get("torch"), "openblas_core": extra.get("openblas_core"),
         "runs": results, "commands": commands}
    for side in results:
        s["median_" + side] = {k: median_of(results[side], k) for k in FIGURES}
    if results.get("ours") and results.get("pytorch"):
        s["ratio_images_per_s"] = s["median_ours"]["images_per_s"] / s["median_pytorch"]["images_per_s"]
        s["target_met"] = s["ratio_images_per_s"] >= cfg["target"]
    return s


if __name__ == "__main__":
    sys.exit(main())
