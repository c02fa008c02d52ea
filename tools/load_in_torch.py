#!/usr/bin/env python3
"""Load a MetricNet checkpoint in PyTorch (docs/checkpoints.md).

    python3 tools/load_in_torch.py CKPT [IMAGE ...] [--npy OUT] [--branch NAME]

prints the module built from the checkpoint and, for images, their embeddings
(--npy OUT writes them as an (N, E) float32 array). As a library:

    import sys; sys.path.insert(0, "tools")
    import load_in_torch as lt
    model, info = lt.load("run/best.safetensors")      # eval mode, strict load
    x = lt.preprocess(["a.png", "b.jpg"], info)         # (N, C, S, S) float32, as our binaries
    with torch.no_grad():
        emb = model(x)

The modules' state_dict() keys are our tensor names (Conv4: block1.conv.weight,
block1.bn.running_mean, ..., dense.weight; KochBranch: conv1..4, bn1..3, dense;
MLP: fc1..fcL; EmbeddingNet: conv1, prelu1, ..., fc3), so a checkpoint loads with
strict=True. The file is read without the `safetensors` package; only torch and
numpy are needed (PIL, when present, decodes JPEG and other formats; PNG, PGM and
uncompressed BMP are decoded here too).
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

try:  # optional: JPEG and any other format PIL reads
    from PIL import Image
except ImportError:  # pragma: no cover - exercised by the interop test
    Image = None

# ------------------------------------------------------------------ safetensors --

_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def read_safetensors(path):
    """(tensors: {name: numpy array}, metadata: {str: str}) of a safetensors file."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: the header declares {n} bytes, the file has {len(data) - 8} after its length")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise ValueError(f"{path}: the header is not JSON ({e})") from None
    meta = header.pop("__metadata__", None) or {}
    base, tensors = 8 + n, {}
    for name, e in header.items():
        if e.get("dtype") not in _DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has dtype {e.get('dtype')}; this reader knows "
                             f"{', '.join(_DTYPES)}")
        dt = np.dtype(_DTYPES[e["dtype"]])
        shape = tuple(int(d) for d in e["shape"])
        begin, end = (int(v) for v in e["data_offsets"])
        count = math.prod(shape)
        if end - begin != count * dt.itemsize or begin < 0 or base + end > len(data):
            raise ValueError(f"{path}: tensor '{name}' {e['dtype']}{list(shape)} has data offsets [{begin}, {end}] "
                             f"that do not fit its size or the file")
        tensors[name] = np.frombuffer(data, dtype=dt, count=count, offset=base + begin).reshape(shape).copy()
    return tensors, meta


# ---------------------------------------------------------------------- layers --

class BatchNorm(nn.Module):
    """Our nn::BatchNorm: weight, bias, running_mean, running_var (no num_batches_tracked)."""

    def __init__(self, c, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                            self.momentum, self.eps)


