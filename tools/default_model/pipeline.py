"""The command's stages in order: corpus, curriculum, tokenizer, model, training, export, measurements, report."""
import glob
import json
import math
import os
import re as stdre
import sys
import time
import types

from . import copying, curriculum, facts as copula, training
from .corpus import CACHE, OUT, build_corpus, ensure_dependencies
from .curriculum import (BPE_CURRICULUM_DOCS, BPE_KINDS, FACT_TEMPLATES, HELDOUT_NAMES, IOI_NAMES,
                         check_heldout, curriculum_documents, heldout_sets, open_vocab, parse_mix, prose_leads,
                         use_more_names, use_more_templates, word_names)
from .tokenizer import (EOT, Encoder, extend_tokenizer, forced_tokens, init_words, read_tokenizer,
                        train_bpe_with_words)
from .batches import batch_fractions, make_batch
from .model import grow_embeddings, make_model
from .export import export, load_exported
from .evaluation import (brief_demo_scores, demo_report, evaluate, head_report, pass_table, repeat_test, sample,
                         seen_sets, tok_repr)
from .report import write_demos_json, write_readme
from .training import cpu_has_bf16, cpu_name


def train_hooks(torch, args, cfg, device, data, cur, cur_starts, cur_w, cur_s, eot, enc, sets, val_docs):
    """What training.train needs from this script: the batch of a step (drawn with the step's generator), the
    induction line of the log and the held-out numbers of the log (held-out IOI and facts, their training-like
    twins, the demos, bits per byte on the first 30,000 validation tokens, copying of repeated validation sentences,
    reuse of a held-out name, the held-out bare copula and reversed facts)."""
    ioi_heldout, facts_heldout, seen = sets
    copies = copying.copy_prompts(enc, val_docs, 60, args.seed)
    names = copying.name_prompts(enc, val_docs, HELDOUT_NAMES, 30, args.seed)
    cop = [(enc.encode(q["prompt"]), enc.encode(q["answer"])[0])
           for q in copula.copula_prompts(FACT_TEMPLATES, enc)]

    def make(g, step):
        fr = batch_fractions(args, step)
        return make_batch(torch, data, g, args.batch, args.ctx, fr["repeat"], fr["random"], cfg["vocab_size"], eot,
                          cur, cur_starts, fr["curriculum"], cur_w, cur_s)

    def copy_line(model):
        first, second, prev, ind = repeat_test(torch, model, cfg, eot, device, n_rep=4, seed=7)
        return (f"repeated random tokens {first:.2f} -> {second:.2f}, best prev-token "
                f"{max(float(p.max()) for p in prev):.2f}, induction {max(float(i.max()) for i in ind):.2f}")

    def evaluate_now(model):
        model.cpu()
        line = brief_demo_scores(torch, model, enc, ioi_heldout, facts_heldout, seen, cfg)
        _, bpb, _ = evaluate(torch, model, enc, val_docs, cfg["n_positions"], max_tokens=30_000)
        nums = {"val_bpb_30k": round(bpb, 4), "copy": copying.top1_share(torch, model, copies),
                "names": copying.top1_share(torch, model, names), "copula": copying.top1_share(torch, model, cop)}
        model.to(device)
        return (line + f" | held-out prose {bpb:.3f} bits/byte (30k tokens), copying {nums['copy']:.0%} of "
                f"{len(copies)}, name reuse {nums['names']:.0%} of {len(names)}, bare copula/reversed facts "
                f"{nums['copula']:.0%} of {len(cop)}"), nums

    return types.SimpleNamespace(make_batch=make, copy_line=copy_line, evaluate=evaluate_now)


def start(args):
    """Installs what is missing, seeds torch and numpy and sets torch's threads; returns (torch, npm folder)."""
    nm = ensure_dependencies()
    import numpy as np
    import torch
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(args.threads)
    return torch, nm


