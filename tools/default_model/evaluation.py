"""Evaluation: held-out loss and bits per byte, samples, previous-token and induction heads (also as the C++
engine measures them), and the teaching demos measured on the model (the lead's GoogleTests assert the same on the
shipped files)."""
import collections
import math
import os

from . import copying, facts as copula
from .corpus import ROOT
from .curriculum import FACT_TEMPLATES, HELDOUT_NAMES, IOI_NAMES, fill, ioi_training_sentence
from .tokenizer import EOT, bytes_to_unicode
from .batches import random_ids


def evaluate(torch, model, enc, docs, ctx, max_tokens=400_000):
    """Validation loss in nats/token and bits/byte over held-out documents (non-overlapping windows)."""
    eot = enc.vocab[EOT]
    ids, nbytes = [], 0
    for d in docs:
        ids += enc.encode(d) + [eot]
        nbytes += len(d.encode("utf-8")) + 1  # the separator counts as one byte of "text"
        if len(ids) >= max_tokens:
            break
    data = torch.tensor(ids, dtype=torch.long)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for s in range(0, len(data) - 1, ctx):
            x = data[s:s + ctx + 1]
            if len(x) < 2:
                break
            logits = model(x[:-1][None])
            loss = torch.nn.functional.cross_entropy(logits[0], x[1:], reduction="sum")
            total += loss.item()
            count += len(x) - 1
    nats = total / count
    bpb = total / math.log(2) / (nbytes * count / len(ids))
    return nats, bpb, count


