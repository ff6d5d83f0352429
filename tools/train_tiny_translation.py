#!/usr/bin/python3
"""Trains a tiny Marian translation model on a toy English -> French, for pictures of cross-attention that mean
something (the alignment of a translation).

    /usr/bin/python3 tools/train_tiny_translation.py [OUT_DIR]    # default /tmp/marian_toy

The toy language pair is real French on a small grammar: "the black dog sees a little cat near the house." ->
"le chien noir voit un petit chat près de la maison." It has what makes alignment worth looking at: colour
adjectives follow the noun (the order swaps) while petit / grand / vieux / jeune stay before it, le / la and the
adjective's ending agree with the noun's gender (so "the" cannot be translated alone), "near" is two words
("près de"), and "near the" + a masculine noun contracts to "près du". Each sentence is drawn fresh, so nothing is
memorised: about 10^8 sentences exist.

The model is written in plain torch with Hugging Face's MarianMTModel tensor names and maths (Post-LN, swish,
embeddings x sqrt(d) plus Marian's sinusoids, tied shared embedding, final_logits_bias), trained on CPU in a few
minutes (seeded), and saved as config.json + model.safetensors (F32) + a SentencePiece Unigram tokenizer.json
(whole words, with letters to spell anything else) + tokenizer_config.json in OUT_DIR. The script reports exact-match
accuracy of greedy translations of unseen sentences, and how often each target word's cross-attention (averaged
over heads and layers, the app's alignment picture) peaks on the English word it translates.
Needs only Debian's python3-torch and python3-numpy (no transformers, no sentencepiece).
"""
import argparse
import json
import math
import os
import random
import time

import torch

from train_tiny_vit import descend, node, set_lr, write_safetensors

U = "\u2581"  # SentencePiece's word-start mark

# --------------------------------------------------------------------------------------------------
# The toy language pair: (English, French, gender) and the grammar
# --------------------------------------------------------------------------------------------------
ANIMALS = [("dog", "chien", "m"), ("cat", "chat", "m"), ("horse", "cheval", "m"), ("wolf", "loup", "m"),
           ("fox", "renard", "m"), ("boy", "garçon", "m"), ("mouse", "souris", "f"), ("cow", "vache", "f"),
           ("girl", "fille", "f"), ("goat", "chèvre", "f"), ("hen", "poule", "f")]
PLACES = [("garden", "jardin", "m"), ("house", "maison", "f"), ("table", "table", "f"), ("bed", "lit", "m"),
          ("river", "rivière", "f"), ("bridge", "pont", "m"), ("forest", "forêt", "f"), ("barn", "grange", "f")]
PREPOSITIONS = {"in": ("dans", ["garden", "house", "forest", "barn", "river"]),
                "near": ("près de", [p[0] for p in PLACES]),
                "on": ("sur", ["table", "bed", "bridge"]),
                "under": ("sous", ["table", "bed", "bridge"]),
                "behind": ("derrière", ["house", "barn", "garden", "forest"])}
# colours follow the noun in French; these four come before it
AFTER = [("black", "noir", "noire"), ("white", "blanc", "blanche"), ("red", "rouge", "rouge"),
         ("green", "vert", "verte"), ("grey", "gris", "grise"), ("brown", "brun", "brune")]
BEFORE = [("little", "petit", "petite"), ("big", "grand", "grande"), ("old", "vieux", "vieille"),
          ("young", "jeune", "jeune")]
VERBS = [("sees", "voit"), ("eats", "mange"), ("follows", "suit"), ("likes", "aime"), ("watches", "regarde"),
         ("chases", "chasse"), ("finds", "trouve"), ("hears", "entend")]
ARTICLES = {"the": ("le", "la"), "a": ("un", "une")}


def noun_phrase(rng, nouns, adjective_p=0.5):
    """([English words], [(French word, index of the English word it translates)]) of one noun phrase."""
    en_noun, fr_noun, g = rng.choice(nouns)
    art = "the" if rng.random() < 0.7 else "a"
    fr_art = ARTICLES[art][g == "f"]
    adj = None
    if rng.random() < adjective_p:
        adj = rng.choice(AFTER + BEFORE)
    if adj is None:
        return [art, en_noun], [(fr_art, 0), (fr_noun, 1)]
    fr_adj = adj[1 if g == "m" else 2]
    en = [art, adj[0], en_noun]
    if adj in BEFORE:
        return en, [(fr_art, 0), (fr_adj, 1), (fr_noun, 2)]
    return en, [(fr_art, 0), (fr_noun, 2), (fr_adj, 1)]


