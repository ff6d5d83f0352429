"""The training loop, resumable and deterministic (issue 48).

- The data of step s is drawn with its own generator seeded from (seed, s) (step_generator): what a step trains on
  does not depend on how the run got there, so a run resumed at step s draws what an uninterrupted one draws.
- A checkpoint (model, optimizer, step, the loss window, the compute time spent) is written atomically every
  --checkpoint-minutes of training, at --stop-at-step and at the last step; --resume loads it and continues. With
  the same command, CPU kind and thread count the result is bit-identical to an uninterrupted run
  (tools/test_train_resume.py checks it).
- A checkpoint remembers the command it belongs to (signature): resuming with other training flags is refused.
- The progress log (stdout, and one JSON object a line in <out>.progress.jsonl) gives the step, loss, learning rate,
  the training time summed over all sessions (wall and CPU seconds) and, every --log-demos-every steps, the
  held-out numbers (run.evaluate). After a resume the steps since the last checkpoint are logged again (with the
  same losses); their training time is not counted twice (the sums restart from the checkpoint's).
"""
import collections
import json
import os
import time

# arguments that do not change what is trained: a run may be resumed with other values of these
NOT_TRAINING = ("resume", "stop_at_step", "checkpoint_minutes", "log_demos_every", "out", "report", "no_report",
                "compare_to", "checkpoint")


def decay_start(total):
    """First step of the linear learning-rate decay: the last fifth of a run of `total` steps."""
    return total - total // 5


def lr_at(peak, warmup, step, total):
    """Warm-up over `warmup` steps, constant, then linear decay to 10 % over the last fifth of `total`."""
    lr = peak * min(1.0, (step + 1) / warmup)
    if step >= decay_start(total):
        lr *= 0.1 + 0.9 * (total - step) / (total - decay_start(total))
    return lr


def step_generator(torch, seed, step):
    """The generator that draws step `step`'s batch: a function of (seed, step) only."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) % (1 << 63))


def signature(args):
    """What a checkpoint must match to be resumed: every argument that changes the training, as sorted JSON."""
    return json.dumps({k: v for k, v in sorted(vars(args).items()) if k not in NOT_TRAINING}, sort_keys=True)


def save_checkpoint(torch, path, model, opt, state):
    """Writes {model, opt, state} to path through a temporary file and a rename, so that a run killed while
    writing leaves the previous checkpoint whole."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
    os.replace(tmp, path)


def load_checkpoint(torch, path, model, opt, sig):
    """Loads a checkpoint into model and opt and returns its state; refuses one written by another command."""
    ck = torch.load(path, map_location="cpu")
    if ck["state"]["signature"] != sig:
        raise SystemExit(f"error: {path} was written by a run with other training flags; rerun that command, or "
                         f"remove the checkpoint to start over\n  checkpoint: {ck['state']['signature']}\n"
                         f"  this run:   {sig}")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    return ck["state"]


def step_loss(torch, model, batch, args, cfg, device, precision):
    """The step's loss and its per-token next-token losses (nll, for the log's plain mean): the weighted mean of
    the next-token losses, plus --ioi-subject-weight times the subject's unlikelihood at each indirect object,
    plus --lens-aux-weight times the logit lens's next-token loss before the last layer."""
    F = torch.nn.functional
    x, y, w, is_cur, subj = batch
    rows = None if args.lens_aux_rows == "all" else is_cur.to(device)
    lens_on = args.lens_aux_weight > 0 and (rows is None or bool(rows.any()))
    with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        if lens_on:  # the residual before the last layer also predicts, through ln_f
            logits, lens = model(x.to(device), lens_at=cfg["n_layer"] - 2, lens_rows=rows)
        else:
            logits = model(x.to(device))
    nll = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.to(device).reshape(-1), reduction="none")
    w = w.to(device).reshape(-1)
    loss = (nll * w).sum() / w.sum()
    at = subj.to(device) >= 0
    if args.ioi_subject_weight > 0 and bool(at.any()):
        # -log(1 - p(S)) where the indirect object is the answer: the repeated name pushed down, not only the
        # answer up (what the IOI logit difference measures)
        logp = torch.log_softmax(logits[at].float(), -1)
        p_s = logp.gather(1, subj.to(device)[at][:, None]).exp().squeeze(1)
        loss = loss + args.ioi_subject_weight * (-torch.log1p(-p_s.clamp(max=1 - 1e-6))).sum() / w.sum()
    if lens_on:
        ys, ws = (y.to(device), w.reshape(y.shape)) if rows is None else (y.to(device)[rows], w.reshape(y.shape)[rows])
        aux = F.cross_entropy(lens.float().reshape(-1, lens.shape[-1]), ys.reshape(-1), reduction="none")
        loss = loss + args.lens_aux_weight * (aux * ws.reshape(-1)).sum() / ws.sum()
    return loss, nll


