"""Byte-level BPE in GPT-2's format (vocab.json + merges.txt with <|endoftext|>): training, the forced merges that
make names, places and the demos' words single tokens, growing a tokenizer by appended merges, and the encoder."""
import collections
import json
import os

from .corpus import CACHE
from .curriculum import FACT_TEMPLATES, HELDOUT_NAMES, IOI_NAMES, IOI_OBJECTS, IOI_PLACES, LANDMARKS, STORY_ANIMALS


GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"



def merge_pair(sym, a, b):
    """sym with every adjacent (a, b) joined into a + b, left to right (a BPE merge applied once)."""
    out, j = [], 0
    while j < len(sym):
        if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
            out.append(a + b)
            j += 2
        else:
            out.append(sym[j])
            j += 1
    return out

def forced_tokens():
    """Words that must be single tokens (with the leading space they have inside a sentence): every name (IOI answers),
    every answer of the fact table and the words of its cities and countries (the landmarks' words need not be: a
    landmark is never an answer), the demo prompts' answers and key words."""
    words = set(IOI_NAMES + HELDOUT_NAMES)
    for rel, (table, _, _) in FACT_TEMPLATES.items():
        for s, o in table:
            words.update(w for w in ((s + " " if rel != "landmark" else "") + o).split() if w[0].isalpha() and w.isalpha())
    words.update("""America Paris mat Once time much times five gentlemen little cat sat dog fox lazy quick brown jumps
    hungry sea old store drink United States city capital language""".split())
    out = sorted(" " + w for w in words)
    return out + ["Once"]  # a story's first word, at the start of a text


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_bpe(docs, vocab_size):
    import regex
    split = regex.compile(GPT2_SPLIT)
    b2u = bytes_to_unicode()
    counts = collections.Counter()
    for d in docs:
        counts.update(split.findall(d))
    words = [[b2u[b] for b in w.encode("utf-8")] for w in counts]
    freq = [counts[w] for w in counts]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words containing it
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freq[i]
            where[(a, b)].add(i)
    merges = []
    n_merges = vocab_size - 256 - 1
    while len(merges) < n_merges and pair_count:
        # most frequent pair; ties broken by the pair itself so the result is deterministic
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        a, b = best
        for i in list(where[best]):
            w = words[i]
            for x, y in zip(w, w[1:]):  # remove this word's old pairs
                pair_count[(x, y)] -= freq[i]
                if pair_count[(x, y)] <= 0:
                    del pair_count[(x, y)]
                where[(x, y)].discard(i)
            out = merge_pair(w, a, b)
            words[i] = out
            for x, y in zip(out, out[1:]):
                pair_count[(x, y)] += freq[i]
                where[(x, y)].add(i)
        where.pop(best, None)
    return vocab_of(merges), merges


