#!/usr/bin/python3
"""Trains a tiny Vision Transformer on synthetic shapes, for screenshots of where a ViT's [CLS] attends.

    /usr/bin/python3 tools/train_tiny_vit.py [OUT_DIR] [SAMPLES_DIR]    # defaults: /tmp/vit_shapes /tmp/vit_shapes_samples

Each 64x64 RGB image holds one filled shape (circle, square, triangle or cross) of random size, position,
slight tilt and bright colour on dim clutter (smooth colour field, stripes or checks, pixel noise, thin
lines), so the class can only be read off the shape's outline and attention on it means something. The model is
written in plain torch with Hugging Face's ViTForImageClassification tensor names and maths (pre-norm,
erf-GELU, LayerNorm eps 1e-12, [CLS] + 8x8 patches), trained on CPU in a few minutes (seeded), and saved as
config.json + model.safetensors (F32) + preprocessor_config.json in OUT_DIR. SAMPLES_DIR gets test PNGs:
two per class at 64x64, and two of those scenes drawn again at 4x (256x256) for a loader's resize path.
Needs only Debian's python3-torch, python3-numpy and python3-pil (no transformers, no safetensors).
"""
import argparse
import json
import math
import os
import struct
import time

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ["circle", "square", "triangle", "cross"]
SIZE, PATCH = 64, 8


# --------------------------------------------------------------------------------------------------
# Data: one shape on clutter, drawn at SIZE * scale pixels
# --------------------------------------------------------------------------------------------------
def background(rng, pix, S):
    """Dim clutter (values about 0 to 140): the shape is always brighter, so the model need not learn both polarities
    of every edge first (with random polarity and any rotation this ViT was still at chance after 64k images)."""
    # a smooth colour field (random coarse grid, upsampled) gives large-scale colour variation ...
    g = rng.randint(2, 6)
    coarse = Image.fromarray(rng.randint(0, 256, (g, g, 3), dtype=np.uint8))
    img = 15 + 0.4 * np.asarray(coarse.resize((S, S), Image.BICUBIC), dtype=np.float32)
    # ... a periodic texture makes every patch busy, so "anything non-flat" is not a shortcut to the shape
    yy, xx = np.mgrid[0:S, 0:S] / S * SIZE
    kind = rng.randint(0, 3)
    if kind == 0:
        a, f = rng.uniform(0, math.pi), rng.uniform(0.3, 1.2)
        tex = np.sin((xx * math.cos(a) + yy * math.sin(a)) * f)
    elif kind == 1:
        c = rng.randint(3, 9)
        tex = ((xx // c + yy // c) % 2) * 2 - 1.0
    else:
        tex = np.zeros_like(xx)
    img += tex[..., None] * rng.uniform(0, 25) * rng.uniform(-1, 1, 3)
    img += pix.normal(0, rng.uniform(0, 12), img.shape)  # pixel noise
    return img


def bright_colour(rng):
    # any hue, full value, some washed towards white: always well above the clutter
    c = rng.uniform(0, 1, 3)
    c = c / c.max()
    c = c + (1 - c) * rng.uniform(0, 0.5)
    return tuple(int(v) for v in c * 255)


def shape_polygon(cls, cx, cy, r, rot):
    if cls == "square":
        pts = [(1, 1), (-1, 1), (-1, -1), (1, -1)]
        pts = [(x * 0.8, y * 0.8) for x, y in pts]  # same area ballpark as the circle of radius r
    elif cls == "triangle":
        pts = [(math.cos(a), math.sin(a)) for a in (-math.pi / 2 + k * 2 * math.pi / 3 for k in range(3))]
    else:  # cross: a plus with arms 0.35 r thick
        t = 0.35
        pts = [(t, 1), (-t, 1), (-t, t), (-1, t), (-1, -t), (-t, -t), (-t, -1), (t, -1), (t, -t), (1, -t), (1, t), (t, t)]
    c, s = math.cos(rot), math.sin(rot)
    return [(cx + r * (x * c - y * s), cy + r * (x * s + y * c)) for x, y in pts]


def draw_scene(rng, label, scale=1):
    """One image (uint8 HxWx3) and its shape mask, drawn at SIZE * scale pixels."""
    S = SIZE * scale
    # per-pixel noise from its own stream: rng then draws the same numbers at any scale, so a seed is one scene
    pix = np.random.RandomState(rng.randint(2**31))
    img = background(rng, pix, S)
    r = rng.uniform(10, 22)
    cx, cy = rng.uniform(r + 1, SIZE - r - 1, 2)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    d = ImageDraw.Draw(pil)
    for _ in range(rng.randint(0, 4)):  # thin distractor lines, thinner than any shape's stroke
        x0, y0, x1, y1 = rng.uniform(0, SIZE, 4) * scale
        d.line((x0, y0, x1, y1), fill=tuple(int(v) for v in rng.randint(0, 160, 3)), width=scale)
    mask = Image.new("L", (S, S), 0)
    colour = bright_colour(rng)
    cls = CLASSES[label]
    tilt = rng.uniform(-0.25, 0.25)  # a slight tilt only: any rotation needs several times the training
    for target, fill in ((d, colour), (ImageDraw.Draw(mask), 255)):
        if cls == "circle":
            target.ellipse([(cx - r) * scale, (cy - r) * scale, (cx + r) * scale, (cy + r) * scale], fill=fill)
        else:
            target.polygon([(x * scale, y * scale) for x, y in shape_polygon(cls, cx, cy, r, tilt)], fill=fill)
    if rng.rand() < 0.3:  # a little blur now and then, as photos and resizes bring
        pil = pil.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.0) * scale))
    out = np.asarray(pil, dtype=np.float32)
    out = np.clip(out + pix.normal(0, rng.uniform(0, 8), out.shape), 0, 255)  # noise on the shape too
    return out.astype(np.uint8), np.asarray(mask) > 0