def log_progress(run, model, args, step, total, loss, lr, spent):
    """Every 25 steps the loss line; every 100 the induction numbers (run.copy_line); every --log-demos-every the
    held-out numbers (run.evaluate: a line and a dict). Each line also goes to <out>.progress.jsonl."""
    if not (step % 25 == 0 or step == total - 1):
        return
    rec = {"step": step, "total": total, "loss": round(loss, 4), "lr": lr, "train_s": round(spent[0], 1),
           "cpu_s": round(spent[1], 1)}
    extra = ""
    if step % 100 == 0 or step == total - 1:
        extra = " | " + run.copy_line(model)
    if (args.log_demos_every > 0 and step % args.log_demos_every == 0) or step == total - 1:
        line, numbers = run.evaluate(model)
        extra += " | " + line
        rec.update(numbers)
    tok = (step + 1 - run.first_step) * args.batch * args.ctx / max(1e-9, spent[0] - run.first_spent)
    print(f"step {step}/{total} loss {loss:.3f} lr {lr:.2e} {spent[0] / 60:.1f} min of training "
          f"({spent[1] / 60:.1f} CPU min; {tok:.0f} tok/s this session){extra}", flush=True)
    with open(args.out.rstrip("/") + ".progress.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


def train(torch, run, model, opt, args, cfg, device, precision):
    """Trains from step 0, or from the checkpoint with --resume when there is one, to args.steps (or to
    --stop-at-step, then returns None). run: make_batch(generator, step) -> (x, y, w, is_cur, subj),
    copy_line(model) -> str, evaluate(model) -> (str, dict). Returns {steps, total, recent, train_s, cpu_s}."""
    path = args.checkpoint or args.out.rstrip("/") + ".checkpoint.pt"
    sig = signature(args)
    st = {"step": 0, "total": args.steps, "recent": [], "train_s": 0.0, "cpu_s": 0.0, "signature": sig}
    if args.resume and os.path.exists(path):
        st = load_checkpoint(torch, path, model, opt, sig)
        print(f"resumed from {path} at step {st['step']} of {st['total']} ({st['train_s'] / 60:.1f} min of "
              f"training before)", flush=True)
    recent = collections.deque(st["recent"], maxlen=50)
    t0, c0, saved = time.time(), time.process_time(), time.time()
    run.first_step, run.first_spent = st["step"], st["train_s"]
    step, total = st["step"], st["total"]

    def spent():
        return st["train_s"] + time.time() - t0, st["cpu_s"] + time.process_time() - c0

    model.train()
    while step < total:
        if args.max_minutes > 0 and step < decay_start(total) and spent()[0] > 0.8 * args.max_minutes * 60:
            total = step
            while decay_start(total) < step:
                total += 1
            print(f"--max-minutes {args.max_minutes}: decaying from step {step}, stopping at {total}", flush=True)
        lr = lr_at(args.lr, args.warmup, step, total)
        for grp in opt.param_groups:
            grp["lr"] = lr
        batch = run.make_batch(step_generator(torch, args.seed, step), step)
        loss, nll = step_loss(torch, model, batch, args, cfg, device, precision)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent.append(float(nll.mean()))  # the plain mean (the README's training loss)
        log_progress(run, model, args, step, total, loss.item(), lr, spent())
        model.train()
        step += 1
        stop = step == args.stop_at_step
        if stop or step == total or time.time() - saved >= args.checkpoint_minutes * 60:
            model.cpu()
            save_checkpoint(torch, path, model, opt, dict(st, step=step, total=total, recent=list(recent),
                                                           train_s=spent()[0], cpu_s=spent()[1]))
            model.to(device)
            saved = time.time()
            print(f"checkpoint: step {step} -> {path}", flush=True)
        if stop:
            print(f"stopped at step {step} (--stop-at-step); rerun with --resume to continue", flush=True)
            return None
    return {"steps": step, "total": total, "recent": list(recent), "train_s": spent()[0], "cpu_s": spent()[1]}


def cpu_name():
    """The CPU's model name and core count, for the README (speeds depend on it)."""
    try:
        names = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else 'CPU'}, {os.cpu_count()} cores"


def cpu_has_bf16():
    """A CPU that multiplies bf16 natively: AMX (Intel) or AVX-512 BF16 (Intel, AMD Zen 4 and later)."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags
