"""Copying from the context, trained on prose-like text and measured on held-out prose (issue 48).

The old curriculum taught copying with a few fixed sentences ("The cat sat on the mat. ... The cat sat on the"), so
on a user's own repeated sentence the model followed its templates instead of the induction head. These documents
copy what the prose itself says, in many frames:
- copy_document: 1-4 consecutive sentences of a training document, then one or all of them again (plain, quoted,
  after "Again," ..., or as a chorus between other sentences);
- names_document: a name introduced ("My name is Ada.", "This is my friend Ada.") and reused after other sentences;
- list_document: a list of nouns of the prose (or days, months, numbers) given, then given again or continued.
Evaluation (never trained on): copy_prompts cuts a repeated sentence of the validation prose inside its repeat;
name_prompts introduces a held-out name in a held-out frame, with validation prose between.
"""
import regex

SENTENCE_END = regex.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")

REPEAT_INTROS = ["", "", "", "Again: ", "Once more: ", "I repeat: ", "{N} said it again: ", "As we said, ",
                 "In short, ", "Remember: ", "Yes. ", "{N} read it aloud: "]
QUOTE_FRAMES = ['{N} said, "{s}"', '"{s}" said {N}.', '{N} wrote: "{s}"', 'The note said: "{s}"',
                'Then {N} read the line again: "{s}"']

NAME_INTROS_FIRST = ["My name is {N}.", "Hello, my name is {N}.", "Hi! I am {N}.", "I am called {N}.",
                     "Everyone calls me {N}.", "You can call me {N}.", "My friends call me {N}.", "I'm {N}.",
                     "Let me introduce myself: I am {N}.", "The name is {N}."]
NAME_REUSE_FIRST = ["What is my name? My name is {N}.", "Do you remember my name? It is {N}.",
                    "As I said, my name is {N}.", "So, my name is {N}.", "Yes, I am {N}.", "Once again, I am {N}.",
                    "Don't forget: my name is {N}.", "Call me {N}.", "I am still {N}.", "And my name? {N}.",
                    "That is all from me, {N}.", "My name, once more, is {N}."]
NAME_INTROS_THIRD = ["There was a man called {N}.", "This is my friend {N}.", "Her name was {N}.",
                     "His name is {N}.", "I met a woman named {N}.", "The new teacher is called {N}.",
                     "The captain's name was {N}.", "A child named {N} lived next door.",
                     "We have a neighbour, {N}.", "The letter was signed by {N}."]
NAME_REUSE_THIRD = ["Everyone liked {N}.", "That is how I met {N}.", "The next day, {N} came back.",
                    "Later, {N} smiled.", "I still think about {N}.", "The name {N} was on the door.",
                    "Her name, again, was {N}.", "Nobody forgot {N}.", "In the end, {N} went home.",
                    "What was the name? It was {N}.", "We never saw {N} again.", "So {N} stayed."]
# held out for name_prompts: never in a training document
NAME_REUSE_HELDOUT = ["I told you before: my name is", "Say it with me: my name is", "Do not forget that my name is",
                      "Please remember, my name is", "Once more, my name is", "I will say it again. My name is"]

LIST_FIRST = ["{N} bought {L}.", "On the table there were {L}.", "We need {L}.", "The box held {L}.",
              "{N} likes {L}.", "In the room we found {L}.", "The list said: {L}.", "They brought {L}.",
              "{N} packed {L}.", "For the trip we took {L}."]
LIST_AGAIN = ["Later, {N} bought {L} again.", "So we got {L}.", "{N} wrote down: {L}.", "Again: {L}.",
              "The list was {L}.", "I said {L}.", "Then {N} counted {L}.", "Nothing was missing: {L}."]
SEQUENCES = [
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    ("January February March April May June July August September October November "
     "December").split(),
    "one two three four five six seven eight nine ten eleven twelve".split(),
    "first second third fourth fifth sixth seventh eighth ninth tenth".split(),
    "spring summer autumn winter".split(),
    "north east south west".split(),
]


def prose_passages(docs, banned, min_words=4, max_words=40):
    """Each document's sentences of min_words-max_words words, as [[sentence]] (documents with fewer than two such
    sentences left out); sentences matching the compiled regex `banned` (held-out names) are dropped."""
    out = []
    for d in docs:
        sents = [" ".join(s.split()) for s in SENTENCE_END.split(d)]
        sents = [s for s in sents if min_words <= len(s.split()) <= max_words and "{" not in s and "}" not in s
                 and not banned.search(s)]
        if len(sents) >= 2:
            out.append(sents)
    return out


