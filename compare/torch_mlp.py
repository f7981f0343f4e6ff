#!/usr/bin/python3
"""PyTorch peer of trainbench's mnist-mlp workload: the Keras MNIST MLP loop, as fast as PyTorch goes on CPU.

What it is: Flatten -> Dense 784x128 ReLU -> 128x256 ReLU -> 256x128 ReLU -> 128x10, sparse cross-entropy,
Adam (Keras defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-7), Glorot-uniform weights and zero biases (as
Keras), Fashion-MNIST from /usr/share/datasets/fashion-mnist (gzip IDX) scaled x/255, reshuffled each
epoch. An epoch is floor(60000 / batch) steps: the last partial batch is dropped.
What it is not: a data-loading benchmark. The whole training set is converted to one float tensor before
the clock starts; each epoch draws one permutation (timed, it is part of training); a batch-1 step takes
a view of one row (no copy), a larger batch one index_select; no DataLoader, no collate.
Batch 1 uses torch.addmv for the dense layers (--linear auto): nn.Linear sends a 1-row input to sgemm,
which repacks the whole weight matrix every call (44 us vs 12 us for 784x128 here); same maths.
Timing: train_time_s covers the training loop only (not loading, not the final evaluation, which runs on
all 10,000 test images under torch.inference_mode).
Output: ONE JSON line on stdout; diagnostics go to stderr.

Run with Debian's interpreter (/usr/bin/python3, torch 1.13). For PyTorch's best speed run it with the
glibc tunables that keep freed memory (compare/run_compare.py sets them): PyTorch loses up to 3x to page
faults without them. Without torch (or numpy) it prints one line naming the module and the Debian package,
and exits 1.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

DATA_DIR = "/usr/share/datasets/fashion-mnist"
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
LOSS_WINDOW = 100  # final_loss = mean training loss of the last LOSS_WINDOW steps (batch 1 is noisy)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=None, help="total optimizer steps (overrides --epochs)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--steps-per-epoch", type=int, default=None,
                   help="steps per epoch (default floor(60000/batch); the data reshuffles every full pass)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op and inter-op threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flush-denormal", choices=["on", "off"], default="on",
                   help="flush denormals to zero (TensorFlow/Keras does on CPU; Adam's second moments of "
                        "always-zero pixels decay towards the denormal range in long batch-1 runs)")
    p.add_argument("--progress", type=int, default=0, metavar="N",
                   help="print the step rate of every N steps to stderr (diagnostics; costs nothing measurable)")
    p.add_argument("--data", default=DATA_DIR, help="directory with the four gzip IDX files")
    p.add_argument("--mode", choices=["eager", "jit"], default="eager",
                   help="eager nn.Sequential or torch.jit.script; measured alike here (within 3%%, in-process "
                        "A/B at batch 1 and 128), so eager stays the default")
    p.add_argument("--foreach", choices=["on", "off"], default="on",
                   help="multi-tensor (foreach) Adam: about 10%% faster at batch 1, equal at 128 (1.13 has no "
                        "fused CPU Adam)")
    p.add_argument("--linear", choices=["auto", "mm", "mv"], default="auto",
                   help="dense layers as addmm (nn.Linear) or addmv (1-D input, batch 1 only); "
                        "auto = mv at batch 1")
    p.add_argument("--inplace-relu", choices=["on", "off"], default="on",
                   help="ReLU(inplace=True): saves one allocation per layer and step")
    a = p.parse_args()
    if a.batch < 1 or a.threads < 1:
        p.error("--batch and --threads must be >= 1")
    if a.steps is not None and a.steps < 1:
        p.error("--steps must be >= 1")
    if a.linear == "auto":
        a.linear = "mv" if a.batch == 1 else "mm"
    if a.linear == "mv" and a.batch != 1:
        p.error("--linear mv needs --batch 1")
    return a


def read_idx(path, magic_expected, n_dims):
    """Reads a gzip IDX file into a uint8 numpy array of the shape its header declares."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    if magic != magic_expected:
        raise ValueError("%s: bad IDX magic 0x%08x (want 0x%08x)" % (path, magic, magic_expected))
    dims = struct.unpack(">" + "I" * n_dims, raw[4:4 + 4 * n_dims])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * n_dims)
    if data.size != int(np.prod(dims)):
        raise ValueError("%s: %d bytes of data, header says %s" % (path, data.size, dims))
    return data.reshape(dims)


