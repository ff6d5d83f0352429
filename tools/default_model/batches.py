"""The training batches: prose windows, the curriculum's windows (with their loss weights and subjects), prose with
a span repeated later and random tokens repeated (induction), in shares that may change with the step."""




def batch_fractions(args, step):
    """Shares of the step's sequences: curriculum, random tokens repeated, prose with a repeated span (the rest is
    plain prose). For the first --early-steps the random share is --early-random-frac and the others shrink in
    proportion: copying is learnt first (an induction head needs many repeats to form), English after."""
    cur, rnd, rep = args.curriculum_frac, args.random_frac, args.repeat_frac
    if step < args.early_steps:
        k = (1 - args.early_random_frac) / (1 - rnd)
        cur, rnd, rep = cur * k, args.early_random_frac, rep * k
    return {"curriculum": cur, "random": rnd, "repeat": rep}


def random_ids(torch, shape, lo, vocab_size, eot, g):
    """Random token ids in [lo, vocab_size) other than <|endoftext|> (the last id of a trained-from-scratch
    vocabulary; an extended one has new ids after it), drawn with generator g."""
    r = torch.randint(lo, vocab_size - 1, shape, generator=g)
    return r + (r >= eot).long()


def make_batch(torch, data, g, batch, ctx, repeat_frac, random_frac, vocab_size, eot, cur=None, cur_starts=None,
               cur_frac=0.0, cur_w=None, cur_s=None):
    """x, y: [batch][ctx] next-token pairs drawn with generator g (the same batches on every machine).

    data is the encoded prose, cur the encoded curriculum (documents joined by <|endoftext|>) and cur_starts the
    positions of its documents' first tokens that leave a full window after them. Each sequence is, by one draw u:
    - u < cur_frac: a window of the curriculum that starts at a document, half of the time with the
      <|endoftext|> before it, so that prompts are learnt both with and without a leading BOS;
    - then random_frac: 10-64 random tokens (any id but <|endoftext|>, as the C++ induction test draws them)
      repeated until it is full, half of the time after an <|endoftext|> (the classic induction test: nothing but
      copying can predict the repeats);
    - then repeat_frac: a prose window in which a span of 8-48 tokens is copied to a later place (prose that
      repeats itself, as names and phrases do);
    - else a plain prose window.
    The loss is taken everywhere, as on plain prose; w: [batch][ctx] the targets' loss weights (cur_w on
    curriculum windows, else 1); is_cur: [batch] whether each sequence is a curriculum window; s: [batch][ctx] the
    subject of the indirect object that is the target there (cur_s), else -1.
    """
    seqs, ws, is_cur, ss = [], [], [], []
    for s in torch.randint(0, len(data) - ctx - 1, (batch,), generator=g).tolist():
        seq = data[s:s + ctx + 1].clone()
        w = torch.ones(ctx)
        sj = torch.full((ctx,), -1, dtype=torch.long)
        u = float(torch.rand((), generator=g))
        is_cur.append(u < cur_frac)
        if u < cur_frac:
            i = int(torch.randint(0, len(cur_starts), (), generator=g))
            a = int(cur_starts[i]) - int(torch.randint(0, 2, (), generator=g))  # 1 back: the separator
            seq = cur[a:a + ctx + 1].clone()
            if cur_w is not None:
                w = cur_w[a + 1:a + ctx + 1]
            if cur_s is not None:
                sj = cur_s[a + 1:a + ctx + 1]
        elif u < cur_frac + random_frac:
            n = int(torch.randint(10, 65, (), generator=g))
            rnd = random_ids(torch, (n,), 0, vocab_size, eot, g)  # any id but <|endoftext|>
            bos = torch.tensor([eot] * int(torch.randint(0, 2, (), generator=g)), dtype=torch.long)
            seq = torch.cat([bos, rnd.repeat(ctx // n + 2)])[:ctx + 1]
        elif u < cur_frac + random_frac + repeat_frac:
            n = int(torch.randint(8, 49, (), generator=g))
            a = int(torch.randint(0, ctx + 1 - 2 * n, (), generator=g))
            b = int(torch.randint(a + n, ctx + 2 - n, (), generator=g))
            seq[b:b + n] = seq[a:a + n].clone()
        seqs.append(seq)
        ws.append(w)
        ss.append(sj)
    full = torch.stack(seqs)
    return full[:, :-1], full[:, 1:], torch.stack(ws), torch.tensor(is_cur, dtype=torch.bool), torch.stack(ss)