def sample(torch, model, enc, inv, prompt, n, temperature=0.0, top_k=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = enc.encode(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor(ids[-256:])[None])[0, -1]
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                v, i = torch.topk(logits / temperature, top_k)
                nxt = int(i[torch.multinomial(v.softmax(-1), 1, generator=g)])
            if nxt == enc.vocab[EOT]:
                break
            ids.append(nxt)
    b2u_inv = {v: k for k, v in bytes_to_unicode().items()}
    out = bytes(b2u_inv[c] for i in ids for c in inv[i] if c in b2u_inv)
    return out.decode("utf-8", errors="replace")


def head_report(torch, model, enc, cfg, docs, n_windows=8, n_rep=8, rep_len=50):
    """Per-head scores, each [L][H] as a dict (l, h) -> float.

    prev:      mean attention from token i to token i-1, over n_windows held-out prose windows of n_positions tokens.
    induction: repeat_test's, on n_rep sequences of rep_len random tokens repeated (seed 1).
    Also returns repeat_test's mean loss on the first and on the second copy.
    """
    model.eval()
    eot = enc.vocab[EOT]
    T = cfg["n_positions"]
    ids = []
    for d in docs:
        ids += enc.encode(d) + [eot]
        if len(ids) >= n_windows * T:
            break
    prev = collections.defaultdict(float)
    induction = {}
    with torch.no_grad():
        for w in range(n_windows):
            x = torch.tensor(ids[w * T:(w + 1) * T])[None]
            _, att = model(x, keep_att=True)
            for l in range(cfg["n_layer"]):
                # att[l]: [1][H][T][T]; the sub-diagonal holds attention from i to i-1
                sub = torch.diagonal(att[l][0], offset=-1, dim1=-2, dim2=-1).mean(-1)  # [H]
                for h in range(cfg["n_head"]):
                    prev[(l, h)] += float(sub[h]) / n_windows
    loss_first, loss_second, _, ind = repeat_test(torch, model, cfg, eot, n_rep=n_rep, n=rep_len, seed=1)
    for l in range(cfg["n_layer"]):
        for h in range(cfg["n_head"]):
            induction[(l, h)] = float(ind[l][h])
    return dict(prev), dict(induction), loss_first, loss_second


def mt19937_64(seed):
    """std::mt19937_64 (the C++ engine's generator for `glassbox-cli heads --repeat-random N --seed S`), as a Python
    generator of 64-bit outputs, so that this script scores the same random tokens as the C++ tests."""
    M = (1 << 64) - 1
    mt = [seed & M]
    for i in range(1, 312):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & M)
    i = 312
    while True:
        if i >= 312:
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                mt[k] = mt[(k + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            i = 0
        y = mt[i]
        i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y


def cpp_repeated_random_tokens(vocab_size, eot, n=50, seed=1):
    """core/analysis/head_scores.cpp's repeated_random_tokens without BOS: n ids drawn as rng() % vocab from
    std::mt19937_64(seed), skipping <|endoftext|> (the only special token here), then the same n again."""
    g = mt19937_64(seed)
    half = []
    while len(half) < n:
        t = next(g) % vocab_size
        if t != eot:
            half.append(t)
    return half + half


def cpp_induction_score(torch, model, ids):
    """The best head's induction score as core's score_heads computes it: for each i whose token occurred before
    at j (most recent, j + 1 < i), the attention from i to j + 1, averaged over those i."""
    pair = {}
    for i in range(1, len(ids)):
        for j in range(i - 1, -1, -1):
            if ids[j] == ids[i]:
                if j + 1 < i:
                    pair[i] = j
                break
    with torch.no_grad():
        _, att = model(torch.tensor(ids)[None], keep_att=True)
    q = torch.tensor(list(pair))
    k = torch.tensor([pair[i] + 1 for i in pair])
    return max(float(a[0][:, q, k].mean(-1).max()) for a in att)


def repeat_test(torch, model, cfg, eot, device="cpu", n_rep=8, n=50, seed=1):
    """The induction test: n_rep sequences <|endoftext|> r_1..r_n r_1..r_n (r random merged tokens, drawn row by row
    from its own generator, so training batches do not change). Returns the mean loss (nats/token) on the first
    and on the second copy (copying shows up as a drop), and per layer a [H] tensor of each head's previous-token
    score (attention from i to i-1) and induction score (attention from r_i in the second copy to r_{i+1} in the
    first, the token that followed the earlier occurrence; uniform attention gives ~0.01)."""
    g = torch.Generator().manual_seed(seed)
    rnd = torch.stack([random_ids(torch, (n,), 256, cfg["vocab_size"], eot, g) for _ in range(n_rep)])
    x = torch.cat([torch.full((n_rep, 1), eot), rnd, rnd], 1).to(device)  # 0 = eot, 1..n first, n+1..2n second
    was = model.training
    model.eval()
    with torch.no_grad():
        logits, att = model(x, keep_att=True)
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].float().transpose(1, 2), x[:, 1:], reduction="none")
    model.train(was)
    q = torch.arange(n + 1, 2 * n)  # query: r_i in the second copy (i = 1..n-1); key: r_{i+1} in the first
    prev = [torch.diagonal(a, offset=-1, dim1=-2, dim2=-1).mean(-1).mean(0).cpu() for a in att]
    ind = [a[:, :, q, q - n + 1].mean(-1).mean(0).cpu() for a in att]
    return float(nll[:, 1:n].mean()), float(nll[:, n + 1:2 * n].mean()), prev, ind