def restore_curriculum_flags(args, state_path):
    """--report: the curriculum the exported model was trained on (its counts are in the README)."""
    st = json.load(open(state_path))
    args.more_templates, args.more_names = st.get("more_templates", 0), st.get("more_names", False)
    args.names_outside_ioi = st.get("names_outside_ioi", "train")
    args.ioi_open_frac = st.get("ioi_open_frac", 0.0)


def generate_curriculum(args, seed, cur, word_pool=(), word_frac=0.0):
    """Fills cur.docs and cur.answers with the curriculum of the flags and checks that nothing held out is in it."""
    cur.answers = []
    cur.docs = curriculum_documents(seed, args.curriculum_docs, parse_mix(args.curriculum_mix), cur.answers,
                                    IOI_NAMES + HELDOUT_NAMES if cur.names_elsewhere else IOI_NAMES, word_pool,
                                    word_frac, cur.ov, args.ioi_open_frac, args.names_after_to, cur.leads,
                                    args.ioi_lead_frac, args.ioi_bare_leads, cur.passages)
    check_heldout(cur.docs, cur.ioi_heldout, cur.facts_heldout, cur.answers, cur.names_elsewhere)
    if parse_mix(args.curriculum_mix)["facts2"] > 0:
        copula.check_copula_heldout(cur.docs, copula.copula_prompts(FACT_TEMPLATES, None))


def make_curriculum(args, seed, train_docs):
    """The generated curriculum (docs, and per document its IOI answers), the held-out and seen prompt sets and what
    the curriculum draws from the prose (open vocabulary, sentence openers, passages)."""
    if args.more_templates:
        use_more_templates(args.more_templates)
    if args.more_names:
        use_more_names()
    curriculum.IOI_IO_FIRST = args.ioi_io_first
    cur = types.SimpleNamespace(names_elsewhere=args.names_outside_ioi == "all")
    cur.ov = open_vocab(train_docs) if args.ioi_open_frac > 0 else None
    cur.leads = prose_leads(train_docs) if args.ioi_lead_frac > 0 else []
    if cur.leads:
        print(f"prose openers before {args.ioi_lead_frac:.0%} of the IOI sentences: {len(cur.leads)} "
              f"({', '.join(cur.leads[::max(1, len(cur.leads) // 6)][:6])}, ...)", flush=True)
    if cur.ov:
        ov = cur.ov
        print(f"open-vocabulary IOI in {args.ioi_open_frac:.0%} of the sentences: {len(ov[0])} verbs "
              f"({', '.join(ov[0][::max(1, len(ov[0]) // 6)][:6])}, ...), {len(ov[1])} nouns, {len(ov[2])} clauses",
              flush=True)
    # sentences of the training prose for the copy, names and list documents (no held-out name among them)
    cur.passages = copying.prose_passages(train_docs, stdre.compile(r"\b(" + "|".join(HELDOUT_NAMES) + r")\b"))
    cur.ioi_heldout, cur.facts_heldout = heldout_sets(seed)
    cur.seen = seen_sets(seed)
    generate_curriculum(args, seed, cur)
    print(f"curriculum: {len(cur.docs)} documents, {sum(len(d) for d in cur.docs) / 1e6:.1f} M characters; held "
          f"out: {len(cur.ioi_heldout)} IOI prompts, {len(cur.facts_heldout)} fact prompts", flush=True)
    return cur


