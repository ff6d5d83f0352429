"""Model: GPT-2 block, written out so the C++ forward's semantics are visible here too; and growing a trained model
into a larger vocabulary."""
import math

from .tokenizer import bpe_symbols


def make_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["n_embd"]
            self.ln_1 = nn.LayerNorm(d, eps=1e-5)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d, eps=1e-5)
            self.c_fc = nn.Linear(d, 4 * d)
            self.mlp_proj = nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.triu(torch.ones(cfg["n_positions"], cfg["n_positions"],
                                                               dtype=torch.bool), 1), persistent=False)

        def forward(self, x, keep_att=False):
            B, T, d = x.shape
            H = cfg["n_head"]
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = [t.view(B, T, H, d // H).transpose(1, 2) for t in (q, k, v)]
            # the scale on q (T x 32 per head) rather than on the scores (T x T): the same numbers, fewer multiplies
            att = (q * (1.0 / math.sqrt(d // H))) @ k.transpose(-2, -1)
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, d)
            x = x + self.c_proj(y)
            x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
            return (x, att) if keep_att else x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
            self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
            self.h = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=1e-5)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * cfg["n_layer"]) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            if cfg.get("pos_init") == "sinusoid":
                # Learned positions, but started from the sinusoids of "Attention is all you need" (rescaled to the
                # 0.02 RMS of the normal init): a shift by one position is then a fixed linear map of them, so a
                # previous-token head (the first half of an induction head) can form early instead of waiting for
                # the positions to be learnt from scratch.
                pos = torch.arange(cfg["n_positions"], dtype=torch.float32)[:, None]
                freq = torch.exp(-math.log(10000.0) * torch.arange(0, cfg["n_embd"], 2, dtype=torch.float32)
                                 / cfg["n_embd"])
                pe = torch.zeros(cfg["n_positions"], cfg["n_embd"])
                pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
                with torch.no_grad():
                    self.wpe.weight.copy_(pe * (0.02 / float(pe.pow(2).mean().sqrt())))

        def forward(self, idx, keep_att=False, lens_at=None, lens_rows=None):
            """logits [B][T][V]; with keep_att also each layer's pattern, with lens_at=l also the logit lens's
            logits from the residual after layer l (--lens-aux-weight), of the sequences lens_rows only (a bool
            [B] mask; None: all)."""
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            atts = []
            lens = None
            for l, blk in enumerate(self.h):
                if keep_att:
                    x, a = blk(x, True)
                    atts.append(a)
                else:
                    x = blk(x)
                if l == lens_at:
                    lens = self.ln_f(x if lens_rows is None else x[lens_rows]) @ self.wte.weight.T
            logits = self.ln_f(x) @ self.wte.weight.T  # tied embeddings
            if lens_at is not None:
                return logits, lens
            return (logits, atts) if keep_att else logits

    return GPT()


def grow_embeddings(torch, model, new_model, vocab, base_merges, new_tokens):
    """Copies a trained model into new_model (the same but for a larger vocabulary) and starts each new token's
    embedding row (tied with the unembedding) at the mean of the rows of the pieces the old tokenizer split it into."""
    sd = model.state_dict()
    wte = sd["wte.weight"]
    n_old = wte.shape[0]
    rank = {m: i for i, m in enumerate(base_merges)}
    rows = [wte]
    for t in new_tokens:
        pieces = bpe_symbols(rank, list(t))
        ids = [vocab[p] for p in pieces]
        assert all(i < n_old for i in ids), (t, pieces)
        rows.append(wte[ids].mean(0, keepdim=True))
    sd["wte.weight"] = torch.cat(rows)
    missing, unexpected = new_model.load_state_dict(sd, strict=False)
    n_old_layers = len(model.h)
    assert not unexpected and all(k.startswith("h.") and int(k.split(".")[1]) >= n_old_layers for k in missing), \
        (missing, unexpected)
    # --grow-layers: blocks after the old ones write nothing at first (zero output projections), so the grown model
    # computes what the old one did and learns from there
    with torch.no_grad():
        for blk in new_model.h[n_old_layers:]:
            for lin in (blk.c_proj, blk.mlp_proj):
                lin.weight.zero_()
                lin.bias.zero_()