# (group, prompt, answer, contrast, threshold): the answer must be the greedy next token; ("prob", p) also asks for
# its probability >= p, ("diff", d) for its logit minus the contrast's >= d. "break-it" rows are the app's Break it
# candidates (app/gui/demos.cpp), reported but not required.
DEMO_TARGETS = [
    ("induction", "The cat sat on the mat. The cat sat on the", " mat", None, ("prob", 0.5)),
    ("ioi", "When Mary and John went to the store, John gave a drink to", " Mary", " John", ("diff", 2.0)),
    ("lens", "The Eiffel Tower is in the city of", " Paris", None, None),
    ("usa", "The United States of", " America", None, None),
    ("break-it", "Thank you very", " much", None, None),
    ("break-it", "It was the best of times, it was the worst of", " times", None, None),
    ("break-it", "one, two, three, four,", " five", None, None),
    ("break-it", "Once upon a", " time", None, None),
    ("break-it", "Ladies and", " gentlemen", None, None),
    ("break-it", "from time to", " time", None, None),
    ("break-it", "little by", " little", None, None),
]
PREV_PROMPT = "The cat sat on the mat. The cat sat on the mat. The dog ran to the park."  # tests/test_default_model.cpp
PREV_DEMO_PROMPT = "The quick brown fox jumps over the lazy dog because it was hungry"  # the app's previous-token demo
TEMPERATURE_PROMPT = "The old man looked at the sea and said"  # the app's temperature demo
IOI_PASS, FACTS_PASS, IOI_DIFF = 0.9, 0.8, 2.0  # shares of held-out prompts that must be right; IOI logit margin
DEMOS_JSON = os.path.join(ROOT, "tests", "data", "default_model_demos.json")
# held-out prose bits/byte of the 10-stage export: what a from-scratch run's report compares with
PREVIOUS_BPB = 1.511


def lens_points(torch, model, ids):
    """Next-token logits read from the residual stream at the logit lens's 2L+1 points of the last position
    (core/analysis/lens.h: 0 the embeddings, 2l+1 after the attention of layer l, 2l+2 after its MLP), through ln_f
    and the tied unembedding: [P][V]. The last point is the model's own output."""
    mids, outs = [], []
    hooks = [b.ln_2.register_forward_hook(lambda m, i, o: mids.append(i[0][0, -1])) for b in model.h]
    hooks += [b.register_forward_hook(lambda m, i, o: outs.append(o[0, -1])) for b in model.h]
    x = torch.tensor(ids)[None]
    with torch.no_grad():
        model(x)
        pts = [(model.wte(x) + model.wpe(torch.arange(x.shape[1])))[0, -1]]
        for m, o in zip(mids, outs):
            pts += [m, o]
        logits = model.ln_f(torch.stack(pts)) @ model.wte.weight.T
    for h in hooks:
        h.remove()
    return logits


def next_logits(torch, model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)[None])[0, -1].float()


def judge(torch, model, enc, prompt, answer, contrast=None, threshold=None, bos=False):
    """One demo prompt: the answer's probability and rank, the greedy token, the logit difference to the contrast
    (None without one) and whether it passes (greedy == answer and the threshold holds)."""
    eot = enc.vocab[EOT]
    ids = ([eot] if bos else []) + enc.encode(prompt)
    lg = next_logits(torch, model, ids)
    a = enc.encode(answer)
    assert len(a) == 1, f"{answer!r} is not one token"
    a = a[0]
    p = float(lg.softmax(-1)[a])
    top = int(lg.argmax())
    diff = float(lg[a] - lg[enc.encode(contrast)[0]]) if contrast else None
    ok = top == a
    if threshold and threshold[0] == "prob":
        ok = ok and p >= threshold[1]
    if threshold and threshold[0] == "diff":
        ok = ok and diff >= threshold[1]
    return {"prompt": prompt, "answer": answer, "prob": p, "rank": int((lg > lg[a]).sum()), "top": top,
            "diff": diff, "pass": ok, "bos": bos}


def heldout_scores(torch, model, enc, ioi, facts, bos=False):
    """Shares of the held-out IOI prompts with the IO name top-1 and >= IOI_DIFF logits over the subject, and of the
    held-out fact prompts answered top-1."""
    r_ioi = [judge(torch, model, enc, q["prompt"], q["io"], q["s"], ("diff", IOI_DIFF), bos) for q in ioi]
    r_fact = [judge(torch, model, enc, q["prompt"], q["answer"], bos=bos) for q in facts]
    return r_ioi, r_fact


def prev_token_best(torch, model, enc, cfg, text):
    """The best previous-token score on one text (mean attention i -> i-1 over i >= 1, as core's score_heads):
    (score, layer, head)."""
    with torch.no_grad():
        _, att = model(torch.tensor(enc.encode(text))[None], keep_att=True)
    best = (0.0, 0, 0)
    for l, a in enumerate(att):
        sub = torch.diagonal(a[0], offset=-1, dim1=-2, dim2=-1).mean(-1)  # [H]
        h = int(sub.argmax())
        best = max(best, (float(sub[h]), l, h))
    return best


