#!/usr/bin/env python3
"""Glassbox against llama.cpp on this machine: the table of docs/performance.md, remade by anyone.

For each stored type it writes a random Llama GGUF of one shape (glassbox-cli make-random), then runs, in
alternating rounds, `glassbox-cli bench --generate` (ours, the exact kernel unless --matmul says otherwise) and
tests/llama_cpp/speed.mjs (node-llama-cpp 3.21.1, CPU, the same threads) on the same file, and prints a Markdown
table of medians: generation tokens/s, the prompt's ms (ours with and without full capture), each process's
peak resident memory, and the ratios, with the machine, its load and the date above it.

    tools/compare_llama.py [--build build] [--types F16,BF16,Q8_0,Q4_K,Q6_K] [--shape 1b|tiny] [--rounds 3]
                           [--prompt 64] [--generate 32] [--repeat 3] [--threads 2] [--matmul auto]
                           [--dir /tmp/glassbox-compare] [--out TABLE.md] [--json RESULTS.json]

Needs tools/setup.sh --tests (node and tests/llama_cpp/node_modules). The 1B shape's five files take about 8 GB
of disk in --dir (kept between runs: a file already there is reused); the machine should be quiet, and a round
takes minutes per type on 2 cores. The medians are of the rounds' own medians (each of --repeat runs).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# make-random's options for each shape: the Llama-3.2-1B shape of the docs, and a tiny one for a quick check
SHAPES = {
    "1b": ["--layers-n", "16", "--d-model", "2048", "--heads-n", "32", "--kv-heads-n", "8", "--ff", "8192",
           "--vocab", "128256", "--ctx", "2048"],
    "tiny": ["--layers-n", "2", "--d-model", "256", "--heads-n", "4", "--kv-heads-n", "2", "--ff", "512",
             "--vocab", "1000", "--ctx", "256"],
}
TYPES = ["F16", "BF16", "Q8_0", "Q4_K", "Q6_K"]


def fail(msg):
    print("compare_llama: " + msg, file=sys.stderr)
    sys.exit(2)


def peak_mb_of(cmd, cwd=None, env=None):
    """Runs cmd and returns (its stdout, its peak resident memory in MB): wait4 on that child alone gives its own
    rusage (communicate() would reap it first). A failure ends the script with the command's last words."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = {}
    readers = [threading.Thread(target=lambda k, f: got.__setitem__(k, f.read()), args=(k, f))
               for k, f in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(p.pid, 0)
    for t in readers:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        fail("%s failed (%d): %s" % (" ".join(cmd[:3]), p.returncode, (got["err"] or got["out"]).strip()[-400:]))
    return got["out"], usage.ru_maxrss / 1024.0  # (Linux: kilobytes)


def machine():
    model = platform.processor() or "unknown CPU"
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        if m:
            model = m.group(1).strip()
        m = re.search(r"^flags\s*:\s*(.+)$", info, re.M)
        if m:
            have = set(m.group(1).split())
            flags = ", ".join(f for f in ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8",
                                          "amx_bf16"] if f in have)
    except OSError:
        pass
    return "%s, %d logical cores (%s)" % (model, os.cpu_count() or 0, flags or "no flags read")


def load():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "unknown"


def ours(cli, path, a):
    cmd = [cli, "bench", "--model", path, "--tokens", str(a.prompt), "--generate", str(a.generate),
           "--repeat", str(a.repeat), "--matmul", a.matmul, "--json", os.path.join(a.dir, "bench.json")]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    _, peak = peak_mb_of(cmd, env=env)
    with open(os.path.join(a.dir, "bench.json")) as f:
        j = json.load(f)
    return {"tokens_per_s": j["tokens_per_s"], "prompt_ms": j["prompt_ms"], "prompt_captured_ms": j["prompt_captured_ms"],
            "peak_mb": peak, "matmul": j.get("matmul", "")}


