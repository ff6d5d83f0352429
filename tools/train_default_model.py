#!/usr/bin/python3
"""Trains Glassbox's embedded default model: a small GPT-2 on public-domain / permissive English prose and a
generated curriculum (indirect objects, facts, stories, repeated sentences) for the app's teaching demos.

One command, deterministic (seeded), CPU-friendly:

    /usr/bin/python3 tools/train_default_model.py            # corpus -> BPE -> train -> export -> report
    /usr/bin/python3 tools/train_default_model.py --report   # only re-measure and rewrite the model README
    /usr/bin/python3 tools/train_default_model.py --init-from DIR ...   # fine-tune the GPT-2 in DIR instead

The shipped model is a fine-tune (--init-from) of a from-scratch base; its README gives every stage's command.

Steps: install what is missing (Debian: python3-torch, python3-numpy, python3-regex, fortunes, libopenblas0-pthread; npm: the
corpus packages, exact versions, into tools/.cache/corpus), build the corpus and a held-out validation split,
generate the curriculum from the seed (with its held-out names, templates and phrasings), train a byte-level BPE
(GPT-2 format: vocab.json + merges.txt with <|endoftext|>; forced merges make names, places and the demos' words
single tokens), train a GPT-2 (Pre-LN,
LayerNorm, tanh-GELU, learned positions, tied embeddings) in PyTorch, export config.json + model.safetensors
(F16) to assets/models/<name>/, then measure validation loss / bits per byte, sample continuations and find
previous-token and induction heads, measure every demo target (pass/fail table), write the model's README.md
and, for the shipped model, tests/data/default_model_demos.json (the held-out prompts for the C++ tests).

This file is the command line; the steps are the package tools/default_model/, one module each (its __init__.py lists
them, pipeline.run calls them in order).
"""
import argparse

from default_model import pipeline
from default_model.corpus import OUT