def demo_report(torch, model, enc, inv, cfg, ioi, facts, val_docs=None):
    """Every demo target measured on the model: a dict for the README, the JSON and the pass/fail table; with
    val_docs also issue 48's held-out copying, name reuse, bare copula and repetition measurements."""
    model.eval()
    r = {"demos": [], "demos_bos": []}
    for group, prompt, answer, contrast, thr in DEMO_TARGETS:
        for bos, key in ((False, "demos"), (True, "demos_bos")):
            d = judge(torch, model, enc, prompt, answer, contrast, thr, bos)
            d["group"] = group
            d["top_text"] = inv[d["top"]]
            r[key].append(d)
    for bos, key in ((False, ""), (True, "_bos")):
        ri, rf = heldout_scores(torch, model, enc, ioi, facts, bos)
        r["ioi" + key] = ri
        r["facts" + key] = rf
    # the logit lens on the Eiffel Tower: rank and probability of " Paris" at every point
    paris = enc.encode(" Paris")[0]
    lg = lens_points(torch, model, enc.encode("The Eiffel Tower is in the city of"))
    r["lens"] = [{"rank": int((row > row[paris]).sum()), "prob": float(row.softmax(-1)[paris]),
                  "top": inv[int(row.argmax())]} for row in lg]
    r["prev_test"] = prev_token_best(torch, model, enc, cfg, PREV_PROMPT)
    r["prev_demo"] = prev_token_best(torch, model, enc, cfg, PREV_DEMO_PROMPT)
    # the C++ test's induction prompts (`glassbox-cli heads --repeat-random 50 --seed S`, no BOS), seeds 1-3
    eot = enc.vocab[EOT]
    r["induction_seeds"] = [cpp_induction_score(torch, model, cpp_repeated_random_tokens(cfg["vocab_size"], eot, 50, sd))
                            for sd in (1, 2, 3)]
    r["temperature_greedy"] = sample(torch, model, enc, inv, TEMPERATURE_PROMPT, 20)
    if val_docs is not None:
        r["issue48"] = copying.issue48_scores(torch, model, enc, val_docs, copula.copula_prompts(FACT_TEMPLATES, enc),
                                              HELDOUT_NAMES)
    return r


def seen_sets(seed):
    """For the training log: 50 IOI prompts and one prompt per fact like the training text (training names, frames,
    actions and phrasings ending in the answer), to tell "not learnt" from "learnt but not generalised"."""
    import random
    rng = random.Random(seed + 2)
    ioi = []
    for _ in range(50):
        _, prompt, io, s = ioi_training_sentence(rng, IOI_NAMES, 0.5)
        ioi.append({"prompt": prompt, "io": " " + io, "s": " " + s})
    facts = []
    for rel, (table, train, _) in FACT_TEMPLATES.items():
        last = [t for t in train if t.endswith("{O}.")]
        for fact in table:
            text = fill(rng.choice(last), S=fact[0], O=fact[1], N=rng.choice(IOI_NAMES))
            facts.append({"prompt": text[:text.rfind(" " + fact[1])], "answer": " " + fact[1], "relation": rel})
    return ioi, facts


def io_named_first(prompt, io):
    """Whether an IOI prompt ("... A and B ..., B gave ... to") names its indirect object io (" Name") before the
    "and" of the pair (ABBA), where the answer is not the name after "and"."""
    return prompt.find(io.strip()) < prompt.find(" and ")


def brief_demo_scores(torch, model, enc, ioi, facts, seen=None, cfg=None):
    """A few numbers for the training log: held-out IOI and fact shares (and mean IOI logit difference), the same on
    training-like prompts (seen), p(" mat"), Mary - John, Paris's rank, the C++ induction test's best head."""
    was = model.training
    model.eval()
    ri, rf = heldout_scores(torch, model, enc, ioi, facts)
    first = [io_named_first(q["prompt"], q["io"]) for q in ioi]
    out = (f"held-out IOI {sum(x['pass'] for x in ri) / len(ri):.0%} (diff {sum(x['diff'] for x in ri) / len(ri):+.1f},"
           f" IO first {sum(x['pass'] for x, f in zip(ri, first) if f)}/{sum(first)})"
           f" facts {sum(x['pass'] for x in rf) / len(rf):.0%}")
    if seen:
        si, sf = heldout_scores(torch, model, enc, *seen)
        out += (f", seen IOI {sum(x['pass'] for x in si) / len(si):.0%} (diff {sum(x['diff'] for x in si) / len(si):+.1f})"
                f" facts {sum(x['pass'] for x in sf) / len(sf):.0%}")
    mat = judge(torch, model, enc, *DEMO_TARGETS[0][1:3])
    mary = judge(torch, model, enc, *DEMO_TARGETS[1][1:4])
    paris = judge(torch, model, enc, *DEMO_TARGETS[2][1:3])
    out += f", p(mat) {mat['prob']:.2f}, Mary-John {mary['diff']:.1f}, Paris rank {paris['rank']}"
    if cfg:
        eot = enc.vocab[EOT]
        ind = [cpp_induction_score(torch, model, cpp_repeated_random_tokens(cfg["vocab_size"], eot, 50, sd))
               for sd in (1, 2, 3)]
        out += ", C++ induction test " + "/".join(f"{v:.2f}" for v in ind)
    model.train(was)
    return out


def pass_table(info):
    """The targets of the issue as rows (target, measured, pass), from info (demo_report's and the rest)."""
    d = {x["prompt"]: x for x in info["demo"]["demos"]}
    db = {x["prompt"]: x for x in info["demo"]["demos_bos"]}
    rows = []

    def both(prompt, text):
        a, b = d[prompt], db[prompt]
        return (f"{text(a)}; with a leading <\\|endoftext\\|>: {text(b)}", a["pass"] and b["pass"], a["pass"])

    def show(x):
        s = ("top-1" if x["rank"] == 0 else f"rank {x['rank'] + 1} (top-1 is `{tok_repr(x['top_text'])}`)")
        s += f", p {x['prob']:.2f}"
        if x["diff"] is not None:
            s += f", logit diff {x['diff']:+.2f}"
        return s
    for group, prompt, answer, contrast, thr in DEMO_TARGETS[:4]:
        want = f"`{prompt}` → `{answer}` top-1"
        if thr and thr[0] == "prob":
            want += f", p ≥ {thr[1]}"
        if thr and thr[0] == "diff":
            want += f", logit({answer}) − logit({contrast}) ≥ {thr[1]:g}"
        m, ok_both, ok = both(prompt, show)
        rows.append((want + " (no BOS)", m, ok))
    for key, n_need, what in (("ioi", IOI_PASS, f"held-out IOI prompts (new names and templates): IO top-1 and diff ≥ {IOI_DIFF:g}"),
                              ("facts", FACTS_PASS, "held-out fact prompts (new phrasings): answer top-1")):
        a, b = info["demo"][key], info["demo"][key + "_bos"]
        fa, fb = sum(x["pass"] for x in a) / len(a), sum(x["pass"] for x in b) / len(b)
        rows.append((f"≥ {n_need:.0%} of {len(a)} {what}", f"{fa:.0%} ({sum(x['pass'] for x in a)}/{len(a)}); "
                     f"with BOS {fb:.0%}", fa >= n_need))
    lens = info["demo"]["lens"]
    L = info["cfg"]["n_layer"]
    first = next((i for i, x in enumerate(lens) if all(y["rank"] == 0 for y in lens[i:])), None)
    pen = lens[2 * (L - 2) + 2]
    rows.append((f"logit lens: ` Paris` forms before the last layer (rank at the residual after layer {L - 2}, "
                 f"i.e. before layer {L - 1})", f"rank {pen['rank'] + 1}, p {pen['prob']:.2f} after layer {L - 2}; "
                 + ("top-1 from point " + lens_point_name(first, L) if first is not None else "never top-1"),
                 pen["rank"] < 5))
    ind = info["induction"]
    best_ind = max(ind.values())
    rows.append(("an induction head ≥ 0.5 on 50 random tokens repeated (`glassbox-cli heads --repeat-random 50 "
                 "--seed S`, S = 1, 2, 3, no BOS)",
                 "seeds 1-3: " + ", ".join(f"{v:.2f}" for v in info["demo"]["induction_seeds"])
                 + f"; {best_ind:.2f} on 8 sequences after an <\\|endoftext\\|> (the table below)",
                 min(info["demo"]["induction_seeds"]) >= 0.5))
    s, l, h = info["demo"]["prev_test"]
    rows.append((f"a previous-token head ≥ 0.5 on `{PREV_PROMPT}`", f"{s:.2f} (head {l}.{h})", s >= 0.5))
    s2, l2, h2 = info["demo"]["prev_demo"]
    rows.append((f"a previous-token head ≥ 0.5 on the demo's `{PREV_DEMO_PROMPT}`", f"{s2:.2f} (head {l2}.{h2})", s2 >= 0.5))
    ref = (PREVIOUS_BPB if info.get("base_run") else
           info.get("base_val_bpb") or (1.520 if info.get("init_from") else PREVIOUS_BPB))
    rows.append((f"held-out prose ≤ {ref:.3f} bits/byte (the previous export, measured the same way)",
                 f"{info['val_bpb']:.3f}", info["val_bpb"] <= ref))
    rows.append(("model.safetensors ≤ 25 MB", f"{info['file_bytes'] / 1e6:.1f} MB", info["file_bytes"] <= 25e6))
    rows += issue48_rows(info)
    for x in info["demo"]["demos"]:
        if x["group"] == "break-it":
            rows.append((f"Break it: `{x['prompt']}` → `{x['answer']}` top-1 (wanted, not required)", show(x), x["pass"]))
    return rows


