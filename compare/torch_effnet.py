#!/usr/bin/python3
"""PyTorch peer of trainbench's EfficientNet throughput runs: torchvision efficientnet_b0 training steps/s.

What it is: torchvision's efficientnet_b0 (random init, num_classes from --classes, train mode so batch
norm, dropout and stochastic depth are live) trained on ONE fixed synthetic batch (uniform inputs,
random labels; like tf_cnn_benchmarks' synthetic mode) at a given resolution and batch, cross-entropy,
SGD (momentum 0.9) or RMSProp (Keras EfficientNet's: rho 0.9, momentum 0.9, eps 1e-3). --warmup steps
run first and are not timed; then --steps timed steps.
What it is not: a convergence run (no data, no accuracy), nor an inference benchmark.
Output: ONE JSON line on stdout, with images_per_s over the timed steps and per-step statistics;
diagnostics go to stderr. train_time_s covers the timed steps only.

Run with Debian's interpreter (/usr/bin/python3, torch 1.13 + torchvision 0.14), and for PyTorch's best
speed with the glibc malloc tunables that compare/run_compare.py sets; at 224x224 use --channels-last.
Without torch or torchvision it prints one line naming the module and the Debian package, and exits 1.
"""
import argparse
import json
import sys

from torch_mlp import need, openblas_core, start_torch, timed_steps  # same directory; no import-time side effects


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=32, help="input height = width (e.g. 32 or 224)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--classes", type=int, default=10, help="num_classes of the classifier")
    p.add_argument("--optimizer", choices=["sgd", "rmsprop"], default="sgd")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (allocator, oneDNN primitives)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op and inter-op threads")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for model and input")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--progress", action="store_true", help="print every step's time to stderr")
    a = p.parse_args()
    if min(a.size, a.batch, a.classes, a.steps, a.threads) < 1 or a.warmup < 0:
        p.error("sizes, --steps and --threads must be >= 1, --warmup >= 0")
    return a


def main():
    a = parse_args()
    torch = start_torch(a.threads, "torch_effnet")
    torchvision = need("torchvision", "torch_effnet", "python3-torchvision")
    import torch.nn.functional as F
    torch.manual_seed(a.seed)

    model = torchvision.models.efficientnet_b0(num_classes=a.classes)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    model.train()
    x = torch.rand(a.batch, 3, a.size, a.size).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,))
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    else:
        opt = torch.optim.RMSprop(model.parameters(), lr=a.lr, alpha=0.9, momentum=0.9, eps=1e-3)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    _, train_time, loss, med, jitter = timed_steps(step, a.warmup, a.steps, "torch_effnet", a.progress)
    final_loss = loss.item()
    row = {
        "impl": "pytorch",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "model": "efficientnet_b0",
        "threads": a.threads,
        "batch": a.batch,
        "size": a.size,
        "classes": a.classes,
        "optimizer": a.optimizer,
        "channels_last": a.channels_last,
        "warmup_steps": a.warmup,
        "steps": a.steps,
        "train_time_s": train_time,
        "images_per_s": a.steps * a.batch / train_time,
        "step_time_median_s": med,
        "step_time_jitter_s": jitter,  # tf_cnn_benchmarks' jitter: 1.4826 * MAD
        "final_loss": final_loss,
        "params": sum(p.numel() for p in model.parameters()),
        "openblas_core": openblas_core(),
    }
    sys.stdout.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