def make_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3067,
                    help="optimizer steps (default 3067: what a run planned at 4400 with --max-minutes 95 did while a C++ "
                         "build shared the cores, 106 min; ~65 min on one idle AMX core in bf16; reproducible)")
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="wall-clock bound for the training loop: at 80%% of it the run is shortened to end after "
                         "its learning-rate decay (0 = no limit, the default; rerun with the reported --steps to "
                         "reproduce a shortened run)")
    ap.add_argument("--batch", type=int, default=16, help="sequences per step")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--pos-init", default="sinusoid", choices=["sinusoid", "normal"],
                    help="initial position embeddings: sinusoids (rescaled, learned from there, no weight decay) or "
                         "normal(0, 0.02) like the token embeddings")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--curriculum-frac", type=float, default=0.25,
                    help="share of training sequences drawn from the generated curriculum (IOI, facts, stories, "
                         "repeated sentences, set phrases)")
    ap.add_argument("--curriculum-docs", type=int, default=60000, help="generated curriculum documents")
    ap.add_argument("--curriculum-mix", default="ioi:0.3,facts:0.3,repeat:0.15,story:0.15,phrase:0.1",
                    help="shares of the curriculum's kinds of documents (indirect-object sentences, facts, "
                         "repeated sentences, stories, set phrases)")
    ap.add_argument("--repeat-frac", type=float, default=0.2,
                    help="share of training sequences with a prose span copied later into them (induction)")
    ap.add_argument("--random-frac", type=float, default=0.05,
                    help="share of training sequences made of random tokens repeated (induction)")
    ap.add_argument("--early-random-frac", type=float, default=0.0,
                    help="share of random repeated sequences during the first --early-steps (the others shrink)")
    ap.add_argument("--early-steps", type=int, default=0, help="see --early-random-frac")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                    help="auto: bf16 autocast on CUDA or on CPUs with AMX or AVX-512 BF16, else fp32")
    # One thread by default: two threads are 1.8x faster on 2 idle cores (6,200 vs 3,400 tokens/s), but 3x slower
    # than one while a compiler holds the other core (each step waits at every barrier for the descheduled thread),
    # and the number of threads is part of what reproduces a run bit for bit.
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    ap.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu or cuda")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--log-demos-every", type=int, default=500, help="steps between the demo scores in the log (0: only at the last step)")
    ap.add_argument("--report", action="store_true", help="skip training; evaluate the exported model")
    ap.add_argument("--init-from", default="",
                    help="fine-tune: start from the GPT-2 model in this folder (its weights, and its tokenizer grown "
                         "by appended merges so that init_words() are single tokens) instead of from scratch "
                         "(the default); the model's shape comes from its config.json")
    ap.add_argument("--compare-to", default="",
                    help="with --init-from: the model folder whose held-out bits per byte the report compares with "
                         "(default: the --init-from folder; name the from-scratch base when fine-tuning a fine-tune)")
    ap.add_argument("--names-outside-ioi", default="train", choices=["train", "all"],
                    help="names in the curriculum's stories, facts and phrases: the IOI training names, or all (also "
                         "the held-out ones, never in an indirect-object sentence)")
    ap.add_argument("--ioi-word-names", type=float, default=0.0,
                    help="share of the IOI documents whose two names are capitalised words of the prose instead")
    ap.add_argument("--ioi-open-frac", type=float, default=0.0,
                    help="share of the IOI sentences whose action is a verb and noun of the prose (and half of them a "
                         "frame around a clause of the prose): open_vocab")
    ap.add_argument("--more-names", action="store_true",
                    help="222 more first names in the indirect-object sentences (each made one token)")
    ap.add_argument("--more-templates", type=int, nargs="?", const=1, default=0,
                    help="1: more IOI frames and actions and more fact phrasings in the curriculum; 2: also facts "
                         "as questions with answers and as consequences")
    ap.add_argument("--lens-aux-weight", type=float, default=0.0,
                    help="weight of an extra next-token loss read through ln_f from the residual before the last "
                         "layer (the logit lens's view there), so that answers form before the last layer")
    ap.add_argument("--ioi-lead-frac", type=float, default=0.0,
                    help="share of the IOI sentences that start with an opener of the prose (\"At last,\", \"In the "
                         "morning,\": prose_leads), so that what comes before the names is not what the answer hangs on")
    ap.add_argument("--names-after-to", action="store_true",
                    help="stories and set phrases also name a new name after \"to\" or \"for\" (never a repeat), so "
                         "that no name is unheard of there (with --names-outside-ioi all, the held-out ones too)")
    ap.add_argument("--ioi-subject-weight", type=float, default=0.0,
                    help="weight of an unlikelihood term, -log(1 - p(subject)), at each curriculum indirect object: "
                         "pushes the repeated name down where the other one is the answer (0: off)")
    ap.add_argument("--lens-aux-rows", default="all", choices=["all", "curriculum"],
                    help="the sequences whose lens also predicts (--lens-aux-weight): all, or the curriculum windows "
                         "only, where the demos' answers are (a third of the extra unembedding's cost, and the prose "
                         "trained as without it)")
    ap.add_argument("--grow-layers", type=int, default=0,
                    help="with --init-from: append this many blocks after the model's (their output projections start "
                         "at zero, so the grown model starts out computing what the old one did)")
    ap.add_argument("--ioi-bare-leads", action="store_true",
                    help="with --ioi-lead-frac: a sentence that starts with a name gets its opener without a comma "
                         "(\"Last year Mary and John ...\"), so that any word may come before the first name")
    ap.add_argument("--ioi-io-first", type=float, default=0.5,
                    help="share of the training IOI sentences that name the indirect object first (ABBA: \"When Mary "
                         "and John ..., John gave a drink to\"), where the answer is not the name after \"and\"")
    ap.add_argument("--warmup", type=int, default=100, help="steps of linear learning-rate warm-up")
    ap.add_argument("--ioi-answer-weight", type=float, default=1.0,
                    help="loss weight of the indirect object (the answer) of each curriculum IOI sentence as a "
                         "target (the loss is the weighted mean over the batch's tokens; 1 = plain mean)")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the checkpoint (<out>.checkpoint.pt, or --checkpoint) when there is one; the "
                         "result is bit-identical to an uninterrupted run of the same command")
    ap.add_argument("--checkpoint", default="", help="the checkpoint file (default: <out>.checkpoint.pt)")
    ap.add_argument("--checkpoint-minutes", type=float, default=10.0,
                    help="minutes of training between checkpoints (one is also written at the last step)")
    ap.add_argument("--stop-at-step", type=int, default=0,
                    help="write the checkpoint at this step and exit (for the resume test; 0: never)")
    ap.add_argument("--no-report", action="store_true", help="export the model and stop (no measurements, no README)")
    return ap


def main():
    ap = make_parser()
    args = ap.parse_args()
    if args.resume and args.max_minutes > 0:
        raise SystemExit("error: --max-minutes cuts a run by wall time, which a resumed run cannot repeat; use --steps")
    pipeline.run(args, vars(ap.parse_args([])))


if __name__ == "__main__":
    main()
