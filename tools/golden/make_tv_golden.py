#!/usr/bin/env python3
"""make_tv_golden.py — torchvision EfficientNet-B0 eval-mode logits for tests/test_golden_tv.c.

Regenerate (needs PyTorch and torchvision: apt-get install python3-torch python3-torchvision):
    /usr/bin/python3 tools/golden/make_tv_golden.py tests/data/tv_b0_golden.bin
and commit the file (about 0.4 MB). The test then holds trainbench's eval-mode logits of the same
weights against these within 1e-4 of the largest |logit|.

What it builds: torchvision.models.efficientnet_b0(num_classes=10), its default BatchNorm (eps 1e-5),
eval mode, in float64, on 32x32 RGB inputs (no resize: trainbench runs with --resolution 32).
 - Convolution and linear weights and biases come from a counter-based generator the C test repeats
   bit for bit (splitmix64 of (tensor index << 32 | element index), top 24 bits -> u in [-1,1) in
   float32, times a float32 scale), in torchvision's layout; only the scale is stored. So the ~16 MB
   of weights need not be committed, yet the names, shapes and layouts are torchvision's own.
 - BatchNorm gamma, beta, running_mean and running_var are stored: statistics measured in eval mode
   one BatchNorm at a time on the test images and 64 more, then perturbed (var x U(1/1.1,1.1), mean
   + 0.02 sd), and on a tenth of the channels running_var is scaled by f = 10^U(-3,-1) with gamma
   scaled by sqrt(f) (the same function at eps 0), so the eps matters:
   evaluated with eps 1e-3 instead of 1e-5 the logits move by far more than the tolerance (printed).
 - Four fixed uint8 images (seeded), preprocessed as trainbench does inside its model:
   x = (p/255 - mean[c]) / std[c], ImageNet mean/std, NCHW for torch.

File format (little-endian): "TBTVG001", u32 count, then per entry: name (64 bytes, NUL-padded),
u32 kind, u32 ndim, u32 dims[4], payload. kind 0: prod(dims) float32 values; kind 1: generated,
payload one float32 scale; kind 2: int64 zero scalar (num_batches_tracked), no payload. The state_dict
entries come in torchvision's order, then "__images__" (N,32,32,3; pixel values as float32) and
"__logits__" (N,10).

The other way (a file trainbench saved, in a default torchvision model):
    /usr/bin/python3 tools/golden/make_tv_golden.py --check SAVED.safetensors LOGITS.npy CIFAR_DIR [CLASSES]
loads SAVED (bench --save) with load_state_dict(strict=True) into a default efficientnet_b0 (its eps
left at torchvision's default unless the file's bn_eps differs, which it then reports and applies),
runs the test_batch.bin images of CIFAR_DIR through the preprocessing recorded in the file, and
compares with LOGITS.npy (bench --plan evaluate --load SAVED --logits LOGITS.npy --data CIFAR_DIR).
"""
import json
import struct
import sys

import numpy as np
import torch
import torchvision

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
N_IMAGES, SIDE, CLASSES = 4, 32, 10
M64 = (1 << 64) - 1


def generated(k, n, scale):
    """The C test's generator: float32 scale * u, u = (splitmix64(k<<32 | i) >> 40) * 2^-23 - 1."""
    with np.errstate(over="ignore"):
        z = (np.uint64(k) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -23) - np.float32(1.0)
    return (u * np.float32(scale)).astype(np.float32)


def preprocess(images_u8):
    x = (images_u8.astype(np.float64) / 255.0 - MEAN) / STD  # (N,H,W,3)
    return torch.from_numpy(x.transpose(0, 3, 1, 2).copy())


