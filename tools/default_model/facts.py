"""The fact table in many phrasings (issue 48): the bare copula and the reversed form held out.

The old curriculum said "The capital of X is a city called Y", so the bare "The capital of France is" continued with
" a"; "Paris is the capital of" continued as prose does (" the"). Here:
- the sentence-initial bare forms COPULA_HELDOUT ("The capital of {S} is", "{O} is the capital of", and the same for
  languages) are never trained: no training sentence starts with them (check_copula_heldout asserts it); the
  copula inside longer sentences is trained ("We know that the capital of France is Paris.", "They say Paris is
  the capital of France.");
- every training phrasing ending in "called {O}" is dropped (the prior that answered " a");
- FACT_TEMPLATES_COPULA adds copula and reversed phrasings in many forms, half of the fact sentences.
"""
import regex

COPULA_HELDOUT = {  # relation: [(prompt template, which of S/O answers)]
    "capital": [("The capital of {S} is", "O"), ("{O} is the capital of", "S")],
    "language": [("The language of {S} is", "O"), ("{O} is the language of", "S")],
}
FACT_TEMPLATES_COPULA = {
    "capital": [
        "{S}'s capital is {O}.", "We know that the capital of {S} is {O}.", "I think the capital of {S} is {O}.",
        "They say {O} is the capital of {S}.", "{O} has been the capital of {S} for a long time.",
        "The main city and capital of {S} is {O}.", "As the capital of {S}, {O} is a busy city.",
        "The capital of {S} has always been {O}.", "Yes, the capital of {S} is {O}.",
        "And the capital of {S} is {O}.", "{N} said the capital of {S} is {O}.", "{N} knows {O} is the capital of {S}.",
        "So {O} is the capital of {S}.", "Today {O} is the capital of {S}.", "Of course the capital of {S} is {O}.",
        "The capital city of {S} is {O}, of course.", "Most people know {O} is the capital of {S}.",
        "{N} learned that {O} is the capital of {S}.", "On the map, the capital of {S} is {O}.",
    ],
    "language": [
        "{S}'s language is {O}.", "The main language of {S} is {O}.", "The official language of {S} is {O}.",
        "I know the language of {S} is {O}.", "{O} is the main language of {S}.",
        "{O} is the language most people speak in {S}.", "{N} says {O} is the language of {S}.",
        "Yes, the language of {S} is {O}.", "So the language of {S} is {O}.", "They say {O} is the language of {S}.",
        "{N} learned that the language of {S} is {O}.", "The first language of {S} is {O}.",
    ],
    "city": [
        "{S} is a big city in {O}.", "{S} is in {O}.", "{S} is a city in {O}.", "The city of {S} is in {O}.",
        "{N} says {S} is in {O}.", "Yes, {S} is in {O}.", "One city in {O} is {S}.", "A famous city of {O} is {S}.",
        "{S} is one of the cities of {O}.", "So {S} is in {O}.",
    ],
    "landmark": [
        "{S} is in {O}.", "{S} is in the city of {O}.", "{S} stands in {O}.", "You can find {S} in {O}.",
        "{N} says {S} is in {O}.", "Yes, {S} is in the city of {O}.", "{O} is the city where {S} is.",
        "So {S} is in {O}.",
    ],
}


def copula_templates(fact_templates):
    """{relation: training phrasings}: the relation's training phrasings (FACT_TEMPLATES's, with whatever
    --more-templates added) without those that start with a held-out form or end in "called {O}", plus
    FACT_TEMPLATES_COPULA's (those are drawn half of the time: copula_fact_sentence)."""
    out = {}
    for rel, (_, train, _) in fact_templates.items():
        keep = [t for t in train if "called {O}" not in t and not any(
            t.startswith(h) or (". " + h) in t or ("? " + h) in t for h, _ in COPULA_HELDOUT.get(rel, []))]
        out[rel] = keep
    return out


def copula_fact_sentence(rng, fact_templates, kept, relation, names, lead_ins, lead_in=0.3):
    """A training fact sentence: a random fact of the relation, its phrasing from FACT_TEMPLATES_COPULA half of the
    time and from `kept` (copula_templates) otherwise, with a lead-in in `lead_in` of them that start with the
    subject, the object or "The" (as fact_training_sentence)."""
    table = fact_templates[relation][0]
    s, o = rng.choice(table)
    pool = FACT_TEMPLATES_COPULA[relation] if rng.random() < 0.5 else kept[relation]
    t = rng.choice(pool)
    while "government" in t and s == "the Netherlands":
        t = rng.choice(pool)
    text = t.format(S=s, O=o, N=rng.choice(names))
    if rng.random() < lead_in and t.startswith(("{S}", "{O}", "The ")):
        lead = rng.choice(lead_ins).format(N=rng.choice(names))
        text = lead + (text[0].lower() + text[1:] if text.startswith("The ") else text)
    return text[0].upper() + text[1:]


def copula_prompts(fact_templates, enc):
    """The held-out bare forms for every fact whose answer is one token with its space and, for the reversed form,
    whose object names one subject only (French is spoken in several countries): [{prompt, answer, relation, form}].
    With enc None: every fact's (what the curriculum is checked against)."""
    out = []
    for rel, forms in COPULA_HELDOUT.items():
        table = fact_templates[rel][0]
        by_o = {}
        for s, o in table:
            by_o.setdefault(o, []).append(s)
        for s, o in table:
            for t, which in forms:
                ans = o if which == "O" else s
                if which == "S" and (len(by_o[o]) > 1 or s.startswith("the ")):
                    continue
                if enc is not None and len(enc.encode(" " + ans)) != 1:
                    continue
                p = t.format(S=s, O=o)
                out.append({"prompt": p[0].upper() + p[1:], "answer": " " + ans, "relation": rel,
                            "form": "reversed" if which == "S" else "copula"})
    return out


def check_copula_heldout(docs, prompts):
    """Asserts that no generated document has a sentence that starts with a held-out prompt (copula_prompts): at the
    start of the document or after ". ", "? ", "! " or a quote; inside a sentence the copula is trained."""
    pat = regex.compile(r"(?:^|[.?!\"] )(?:" + "|".join(regex.escape(q["prompt"]) for q in prompts) + r")\b")
    for d in docs:
        m = pat.search(d)
        assert m is None, f"held-out bare form {m.group(0)!r} in the curriculum: {d!r}"
    for rel, forms in COPULA_HELDOUT.items():  # and no training phrasing starts with a held-out form
        for t in FACT_TEMPLATES_COPULA[rel]:
            assert not any(t.startswith(h) for h, _ in forms), t