def make_tokenizer(args, seed, train_docs, cur):
    """(vocab, merges, forced or appended merges, the base's merges, the appended tokens): the exported tokenizer
    (--report), the --init-from model's grown by appended merges, or a BPE learnt here."""
    if args.report:
        vocab = json.load(open(os.path.join(args.out, "vocab.json"), encoding="utf-8"))
        merges = [tuple(l.rstrip("\n").split(" ")) for l in open(os.path.join(args.out, "merges.txt"), encoding="utf-8")
                  if l.strip() and not l.startswith("#version")]
        return vocab, merges, None, None, None
    if args.init_from:
        base_vocab, base_merges = read_tokenizer(args.init_from)
        vocab, merges, n_forced, new_tokens = extend_tokenizer(base_vocab, base_merges, init_words())
        print(f"tokenizer of {args.init_from}: {len(base_vocab)} tokens, grown to {len(vocab)} by {n_forced} appended "
              f"merges", flush=True)
        return vocab, merges, n_forced, base_merges, new_tokens
    t1 = time.time()
    # the BPE learns from the prose and a sample of the curriculum (its words are frequent there); the words the
    # demos need are then made single tokens by forced merges where the learnt ones do not reach them
    # (the curriculum sample has every kind in equal shares, whatever --curriculum-mix, so the tokenizer is the
    # same for every mix)
    bpe_cur = curriculum_documents(seed, BPE_CURRICULUM_DOCS, parse_mix(",".join(k + ":1" for k in BPE_KINDS)))
    check_heldout(bpe_cur, cur.ioi_heldout, cur.facts_heldout)
    vocab, merges, n_forced = train_bpe_with_words(train_docs + bpe_cur, args.vocab,
                                                   forced_tokens())
    print(f"BPE: {len(vocab)} tokens, {len(merges)} merges of which {n_forced} forced ({time.time() - t1:.0f} s)",
          flush=True)
    return vocab, merges, n_forced, None, None


def use_word_names(args, seed, enc, train_docs, cur):
    """--ioi-word-names: the stand-in names need the tokenizer, so the curriculum is generated again with them;
    returns how many there are."""
    pool = word_names(enc, train_docs)
    generate_curriculum(args, seed, cur, pool, args.ioi_word_names)
    print(f"{len(pool)} capitalised words as stand-in names in {args.ioi_word_names:.0%} of the IOI documents, "
          f"e.g. {', '.join(pool[::max(1, len(pool) // 8)][:8])}", flush=True)
    return len(pool)


def base_run_of(init_from):
    """The state of the from-scratch run that made --init-from, when this script made it (else None)."""
    p = os.path.abspath(init_from) + ".train_state.json"
    if os.path.exists(p):
        st = json.load(open(p))
        if not st.get("init_from"):
            return {k: st.get(k) for k in ("argv", "steps", "train_minutes", "tokens_seen", "cpu", "precision")}
    return None


def reference_bpb(torch, args, cfg, val_docs):
    """The base model's held-out prose bits per byte (--compare-to, else --init-from), measured as this run's model
    will be (same documents); cached by the base's weights (minutes on a busy CPU)."""
    import hashlib
    ref = args.compare_to or args.init_from
    key = hashlib.sha256(open(os.path.join(ref, "model.safetensors"), "rb").read()).hexdigest()[:24]
    bpb_path = os.path.join(CACHE, "base_bpb", key + ".json")
    if os.path.exists(bpb_path):
        base_bpb = json.load(open(bpb_path))["val_bpb"]
    else:
        ref_cfg = json.load(open(os.path.join(ref, "config.json")))
        ref_shape = dict(cfg, vocab_size=ref_cfg["vocab_size"], n_layer=ref_cfg["n_layer"])  # before any growth
        ref_model = make_model(torch, ref_shape)
        load_exported(torch, ref_model, ref_shape, ref)
        _, base_bpb, _ = evaluate(torch, ref_model, Encoder(*read_tokenizer(ref)), val_docs, cfg["n_positions"])
        os.makedirs(os.path.dirname(bpb_path), exist_ok=True)
        json.dump({"val_bpb": base_bpb}, open(bpb_path, "w"))
    print(f"{ref}: validation {base_bpb:.4f} bits/byte", flush=True)
    return base_bpb


