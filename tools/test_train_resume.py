#!/usr/bin/python3
"""Resume test of the default model's training loop (tools/default_model/training.py, issue 48).

Trains a small GPT-2 of default_model.model.make_model on a fixed token stream with the real loop, batches
(make_batch with the curriculum, random and repeated windows) and loss (IOI weights, subject unlikelihood, the
lens's auxiliary loss):
  A: N steps straight;
  B: N/2 steps (--stop-at-step), then a fresh process state (a model initialised from another seed, a new
     optimizer) resumed from the checkpoint to N.
Passes when A's and B's weights (every fp32 bit) and their F16 model.safetensors have the same sha256. Also
checks that the data of a step depends on (seed, step) only and that a checkpoint of other flags is refused.

    /usr/bin/python3 tools/test_train_resume.py             # about a minute on 2 cores
    /usr/bin/python3 tools/test_train_resume.py --command   # also through the real command (corpus, BPE,
                                                            # curriculum): three tiny runs, about 10 minutes
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from default_model import batches, export, model as gpt2, tokenizer, training  # noqa: E402

N = 12
CFG = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 128, "vocab_size": 97, "pos_init": "normal"}


def make_args(out, **kw):
    args = types.SimpleNamespace(
        steps=N, seed=5, lr=3e-3, warmup=3, max_minutes=0.0, resume=False, checkpoint="", checkpoint_minutes=10.0,
        stop_at_step=0, out=out, log_demos_every=0, batch=4, ctx=128, lens_aux_rows="all", lens_aux_weight=0.3,
        ioi_subject_weight=2.0, repeat_frac=0.3, random_frac=0.2, curriculum_frac=0.3, early_steps=0,
        early_random_frac=0.0, precision="fp32")
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def hooks(args):
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, CFG["vocab_size"] - 1, (4000,), generator=g)
    cur = torch.randint(0, CFG["vocab_size"] - 1, (3000,), generator=g)
    cur_starts = torch.arange(1, 3000 - 140, 17)
    cur_w = torch.ones(3000)
    cur_s = torch.full((3000,), -1, dtype=torch.long)
    cur_w[100::50], cur_s[100::50] = 5.0, 7  # "indirect objects" with their "subject"

    def make(gen, step):
        fr = batches.batch_fractions(args, step)
        return batches.make_batch(torch, data, gen, args.batch, args.ctx, fr["repeat"], fr["random"], CFG["vocab_size"],
                              CFG["vocab_size"] - 1, cur, cur_starts, fr["curriculum"], cur_w, cur_s)

    return types.SimpleNamespace(make_batch=make, copy_line=lambda m: "", evaluate=lambda m: ("", {}))


def fresh(init_seed):
    torch.manual_seed(init_seed)
    model = gpt2.make_model(torch, CFG)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    return model, opt


def run(args, init_seed):
    model, opt = fresh(init_seed)
    done = training.train(torch, hooks(args), model, opt, args, CFG, "cpu", args.precision)
    return model, done


def digest(model, folder):
    """sha256 of every fp32 weight's bytes, and of the exported F16 model.safetensors."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode() + v.detach().contiguous().numpy().tobytes())
    vocab = {f"t{i}": i for i in range(CFG["vocab_size"] - 1)}
    vocab[tokenizer.EOT] = CFG["vocab_size"] - 1
    export.export(model, CFG, vocab, [], folder)
    return h.hexdigest(), hashlib.sha256(open(os.path.join(folder, "model.safetensors"), "rb").read()).hexdigest()


def check(precision):
    tmp = tempfile.mkdtemp(prefix="glassbox-resume-")
    a_out, b_out = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    a, done_a = run(make_args(a_out, precision=precision), init_seed=11)
    assert done_a["steps"] == N
    half = run(make_args(b_out, stop_at_step=N // 2, precision=precision), init_seed=11)[1]
    assert half is None and os.path.exists(b_out + ".checkpoint.pt"), "no checkpoint at --stop-at-step"
    # another init: the checkpoint must replace it
    b, done_b = run(make_args(b_out, resume=True, precision=precision), init_seed=99)
    assert done_b["steps"] == N and done_b["recent"] == done_a["recent"], (done_a["recent"], done_b["recent"])
    da, db = digest(a, a_out), digest(b, b_out)
    print(f"{precision}: straight {N} steps:      weights {da[0][:16]}  model.safetensors {da[1][:16]}")
    print(f"{precision}: {N // 2} + resumed {N - N // 2} steps: weights {db[0][:16]}  model.safetensors {db[1][:16]}")
    assert da == db, "a resumed run differs from the uninterrupted one"
    try:  # a checkpoint of another command is refused
        run(make_args(b_out, resume=True, lr=1e-3, precision=precision), init_seed=11)
        raise AssertionError("a checkpoint of other flags was resumed")
    except SystemExit as e:
        assert "other training flags" in str(e)


def check_command():
    """The same through train_default_model.py itself: a tiny model, 8 steps straight against 4 (--stop-at-step),
    then --resume; the curriculum in 30 % of the sequences."""
    tmp = tempfile.mkdtemp(prefix="glassbox-resume-cmd-")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_default_model.py")
    flags = ["--threads", "2", "--steps", "8", "--warmup", "2", "--layers", "1", "--heads", "2", "--d-model", "32",
             "--ctx", "128", "--batch", "2", "--curriculum-frac", "0.3", "--curriculum-docs", "3000",
             "--log-demos-every", "0", "--no-report"]
    sums = []
    for out, extra in (("a", [[]]), ("b", [["--stop-at-step", "4"], ["--resume"]])):
        for e in extra:
            subprocess.run([sys.executable, script, "--out", os.path.join(tmp, out)] + flags + e, check=True,
                           stdout=subprocess.DEVNULL)
        sums.append(hashlib.sha256(open(os.path.join(tmp, out, "model.safetensors"), "rb").read()).hexdigest())
    print(f"command: straight 8 steps {sums[0][:16]}, 4 + resumed 4 steps {sums[1][:16]}")
    assert sums[0] == sums[1], "a resumed run of the command differs from the uninterrupted one"


def main():
    torch.set_num_threads(2)
    g1, g2 = training.step_generator(torch, 5, 7), training.step_generator(torch, 5, 7)
    assert torch.equal(torch.rand(8, generator=g1), torch.rand(8, generator=g2)), "step data not a function of (seed, step)"
    kinds = ["fp32"] + (["bf16"] if training.cpu_has_bf16() else [])
    for precision in kinds:
        check(precision)
    if "--command" in sys.argv[1:]:
        check_command()
        kinds.append("the command")
    print(f"PASS ({', '.join(kinds)}): resumed runs bit-identical to uninterrupted ones; other flags refused")


if __name__ == "__main__":
    main()
