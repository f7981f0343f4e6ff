#!/usr/bin/python3
"""ckpt_roundtrip.py — trainbench checkpoints <-> torchvision EfficientNet-B0, both ways.

Run with Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14); needs no `safetensors` package:
the format (8-byte little-endian header length, JSON header, raw little-endian data) is read and
written here directly.

  load CKPT [--image IMG] [--n N] [--res R] [--classes K] [--out LOGITS]
      Loads a trainbench checkpoint (a --save file, or a resumable --checkpoint-dir one: keys starting
      with "__", such as the optimizer state "__optimizer__.*", are dropped first) into
      torchvision.models.efficientnet_b0(num_classes=K) with load_state_dict(strict=True), runs model.eval() on the uint8 images in IMG ((N,R,R,3) NHWC
      raw bytes, ImageNet mean/std normalisation as trainbench's input layer does; without --image a
      fixed seeded image set) and prints the logits (N,K); --out also writes them as little-endian
      float64.
  make CKPT --seed S [--image IMG] [--n N] [--res R] [--classes K] [--out LOGITS]
      Builds torchvision's randomly initialised efficientnet_b0(num_classes=K) (torch seed S), gives
      its BatchNorms realistic running statistics (the batch statistics of IMG), perturbs gamma/beta, saves the state_dict as safetensors to CKPT and writes the eval logits of IMG as above.

BatchNorm: torchvision's B0 uses eps 1e-5, momentum 0.1, and so does trainbench's effnet-b0 by default
(before issue 28 it used the paper's eps 1e-3, which older checkpoints record). The script sets every
BatchNorm to the checkpoint's __metadata__ "bn_eps" if present, else --bn-eps (default 1e-5,
torchvision's), so both sides compute the same function. Logits are computed in float64 so they serve as a reference for float32 code.
Exit status: 0 on success, 1 on any error (message on stderr).
"""
import argparse
import json
import struct
import sys

import numpy as np
import torch
import torchvision

DTYPES = {"F32": (np.float32, torch.float32), "F64": (np.float64, torch.float64),
          "I64": (np.int64, torch.int64), "I32": (np.int32, torch.int32)}
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float64)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float64)


def st_read(path):
    """Returns ({name: torch tensor}, metadata dict) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise ValueError(f"{path}: header length {hlen} exceeds the file")
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    data = raw[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, rec in header.items():
        npt, _ = DTYPES[rec["dtype"]]
        a, b = rec["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=np.dtype(npt).newbyteorder("<")).astype(npt)
        out[name] = torch.from_numpy(arr.reshape(rec["shape"]).copy())
    return out, meta


def st_write(path, tensors, meta=None):
    """Writes {name: tensor} as safetensors (sorted names, header padded to 8 bytes)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        dtype = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32"}[t.dtype]
        b = t.numpy().astype(np.dtype(DTYPES[dtype][0]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if meta:
        header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def build(classes, bn_eps):
    m = torchvision.models.efficientnet_b0(num_classes=classes)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.eps = bn_eps
            mod.momentum = 0.01
    return m


def read_images(path, n, res):
    if path is None:
        raw = np.random.RandomState(0).randint(0, 256, size=n * res * res * 3).astype(np.uint8)
    else:
        raw = np.fromfile(path, dtype=np.uint8)
    if raw.size != n * res * res * 3:
        raise ValueError(f"{path}: {raw.size} bytes, expected {n}x{res}x{res}x3")
    x = raw.reshape(n, res, res, 3).astype(np.float64)
    x = (x / 255.0 - MEAN) / STD
    return torch.from_numpy(x.transpose(0, 3, 1, 2).copy())


def logits_of(model, images):
    model = model.double().eval()
    with torch.no_grad():
        return model(images)


def emit(out_path, logits):
    if out_path:
        logits.numpy().astype("<f8").tofile(out_path)
    for row in logits.numpy():
        print(" ".join(f"{v:+.7e}" for v in row))


def model_tensors(sd):
    """The model's own tensors: drops the keys starting with "__" (a resumable checkpoint's optimizer
    state "__optimizer__.<name>.<k>", and any other bookkeeping tensor), which no torch module has."""
    return {k: v for k, v in sd.items() if not k.startswith("__")}


def cmd_load(a):
    sd, meta = st_read(a.ckpt)
    sd = model_tensors(sd)
    eps = float(meta.get("bn_eps", a.bn_eps))
    model = build(a.classes, eps)
    model.load_state_dict(sd, strict=True)
    emit(a.out, logits_of(model, read_images(a.image, a.n, a.res)))


def cmd_make(a):
    torch.manual_seed(a.seed)
    model = build(a.classes, a.bn_eps)
    images = read_images(a.image, a.n, a.res)
    # Realistic running statistics: the batch statistics of the test images themselves (only the
    # BatchNorms in train mode: no stochastic depth or dropout), so every layer's eval output is
    # normalised and the logits depend on all of the network (random-init statistics let activations
    # explode or vanish, and a comparison of logits would then test little but float rounding).
    # gamma/beta are perturbed first: changed after calibration, they would shift every later layer's
    # input away from its statistics.
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    model.eval()
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.1)
            bn.momentum = None
            bn.reset_running_stats()
            bn.train()
        model(images.float())
        for bn in bns:
            bn.momentum = 0.01
            bn.eval()
    sd = model.state_dict()
    st_write(a.ckpt, sd, {"source": "torchvision.models.efficientnet_b0", "bn_eps": repr(a.bn_eps),
                          "seed": str(a.seed)})
    emit(a.out, logits_of(model, images))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("load", "make"):
        s = sub.add_parser(name)
        s.add_argument("ckpt")
        s.add_argument("--image", default=None)
        s.add_argument("--n", type=int, default=2)
        s.add_argument("--res", type=int, default=32)
        s.add_argument("--classes", type=int, default=10)
        s.add_argument("--out", default=None)
        s.add_argument("--bn-eps", type=float, default=1e-5)
        s.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    try:
        (cmd_load if a.cmd == "load" else cmd_make)(a)
    except Exception as e:  # one line on stderr, exit 1: the C test shows it
        print(f"ckpt_roundtrip.py {a.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