def load_base(torch, args, cfg):
    """--init-from: the base model, loaded; cfg and args take its shape, plus --grow-layers blocks."""
    base_file = json.load(open(os.path.join(args.init_from, "config.json")))
    for k, a in (("n_layer", "layers"), ("n_head", "heads"), ("n_embd", "d_model"), ("n_positions", "ctx")):
        cfg[k] = base_file[k]
        setattr(args, a, base_file[k])
    base_cfg = dict(cfg, vocab_size=base_file["vocab_size"])
    cfg["n_layer"] += args.grow_layers
    args.layers = cfg["n_layer"]
    base = make_model(torch, base_cfg)
    load_exported(torch, base, base_cfg, args.init_from)
    return base


def encode_curriculum(enc, cur, eot):
    """The curriculum's tokens (each document followed by <|endoftext|>), where each document starts, and each IOI
    answer's place with its subject's token."""
    cur_ids, starts, answer_pos, answer_subj = [eot], [], [], []
    for i, d in enumerate(cur.docs):
        starts.append(len(cur_ids))
        if cur.answers[i] is None:
            cur_ids += enc.encode(d) + [eot]
            continue
        # sentence by sentence (the same tokens: each sentence after the first starts a pre-token with its
        # space), noting where each indirect object is the next token
        doc_ids = []
        for k, (t, io, subj) in enumerate(cur.answers[i]):
            piece = enc.encode(t if k == 0 else " " + t)
            if io:
                tok = enc.encode(" " + io)[0]
                answer_pos.append(len(cur_ids) + len(doc_ids) + max(j for j, x in enumerate(piece) if x == tok))
                answer_subj.append(enc.encode(" " + subj)[0])
            doc_ids += piece
        if i < 300:
            assert doc_ids == enc.encode(d), d
        cur_ids += doc_ids + [eot]
    return cur_ids, starts, answer_pos, answer_subj


def encode_data(torch, args, enc, inv, eot, train_docs, cur):
    """The training tensors: the prose's tokens, the curriculum's tokens with their loss weights and subjects and
    the window starts; also the token counts and the prose's bytes per token."""
    t1 = time.time()
    ids = []
    for d in train_docs:
        ids += enc.encode(d) + [eot]
    data = torch.tensor(ids, dtype=torch.long)
    cur_ids, starts, answer_pos, answer_subj = encode_curriculum(enc, cur, eot)
    cur_t = torch.tensor(cur_ids, dtype=torch.long)
    # loss weight of each curriculum token as a target: --ioi-answer-weight on the indirect objects, else 1
    cur_w = torch.ones(len(cur_ids))
    cur_w[torch.tensor(answer_pos, dtype=torch.long)] = args.ioi_answer_weight
    # the subject (the repeated name) of each indirect-object answer, at the answer's place; -1 elsewhere
    cur_s = torch.full((len(cur_ids),), -1, dtype=torch.long)
    cur_s[torch.tensor(answer_pos, dtype=torch.long)] = torch.tensor(answer_subj, dtype=torch.long)
    show = [tok_repr("".join(inv[t] for t in cur_ids[p - 6:p])) + " ->" + tok_repr(inv[cur_ids[p]])
            for p in answer_pos[:3]]
    print(f"{len(answer_pos):,} IOI answers in the curriculum (loss weight {args.ioi_answer_weight:g}), e.g. "
          + "; ".join(show), flush=True)
    cur_starts = torch.tensor([s for s in starts if s + args.ctx + 1 <= len(cur_ids)], dtype=torch.long)
    print(f"encoded {len(cur_ids):,} curriculum tokens", flush=True)
    train_bytes = sum(len(d.encode("utf-8")) + 1 for d in train_docs)
    bytes_per_token = train_bytes / len(ids)
    print(f"encoded {len(ids):,} training tokens, {bytes_per_token:.2f} bytes/token ({time.time() - t1:.0f} s)",
          flush=True)
    tensors = (data, cur_t, cur_starts, cur_w, cur_s)
    return tensors, len(ids), len(cur_ids), bytes_per_token