def load_split(data_dir, images, labels, torch):
    """Returns (x float32 (N,784) in [0,1], y int64 (N,)) as contiguous torch tensors."""
    xi = read_idx(os.path.join(data_dir, images), 0x00000803, 3)
    yi = read_idx(os.path.join(data_dir, labels), 0x00000801, 1)
    if xi.shape[0] != yi.shape[0]:
        raise ValueError("%s/%s: %d images but %d labels" % (images, labels, xi.shape[0], yi.shape[0]))
    x = torch.from_numpy(xi.reshape(xi.shape[0], -1).astype("float32") / 255.0).contiguous()
    y = torch.from_numpy(yi.astype("int64")).contiguous()
    return x, y


def build_model(torch, inplace, flatten):
    nn = torch.nn

    class Dense(nn.Linear):
        """nn.Linear that takes a 1-D input (one sample) through addmv instead of a 1-row sgemm."""

        def forward(self, x):
            if x.dim() == 1:
                return torch.addmv(self.bias, self.weight, x)
            return nn.functional.linear(x, self.weight, self.bias)

    layers = [nn.Flatten()] if flatten else []  # the data is already (N,784): Flatten is a no-op view
    layers += [
        Dense(784, 128), nn.ReLU(inplace=inplace),
        Dense(128, 256), nn.ReLU(inplace=inplace),
        Dense(256, 128), nn.ReLU(inplace=inplace),
        Dense(128, 10),
    ]
    model = nn.Sequential(*layers)
    for m in model:
        if isinstance(m, nn.Linear):
            # Keras glorot_uniform: U(-l, l), l = sqrt(6/(fan_in+fan_out)); symmetric in the two fans,
            # so PyTorch's (out,in) weight storage gives the same distribution.
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def main():
    a = parse_args()
    torch = start_torch(a.threads, "torch_mlp")
    need("numpy", "torch_mlp", "python3-numpy")  # read_idx's
    import torch.nn.functional as F

    x_train, y_train = load_split(a.data, TRAIN_IMAGES, TRAIN_LABELS, torch)
    x_test, y_test = load_split(a.data, TEST_IMAGES, TEST_LABELS, torch)
    n_train = x_train.shape[0]
    if a.batch > n_train:
        raise SystemExit("torch_mlp.py: --batch %d exceeds the %d training images" % (a.batch, n_train))
    full_epoch = n_train // a.batch
    spe = a.steps_per_epoch or full_epoch
    if a.steps is not None:
        steps = a.steps
    else:
        steps = (a.epochs or 1) * spe

    torch.set_flush_denormal(a.flush_denormal == "on")
    torch.manual_seed(a.seed)
    mv = a.linear == "mv"
    model = build_model(torch, a.inplace_relu == "on", flatten=not mv)
    if a.mode == "jit":
        model = torch.jit.script(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7,
                           foreach=(a.foreach == "on"))
    gen = torch.Generator().manual_seed(a.seed)
    model.train()

    losses = []
    loss_from = steps - min(steps, LOSS_WINDOW)
    pos = full_epoch  # batches consumed of the current permutation; forces a draw on step 0
    b = a.batch
    t0 = t_chunk = time.perf_counter()
    for step in range(steps):
        if pos >= full_epoch:
            perm = torch.randperm(n_train, generator=gen)
            if mv:
                order = perm.tolist()
            pos = 0
        if mv:
            i = order[pos]
            xb = x_train[i]  # (784,) view, fed to addmv
            yb = y_train[i:i + 1]
            loss = F.cross_entropy(model(xb).unsqueeze(0), yb)
        else:
            idx = perm[pos * b:(pos + 1) * b]
            xb = x_train.index_select(0, idx)
            yb = y_train.index_select(0, idx)
            loss = F.cross_entropy(model(xb), yb)
        pos += 1
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= loss_from:
            losses.append(loss.item())
        if a.progress and (step + 1) % a.progress == 0:
            now = time.perf_counter()
            sys.stderr.write("torch_mlp: steps %d-%d: %.0f steps/s\n" % (step + 2 - a.progress, step + 1,
                                                                       a.progress / (now - t_chunk)))
            t_chunk = now
    train_time = time.perf_counter() - t0

    model.eval()
    with torch.inference_mode():
        pred = model(x_test).argmax(dim=1)
        acc = (pred == y_test).double().mean().item()

    row = {
        "impl": "pytorch",
        "torch": torch.__version__,
        "threads": a.threads,
        "batch": a.batch,
        "steps": steps,
        "epochs": steps / spe,
        "steps_per_epoch": spe,
        "mode": a.mode,
        "foreach": a.foreach == "on",
        "linear": a.linear,
        "flush_denormal": a.flush_denormal == "on",
        "seed": a.seed,
        "train_time_s": train_time,
        "images_per_s": steps * a.batch / train_time,
        "test_accuracy": acc,
        "final_loss": sum(losses) / len(losses),
        "final_loss_window_steps": len(losses),
        "openblas_core": openblas_core(),
    }
    sys.stdout.write(json.dumps(row) + "\n")
    return 0