def copy_document(rng, passages, names):
    """1-4 consecutive prose sentences, then one or all of them again (plain, after a short intro, quoted, or as a
    chorus between other sentences of the passage)."""
    p = rng.choice(passages)
    i = rng.randrange(len(p))
    sents = p[i:i + rng.randint(1, 4)]
    n = rng.choice(names)
    u = rng.random()
    if u < 0.35:
        again = rng.choice(REPEAT_INTROS).format(N=n) + rng.choice(sents)
        return " ".join(sents + [again])
    if u < 0.6:
        return " ".join(sents + [rng.choice(REPEAT_INTROS).format(N=n) + " ".join(sents)])
    if u < 0.8:
        return " ".join(sents + [rng.choice(QUOTE_FRAMES).format(N=n, s=rng.choice(sents))])
    chorus, other = rng.choice(sents), rng.sample(p, min(2, len(p)))
    return " ".join([chorus, other[0], chorus] + other[1:] + [chorus])


def names_document(rng, names, passages):
    """A name introduced, 0-3 prose sentences, the name reused; in the first or the third person, sometimes with a
    second name introduced beside it (which is then the one reused)."""
    n, m = rng.sample(names, 2)
    first = rng.random() < 0.5
    intros, reuses = (NAME_INTROS_FIRST, NAME_REUSE_FIRST) if first else (NAME_INTROS_THIRD, NAME_REUSE_THIRD)
    parts = [rng.choice(intros).format(N=n)]
    if rng.random() < 0.3:
        parts.append(rng.choice(NAME_INTROS_THIRD).format(N=m))
        n = m if rng.random() < 0.5 else n
        reuses = NAME_REUSE_THIRD if n == m else reuses
    p = rng.choice(passages)
    i = rng.randrange(len(p))
    parts += p[i:i + rng.randint(0, 3)]
    parts += [r.format(N=n) for r in rng.sample(reuses, rng.randint(1, 2))]
    return " ".join(parts)


def list_text(items, rng):
    """"a, b, c and d" (or "a, b, c, and d", or with "or")."""
    last = rng.choice((" and ", " and ", ", and ", " or "))
    return ", ".join(items[:-1]) + last + items[-1]


def list_document(rng, nouns, names, passages):
    """A list given and given again later (nouns of the prose, with "the"/"some"/"a" or bare), or a known sequence
    (days, months, numbers) continued from a random start."""
    n = rng.choice(names)
    if rng.random() < 0.25:
        seq = rng.choice(SEQUENCES)
        a = rng.randrange(len(seq) - 2)
        items = seq[a:a + rng.randint(3, len(seq) - a)]
        return rng.choice(["{L}.", "They came in order: {L}.", "{N} said {L}.", "Count with me: {L}."]).format(
            N=n, L=", ".join(items))
    det = rng.choice(("", "the ", "some "))
    items = [det + w for w in rng.sample(nouns, rng.randint(3, 6))]
    parts = [rng.choice(LIST_FIRST).format(N=n, L=list_text(items, rng))]
    p = rng.choice(passages)
    i = rng.randrange(len(p))
    parts += p[i:i + rng.randint(0, 2)]
    parts.append(rng.choice(LIST_AGAIN).format(N=n, L=list_text(items, rng)))
    return " ".join(parts)