def device_and_precision(torch, args):
    """The device (--device) and the precision (--precision) of the training."""
    # batches are drawn on the CPU generator (same data order everywhere); only the model runs on the device
    device = ("cuda" if args.device == "auto" and torch.cuda.is_available() else
              ("cpu" if args.device == "auto" else args.device))
    # bf16 autocast (fp32 master weights) where the hardware multiplies bf16 natively: 3.7x the fp32 steps per
    # second on 2 AMX cores, 3.4x on 2 AMD Zen 5 cores (AVX-512 BF16); elsewhere fp32. The precision is part of
    # what reproduces a run.
    precision = args.precision
    if precision == "auto":
        precision = "bf16" if device == "cuda" or cpu_has_bf16() else "fp32"
    return device, precision


def optimizer(torch, args, model):
    """AdamW (betas 0.9/0.95, weight decay 0.1 on the matrices)."""
    # no weight decay on biases, LayerNorm gains and (with --pos-init sinusoid) the positions: decay would fade
    # the sinusoids the previous-token heads read
    keep = ("wpe.weight",) if args.pos_init == "sinusoid" else ()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and n not in keep]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or n in keep]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95))


def train_and_export(torch, args, cfg, model, tok, docs, cur, state, t0):
    """Trains the model, exports it to --out and writes the run's state (what --report and the README need);
    returns the state, or None at --stop-at-step (the checkpoint is written, nothing exported). tok: (enc, vocab,
    merges, inv, n_forced); state: what the run knows already (n_word_names, base_bpb, base_run)."""
    enc, vocab, merges, inv, n_forced = tok
    train_docs, val_docs, state_path = docs
    eot = vocab[EOT]
    (data, cur_t, cur_starts, cur_w, cur_s), n_ids, n_cur_ids, bytes_per_token = encode_data(
        torch, args, enc, inv, eot, train_docs, cur)
    device, precision = device_and_precision(torch, args)
    print(f"training on {device}, {precision}", flush=True)
    model.to(device)
    opt = optimizer(torch, args, model)
    run = train_hooks(torch, args, cfg, device, data, cur_t, cur_starts, cur_w, cur_s, eot, enc,
                      (cur.ioi_heldout, cur.facts_heldout, cur.seen), val_docs)
    t_train = time.time()
    done = training.train(torch, run, model, opt, args, cfg, device, precision)
    if done is None:  # --stop-at-step: the checkpoint is written, nothing exported
        return None
    steps_done, recent = done["steps"], done["recent"]
    train_minutes = done["train_s"] / 60  # summed over every session of a resumed run
    model.cpu()
    export(model, cfg, vocab, merges, args.out)
    train_loss = sum(recent) / len(recent)
    info = {"argv": sys.argv[1:],
            "precision": precision, "repeat_frac": args.repeat_frac, "random_frac": args.random_frac,
            "curriculum_frac": args.curriculum_frac, "curriculum_docs": args.curriculum_docs,
            "curriculum_mix": args.curriculum_mix, "pos_init": args.pos_init,
            "early_random_frac": args.early_random_frac, "early_steps": args.early_steps,
            "curriculum_tokens": n_cur_ids, "forced_merges": n_forced,
            "init_from": args.init_from, "base_val_bpb": state["base_bpb"], "warmup": args.warmup,
            "compare_to": args.compare_to or args.init_from, "ioi_answer_weight": args.ioi_answer_weight,
            "names_outside_ioi": args.names_outside_ioi, "more_templates": args.more_templates,
            "more_names": args.more_names, "ioi_word_names": args.ioi_word_names,
            "n_word_names": state["n_word_names"], "ioi_open_frac": args.ioi_open_frac,
            "lens_aux_weight": args.lens_aux_weight, "lens_aux_rows": args.lens_aux_rows,
            "ioi_subject_weight": args.ioi_subject_weight, "names_after_to": args.names_after_to,
            "ioi_lead_frac": args.ioi_lead_frac, "cpu": cpu_name(),
            "ioi_bare_leads": args.ioi_bare_leads, "ioi_io_first": args.ioi_io_first, "grow_layers": args.grow_layers,
            "base_run": state["base_run"],
            "steps": steps_done, "planned_steps": args.steps, "max_minutes": args.max_minutes, "device": device,
            "batch": args.batch, "lr": args.lr, "seed": args.seed, "threads": args.threads,
            "tokens_seen": steps_done * args.batch * args.ctx, "train_minutes": train_minutes,
            "prep_minutes": (t_train - t0) / 60, "cpu_minutes": done["cpu_s"] / 60, "train_tokens": n_ids,
            "bytes_per_token": bytes_per_token,
            "train_loss": train_loss, "train_bpb": train_loss / math.log(2) / bytes_per_token}
    os.makedirs(CACHE, exist_ok=True)
    json.dump(info, open(state_path, "w"))
    return info


