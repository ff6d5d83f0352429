#!/usr/bin/env python3
"""Soak test of the desktop app: drives it at random for a while and watches its memory.

    tools/soak.py --app build-asan/glassbox --cli build/glassbox-cli --minutes 10 --out /tmp/soak

Writes small random models of every kind make-random makes (GPT-2, Llama and Marian folders, Mixtral, Qwen2 Q8_0 and
Gemma 2 GGUF files) and broken ones (a folder whose config.json is not JSON, random bytes as .gguf, a truncated
GGUF, a missing path, a path that is not UTF-8), then a seeded random script of the app's script commands: typing,
keys (text size, presentation, fill the window), every tab, demos, SAEs (the shipped one, a broken one, one
trained in the app), the head grid's colourings, token and head
selection, clicks on every remembered control that is on screen, drags of sliders, generation, model and model-B
switches among the good and the broken files, sessions saved and loaded (and a broken one), exports. The script
repeats until --minutes have passed; the app then exits normally, so a sanitizer build reports leaks at exit.
The app runs under xvfb-run; its resident memory is sampled every 5 s. Prints a summary (and writes
OUT/soak.json): the exit code, the number of sanitizer reports in its stderr, and the resident memory over the
first and the last minute. Exit code 0 only when the app exited 0 with no sanitizer report.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

TABS = ["head", "lens", "attribution", "patching", "learn", "sampling", "experts", "image", "cross", "circuit", "steer",
        "features"]
DEMOS = ["induction", "prev-token", "lens", "ioi", "break-it", "temperature"]
COLOURS = ["pattern", "prev_token", "first_token", "induction", "duplicate_token", "entropy"]
PANELS = ["prompt", "ablations", "model", "left", "overview", "analysis", "output", "residual"]
KEYS = ["ctrl+=", "ctrl+-", "ctrl+0", "f5", "f11", "escape", "left", "right", "end", "backspace", "enter", "ctrl+e"]
# controls the app remembers by name (app/gui: remember_item); clicked only when on screen at that moment
CLICKS = ["Generate", "Append to prompt", "prepend BOS", "attention on the GPU", "break it", "break next",
          "break previous", "break restore", "break row none", "clear all", "clear knockouts", "clear experts",
          "circuit keep", "circuit restore", "remove circuit", "end demo", "back to my prompt", "induction test",
          "learn next", "learn prev", "learn present", "lens clear target", "patch mode patching", "patch mode trace",
          "patching difference", "patching fast mode", "patching use suggested contrast", "saliency gradient x input",
          "saliency integrated gradients", "steer build", "steer apply", "steer mean", "steer last",
          "remove steering", "steer from position", "stack encoder", "stack decoder", "compare rel", "Close model B",
          "text larger", "text smaller", "presentation mode", "translate", "Translate, sampled", "attention rollout",
          "how it differs", "surprisal", "computed", "Open recent", "feature ablate", "feature clamp", "feature steer",
          "feature index", "feature close", "sae train section", "sae train"]
DRAGS = ["step slider", "saliency steps", "sampling top-k", "sampling seed"]
WORDS = ["The", "cat", "sat", "on", "the", "mat", ".", "When", "Mary", "and", "John", "went", "to", "store", ",",
         "gave", "a", "drink", "Eiffel", "Tower", "is", "in", "Paris", "Once", "upon", "time", "é", "日本", "🙂",
         "\u200b", "  ", "1234567890", "the the the the"]


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def make_models(cli, d):
    small = ["--layers-n", "2", "--d-model", "64", "--heads-n", "4", "--vocab", "400", "--ctx", "128"]
    good = {
        "gpt2": f"{d}/gpt2",
        "llama": f"{d}/llama",
        "marian": f"{d}/marian",
        "mixtral": f"{d}/mixtral.gguf",
        "qwen2": f"{d}/qwen2-q8.gguf",
        "gemma2": f"{d}/gemma2-f16.gguf",
    }
    run([cli, "make-random", "--out", good["gpt2"], *small, "--seed", "1"])
    run([cli, "make-random", "--arch", "llama", "--out", good["llama"], *small, "--kv-heads-n", "2", "--seed", "2"])
    run([cli, "make-random", "--arch", "marian", "--out", good["marian"], *small, "--encoder-layers-n", "3", "--seed", "3"])
    run([cli, "make-random", "--arch", "mixtral", "--out", good["mixtral"], *small, "--seed", "4"])
    run([cli, "make-random", "--arch", "qwen2", "--out", good["qwen2"], *small, "--dtype", "Q8_0", "--seed", "5"])
    run([cli, "make-random", "--arch", "gemma2", "--out", good["gemma2"], *small, "--dtype", "F16", "--seed", "6"])
    os.makedirs(f"{d}/bad-config", exist_ok=True)
    with open(f"{d}/bad-config/config.json", "w") as f:
        f.write("{ not json")
    with open(f"{d}/random.gguf", "wb") as f:
        f.write(random.Random(7).randbytes(4096))
    with open(good["qwen2"], "rb") as f:
        head = f.read(os.path.getsize(good["qwen2"]) // 3)
    with open(f"{d}/truncated.gguf", "wb") as f:
        f.write(head)
    with open(f"{d}/bad-session.json", "w") as f:
        f.write('{"glassbox_session": 1, "model": 42, "ablations": "x"')
    os.makedirs(f"{d}/bad-sae", exist_ok=True)
    with open(f"{d}/bad-sae/cfg.json", "w") as f:
        f.write('{"d_in": 7, "d_sae": 3, "architecture": "topk"')
    with open(f"{d}/bad-sae/sae_weights.safetensors", "wb") as f:
        f.write(random.Random(8).randbytes(512))
    bad = [f"{d}/bad-config", f"{d}/random.gguf", f"{d}/truncated.gguf", f"{d}/does-not-exist",
           f"{d}/not-utf8-\udcff\udcfe"]
    return good, bad


def make_script(rng, good, bad, default_model, d, seconds, steps, sae, corpus):
    models = list(good.values()) + [default_model]
    lines = []
    current = default_model  # broken files keep the model that was open
    for i in range(steps):
        r = rng.random()
        if r < 0.14:
            lines.append("try-click prompt")
            lines.append("type " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))))
        elif r < 0.22:
            lines.append("key " + rng.choice(KEYS))
        elif r < 0.34:
            lines.append("tab " + rng.choice(TABS))
        elif r < 0.38:
            if current == default_model:
                lines.append("demo " + rng.choice(DEMOS))
        elif r < 0.42:
            lines.append("colour-by " + rng.choice(COLOURS))
            lines.append("scale " + rng.choice(["linear", "log", "rowmax"]))
        elif r < 0.48:
            lines.append(f"select-token {rng.randint(0, 12)}")
            lines.append(f"select-head {rng.randint(0, 3)}.{rng.randint(0, 7)}")
        elif r < 0.62:
            lines.append("try-click " + rng.choice(CLICKS))
        elif r < 0.66:
            lines.append(f"drag {rng.choice(DRAGS)} {rng.randint(-300, 300)} {rng.randint(-20, 20)}")
        elif r < 0.69:
            lines.append(f"gen-tokens {rng.randint(1, 40)}")
            lines.append(f"gen-temperature {rng.choice(['0', '0.7', '1', '2'])}")
            lines.append("try-click Generate")
        elif r < 0.72:
            lines.append("corrupt " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))))
            lines.append("patch-mode " + rng.choice(["patching", "trace"]))
            lines.append("subject " + rng.choice(WORDS))
        elif r < 0.78:
            if rng.random() < 0.4:
                lines.append("open " + rng.choice(bad))
            else:
                current = rng.choice(models)
                lines.append("open " + current)
            lines.append("wait")
        elif r < 0.80:
            lines.append("open-b " + rng.choice(models + bad))
            lines.append("compare-view " + rng.choice(["a", "b", "avsb"]))
        elif r < 0.83:
            lines.append(f"ui-scale {rng.choice(['0.6', '0.8', '1', '1.25', '1.5', '2', '3'])}")
        elif r < 0.86:
            lines.append("maximise " + rng.choice(PANELS) if rng.random() < 0.6 else "restore")
        elif r < 0.88:
            lines.append("present " + rng.choice(["on", "off"]))
        elif r < 0.91:
            lines.append(f"save-session {d}/session.json")
            lines.append("session " + rng.choice([f"{d}/session.json", f"{d}/bad-session.json", f"{d}/none.json"]))
            lines.append("wait")
        elif r < 0.93:
            lines.append(f"export {d}/export")
            if rng.random() < 0.5:
                lines.append(f"export-panel {rng.choice(PANELS)} {d}/export")
        elif r < 0.955:
            lines.append(f"wheel {rng.randint(-5, 5)}")
        elif r < 0.975:  # features: the shipped SAE (the default model's), a broken one, one trained here
            lines.append("tab features")
            lines.append("sae " + rng.choice([sae, f"{d}/bad-sae", f"{d}/no-sae", f"{d}/trained-sae"]))
            lines.append(f"feature {rng.randint(-1, 40)}")
            if rng.random() < 0.3:
                lines.append(f"sae-train corpus={corpus} out={d}/trained-sae layer={rng.randint(0, 3)} features=32 k=4 "
                             f"steps={rng.randint(20, 200)}")
            if rng.random() < 0.3:
                lines.append(f"feature-corpus {corpus}")
                lines.append("try-click feature index")
        else:
            lines.append(f"frames {rng.randint(1, 20)}")
        if i % 100 == 99:
            lines.append("print")  # progress, in the app's stdout
    lines.append(f"repeat-until {seconds}")
    lines.append("restore")
    lines.append("present off")
    lines.append("wait")
    lines.append("print")
    return lines


def app_pid(root, exe):
    """The pid of the process running exe among root's descendants (xvfb-run runs the app), else root."""
    parent, argv0 = {}, {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    st = f.read()
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv0[int(p)] = f.read().split(b"\0")[0].decode("utf-8", "replace")
                parent[int(p)] = int(st[st.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    for pid, a0 in argv0.items():
        if a0 == exe:
            q = parent.get(pid, 0)
            while q > 1:
                if q == root:
                    return pid
                q = parent.get(q, 0)
    return root


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmRSS:\s+(\d+)", f.read())
        return int(m.group(1)) if m else None
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", required=True, help="the glassbox binary (a sanitizer build for leak and memory checks)")
    ap.add_argument("--cli", required=True, help="glassbox-cli, to write the random models")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1500, help="script lines before it repeats")
    ap.add_argument("--out", required=True, help="a folder for the models, the script, the logs and soak.json")
    a = ap.parse_args()
    d = os.path.abspath(a.out)
    a.app, a.cli = os.path.abspath(a.app), os.path.abspath(a.cli)
    os.makedirs(d, exist_ok=True)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_model = os.path.join(repo, "assets", "models", "glassbox-tiny-en")
    good, bad = make_models(a.cli, d)
    seconds = a.minutes * 60
    sae = os.path.join(repo, "assets", "saes", "default-resid_post-L2")
    corpus = os.path.join(repo, "tests", "data", "default_model_text.txt")
    lines = make_script(random.Random(a.seed), good, bad, default_model, d, seconds, a.steps, sae, corpus)
    script = os.path.join(d, "soak-script.txt")
    with open(script, "wb") as f:  # bytes: one path is not UTF-8 on purpose
        f.write("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")

    env = dict(os.environ, GLASSBOX_CONFIG_DIR=os.path.join(d, "config"))
    env.setdefault("LSAN_OPTIONS", f"suppressions={repo}/tools/lsan.supp:print_suppressions=0")
    env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1:intercept_tls_get_addr=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    err_path, out_path = os.path.join(d, "app-stderr.txt"), os.path.join(d, "app-stdout.txt")
    t0 = time.time()
    with open(err_path, "wb") as err, open(out_path, "wb") as out:
        app = subprocess.Popen(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", a.app, "--size", "1600x1000", "--script",
                                script], cwd=d, env=env, stdout=out, stderr=err)
        samples = []
        limit = seconds + 900  # the script's last lap (the app allows it 8 minutes), the leak check at exit
        while app.poll() is None and time.time() - t0 < limit:
            pid = app_pid(app.pid, a.app)
            kb = rss_kb(pid) if pid != app.pid else None  # (before the app starts: xvfb-run's shell)
            if kb:
                samples.append((round(time.time() - t0, 1), kb))
            time.sleep(5)
        if app.poll() is None:
            app.kill()
        rc = app.wait()
    stderr = open(err_path, "rb").read().decode("utf-8", "replace")
    reports = len(re.findall(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:", stderr))
    script_errors = re.findall(r"^error: .*$", stderr, re.M)
    first = [kb for t, kb in samples if t <= 60]
    last = [kb for t, kb in samples if t >= samples[-1][0] - 60] if samples else []
    summary = {
        "seconds": round(time.time() - t0, 1), "exit_code": rc, "sanitizer_reports": reports,
        "script_errors": script_errors[:5], "script_lines": len(lines), "samples": len(samples),
        "rss_mb_first_minute": [round(min(first) / 1024, 1), round(max(first) / 1024, 1)] if first else None,
        "rss_mb_last_minute": [round(min(last) / 1024, 1), round(max(last) / 1024, 1)] if last else None,
        "rss_mb_max": round(max(kb for _, kb in samples) / 1024, 1) if samples else None,
    }
    with open(os.path.join(d, "soak.json"), "w") as f:
        json.dump({**summary, "rss_kb": samples}, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if rc == 0 and reports == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