def sentence(rng):
    """(English, French, alignment): the texts, and for each French word the index of its English word."""
    en, fr = [], []

    def add(words, pairs):
        base = len(en)
        en.extend(words)
        fr.extend((w, base + i) for w, i in pairs)

    add(*noun_phrase(rng, ANIMALS))
    v = rng.choice(VERBS)
    add([v[0]], [(v[1], 0)])
    add(*noun_phrase(rng, ANIMALS))
    if rng.random() < 0.5:
        prep = rng.choice(list(PREPOSITIONS))
        fr_prep, places = PREPOSITIONS[prep]
        place = rng.choice(places)
        en_place, fr_place, g = next(p for p in PLACES if p[0] == place)
        art = "the" if rng.random() < 0.8 else "a"
        fr_art = ARTICLES[art][g == "f"]
        b = len(en)
        en.extend([prep, art, en_place])
        if prep == "near" and art == "the" and g == "m":  # près de + le = près du
            fr.extend([("près", b), ("du", b + 1), (fr_place, b + 2)])
        elif prep == "near":
            fr.extend([("près", b), ("de", b), (fr_art, b + 1), (fr_place, b + 2)])
        else:
            fr.extend([(fr_prep, b), (fr_art, b + 1), (fr_place, b + 2)])
    return " ".join(en) + ".", " ".join(w for w, _ in fr) + ".", [i for _, i in fr]


# --------------------------------------------------------------------------------------------------
# The tokenizer: SentencePiece Unigram over whole words (one shared vocabulary, as Marian's), letters as fallback
# --------------------------------------------------------------------------------------------------
def vocabulary():
    words = set(ARTICLES) | {w for pair in ARTICLES.values() for w in pair} | {"près", "de", "du"}
    for table in (ANIMALS, PLACES):
        words |= {e for e, _, _ in table} | {f for _, f, _ in table}
    words |= set(PREPOSITIONS) | {w for f, _ in PREPOSITIONS.values() for w in f.split()}
    words |= {w for a in AFTER + BEFORE for w in a} | {w for v in VERBS for w in v}
    letters = "abcdefghijklmnopqrstuvwxyzçèéêà"
    pieces = {"</s>": 0.0, "<unk>": 0.0, U: -2.0, ".": -2.0, ",": -2.0}
    for c in letters:  # spelling an unknown word costs far more than any known one
        pieces[c], pieces[U + c] = -8.0, -9.0
    for w in sorted(words):
        pieces[U + w] = -3.0
    pieces["<pad>"] = 0.0  # Marian: <pad> is the last id and the decoder's start
    return list(pieces.items())


def encode(text, ids):
    """The toy texts hold only known words and a final '.': one piece per word, as the Unigram model segments them."""
    out = [ids[U + w] for w in text[:-1].split()]
    return out + [ids["."]]


def write_tokenizer(out, vocab):
    V = len(vocab)
    specials = [0, 1, V - 1]
    added = [{"id": i, "content": vocab[i][0], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in specials]
    metaspace = {"type": "Metaspace", "replacement": U, "add_prefix_space": True, "prepend_scheme": "always",
                 "split": True}
    post = {"type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [0], "tokens": ["</s>"]}}}
    # lower-cased first: "The cat" reads as "the cat" (the toy texts are lower case, the vocabulary too)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "Lowercase"},
           "pre_tokenizer": metaspace, "post_processor": post, "decoder": metaspace,
           "model": {"type": "Unigram", "unk_id": 1, "vocab": [[p, s] for p, s in vocab], "byte_fallback": False}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "tokenizer_class": "MarianTokenizer"}, f, indent=1)


# --------------------------------------------------------------------------------------------------
# The model: HF Marian's maths; module attributes named so that state_dict() keys are HF's tensor names
# --------------------------------------------------------------------------------------------------
def make_model(V, d, layers, heads, ff):
    nn = torch.nn

    def attention():
        return node(q_proj=nn.Linear(d, d), k_proj=nn.Linear(d, d), v_proj=nn.Linear(d, d), out_proj=nn.Linear(d, d))

    def layer(cross):
        parts = dict(self_attn=attention(), self_attn_layer_norm=nn.LayerNorm(d), fc1=nn.Linear(d, ff),
                     fc2=nn.Linear(ff, d), final_layer_norm=nn.LayerNorm(d))
        if cross:
            parts.update(encoder_attn=attention(), encoder_attn_layer_norm=nn.LayerNorm(d))
        return node(**parts)

    model = node(model=node(shared=nn.Embedding(V, d),
                            encoder=node(layers=nn.ModuleList([layer(False) for _ in range(layers)])),
                            decoder=node(layers=nn.ModuleList([layer(True) for _ in range(layers)]))))
    model.register_buffer("final_logits_bias", torch.zeros(1, V))  # Marian's are zeros until fine-tuned
    model.heads = heads
    for name, p in model.named_parameters():  # HF's init: N(0, 0.02) weights, zero biases
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    return model