def load_for_report(torch, args, cfg, enc, train_docs, state_path):
    """--report: the exported model, loaded, and the state of the run that trained it."""
    cfg_file = json.load(open(os.path.join(args.out, "config.json")))
    cfg.update({k: cfg_file[k] for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")})
    model = make_model(torch, cfg)
    load_exported(torch, model, cfg, args.out)
    info = json.load(open(state_path))
    if "train_tokens" not in info:  # state written by an older version of this script
        n_tok = sum(len(enc.encode(d)) + 1 for d in train_docs)
        info["train_tokens"] = n_tok
        info["bytes_per_token"] = sum(len(d.encode("utf-8")) + 1 for d in train_docs) / n_tok
    return model, info


def measure(torch, args, defaults, model, enc, inv, cfg, cur, val_docs, info):
    """Adds the measurements of the exported model to info: validation loss, samples, heads, the demos."""
    val_loss, val_bpb, val_tokens = evaluate(torch, model, enc, val_docs, cfg["n_positions"])
    print(f"validation: {val_loss:.3f} nats/token, {val_bpb:.3f} bits/byte over {val_tokens:,} tokens", flush=True)
    samples, n_new = [], 40
    for p in ["The cat sat on the", "Once upon a time", "The President said that"]:
        samples.append((p, "greedy", sample(torch, model, enc, inv, p, n_new)))
        samples.append((p, "sampled", sample(torch, model, enc, inv, p, n_new, temperature=0.8, seed=1)))
    for p, mode, s in samples:
        print(f"sample ({mode}):", repr(s), flush=True)
    prev, induction, rep_first, rep_second = head_report(torch, model, enc, cfg, val_docs)
    for (l, h), v in sorted(prev.items()):
        print(f"head {l}.{h}: previous-token {v:.2f} induction {induction[(l, h)]:.2f}", flush=True)
    print(f"repeated random tokens: loss {rep_first:.2f} (first copy) -> {rep_second:.2f} (second copy)", flush=True)
    info.update({"val_loss": val_loss, "val_bpb": val_bpb,
                 "val_tokens": val_tokens, "samples": samples, "sample_tokens": n_new, "prev": prev,
                 "induction": induction, "rep_loss_first": rep_first, "rep_loss_second": rep_second,
                 "file_bytes": os.path.getsize(os.path.join(args.out, "model.safetensors")),
                 "defaults": {k: defaults[k] for k in ("steps", "batch", "ctx", "layers", "heads", "d_model",
                                                       "vocab", "lr", "seed", "threads", "curriculum_frac",
                                                       "curriculum_docs", "repeat_frac", "random_frac")},
                 "demo": demo_report(torch, model, enc, inv, cfg, cur.ioi_heldout, cur.facts_heldout, val_docs)})


def write_report(args, info, inv, cur):
    """Prints the pass table and the missed prompts; writes the README (and, for the shipped model, the C++ tests'
    data)."""
    print("\ntargets (measured on the exported F16 weights):", flush=True)
    for want, got, ok in pass_table(info):
        print(f"  [{'PASS' if ok else 'FAIL'}] {want}: {got}", flush=True)
    missed = [x for x in info["demo"]["ioi"] + info["demo"]["facts"] if not x["pass"]]
    for x in missed[:30]:
        print(f"  missed: {x['prompt']!r} -> {x['answer']!r} (rank {x['rank'] + 1}, top {tok_repr(inv[x['top']])!r})")
    if len(missed) > 30:
        print(f"  ... and {len(missed) - 30} more held-out prompts missed (the README lists them)")
    if os.path.abspath(args.out) == os.path.abspath(OUT):  # the test data describe the shipped model only
        write_demos_json(info, cur.ioi_heldout, cur.facts_heldout)
    write_readme(args.out, info)
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(args.out, "*")))
    print(f"wrote {args.out} ({total / 1e6:.1f} MB)", flush=True)