def copy_prompts(enc, val_docs, n, seed):
    """n held-out copying prompts: a validation sentence (6-30 words), a space, the same sentence again cut before a
    word inside the repeat (at least its third token): [(prompt ids, answer id)]. Sentences are taken evenly over
    the documents, the cut drawn with `seed`."""
    import random
    rng = random.Random(seed)
    sents = [s for p in prose_passages(val_docs, regex.compile(r"(?!x)x"), 6, 30) for s in p]
    inv = {v: k for k, v in enc.vocab.items()}
    out = []
    for s in sents[::max(1, len(sents) // n)][:n]:
        first = enc.encode(s)
        ids = first + enc.encode(" " + s)
        word_starts = [j for j in range(len(first) + 2, len(ids)) if inv[ids[j]].startswith("\u0120")]
        if not word_starts:
            continue
        j = rng.choice(word_starts)
        out.append((ids[:j], ids[j]))
    return out


def name_prompts(enc, val_docs, names, n, seed):
    """n held-out name-reuse prompts: a held-out name introduced in a training intro, 1-2 validation sentences, a
    held-out reuse phrase ("I told you before: my name is") -> the name: [(prompt ids, answer id)]."""
    import random
    rng = random.Random(seed)
    passages = prose_passages(val_docs, regex.compile(r"\b(" + "|".join(names) + r")\b"), 4, 25)
    out = []
    for k in range(n):
        name = names[k % len(names)]
        p = rng.choice(passages)
        text = " ".join([rng.choice(NAME_INTROS_FIRST).format(N=name)] + p[:rng.randint(1, 2)]
                        + [NAME_REUSE_HELDOUT[k % len(NAME_REUSE_HELDOUT)]])
        out.append((enc.encode(text), enc.encode(" " + name)[0]))
    return out


def top1_share(torch, model, items):
    """Share of (prompt ids, answer id) whose greedy next token is the answer (no BOS)."""
    hits = 0
    model.eval()
    with torch.no_grad():
        for ids, ans in items:
            logits = model(torch.tensor(ids[-model.wpe.weight.shape[0]:], dtype=torch.long)[None])
            hits += int(int(logits[0, -1].argmax()) == ans)
    return hits / max(1, len(items))


def repeated_phrase(words, n=3, times=3):
    """The first phrase of n words that occurs `times` times in `words` (a list), or None."""
    counts = {}
    for i in range(len(words) - n + 1):
        key = tuple(w.strip('.,;:!?"\'').lower() for w in words[i:i + n])
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= times:
            return " ".join(key)
    return None


def greedy_loops(torch, model, enc, val_docs, n=20, new_tokens=30):
    """n held-out greedy continuations of new_tokens tokens, each after the first 6-10 words of a validation
    sentence: [(prompt, continuation, the phrase of 3 words said 3 times or None)]."""
    inv = {v: k for k, v in enc.vocab.items()}
    b2u = {}
    for b in range(256):  # the byte-level alphabet, as bytes_to_unicode
        c = b if (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255) else None
        b2u[b] = c
    extra = [b for b in range(256) if b2u[b] is None]
    u2b = {chr(b): b for b in range(256) if b2u[b] is not None}
    u2b.update({chr(256 + i): b for i, b in enumerate(extra)})
    sents = [s for p in prose_passages(val_docs, regex.compile(r"(?!x)x"), 10, 30) for s in p]
    out = []
    model.eval()
    for s in sents[::max(1, len(sents) // n)][:n]:
        prompt = " ".join(s.split()[:6 + len(out) % 5])
        ids = enc.encode(prompt)
        new = []
        with torch.no_grad():
            for _ in range(new_tokens):
                nxt = int(model(torch.tensor((ids + new)[-model.wpe.weight.shape[0]:])[None])[0, -1].argmax())
                new.append(nxt)
        text = bytes(u2b[c] for i in new for c in inv[i] if c in u2b).decode("utf-8", errors="replace")
        out.append((prompt, text, repeated_phrase((prompt + text).split())))
    return out


def issue48_scores(torch, model, enc, val_docs, copula_items, heldout_names, seed=1):
    """The held-out measurements issue 48 asks for: copying (200 repeated validation sentences cut inside the
    repeat), name reuse (60 held-out names), the bare copula and the reversed facts (counted apart), 20 greedy
    continuations checked for a phrase said three times."""
    cop = [q for q in copula_items if q["form"] == "copula"]
    rev = [q for q in copula_items if q["form"] == "reversed"]

    def share(items):
        return top1_share(torch, model, [(enc.encode(q["prompt"]), enc.encode(q["answer"])[0]) for q in items])

    loops = greedy_loops(torch, model, enc, val_docs)
    copies, names = copy_prompts(enc, val_docs, 200, seed), name_prompts(enc, val_docs, heldout_names, 60, seed)
    return {"copy": top1_share(torch, model, copies), "copy_n": len(copies),
            "names": top1_share(torch, model, names), "names_n": len(names),
            "copula": share(cop), "copula_n": len(cop), "reversed": share(rev), "reversed_n": len(rev),
            "loops": [{"prompt": p, "continuation": c, "repeated": r} for p, c, r in loops]}
