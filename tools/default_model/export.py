"""Export: HF GPT-2 layout (Conv1D weights are [in, out] = nn.Linear.weight transposed), F16 safetensors, and
reading it back into the torch model."""
import json
import os
import struct

from .corpus import NAME, OUT, ROOT
from .tokenizer import EOT


def write_safetensors(path, tensors, dtype="F16"):
    import numpy as np
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float16 if dtype == "F16" else np.float32)
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def export(model, cfg, vocab, merges, out):
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    t = {"wte.weight": sd["wte.weight"], "wpe.weight": sd["wpe.weight"],
         "ln_f.weight": sd["ln_f.weight"], "ln_f.bias": sd["ln_f.bias"]}
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = sd[p + "ln_1.weight"], sd[p + "ln_1.bias"]
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = sd[p + "ln_2.weight"], sd[p + "ln_2.bias"]
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = sd[p + "c_attn.weight"].T, sd[p + "c_attn.bias"]
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = sd[p + "c_proj.weight"].T, sd[p + "c_proj.bias"]
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = sd[p + "c_fc.weight"].T, sd[p + "c_fc.bias"]
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = sd[p + "mlp_proj.weight"].T, sd[p + "mlp_proj.bias"]
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": cfg["n_layer"],
              "n_head": cfg["n_head"], "n_embd": cfg["n_embd"], "vocab_size": cfg["vocab_size"],
              "n_positions": cfg["n_positions"], "n_ctx": cfg["n_positions"], "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "bos_token_id": vocab[EOT], "eos_token_id": vocab[EOT]}
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump(vocab, open(os.path.join(out, "vocab.json"), "w", encoding="utf-8"), ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    if os.path.abspath(out) == os.path.abspath(OUT):  # experiments (--out elsewhere) leave DEFAULT alone
        with open(os.path.join(ROOT, "assets", "models", "DEFAULT"), "w") as f:
            f.write(NAME + "\n")


def load_exported(torch, model, cfg, out):
    """Loads model.safetensors (as shipped, F16) back into the torch model."""
    import numpy as np
    raw = open(os.path.join(out, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n

    def get(name):
        e = header[name]
        a, b = e["data_offsets"]
        dt = np.float16 if e["dtype"] == "F16" else np.float32
        return torch.tensor(np.frombuffer(raw[base + a:base + b], dtype=dt).astype(np.float32).reshape(e["shape"]))

    sd = {"wte.weight": get("wte.weight"), "wpe.weight": get("wpe.weight"),
          "ln_f.weight": get("ln_f.weight"), "ln_f.bias": get("ln_f.bias")}
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        for a, b in [("ln_1.weight", "ln_1.weight"), ("ln_1.bias", "ln_1.bias"), ("ln_2.weight", "ln_2.weight"),
                     ("ln_2.bias", "ln_2.bias"), ("c_attn.bias", "attn.c_attn.bias"),
                     ("c_proj.bias", "attn.c_proj.bias"), ("c_fc.bias", "mlp.c_fc.bias"),
                     ("mlp_proj.bias", "mlp.c_proj.bias")]:
            sd[p + a] = get(p + b)
        for a, b in [("c_attn.weight", "attn.c_attn.weight"), ("c_proj.weight", "attn.c_proj.weight"),
                     ("c_fc.weight", "mlp.c_fc.weight"), ("mlp_proj.weight", "mlp.c_proj.weight")]:
            sd[p + a] = get(p + b).T.contiguous()
    model.load_state_dict(sd)