def run(args, defaults):
    """The whole command for parsed arguments; defaults: every flag's default value (the README quotes some)."""
    torch, nm = start(args)
    t0 = time.time()
    train_docs, val_docs, sources = build_corpus(nm)
    print(f"corpus: {len(train_docs)} train / {len(val_docs)} validation documents, "
          f"{sum(len(d) for d in train_docs) / 1e6:.1f} M characters ({time.time() - t0:.0f} s)", flush=True)
    # what --report needs from the training run; an experiment (--out elsewhere) keeps its own beside its folder
    state_path = (os.path.join(CACHE, "train_state.json") if os.path.abspath(args.out) == os.path.abspath(OUT)
                  else os.path.abspath(args.out) + ".train_state.json")
    seed = json.load(open(state_path))["seed"] if args.report else args.seed
    if args.report:
        restore_curriculum_flags(args, state_path)
    cur = make_curriculum(args, seed, train_docs)
    vocab, merges, n_forced, base_merges, new_tokens = make_tokenizer(args, seed, train_docs, cur)
    enc = Encoder(vocab, merges)
    state = {"n_word_names": 0, "base_bpb": None, "base_run": None}
    if args.ioi_word_names > 0 and not args.report:
        state["n_word_names"] = use_word_names(args, seed, enc, train_docs, cur)
    not_single = [w for w in (init_words() if args.init_from else forced_tokens()) if len(enc.encode(w)) != 1]
    assert not not_single, f"not single tokens: {not_single}"
    inv = {v: k for k, v in vocab.items()}
    cfg = {"n_layer": args.layers, "n_head": args.heads, "n_embd": args.d_model, "n_positions": args.ctx,
           "vocab_size": len(vocab), "pos_init": args.pos_init}
    if args.init_from and not args.report:
        state["base_run"] = base_run_of(args.init_from)
        base = load_base(torch, args, cfg)
        state["base_bpb"] = reference_bpb(torch, args, cfg, val_docs)
    model = make_model(torch, cfg)
    if args.init_from and not args.report:
        grow_embeddings(torch, base, model, vocab, base_merges, new_tokens)
    n_params = sum(p.numel() for p in model.parameters())
    if args.report:
        model, info = load_for_report(torch, args, cfg, enc, train_docs, state_path)
        n_params = sum(p.numel() for p in model.parameters())
    else:
        info = train_and_export(torch, args, cfg, model, (enc, vocab, merges, inv, n_forced),
                                (train_docs, val_docs, state_path), cur, state, t0)
        if info is None:
            return
        if args.no_report:
            print(f"exported {args.out} (--no-report: not measured)", flush=True)
            return
        load_exported(torch, model, cfg, args.out)  # report on exactly what ships (F16)
    info.update({"cfg": cfg, "n_params": n_params, "sources": sources})
    measure(torch, args, defaults, model, enc, inv, cfg, cur, val_docs, info)
    write_report(args, info, inv, cur)