def sinusoids(n, d):
    """Marian's fixed positions: sin(t / 10000^(2k/d)) in the first half of the columns, cos in the second."""
    half = (d + 1) // 2
    t = torch.arange(n, dtype=torch.float64)[:, None]
    k = torch.arange(half, dtype=torch.float64)[None, :]
    angle = t / torch.pow(10000.0, 2 * k / d)
    return torch.cat([torch.sin(angle), torch.cos(angle)[:, : d - half]], 1).float()


def attend(a, x, mem, allowed, heads):
    """Multi-head attention of x's queries over mem's keys and values: (output [B, Tq, d], pattern [B, H, Tq, Tk])."""
    B, Tq, d = x.shape
    Tk, dh = mem.shape[1], d // heads
    q = a.q_proj(x).view(B, Tq, heads, dh).transpose(1, 2)
    k = a.k_proj(mem).view(B, Tk, heads, dh).transpose(1, 2)
    v = a.v_proj(mem).view(B, Tk, heads, dh).transpose(1, 2)
    p = ((q @ k.transpose(-2, -1)) / math.sqrt(dh)).masked_fill(~allowed, float("-inf")).softmax(-1)
    return a.out_proj((p @ v).transpose(1, 2).reshape(B, Tq, d)), p


def forward(model, src, tgt, pad, keep_cross=False):
    """Logits [B, T, V] of the decoder reading tgt (decoder start first) over the source src; Post-LN as Marian."""
    F = torch.nn.functional
    m = model.model
    E = m.shared.weight
    d, H = E.shape[1], model.heads
    pe = sinusoids(max(src.shape[1], tgt.shape[1]), d)
    src_ok = (src != pad)[:, None, None, :]
    x = F.embedding(src, E) * math.sqrt(d) + pe[: src.shape[1]]
    for L in m.encoder.layers:
        x = L.self_attn_layer_norm(x + attend(L.self_attn, x, x, src_ok, H)[0])
        x = L.final_layer_norm(x + L.fc2(F.silu(L.fc1(x))))
    T = tgt.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
    y = F.embedding(tgt, E) * math.sqrt(d) + pe[:T]
    cross = []
    for L in m.decoder.layers:
        y = L.self_attn_layer_norm(y + attend(L.self_attn, y, y, causal, H)[0])
        c, p = attend(L.encoder_attn, y, x, src_ok, H)
        cross.append(p)
        y = L.encoder_attn_layer_norm(y + c)
        y = L.final_layer_norm(y + L.fc2(F.silu(L.fc1(y))))
    logits = y @ E.t() + model.final_logits_bias
    return (logits, cross) if keep_cross else logits


# --------------------------------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------------------------------
def batch_of(pairs, ids, eos, pad):
    """Source ids (text </s>), decoder input (start = <pad>, then the target) and labels (target </s>), padded."""
    src = [encode(e, ids) + [eos] for e, _, _ in pairs]
    tgt = [encode(f, ids) for _, f, _ in pairs]
    S, T = max(map(len, src)), max(map(len, tgt)) + 1
    s = torch.full((len(pairs), S), pad)
    inp = torch.full((len(pairs), T), pad)
    lab = torch.full((len(pairs), T), -100)
    for i, (a, b) in enumerate(zip(src, tgt)):
        s[i, : len(a)] = torch.tensor(a)
        inp[i, : len(b) + 1] = torch.tensor([pad] + b)
        lab[i, : len(b) + 1] = torch.tensor(b + [eos])
    return s, inp, lab


def train(model, ids, eos, pad, steps, batch, lr, seed):
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    t0 = time.time()
    for step in range(steps):
        rate = set_lr(opt, lr, step, steps)
        src, inp, lab = batch_of([sentence(rng) for _ in range(batch)], ids, eos, pad)
        logits = forward(model, src, inp, pad)
        loss = descend(opt, model, torch.nn.functional.cross_entropy(logits.flatten(0, 1), lab.flatten(), ignore_index=-100))
        if step % 250 == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {loss:.4f}  lr {rate:.2e}  {time.time() - t0:4.0f} s", flush=True)


@torch.no_grad()
def translate(model, src_ids, eos, pad, max_len=40):
    """Greedy decoding of one source (its ids, </s> included): the target ids, </s> not kept."""
    src = torch.tensor([src_ids])
    out = [pad]
    for _ in range(max_len):
        nxt = int(forward(model, src, torch.tensor([out]), pad)[0, -1].argmax())
        if nxt == eos:
            break
        out.append(nxt)
    return out[1:]