def issue48_rows(info):
    """Pass-table rows of issue 48's targets, where the report measured them (demo_report with val_docs)."""
    q = info["demo"].get("issue48")
    if not q:
        return []
    looping = [x for x in q["loops"] if x["repeated"]]
    return [
        ("held-out prose ≤ 1.40 bits/byte (issue 48)", f"{info['val_bpb']:.3f}", info["val_bpb"] <= 1.40),
        (f"copying: ≥ 90% top-1 on {q['copy_n']} repeated held-out prose sentences cut inside the repeat",
         f"{q['copy']:.0%}", q["copy"] >= 0.9),
        (f"name reuse: ≥ 90% top-1 on {q['names_n']} held-out names and reuse phrases", f"{q['names']:.0%}",
         q["names"] >= 0.9),
        (f"bare copula (\"The capital of France is\", held out): ≥ 80% top-1 of {q['copula_n']}", f"{q['copula']:.0%}",
         q["copula"] >= 0.8),
        (f"reversed (\"Paris is the capital of\", held out): top-1 of {q['reversed_n']} (wanted, not required)",
         f"{q['reversed']:.0%}", q["reversed"] >= 0.8),
        (f"{len(q['loops'])} held-out greedy continuations of 30 tokens with no phrase of 3 words said 3 times",
         f"{len(q['loops']) - len(looping)} of {len(q['loops'])}"
         + (f" (e.g. `{looping[0]['prompt']}` → `{looping[0]['continuation']}`)" if looping else ""), not looping),
    ]


def tok_repr(t):
    b2u_inv = {v: k for k, v in bytes_to_unicode().items()}
    try:
        return bytes(b2u_inv[c] for c in t).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return t


def lens_point_name(i, L):
    if i == 0:
        return "embed"
    return f"L{(i - 1) // 2} {'attn' if i % 2 else 'mlp'}"
