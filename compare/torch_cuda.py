#!/usr/bin/python3
"""PyTorch-on-CUDA peer of trainbench's cuda backend: torchvision EfficientNet training images/s on one GPU.

What it is: torchvision's efficientnet_b0..b7 (random init, train mode, so batch norm, dropout and stochastic
depth are live) trained on ONE fixed synthetic batch that lives on the GPU (uniform inputs, random labels),
cross-entropy (optional label smoothing), SGD (momentum 0.9) or RMSProp (Keras EfficientNet's: rho 0.9,
momentum 0.9, eps 1e-3). Precision: fp32 (TF32 off unless --tf32: matmuls AND cuDNN convolutions, whose
default is on), or bf16 / fp16 autocast (fp16 with a GradScaler: loss scaling); --channels-last for NHWC
(what the cuda backend runs); --compile for torch.compile. --warmup untimed steps, then --steps timed steps,
each ended by torch.cuda.synchronize() so its time is the GPU's.
What it is not: a convergence run, an inference benchmark, or multi-GPU.
Output: ONE JSON line on stdout (the keys compare/run_compare.py reads: images_per_s, train_time_s,
final_loss; plus the GPU, precision, TF32 and peak memory: torch.cuda.max_memory_allocated over the whole
run); settings and diagnostics go to stderr. Without a CUDA device, torch or torchvision it prints one line
(the module and its Debian package where one is missing) and exits 1.

Issue 26's runs (on the GPU machine's python3, PyTorch 2.x):
  torch_cuda.py --model b0 --size 224 --batch 256 --precision fp32 --channels-last
  torch_cuda.py --model b0 --size 224 --batch 256 --precision bf16 --channels-last
  torch_cuda.py --model b4 --size 380 --batch 64 --precision bf16 --channels-last
Side by side with bench --backend cuda, A B A B (the same three runs as configurations):
  compare/run_compare.py cuda-b0-fp32 --python python3   (also cuda-b0-bf16, cuda-b0-fp16, cuda-b4-bf16)
"""
import argparse
import json
import sys

from torch_mlp import need, timed_steps  # same directory; the module has no import-time side effects

MODELS = ["b%d" % i for i in range(8)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=MODELS, default="b0", help="torchvision efficientnet_<model>")
    p.add_argument("--size", type=int, default=224, help="input height = width")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--classes", type=int, default=1000, help="num_classes of the classifier")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="fp32, or autocast mixed precision with fp32 weights (fp16: with loss scaling)")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in matmuls and cuDNN convolutions (fp32)")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for model and input")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--optimizer", choices=["sgd", "rmsprop"], default="sgd")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (cuDNN autotuning, allocator)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--progress", action="store_true", help="print every step's time to stderr")
    a = p.parse_args()
    if min(a.size, a.batch, a.classes, a.steps) < 1 or a.warmup < 0:
        p.error("--size, --batch, --classes and --steps must be >= 1, --warmup >= 0")
    if not 0.0 <= a.label_smoothing < 1.0:
        p.error("--label-smoothing must be in [0, 1)")
    return a


def main():
    a = parse_args()
    torch = need("torch", "torch_cuda", "python3-torch")
    if not torch.cuda.is_available():
        sys.stderr.write("torch_cuda: no CUDA device (torch %s, built for CUDA %s)\n"
                         % (torch.__version__, torch.version.cuda or "none"))
        return 1
    if a.compile and not hasattr(torch, "compile"):
        sys.stderr.write("torch_cuda: --compile needs PyTorch 2 (this is %s)\n" % torch.__version__)
        return 2
    torchvision = need("torchvision", "torch_cuda", "python3-torchvision")
    import torch.nn.functional as F

    # TF32 for both matmuls and cuDNN, stated: cuDNN allows it by default, which would make "fp32" TF32.
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest algorithms once
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")

    model = getattr(torchvision.models, "efficientnet_" + a.model)(num_classes=a.classes)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(dev, memory_format=fmt)
    model.train()
    x = torch.rand(a.batch, 3, a.size, a.size, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    else:
        opt = torch.optim.RMSprop(model.parameters(), lr=a.lr, alpha=0.9, momentum=0.9, eps=1e-3)
    fwd = torch.compile(model) if a.compile else model
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None
    sys.stderr.write("torch_cuda: %s, efficientnet_%s %dx%d batch %d, %s%s, %s, cudnn.benchmark on%s\n" % (
        torch.cuda.get_device_name(0), a.model, a.size, a.size, a.batch, a.precision,
        "" if amp_dtype else (", TF32 on" if a.tf32 else ", TF32 off"),
        "channels-last" if a.channels_last else "NCHW", ", torch.compile" if a.compile else ""))

    def step():
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(fwd(x), y, label_smoothing=a.label_smoothing)
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    torch.cuda.reset_peak_memory_stats()
    _, train_time, loss, med, jitter = timed_steps(step, a.warmup, a.steps, "torch_cuda", a.progress,
                                                  sync=torch.cuda.synchronize, digits=4)
    final_loss = loss.item()
    peak = torch.cuda.max_memory_allocated()
    row = {
        "impl": "pytorch-cuda",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "model": "efficientnet_" + a.model,
        "batch": a.batch,
        "size": a.size,
        "classes": a.classes,
        "precision": a.precision,
        "tf32": bool(a.tf32 and not amp_dtype),
        "channels_last": a.channels_last,
        "compile": a.compile,
        "label_smoothing": a.label_smoothing,
        "optimizer": a.optimizer,
        "warmup_steps": a.warmup,
        "steps": a.steps,
        "train_time_s": train_time,
        "images_per_s": a.steps * a.batch / train_time,
        "step_time_median_s": med,
        "step_time_jitter_s": jitter,  # tf_cnn_benchmarks' jitter: 1.4826 * MAD
        "final_loss": final_loss,
        "peak_gpu_memory_bytes": peak,
        "peak_gpu_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
        "params": sum(p.numel() for p in model.parameters()),
    }
    sys.stderr.write("torch_cuda: %.1f images/s, peak GPU memory %.2f GiB allocated\n"
                     % (row["images_per_s"], peak / 2.0 ** 30))
    sys.stdout.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