@torch.no_grad()
def evaluate(model, ids, vocab, eos, pad, n, seed):
    """Exact-match accuracy of greedy translations of n unseen sentences, and the share of target words whose
    cross-attention, averaged over heads and layers, peaks on the English word they translate (gold alignment
    from the grammar). Row t of the decoder writes target word t (its input is the word before it)."""
    rng = random.Random(seed)
    exact, hit, words = 0, 0, 0
    for _ in range(n):
        en, fr, align = sentence(rng)
        src = encode(en, ids) + [eos]
        want = encode(fr, ids)
        exact += translate(model, src, eos, pad) == want
        _, cross = forward(model, torch.tensor([src]), torch.tensor([[pad] + want]), pad, keep_cross=True)
        avg = torch.stack([c[0].mean(0) for c in cross]).mean(0)  # [T][S]
        for t, j in enumerate(align):  # the final '.' (row len(align)) aligns to the source's '.': not counted
            hit += int(avg[t].argmax()) == j
            words += 1
    return exact / n, hit / words


def export(model, args, vocab, out):
    os.makedirs(out, exist_ok=True)
    V = len(vocab)
    write_safetensors(os.path.join(out, "model.safetensors"),
                      {k: v.detach().float().numpy() for k, v in model.state_dict().items()})
    config = {"model_type": "marian", "architectures": ["MarianMTModel"], "is_encoder_decoder": True,
              "d_model": args.d_model, "encoder_layers": args.layers, "decoder_layers": args.layers,
              "encoder_attention_heads": args.heads, "decoder_attention_heads": args.heads,
              "encoder_ffn_dim": args.ffn, "decoder_ffn_dim": args.ffn, "vocab_size": V, "decoder_vocab_size": V,
              "max_position_embeddings": 64, "activation_function": "swish", "scale_embedding": True,
              "static_position_embeddings": True, "normalize_before": False, "normalize_embedding": False,
              "add_final_layer_norm": False, "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
              "pad_token_id": V - 1, "eos_token_id": 0, "decoder_start_token_id": V - 1, "forced_eos_token_id": 0,
              "bos_token_id": 0, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0,
              "init_std": 0.02}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_tokenizer(out, vocab)


@torch.no_grad()
def time_opus_shape(threads):
    """docs/performance.md's PyTorch anchor: this file's plain-torch Marian at opus-mt-en-de's shape (6 + 6 layers, d 512,
    8 heads, ff 2048, 58101 pieces), random weights, source and target of T tokens, logits at every position."""
    torch.set_num_threads(threads)
    model = make_model(58101, 512, 6, 8, 2048).eval()
    pad = 58100
    g = torch.Generator().manual_seed(1)
    print(f"plain-torch Marian, opus-mt shape, {threads} threads, torch {torch.__version__}; median (min) of 10 in ms:")
    with torch.inference_mode():
        for T in (16, 64, 256):
            src = torch.randint(0, pad, (1, T), generator=g)
            tgt = torch.randint(0, pad, (1, T), generator=g)
            times = []
            for r in range(11):  # the first warms up
                t0 = time.perf_counter()
                forward(model, src, tgt, pad, keep_cross=True)
                if r:
                    times.append(1000 * (time.perf_counter() - t0))
            times.sort()
            print(f"  T {T:4d}: {(times[4] + times[5]) / 2:8.2f} ({times[0]:.2f})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="/tmp/marian_toy", help="model folder (default /tmp/marian_toy)")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2, help="encoder layers, and as many decoder layers")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time-opus-shape", action="store_true",
                    help="train nothing: time this file's torch forward at opus-mt-en-de's shape (with --threads)")
    args = ap.parse_args()
    if args.time_opus_shape:
        time_opus_shape(args.threads)
        return

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    vocab = vocabulary()
    ids = {p: i for i, (p, _) in enumerate(vocab)}
    eos, pad = ids["</s>"], ids["<pad>"]
    model = make_model(len(vocab), args.d_model, args.layers, args.heads, args.ffn)
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters, vocabulary {len(vocab)}", flush=True)
    t0 = time.time()
    train(model, ids, eos, pad, args.steps, args.batch, args.lr, args.seed)
    print(f"training: {time.time() - t0:.0f} s", flush=True)
    exact, aligned = evaluate(model, ids, vocab, eos, pad, 300, args.seed + 1000)  # other seed: unseen sentences
    print(f"unseen sentences translated exactly: {exact:.3f}; target words whose averaged cross-attention peaks on "
          f"their English word: {aligned:.3f}")
    export(model, args, vocab, args.out)
    print(f"wrote {args.out}; for example:")
    rng = random.Random(args.seed + 2000)
    for _ in range(4):
        en, fr, _ = sentence(rng)
        got = translate(model, encode(en, ids) + [eos], eos, pad)
        text = "".join(vocab[i][0] for i in got).replace(U, " ").strip()
        print(f"  {en}  ->  {text}" + ("" if text == fr else f"   (want {fr})"))


if __name__ == "__main__":
    main()