class LRN(nn.Module):
    """Our nn::LRN (kernels/lrn.h): b = a (k + alpha * sum_{window} a^2)^-beta, alpha on the plain sum
    (Krizhevsky; torch.nn.LocalResponseNorm divides alpha by n), window [c - (n-1)//2, c + n//2]."""

    def __init__(self, size=5, alpha=1e-4, beta=0.75, k=2.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        c = x.shape[1]
        sq = F.pad(x * x, (0, 0, 0, 0, (self.size - 1) // 2, self.size // 2))
        s = sum(sq[:, i:i + c] for i in range(self.size))
        return x * (self.k + self.alpha * s).pow(-self.beta)


def activation(name):
    """Our registered activations with their defaults (nn/registry.cpp)."""
    table = {"relu": nn.ReLU, "elu": nn.ELU, "selu": nn.SELU, "softplus": nn.Softplus, "sigmoid": nn.Sigmoid,
             "tanh": nn.Tanh}
    if name not in table:
        raise ValueError(f"activation '{name}': expected one of {', '.join(table)}")
    return table[name]()


# ---------------------------------------------------------------------- trunks --

class Conv4Block(nn.Module):
    def __init__(self, cin, c, batchnorm, pool_batchnorm):
        super().__init__()
        self.conv = nn.Conv2d(cin, c, 3, padding=1)
        if batchnorm:
            self.bn = BatchNorm(c)
        if pool_batchnorm:
            self.pool_bn = BatchNorm(c)


class Conv4(nn.Module):
    """nn/models/conv4.h: per block conv 3x3 pad 1 -> [bn] -> act -> max-pool 2 -> [LRN] -> [pool_bn] ->
    [dropout]; flatten -> [dropout] -> [dense] -> [sigmoid]."""

    def __init__(self, in_channels=1, input_size=28, channels=64, blocks=4, batchnorm=True, embedding=0,
                 activation_name="relu", lrn=False, pool_batchnorm=False, dropout=0.0, sigmoid=False):
        super().__init__()
        side = input_size
        for b in range(blocks):
            setattr(self, f"block{b + 1}", Conv4Block(in_channels if b == 0 else channels, channels, batchnorm,
                                                      pool_batchnorm))
            side //= 2
        self.blocks, self.flat = blocks, channels * side * side
        self.act, self.pool = activation(activation_name), nn.MaxPool2d(2)
        self.lrn = LRN() if lrn else None
        self.drop = nn.Dropout(dropout) if dropout > 0 else None
        if embedding > 0:
            self.dense = nn.Linear(self.flat, embedding)
        self.sigmoid = sigmoid

    def forward(self, x):
        for b in range(self.blocks):
            blk = getattr(self, f"block{b + 1}")
            h = blk.conv(x)
            if hasattr(blk, "bn"):
                h = blk.bn(h)
            x = self.pool(self.act(h))
            if self.lrn is not None:
                x = self.lrn(x)
            if hasattr(blk, "pool_bn"):
                x = blk.pool_bn(x)
            if self.drop is not None:
                x = self.drop(x)
        x = torch.flatten(x, 1)
        if not hasattr(self, "dense"):
            return x
        if self.drop is not None:
            x = self.drop(x)
        x = self.dense(x)
        return torch.sigmoid(x) if self.sigmoid else x


class KochBranch(nn.Module):
    """nn/models/koch_branch.h: conv 10x10, 7x7, 4x4 (each act -> max-pool 2 -> [LRN] -> [bn] -> [dropout]),
    conv 4x4 -> act -> flatten -> [dropout] -> dense -> [sigmoid]."""

    def __init__(self, input_size=105, channels=(64, 128, 128, 256), embedding=4096, activation_name="relu",
                 lrn=False, batchnorm=False, dropout=0.0, sigmoid=True):
        super().__init__()
        side, cin = input_size, 1
        for i, (k, c) in enumerate(zip((10, 7, 4, 4), channels)):
            setattr(self, f"conv{i + 1}", nn.Conv2d(cin, c, k))
            side = side - k + 1
            if i < 3:
                side //= 2
                if batchnorm:
                    setattr(self, f"bn{i + 1}", BatchNorm(c))
            cin = c
        self.dense = nn.Linear(cin * side * side, embedding)
        self.act, self.pool = activation(activation_name), nn.MaxPool2d(2, 2)
        self.lrn = LRN() if lrn else None
        self.drop = nn.Dropout(dropout) if dropout > 0 else None
        self.sigmoid = sigmoid

    def forward(self, x):
        for i in range(4):
            x = self.act(getattr(self, f"conv{i + 1}")(x))
            if i < 3:
                x = self.pool(x)
                if self.lrn is not None:
                    x = self.lrn(x)
                if hasattr(self, f"bn{i + 1}"):
                    x = getattr(self, f"bn{i + 1}")(x)
                if self.drop is not None:
                    x = self.drop(x)
        x = torch.flatten(x, 1)
        if self.drop is not None:
            x = self.drop(x)
        x = self.dense(x)
        return torch.sigmoid(x) if self.sigmoid else x


class MLP(nn.Module):
    """nn/models/mlp.h: fc1 -> act -> [dropout] -> ... -> fcL [-> act] on the flattened input."""

    def __init__(self, sizes, activation_name="relu", activate_output=False, dropout=0.0):
        super().__init__()
        for i in range(len(sizes) - 1):
            setattr(self, f"fc{i + 1}", nn.Linear(sizes[i], sizes[i + 1]))
        self.layers, self.act, self.activate_output = len(sizes) - 1, activation(activation_name), activate_output
        self.drop = nn.Dropout(dropout) if dropout > 0 else None

    def forward(self, x):
        x = torch.flatten(x, 1)
        for i in range(self.layers):
            x = getattr(self, f"fc{i + 1}")(x)
            last = i + 1 == self.layers
            if not last or self.activate_output:
                x = self.act(x)
            if not last and self.drop is not None:
                x = self.drop(x)
        return x


class EmbeddingNet(nn.Module):
    """nn/models/embedding_net.h (Bielski's): conv 5x5 -> PReLU -> max-pool 2, twice; fc1 -> PReLU ->
    fc2 -> PReLU -> fc3."""

    def __init__(self, in_channels=1, input_size=28, conv1=32, conv2=64, hidden=256, embedding=2):
        super().__init__()
        side = ((input_size - 4) // 2 - 4) // 2
        self.conv1, self.prelu1 = nn.Conv2d(in_channels, conv1, 5), nn.PReLU()
        self.conv2, self.prelu2 = nn.Conv2d(conv1, conv2, 5), nn.PReLU()
        self.fc1, self.prelu3 = nn.Linear(conv2 * side * side, hidden), nn.PReLU()
        self.fc2, self.prelu4 = nn.Linear(hidden, hidden), nn.PReLU()
        self.fc3 = nn.Linear(hidden, embedding)

    def forward(self, x):
        x = F.max_pool2d(self.prelu1(self.conv1(x)), 2)
        x = F.max_pool2d(self.prelu2(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = self.prelu3(self.fc1(x))
        x = self.prelu4(self.fc2(x))
        return self.fc3(x)


# ------------------------------------------------------------- the checkpoint --

def _flag(cfg, key, default=None, kind=str):
    """A config value (stored as JSON string, number or bool) as `kind`."""
    if key not in cfg:
        if default is None:
            raise KeyError(f"the checkpoint's config lacks '{key}'")
        return default
    v = cfg[key]
    if kind is bool:
        return v if isinstance(v, bool) else str(v).lower() in ("true", "1", "yes", "on")
    return kind(v)


def _count(tensors, fmt):
    n = 0
    while fmt.format(n + 1) in tensors:
        n += 1
    return n


def _conv4(tensors, cfg, in_channels, input_size, activation_name="relu", lrn=False, dropout=0.0, sigmoid=False):
    blocks = _count(tensors, "block{}.conv.weight")
    w = tensors["block1.conv.weight"]
    emb = tensors["dense.weight"].shape[0] if "dense.weight" in tensors else 0
    if w.shape[1] != in_channels:
        raise ValueError(f"block1.conv.weight {list(w.shape)} takes {w.shape[1]} channels, the config says "
                         f"{in_channels}")
    return Conv4(in_channels, input_size, w.shape[0], blocks, "block1.bn.weight" in tensors, emb, activation_name,
                 lrn, "block1.pool_bn.weight" in tensors, dropout, sigmoid)


def _koch(tensors, input_size, activation_name="relu", lrn=False, dropout=0.0, sigmoid=True):
    channels = tuple(tensors[f"conv{i}.weight"].shape[0] for i in range(1, 5))
    return KochBranch(input_size, channels, tensors["dense.weight"].shape[0], activation_name, lrn,
                      "bn1.weight" in tensors, dropout, sigmoid)


def _embedding_net(tensors, in_channels, input_size):
    return EmbeddingNet(in_channels, input_size, tensors["conv1.weight"].shape[0], tensors["conv2.weight"].shape[0],
                        tensors["fc1.weight"].shape[0], tensors["fc3.weight"].shape[0])


def _mlp(tensors, activate_output=False):
    n = _count(tensors, "fc{}.weight")
    sizes = [tensors["fc1.weight"].shape[1]] + [tensors[f"fc{i}.weight"].shape[0] for i in range(1, n + 1)]
    return MLP(sizes, activate_output=activate_output)


def _build(study, cfg, t):
    """(module, preprocessing) for the trunk tensors `t` (prefix stripped) of a `study` checkpoint."""
    if study == "metric_train":
        trunk, C, S = _flag(cfg, "trunk"), _flag(cfg, "channels", kind=int), _flag(cfg, "image-size", kind=int)
        pre = {"decode_channels": C, "size": S, "resize": "box",
               "float": "ink01" if _flag(cfg, "invert", kind=bool) else "gray01", "scale": 1.0}
        if trunk == "conv4":
            return _conv4(t, cfg, C, S), pre
        if trunk == "embedding-net":
            return _embedding_net(t, C, S), pre
        if trunk == "mlp":
            return _mlp(t), pre
        if trunk == "koch":
            return _koch(t, S), pre
        raise ValueError(f"metric_train trunk '{trunk}' is not known to this tool")
    if study in ("omniglot_triplet", "omniglot_siamese"):
        S = _flag(cfg, "image-size", 105, int)
        pre = {"decode_channels": 1, "size": S, "resize": "area", "float": "ink01",
               "scale": 1.0 if _flag(cfg, "input-norm", False, bool) else 255.0}
        act, lrn, drop = _flag(cfg, "activation", "relu"), _flag(cfg, "lrn", False, bool), _flag(cfg, "dropout", 0.0,
                                                                                                  float)
        if _flag(cfg, "trunk", "koch") == "conv4":
            return _conv4(t, cfg, 1, S, act, lrn, drop, _flag(cfg, "conv4-sigmoid", False, bool)), pre
        return _koch(t, S, act, lrn, drop, _flag(cfg, "sigmoid-embedding", True, bool)), pre
    if study == "sampling":
        # the sampling study's EmbeddingNet on MNIST-sized images: the side that gives fc1's inputs
        side = int(round(math.sqrt(t["fc1.weight"].shape[1] // t["conv2.weight"].shape[0])))
        S = next(s for s in range(16, 1025) if ((s - 4) // 2 - 4) // 2 == side)
        pre = {"decode_channels": 1, "size": S, "resize": "box", "float": "normalize",
               "mean": 0.28604059698879553, "std": 0.35302424451492237, "scale": 1.0}
        return _embedding_net(t, t["conv1.weight"].shape[1], S), pre
    raise ValueError(f"checkpoints of '{study}' are not known to this tool (metric_train, omniglot_triplet, "
                     f"omniglot_siamese, sampling)")


def load(path, branch=None, device="cpu"):
    """(module in eval mode, info) for a MetricNet checkpoint (training or weights-only).

    info: study, config (dict), trunk (class name), prefix (stripped from the names), preprocess (how
    preprocess() prepares images), ignored (tensor names not loaded: optimizer state, other branches),
    head (omniglot_siamese: torch.nn.Linear of Koch's head on |e1 - e2|, else None), metadata.
    `branch` picks the trunk of a two-trunk net ("anchor_branch", "second_branch"; default "branch")."""
    tensors, meta = read_safetensors(path)
    study = meta.get("study", "")
    try:
        cfg = json.loads(meta.get("config", "{}"))
    except ValueError:
        raise ValueError(f"{path}: metadata 'config' is not JSON") from None
    prefix = ""
    if study.startswith("omniglot_"):
        prefix = (branch or "branch") + "."
    elif branch:
        raise ValueError(f"{path}: a {study} checkpoint holds one trunk; --branch is for Omniglot nets")
    trunk_t = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix) and not k.startswith("optim.")}
    if not trunk_t:
        raise ValueError(f"{path}: no tensors named '{prefix}*' (study '{study or 'none'}')")
    try:
        module, pre = _build(study, cfg, trunk_t)
        module.load_state_dict({k: torch.from_numpy(v) for k, v in trunk_t.items()}, strict=True)
    except (KeyError, ValueError, RuntimeError) as e:
        raise ValueError(f"{path}: {e.args[0] if e.args else e}") from None
    module.to(device).eval()
    head = None
    if "head.weight" in tensors:
        w = tensors["head.weight"]
        head = nn.Linear(w.shape[1], w.shape[0])
        head.load_state_dict({"weight": torch.from_numpy(w), "bias": torch.from_numpy(tensors["head.bias"])})
        head.to(device).eval()
    loaded = {prefix + k for k in trunk_t}
    ignored = sorted(k for k in tensors if k not in loaded)
    info = {"study": study, "config": cfg, "trunk": type(module).__name__, "prefix": prefix, "preprocess": pre,
            "ignored": ignored, "head": head, "metadata": meta, "path": path}
    return module, info


# --------------------------------------------------------------- preprocessing --

def _read_pgm(b):
    pos, vals = 2, []
    while len(vals) < 3:
        while b[pos:pos + 1].isspace() or b[pos:pos + 1] == b"#":
            if b[pos:pos + 1] == b"#":
                pos = b.index(b"\n", pos)
            pos += 1
        end = pos
        while b[end:end + 1].isdigit():
            end += 1
        vals.append(int(b[pos:end]))
        pos = end
    w, h, maxval = vals
    if b[1:2] == b"2":
        px = np.array(b[pos:].split()[:w * h], dtype=np.int64)
    else:
        pos += 1
        px = np.frombuffer(b, np.uint8 if maxval < 256 else ">u2", w * h, pos).astype(np.int64)
    if maxval != 255:
        px = (px * 255 + maxval // 2) // maxval
    return px.astype(np.uint8).reshape(h, w, 1)


def _read_png(b):
    pos, idat, plte, trns = 8, [], None, None
    while pos < len(b):
        (n,) = struct.unpack(">I", b[pos:pos + 4])
        kind, body = b[pos + 4:pos + 8], b[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            plte = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"tRNS":
            trns = body
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if interlace:
        raise ValueError("an interlaced PNG: install PIL (python3-pil) to decode it")
    comps = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
    bpp = max(1, comps * depth // 8)
    stride = (w * comps * depth + 7) // 8
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, stride + 1)
    out, prev = np.zeros((h, stride), np.int64), np.zeros(stride, np.int64)
    for y in range(h):
        f, line = int(raw[y, 0]), raw[y, 1:].astype(np.int64)
        if f in (0, 2):  # None, Up
            cur = (line + (prev if f == 2 else 0)) & 255
        elif f == 1:  # Sub: running sums of the bytes bpp apart
            cur = np.cumsum(line.reshape(-1, bpp), axis=0).reshape(-1) & 255
        elif f in (3, 4):  # Average, Paeth: byte by byte along the row
            ln, up, cur_l = line.tolist(), prev.tolist(), [0] * stride
            for i in range(stride):
                a = cur_l[i - bpp] if i >= bpp else 0
                c = up[i - bpp] if i >= bpp else 0
                if f == 3:
                    pred = (a + up[i]) // 2
                else:
                    p = a + up[i] - c
                    pa, pb, pc = abs(p - a), abs(p - up[i]), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else up[i] if pb <= pc else c
                cur_l[i] = (ln[i] + pred) & 255
            cur = np.array(cur_l, np.int64)
        else:
            raise ValueError(f"a corrupt PNG (row {y} has filter {f})")
        out[y], prev = cur, cur
    if depth == 16:
        px = (out.reshape(h, w * comps, 2)[:, :, 0]).reshape(h, w, comps)  # stb keeps the high byte
    elif depth == 8:
        px = out.reshape(h, w, comps)
    else:
        bits = np.unpackbits(out.astype(np.uint8), axis=1).reshape(h, -1)
        vals = np.zeros((h, w), np.int64)
        for k in range(depth):
            vals = vals * 2 + bits[:, k:w * depth:depth]
        px = (vals if ctype == 3 else vals * (255 // (2 ** depth - 1))).reshape(h, w, 1)
    if ctype == 3:
        rgb = plte[px[:, :, 0]]
        if trns is not None:
            alpha = np.full(len(plte), 255, np.uint8)
            alpha[:len(trns)] = np.frombuffer(trns, np.uint8)
            rgb = np.concatenate([rgb, alpha[px[:, :, 0]][:, :, None]], axis=2)
        px = rgb
    return px.astype(np.uint8)


def _read_bmp(b):
    (off,) = struct.unpack("<I", b[10:14])
    w, h, _, bits, compression = struct.unpack("<iiHHI", b[18:34])
    if compression not in (0, 3) or bits not in (24, 32):
        raise ValueError("a compressed or palette BMP: install PIL (python3-pil) to decode it")
    stride = (w * bits // 8 + 3) & ~3
    rows = np.frombuffer(b, np.uint8, stride * abs(h), off).reshape(abs(h), stride)[:, :w * bits // 8]
    px = rows.reshape(abs(h), w, bits // 8)[:, :, [2, 1, 0]]
    return px[::-1] if h > 0 else px


def decode(path, use_pil=None):
    """The file's pixels as stb_image gives them before a channel conversion: (H, W, K) uint8 with K = 1
    grey, 2 grey + alpha, 3 RGB, 4 RGBA. PGM, PNG and uncompressed BMP are decoded here (also without PIL);
    other formats (JPEG) need PIL, whose JPEG decoder may differ from stb_image's by a few levels."""
    with open(path, "rb") as fh:
        b = fh.read()
    if use_pil is None:
        use_pil = Image is not None
    reader = _read_pgm if b[:2] in (b"P2", b"P5") else None
    if not use_pil and b[:8] == b"\x89PNG\r\n\x1a\n":
        reader = _read_png
    elif not use_pil and b[:2] == b"BM":
        reader = _read_bmp
    if reader is not None:
        try:
            return reader(b)
        except (ValueError, KeyError, IndexError, struct.error, zlib.error) as e:
            raise ValueError(f"{path}: a corrupt or unsupported image ({e})") from None
    if Image is None:
        raise ValueError(f"{path}: not a PNG, PGM or uncompressed BMP; install PIL (python3-pil) to decode it")
    with Image.open(path) as im:
        if im.mode in ("I;16", "I;16B", "I;16L", "I"):
            return (np.asarray(im).astype(np.int64) >> 8).astype(np.uint8)[:, :, None]
        if im.mode == "1":
            im = im.convert("L")
        elif im.mode == "P":
            im = im.convert("RGBA" if "transparency" in im.info else "RGB")
        elif im.mode not in ("L", "LA", "RGB", "RGBA"):
            im = im.convert("RGB")
        a = np.asarray(im, dtype=np.uint8)
    return a[:, :, None] if a.ndim == 2 else a


def to_channels(px, channels):
    """stb_image's conversion of (H, W, K) pixels to 1 channel (luma (77 R + 150 G + 29 B) >> 8 of colour;
    alpha dropped) or 3 (grey replicated; alpha dropped)."""
    px = np.asarray(px, dtype=np.uint8)
    if px.ndim == 2:
        px = px[:, :, None]
    k = px.shape[2]
    if channels == 1:
        if k <= 2:
            return px[:, :, :1]
        r, g, b = (px[:, :, i].astype(np.int64) for i in range(3))
        return ((r * 77 + g * 150 + b * 29) >> 8).astype(np.uint8)[:, :, None]
    return np.repeat(px[:, :, :1], 3, axis=2) if k <= 2 else px[:, :, :3]


def _box_weights(n_in, n_out):
    """data/image_folder.cpp box_weights: per output index its input taps and weights, padded with zeros."""
    scale = n_in / n_out
    taps = []
    for o in range(n_out):
        lo, hi = o * scale, (o + 1) * scale
        t = []
        for i in range(int(math.floor(lo)), min(n_in, int(math.ceil(hi)))):
            part = min(hi, float(i + 1)) - max(lo, float(i))
            if part > 0:
                t.append((i, part / scale))
        taps.append(t)
    m = max(len(t) for t in taps)
    idx, wt = np.zeros((n_out, m), np.int64), np.zeros((n_out, m), np.float64)
    for o, t in enumerate(taps):
        for j, (i, v) in enumerate(t):
            idx[o, j], wt[o, j] = i, v
    return idx, wt


def _area_taps(n_in, n_out):
    """data/transforms.cpp area_taps (the Omniglot resize): the same covers, a tap of weight 0 kept."""
    scale = n_in / n_out
    rows = []
    for o in range(n_out):
        lo, hi = o * scale, (o + 1) * scale
        t = []
        for i in range(int(math.floor(lo)), min(n_in - 1, int(math.ceil(hi)) - 1) + 1):
            cover = min(hi, float(i + 1)) - max(lo, float(i))
            t.append((i, cover / scale if cover > 0 else 0.0))
        rows.append(t)
    m = max(len(t) for t in rows)
    idx, wt = np.zeros((n_out, m), np.int64), np.zeros((n_out, m), np.float64)
    for o, t in enumerate(rows):
        for j, (i, v) in enumerate(t):
            idx[o, j], wt[o, j] = i, v
    return idx, wt


def _round_clamp(v):
    """std::lround (halves away from zero) of values clamped to 0..255."""
    v = np.clip(v, 0.0, 255.0)
    f = np.floor(v)
    return (f + (v - f >= 0.5)).astype(np.uint8)


def resize_box(px, size):
    """data/image_folder.cpp resize_box_planar: (H, W, C) uint8 -> (C, size, size) uint8, the area-weighted
    mean of the covered input pixels (rows first, then columns, in float64), rounded to nearest."""
    px = np.asarray(px, dtype=np.float64)
    iy, wy = _box_weights(px.shape[0], size)
    ix, wx = _box_weights(px.shape[1], size)
    rows = np.zeros((size,) + px.shape[1:])
    for j in range(iy.shape[1]):  # the same order of additions as the C++ loop
        rows = rows + wy[:, j, None, None] * px[iy[:, j]]
    out = np.zeros((size, size, px.shape[2]))
    for j in range(ix.shape[1]):
        out = out + wx[None, :, j, None] * rows[:, ix[:, j]]
    return _round_clamp(out).transpose(2, 0, 1)


def resize_area(px, size):
    """data/transforms.cpp resize_area (the Omniglot studies): (H, W) uint8 -> (size, size) uint8, columns
    first, then rows; the identity at the same size."""
    px = np.asarray(px, dtype=np.float64)
    if px.shape == (size, size):
        return px.astype(np.uint8)
    iy, wy = _area_taps(px.shape[0], size)
    ix, wx = _area_taps(px.shape[1], size)
    rows = np.zeros((px.shape[0], size))
    for j in range(ix.shape[1]):
        rows = rows + wx[None, :, j] * px[:, ix[:, j]]
    out = np.zeros((size, size))
    for j in range(iy.shape[1]):
        out = out + wy[:, j, None] * rows[iy[:, j]]
    return _round_clamp(out)


def preprocess(images, info, use_pil=None):
    """(N, C, S, S) float32 tensor of `images` (paths, or uint8 arrays (H, W) / (H, W, K) as decode()
    gives), prepared as the checkpoint's binary prepares them (info['preprocess'])."""
    p = info["preprocess"] if "preprocess" in info else info
    if isinstance(images, (str, os.PathLike, np.ndarray)):  # one image
        images = [images]
    out = []
    for im in images:
        px = decode(im, use_pil) if isinstance(im, (str, os.PathLike)) else np.asarray(im, dtype=np.uint8)
        px = to_channels(px, p["decode_channels"])
        if p["resize"] == "box":
            u8 = resize_box(px, p["size"])
        else:
            u8 = resize_area(px[:, :, 0], p["size"])[None]
        v = u8.astype(np.float32) / np.float32(255)
        if p["float"] == "ink01":
            v = np.float32(1) - v
        elif p["float"] == "normalize":  # the sampling study's lookup table, in float64 then rounded
            v = ((u8.astype(np.float64) / 255.0 - p["mean"]) / p["std"]).astype(np.float32)
        if p["scale"] != 1.0:
            v = v * np.float32(p["scale"])
        out.append(v.astype(np.float32))
    return torch.from_numpy(np.stack(out))


def embed(module, images, info, batch=256):
    """Embeddings (N, E) float32 numpy array of `images` (as preprocess takes them)."""
    parts = []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = preprocess(images[i:i + batch], info).to(next(module.parameters()).device)
            parts.append(module(x).cpu().numpy())
    return np.concatenate(parts).astype(np.float32)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Load a MetricNet checkpoint in PyTorch; embed images with it.")
    ap.add_argument("checkpoint", help="a *.safetensors checkpoint (training or --export-weights)")
    ap.add_argument("images", nargs="*", help="image files to embed, prepared as the checkpoint's binary does")
    ap.add_argument("--npy", help="write the embeddings (N, E) float32 here")
    ap.add_argument("--branch", help="Omniglot nets: the trunk to load (branch, anchor_branch, second_branch)")
    a = ap.parse_args(argv)
    try:
        module, info = load(a.checkpoint, a.branch)
    except (OSError, ValueError) as e:
        print(f"load_in_torch: {e}", file=sys.stderr)
        return 1
    print(module)
    print(f"study {info['study']}, trunk {info['trunk']}, prefix '{info['prefix']}', "
          f"{len(info['ignored'])} tensors not loaded, preprocessing {info['preprocess']}")
    if not a.images:
        return 0
    try:
        e = embed(module, a.images, info)
    except (OSError, ValueError) as err:  # PIL's UnidentifiedImageError is an OSError
        print(f"load_in_torch: {err}", file=sys.stderr)
        return 1
    np.set_printoptions(precision=5, suppress=True, linewidth=120)
    for name, row in zip(a.images, e):
        print(name, row)
    if a.npy:
        np.save(a.npy, e)
        print(f"wrote {a.npy} {e.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