def make(path):
    torch.manual_seed(2026)
    rng = np.random.default_rng(2026)
    model = torchvision.models.efficientnet_b0(num_classes=CLASSES).double()
    sd = model.state_dict()
    bn_names = {n for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    entries = []  # (name, kind, shape, payload)
    with torch.no_grad():
        for k, (name, t) in enumerate(sd.items()):
            is_bn = name.rsplit(".", 1)[0] in bn_names
            if is_bn:
                continue
            fan_in = int(np.prod(t.shape[1:])) if t.dim() > 1 else 0
            scale = np.float32(np.sqrt(6.0 / fan_in)) if fan_in else np.float32(0.1)
            t.copy_(torch.from_numpy(generated(k, t.numel(), scale).astype(np.float64).reshape(t.shape)))
            entries.append((name, 1, tuple(t.shape), scale))
        # BatchNorm statistics as the model's own eval-mode activations give them, one BatchNorm at a time
        # (the others in eval mode), on the test images plus 64 more like them: at 32x32 the last stages
        # are 1x1 maps, and statistics of other inputs leave the network badly conditioned.
        bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
            m.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, m.num_features)))
            m.bias.copy_(torch.from_numpy(rng.uniform(-0.2, 0.2, m.num_features)))
        images = rng.integers(0, 256, size=(N_IMAGES, SIDE, SIDE, 3), dtype=np.uint8)
        calib = preprocess(np.concatenate([images, rng.integers(0, 256, size=(64, SIDE, SIDE, 3), dtype=np.uint8)]))
        for m in bns:
            model.eval()
            m.train()
            model(calib)
        for m in bns:
            var = m.running_var.numpy() * rng.uniform(1 / 1.1, 1.1, m.num_features)
            mean = m.running_mean.numpy() + 0.02 * np.sqrt(var) * rng.standard_normal(m.num_features)
            f = np.where(rng.uniform(size=m.num_features) < 0.1, 10.0 ** rng.uniform(-3, -1, m.num_features), 1.0)
            m.running_var.copy_(torch.from_numpy((var * f).astype(np.float32).astype(np.float64)))
            m.running_mean.copy_(torch.from_numpy(mean.astype(np.float32).astype(np.float64)))
            m.weight.copy_(torch.from_numpy((m.weight.numpy() * np.sqrt(f)).astype(np.float32).astype(np.float64)))
            m.bias.copy_(torch.from_numpy(m.bias.numpy().astype(np.float32).astype(np.float64)))
            m.num_batches_tracked.zero_()
    sd = model.state_dict()
    gen = {e[0]: e for e in entries}
    ordered = []
    for name, t in sd.items():
        if name in gen:
            ordered.append(gen[name])
        elif name.endswith("num_batches_tracked"):
            ordered.append((name, 2, (), None))
        else:
            ordered.append((name, 0, tuple(t.shape), t.numpy().astype(np.float32)))
    model.eval()
    with torch.no_grad():
        logits = model(preprocess(images)).numpy()
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eps = 1e-3
        wrong = model(preprocess(images)).numpy()
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eps = 1e-5
        f32 = model.float()(preprocess(images).float()).double().numpy()
    print("logits:\n", logits)
    print("max |logit| %.4g; with eps 1e-3 instead of 1e-5 the logits move by %.3g of it"
          % (np.abs(logits).max(), np.abs(wrong - logits).max() / np.abs(logits).max()))
    print("torch in float32 is %.3g of it from float64 (the conditioning the tolerance must allow)"
          % (np.abs(f32 - logits).max() / np.abs(logits).max()))
    ordered.append(("__images__", 0, images.shape, images.astype(np.float32)))
    ordered.append(("__logits__", 0, logits.shape, logits.astype(np.float32)))
    with open(path, "wb") as f:
        f.write(b"TBTVG001" + struct.pack("<I", len(ordered)))
        for name, kind, shape, payload in ordered:
            dims = list(shape) + [0] * (4 - len(shape))
            f.write(name.encode().ljust(64, b"\0") + struct.pack("<6I", kind, len(shape), *dims))
            if kind == 0:
                f.write(np.ascontiguousarray(payload, dtype="<f4").tobytes())
            elif kind == 1:
                f.write(struct.pack("<f", payload))
    print("wrote %s: %d entries" % (path, len(ordered)))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    sd = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}[e["dtype"]]
        sd[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=dt).reshape(e["shape"]).copy())
    return sd, meta


def check(saved, logits_npy, cifar_dir, classes=10):
    sd, meta = read_safetensors(saved)
    sd = {k: v for k, v in sd.items() if not k.startswith("__")}
    model = torchvision.models.efficientnet_b0(num_classes=classes)
    model.load_state_dict(sd, strict=True)
    eps = float(meta.get("bn_eps", "1e-5"))
    if abs(eps - 1e-5) > 1e-9:
        print("note: the file's bn_eps is %g, not torchvision's 1e-5: applying it" % eps)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eps = eps
    model.eval()
    raw = np.fromfile(cifar_dir + "/test_batch.bin", dtype=np.uint8).reshape(-1, 3073)
    images = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    mean = np.array(json.loads(meta.get("input_mean", "[0.485,0.456,0.406]")))
    std = np.array(json.loads(meta.get("input_std", "[0.229,0.224,0.225]")))
    scale = float(meta.get("input_scale", 1 / 255))
    x = (images.astype(np.float64) * scale - mean) / std
    with torch.no_grad():
        want = model(torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float32).copy())).numpy()
    got = np.load(logits_npy)
    err = np.abs(got - want).max() / np.abs(want).max()
    top1 = (got.argmax(1) == want.argmax(1)).mean()
    print("%d images: max |trainbench - torchvision| = %.3g of max |logit|, top-1 agreement %.1f %%"
          % (len(got), err, 100 * top1))
    return 0 if err < 1e-3 else 1


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 10))
    make(sys.argv[1] if len(sys.argv) > 1 else "tests/data/tv_b0_golden.bin")