def need(module, name, package):
    """Imports `module` and returns it; where it is missing or broken, exits 1 with one line (shared with
    torch_effnet.py and torch_cuda.py: a peer that cannot start says why, not a traceback)."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name == module:
            raise SystemExit("%s: no %s module for %s (Debian: %s)" % (name, module, sys.executable, package))
        raise SystemExit("%s: %s cannot be imported by %s: %s" % (name, module, sys.executable, e))


def start_torch(threads, name):
    """Imports torch with `threads` intra-op and inter-op threads and returns it (shared with torch_effnet.py)."""
    # Thread counts must be set before torch starts its pools.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch = need("torch", name, "python3-torch")
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already set by an earlier parallel region; intra-op is what matters here
    return torch


def timed_steps(step, warmup, steps, name, progress, sync=lambda: None, digits=3):
    """Runs `warmup` untimed and `steps` timed calls of step() (shared with torch_effnet.py, torch_cuda.py).

    sync() waits for the device after each step (CUDA), so a step's time is its work, not its launch.
    Returns (per-step seconds, seconds of the timed loop, the last step's loss, median s, jitter s:
    1.4826 * MAD, tf_cnn_benchmarks' jitter)."""
    import statistics
    for i in range(warmup):
        t = time.perf_counter()
        step()
        sync()
        if progress:
            sys.stderr.write("%s: warm-up %d: %.*f s\n" % (name, i + 1, digits, time.perf_counter() - t))
    times = []
    sync()
    t0 = time.perf_counter()
    loss = None
    for i in range(steps):
        t = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t)
        if progress:
            sys.stderr.write("%s: step %d: %.*f s\n" % (name, i + 1, digits, times[-1]))
    train_time = time.perf_counter() - t0
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times)
    return times, train_time, loss, med, 1.4826 * mad


def openblas_core():
    """The kernel set OpenBLAS picked (the copy torch loaded), or None if it cannot be asked."""
    import ctypes
    for name in ("libopenblas.so.0", "libopenblasp.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(name)
            f = lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_char_p
        return f().decode()
    return None


if __name__ == "__main__":
    sys.exit(main())