def make_set(n, seed):
    rng = np.random.RandomState(seed)
    labels = np.arange(n) % len(CLASSES)
    rng.shuffle(labels)
    imgs, masks = zip(*(draw_scene(rng, int(l)) for l in labels))
    return np.stack(imgs), np.stack(masks), labels


def normalise(u8):
    # exactly the ViTImageProcessor path of preprocessor_config.json: x / 255, then (x - 0.5) / 0.5
    x = torch.from_numpy(u8).float().permute(0, 3, 1, 2)
    return (x / 255.0 - 0.5) / 0.5


# --------------------------------------------------------------------------------------------------
# Model: HF ViT's maths; module attributes named so that state_dict() keys are HF's tensor names
# --------------------------------------------------------------------------------------------------
def node(**children):
    m = torch.nn.Module()
    for k, v in children.items():
        setattr(m, k, v)
    return m


def make_model(d, layers, heads, inter, n_classes):
    nn = torch.nn
    n_tokens = (SIZE // PATCH) ** 2 + 1
    emb = node(patch_embeddings=node(projection=nn.Conv2d(3, d, PATCH, stride=PATCH)))
    emb.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
    emb.position_embeddings = nn.Parameter(torch.randn(1, n_tokens, d) * 0.02)
    layer = [node(layernorm_before=nn.LayerNorm(d, eps=1e-12),
                  attention=node(attention=node(query=nn.Linear(d, d), key=nn.Linear(d, d), value=nn.Linear(d, d)),
                                 output=node(dense=nn.Linear(d, d))),
                  layernorm_after=nn.LayerNorm(d, eps=1e-12),
                  intermediate=node(dense=nn.Linear(d, inter)),
                  output=node(dense=nn.Linear(inter, d))) for _ in range(layers)]
    vit = node(embeddings=emb, encoder=node(layer=nn.ModuleList(layer)), layernorm=nn.LayerNorm(d, eps=1e-12))
    model = node(vit=vit, classifier=nn.Linear(d, n_classes))
    model.heads = heads
    for name, p in model.named_parameters():  # HF's ViT init: N(0, 0.02) weights, zero biases
        if name.endswith("weight") and p.dim() > 1:
            nn.init.trunc_normal_(p, std=0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    return model


def forward(model, x, keep_att=False):
    """Logits [B, classes] (and per-layer attention [B, heads, T, T] with keep_att), as HF's ViT computes them."""
    F = torch.nn.functional
    e = model.vit.embeddings
    h = e.patch_embeddings.projection(x).flatten(2).transpose(1, 2)  # [B, 64, d], patches in row-major order
    h = torch.cat([e.cls_token.expand(len(x), -1, -1), h], 1) + e.position_embeddings
    B, T, d = h.shape
    H = model.heads
    atts = []
    for L in model.vit.encoder.layer:
        a = L.attention.attention
        y = L.layernorm_before(h)
        q, k, v = [m(y).view(B, T, H, d // H).transpose(1, 2) for m in (a.query, a.key, a.value)]
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(d // H)).softmax(-1)
        atts.append(att)
        h = h + L.attention.output.dense((att @ v).transpose(1, 2).reshape(B, T, d))
        h = h + L.output.dense(F.gelu(L.intermediate.dense(L.layernorm_after(h))))  # erf GELU = HF "gelu"
    logits = model.classifier(model.vit.layernorm(h)[:, 0])
    return (logits, atts) if keep_att else logits


# --------------------------------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------------------------------
def augment(x, g):
    # every class is unchanged by flips and quarter turns: 8x the variety of the fixed training set for free
    if torch.rand(1, generator=g) < 0.5:
        x = x.flip(3)
    return torch.rot90(x, int(torch.randint(0, 4, (1,), generator=g)), (2, 3))


def set_lr(opt, lr, step, steps):
    """Linear warm-up over the first 5 % of steps, then cosine to zero (stable from scratch at a high rate); returns
    the rate set."""
    warm = steps // 20
    f = (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
    for grp in opt.param_groups:
        grp["lr"] = lr * f
    return lr * f


def descend(opt, model, loss):
    """One optimiser step on loss, gradients clipped to norm 1; returns the loss's value."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def train(model, xs, ys, vx, vy, steps, batch, lr, seed):
    g = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1 and "embeddings" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() > 1 and "embeddings" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.99))
    t0 = time.time()
    for step in range(steps):
        rate = set_lr(opt, lr, step, steps)
        idx = torch.randint(0, len(xs), (batch,), generator=g)
        loss = torch.nn.functional.cross_entropy(forward(model, augment(xs[idx], g)), ys[idx], label_smoothing=0.05)
        descend(opt, model, loss)
        if step % 250 == 0 or step == steps - 1:
            with torch.no_grad():
                acc = (forward(model, vx).argmax(1) == vy).float().mean().item()
            print(f"step {step:5d}  loss {loss.item():.3f}  val {acc:.3f}  lr {rate:.2e}  {time.time() - t0:4.0f} s",
                  flush=True)


@torch.no_grad()
def evaluate(model, xs, ys, masks):
    """Accuracy, per-class accuracy, and per layer and head the share of [CLS]'s attention that lands on the shape."""
    logits, atts = forward(model, xs, keep_att=True)
    pred = logits.argmax(1)
    acc = (pred == ys).float().mean().item()
    per_class = {c: (pred[ys == i] == i).float().mean().item() for i, c in enumerate(CLASSES)}
    # a patch counts as "shape" when at least a quarter of its pixels are the shape
    n = SIZE // PATCH
    cover = torch.from_numpy(masks).float().view(-1, n, PATCH, n, PATCH).mean((2, 4)).flatten(1) >= 0.25
    on_shape = [(a[:, :, 0, 1:] * cover[:, None]).sum(2).mean(0).tolist() for a in atts]  # [layer][head]
    return acc, per_class, on_shape, cover.float().mean().item()


# --------------------------------------------------------------------------------------------------
# Export: HF ViTForImageClassification folder
# --------------------------------------------------------------------------------------------------
def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # keeps the data 8-byte aligned for readers that map it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def export(model, args, out):
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"),
                      {k: v.detach().float().numpy() for k, v in model.state_dict().items()})
    config = {"model_type": "vit", "architectures": ["ViTForImageClassification"], "hidden_size": args.d_model,
              "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
              "intermediate_size": args.intermediate, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
              "image_size": SIZE, "patch_size": PATCH, "num_channels": 3, "qkv_bias": True,
              "id2label": {str(i): c for i, c in enumerate(CLASSES)}, "label2id": {c: i for i, c in enumerate(CLASSES)}}
    prep = {"do_resize": True, "size": {"height": SIZE, "width": SIZE}, "resample": 2, "do_rescale": True,
            "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "image_processor_type": "ViTImageProcessor"}
    for name, obj in (("config.json", config), ("preprocessor_config.json", prep)):
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")


@torch.no_grad()
def write_samples(model, out, seed):
    """Two PNGs per class at 64x64, circle_0 and triangle_0 again at 256x256; prints what the model says of each."""
    os.makedirs(out, exist_ok=True)
    jobs = [(c, 1, k) for c in range(len(CLASSES)) for k in range(2)] + [(0, 4, 0), (2, 4, 0)]
    for label, scale, k in jobs:
        img, _ = draw_scene(np.random.RandomState(seed + 10 * label + k), label, scale)
        name = f"{CLASSES[label]}_{k}" + ("_256" if scale > 1 else "") + ".png"
        Image.fromarray(img).save(os.path.join(out, name))
        # predict from the PNG as a loader would: decode, bilinear resize (Pillow, resample=2) to 64x64, normalise
        pil = Image.open(os.path.join(out, name)).convert("RGB")
        if pil.size != (SIZE, SIZE):
            pil = pil.resize((SIZE, SIZE), Image.BILINEAR)
        p = forward(model, normalise(np.array(pil)[None])).softmax(1)[0]
        top = p.argsort(descending=True)[:3]
        print(f"  {name:22s} " + "  ".join(f"{CLASSES[i]} {p[i]:.3f}" for i in top))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="/tmp/vit_shapes", help="model folder (default /tmp/vit_shapes)")
    ap.add_argument("samples", nargs="?", default="/tmp/vit_shapes_samples",
                    help="sample PNG folder (default /tmp/vit_shapes_samples)")
    ap.add_argument("--steps", type=int, default=2500, help="optimizer steps (default 2500: about 5 minutes on 1 core)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--train-images", type=int, default=20000)
    ap.add_argument("--val-images", type=int, default=2000)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    # 1 thread: at this size two OpenMP threads were no faster on idle cores and 2.5x slower beside a build
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    tr_img, _, tr_y = make_set(args.train_images, args.seed)
    va_img, va_mask, va_y = make_set(args.val_images, args.seed + 1000)  # other seed: unseen scenes
    print(f"data: {len(tr_y)} train / {len(va_y)} validation images ({time.time() - t0:.0f} s)", flush=True)

    model = make_model(args.d_model, args.layers, args.heads, args.intermediate, len(CLASSES))
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    t1 = time.time()
    vx, vy = normalise(va_img), torch.from_numpy(va_y).long()
    train(model, normalise(tr_img), torch.from_numpy(tr_y).long(), vx[:500], vy[:500], args.steps, args.batch, args.lr,
          args.seed)
    print(f"training: {time.time() - t1:.0f} s", flush=True)

    acc, per_class, on_shape, covered = evaluate(model, vx, vy, va_mask)
    print(f"validation accuracy {acc:.4f}  (" + ", ".join(f"{c} {a:.3f}" for c, a in per_class.items()) + ")")
    print(f"[CLS] attention on shape patches (they are {covered:.2f} of the image), per layer, heads 0..:")
    for l, heads in enumerate(on_shape):
        print(f"  layer {l}: " + " ".join(f"{v:.2f}" for v in heads))
    export(model, args, args.out)
    print(f"wrote {args.out}; samples (top 3 from the PNG via Pillow resize + torch):")
    write_samples(model, args.samples, args.seed + 2000)
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