def vocab_of(merges):
    """vocab.json: the 256 byte symbols, one token per merge in merge order, <|endoftext|> last. A merge whose result
    is already a token (the same string reached through another split) adds no id, so the ids stay contiguous."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    vocab[EOT] = len(vocab)
    return vocab


def bpe_pieces(rank, word):
    """The symbols (strings) BPE makes of one pre-tokenized word with merge ranks `rank` (as Encoder.bpe)."""
    b2u = bytes_to_unicode()
    return bpe_symbols(rank, [b2u[b] for b in word.encode("utf-8")])


def bpe_symbols(rank, sym):
    """BPE on a list of symbols (byte characters or tokens) with merge ranks `rank`: the symbols it ends with."""
    while len(sym) > 1:
        r, i = min((rank.get((x, y), 1 << 30), i) for i, (x, y) in enumerate(zip(sym, sym[1:])))
        if r == 1 << 30:
            break
        sym = merge_pair(sym, sym[i], sym[i + 1])
    return sym


def forced_merges(merges, words):
    """Merges to append to `merges` so that every word of `words` is one token under ordinary BPE.

    A word's pieces under the merges so far (including those appended for earlier words) are joined left to right:
    (p0, p1), (p0p1, p2), ... Appended merges rank after every earlier one, so they cannot change how an earlier
    word is split: BPE on that word always finds one of its own lower-ranked merges first, until it is one token."""
    rank = {m: i for i, m in enumerate(merges)}
    extra = []
    for w in words:
        sym = bpe_pieces(rank, w)
        while len(sym) > 1:
            m = (sym[0], sym[1])
            rank[m] = len(rank)
            extra.append(m)
            sym = [sym[0] + sym[1]] + sym[2:]
    return extra


def read_tokenizer(folder):
    """vocab.json ({token: id}) and merges.txt ([(a, b)] in rank order) of a GPT-2 model folder."""
    vocab = json.load(open(os.path.join(folder, "vocab.json"), encoding="utf-8"))
    merges = [tuple(l.rstrip("\n").split(" ")) for l in open(os.path.join(folder, "merges.txt"), encoding="utf-8")
              if l.strip() and not l.startswith("#version")]
    return vocab, merges


def extend_tokenizer(vocab, merges, words):
    """A trained tokenizer grown so that each of `words` is one token, without changing any existing id: the merges
    forced_merges finds are appended (lowest priority: every text is first split exactly as before, then only these
    joins can apply) and each new token gets the next id after the existing ones (<|endoftext|> keeps its id).
    Returns (vocab, merges, number of appended merges, new tokens in id order)."""
    extra = forced_merges(merges, words)
    vocab = dict(vocab)
    new = []
    for a, b in extra:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            new.append(a + b)
    return vocab, merges + extra, len(extra), new


def init_words():
    """The words --init-from makes single tokens: forced_tokens() (names, the fact table's answers, cities and
    countries, demo words) plus the landmark words, the IOI places and objects and story words."""
    words = set(forced_tokens())
    for s, _ in LANDMARKS:
        words.update(" " + w for w in s.split() if w.isalpha())
    words.update(" " + w for w in IOI_PLACES + IOI_OBJECTS + STORY_ANIMALS + ["Tower", "Eiffel"])
    return sorted(words)


def train_bpe_with_words(docs, vocab_size, words):
    """A BPE of vocab_size tokens (at most) in which each of `words` is a single token: the first k learnt merges
    (a prefix of a longer BPE run is the BPE run with fewer merges) plus the forced merges those words still need,
    with k as large as fits. The learnt merges are cached in tools/.cache/bpe, keyed by a hash of their inputs."""
    import hashlib
    h = hashlib.sha256(f"{vocab_size}\n".encode())
    for d in docs:
        h.update(d.encode("utf-8") + b"\0")
    path = os.path.join(CACHE, "bpe", h.hexdigest()[:24] + ".json")
    if os.path.exists(path):
        merges = [tuple(m) for m in json.load(open(path, encoding="utf-8"))]
    else:
        _, merges = train_bpe(docs, vocab_size)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        json.dump(merges, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    n = vocab_size - 256 - 1
    k = n
    while True:
        extra = forced_merges(merges[:k], words)
        if k + len(extra) <= n:
            break
        k = n - len(extra)
    merges = merges[:k] + extra
    return vocab_of(merges), merges, len(extra)


class Encoder:
    """GPT-2 encoding with our merges (the C++ tokenizer does the same; tests compare them on text)."""

    def __init__(self, vocab, merges):
        import regex
        self.split = regex.compile(GPT2_SPLIT)
        self.vocab = vocab
        self.rank = {m: i for i, m in enumerate(merges)}
        self.b2u = bytes_to_unicode()
        self.cache = {}

    def bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        sym = [self.b2u[b] for b in word.encode("utf-8")]
        while len(sym) > 1:
            pairs = [(self.rank.get((x, y), 1 << 30), i) for i, (x, y) in enumerate(zip(sym, sym[1:]))]
            r, _ = min(pairs)
            if r == 1 << 30:
                break
            sym = merge_pair(sym, *self.merge_of(r))
        ids = [self.vocab[s] for s in sym]
        self.cache[word] = ids
        return ids

    def merge_of(self, r):
        if not hasattr(self, "_by_rank"):
            self._by_rank = {v: k for k, v in self.rank.items()}
        return self._by_rank[r]

    def encode(self, text):
        ids = []
        for w in self.split.findall(text):
            ids += self.bpe(w)
        return ids