def llama(path, a):
    cmd = ["node", "speed.mjs", path, "--prompt", str(a.prompt), "--generate", str(a.generate), "--repeat",
           str(a.repeat), "--threads", str(a.threads)]
    env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true")
    out, peak = peak_mb_of(cmd, cwd=os.path.join(ROOT, "tests", "llama_cpp"), env=env)
    m = re.search(r"median: prompt ([0-9.]+) ms, generation ([0-9.]+) tokens/s", out)
    if not m:
        fail("speed.mjs printed no median line: " + out.strip()[-300:])
    return {"prompt_ms": float(m.group(1)), "tokens_per_s": float(m.group(2)), "peak_mb": peak}


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def table(results, a, info):
    lines = ["Machine: %s. Load before %s, after %s. %s; %d threads each; %d alternating round%s, each the median of "
             "%d runs; the table gives the medians of the rounds. Shape %s, a prompt of %d random tokens, %d generated "
             "greedily; ours `bench --matmul %s` (%s)." % (info["machine"], info["load_before"], info["load_after"],
                                                          info["date"], a.threads, a.rounds, "" if a.rounds == 1 else "s",
                                                          a.repeat, a.shape, a.prompt, a.generate, a.matmul,
                                                          info["kernel"]),
             "",
             "| type | generation, ours (tokens/s) | llama.cpp | ours / llama.cpp | prompt %d, ours with full capture (ms) "
             "| ours, nothing kept | llama.cpp | ours (full capture) / llama.cpp | peak RSS, ours (MB) | llama.cpp |" % a.prompt,
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in a.types:
        o, l = results[t]["ours"], results[t]["llama"]
        g_o, g_l = med(o, "tokens_per_s"), med(l, "tokens_per_s")
        p_o, p_n, p_l = med(o, "prompt_captured_ms"), med(o, "prompt_ms"), med(l, "prompt_ms")
        lines.append("| %s | %.1f | %.1f | %.2f× | %.1f | %.1f | %.1f | %.2f× | %.0f | %.0f |" %
                     (t, g_o, g_l, g_o / g_l, p_o, p_n, p_l, p_o / p_l, med(o, "peak_mb"), med(l, "peak_mb")))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--shape", default="1b", choices=sorted(SHAPES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--generate", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--matmul", default="auto", choices=["auto", "fp32", "amx", "int8"])
    ap.add_argument("--dir", default="/tmp/glassbox-compare")
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--json", help="also write every run's numbers to this file")
    a = ap.parse_args()
    a.types = [t.strip() for t in a.types.split(",") if t.strip()]
    for t in a.types:
        if t not in TYPES:
            fail("unknown type %s (one of %s)" % (t, ", ".join(TYPES)))
    for n in ("rounds", "prompt", "generate", "repeat", "threads"):
        if getattr(a, n) < 1:
            fail("--%s must be at least 1" % n)
    cli = os.path.join(a.build, "glassbox-cli")
    if not os.access(cli, os.X_OK):
        fail("no %s: build first (tools/build.sh glassbox-cli)" % cli)
    if not os.path.isdir(os.path.join(ROOT, "tests", "llama_cpp", "node_modules", "node-llama-cpp")):
        fail("no node-llama-cpp in tests/llama_cpp: run tools/setup.sh --tests")
    os.makedirs(a.dir, exist_ok=True)

    files = {}
    for t in a.types:  # the files, written once and kept
        files[t] = os.path.join(a.dir, "%s-%s.gguf" % (a.shape, t))
        if not os.path.exists(files[t]):
            print("writing %s" % files[t], file=sys.stderr)
            part = files[t][:-len(".gguf")] + ".part.gguf"  # (complete or absent: an interrupted run leaves a .part)
            peak_mb_of([cli, "make-random", "--arch", "llama", "--out", part, "--dtype", t] + SHAPES[a.shape])
            os.replace(part, files[t])

    info = {"machine": machine(), "load_before": load(), "date": time.strftime("%Y-%m-%d %H:%M")}
    results = {t: {"ours": [], "llama": []} for t in a.types}
    for r in range(a.rounds):
        for t in a.types:  # alternating: ours first in even rounds, llama.cpp first in odd ones
            order = ["ours", "llama"] if r % 2 == 0 else ["llama", "ours"]
            for who in order:
                res = ours(cli, files[t], a) if who == "ours" else llama(files[t], a)
                results[t][who].append(res)
                print("round %d, %s, %s: %.1f tokens/s, prompt %.1f ms, peak %.0f MB" %
                      (r + 1, t, who, res["tokens_per_s"], res.get("prompt_captured_ms", res["prompt_ms"]),
                       res["peak_mb"]), file=sys.stderr)
    info["load_after"] = load()
    info["kernel"] = ", ".join(sorted({o["matmul"] for t in a.types for o in results[t]["ours"]}))
    text = table(results, a, info)
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "args": vars(a), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
