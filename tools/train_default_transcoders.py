#!/usr/bin/python3
"""Trains the transcoder set shipped with the embedded default model, on the text the shipped SAE was trained on.

    /usr/bin/python3 tools/train_default_transcoders.py   # corpus -> glassbox-cli train-transcoder -> assets/transcoders/

The corpus is tools/train_default_sae.py's (imported, not copied): a seeded sample of the default model's prose
training split and its generated curriculum, written to tools/.cache/sae/train.txt. Then glassbox-cli
train-transcoder trains every layer (1,024 TopK features, k 32, a linear skip, seed 0, one thread) and writes the
set in circuit-tracer's per-layer layout into assets/transcoders/glassbox-tiny-en/, with train.json there: the
exact command, the corpus, the time and each layer's held-out explained variance of the MLP output (the corpus's
last tenth of positions). The state files are removed (they are for resuming, not part of the set).
Deterministic for a given build.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import train_default_sae as sae  # noqa: E402  (the SAE's corpus: write_corpus)

ROOT = sae.ROOT
MODEL = open(os.path.join(ROOT, "assets", "models", "DEFAULT")).read().strip()
OUT = os.path.join(ROOT, "assets", "transcoders", MODEL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=None, help="the glassbox-cli to run (default: build/glassbox-cli, then PATH)")
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--no-skip", action="store_true", help="no linear skip (W_skip)")
    ap.add_argument("--max-rows", type=int, default=150000, help="positions collected from the training text")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    train_txt, _ = sae.write_corpus(1_600_000, 200_000)  # the SAE's defaults: the same text
    cli = args.cli or sae.find_cli()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)  # a fresh training, not a resumed one
    os.makedirs(args.out)
    cmd = [cli, "train-transcoder", "--corpus", train_txt, "--out", args.out, "--features", str(args.features),
           "--k", str(args.k), "--steps", str(args.steps), "--batch", str(args.batch), "--max-rows", str(args.max_rows),
           "--seed", "0", "--json", os.path.join(args.out, "train.json")] + ([] if args.no_skip else ["--skip"])
    shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)
    print(shown, flush=True)
    t0 = time.time()
    # one thread: the products are small, and on a busy 2-core machine OpenMP's spinning threads made the training
    # some ten times slower (measured: 1,000 steps of a layer in 26 s with one thread, several minutes without)
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.time() - t0
    for name in os.listdir(args.out):
        if name.startswith("train_state_"):
            os.remove(os.path.join(args.out, name))
    info = json.load(open(os.path.join(args.out, "train.json")))
    info["command"] = shown
    info["corpus"] = ("tools/.cache/sae/train.txt, written by tools/train_default_sae.py (the shipped SAE's training "
                      "text: 1.6 M characters, the default model's prose training split and curriculum, seed 1234)")
    info["wall_s"] = wall
    for k in ("out",):
        info[k] = os.path.relpath(info[k], ROOT) if os.path.isabs(info[k]) else info[k]
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
