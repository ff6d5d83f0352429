// llama.cpp's speed on a GGUF file, the anchor for `glassbox-cli bench --generate` (docs/performance.md): the time
// to read a prompt of P random tokens, and greedy generation after it, as a user of llama.cpp gets them (CPU, its
// default KV cache and attention settings).
//
//   node speed.mjs FILE.gguf [--prompt 64] [--generate 32] [--threads 2] [--repeat 3] [--seed 1]
//
// Prints one line per repeat ("prompt P tokens: X ms; generate G tokens: Y ms, Z tokens/s") and the medians.
// Random tokens are drawn from the file's vocabulary with a fixed seed, as bench draws ours.
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
    const out = {file: null, prompt: 64, generate: 32, threads: 2, repeat: 3, seed: 1};
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i].replace(/^--/, "");
        if (argv[i].startsWith("--")) {
            if (!(k in out) || k === "file") throw new Error(`unknown option ${argv[i]}`);
            out[k] = Number(argv[++i]);
            if (!Number.isInteger(out[k]) || out[k] < 0) throw new Error(`--${k}: expected a whole number`);
        } else out.file = argv[i];
    }
    if (!out.file || out.prompt < 1 || out.repeat < 1)
        throw new Error("usage: node speed.mjs FILE.gguf [--prompt 64] [--generate 32] [--threads 2] [--repeat 3]");
    return out;
}

// xorshift: the same tokens on every run
function randomTokens(n, vocab, seed) {
    let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
    const out = [];
    for (let i = 0; i < n; i++) {
        s ^= s << 13n; s &= (1n << 64n) - 1n; s ^= s >> 7n; s ^= s << 17n; s &= (1n << 64n) - 1n;
        out.push(Number(s % BigInt(vocab - 16)) + 8); // away from the special ids at the ends
    }
    return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const a = parseArgs(process.argv.slice(2));
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: "error", progressLogs: false});
const model = await llama.loadModel({modelPath: a.file, gpuLayers: 0});
const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const tokens = randomTokens(a.prompt, vocab, a.seed);
const promptMs = [], genMs = [];
for (let r = 0; r < a.repeat; r++) {
    const context = await model.createContext({contextSize: a.prompt + a.generate + 16, batchSize: a.prompt,
                                               sequences: 1, threads: a.threads});
    const seq = context.getSequence();
    // greedy: the first token comes with the prompt's evaluation; each one after it is one evaluation of a token
    let made = 0, pm = 0;
    let t0 = performance.now();
    for await (const tok of seq.evaluate(tokens, {temperature: 0})) {
        void tok;
        if (made === 0) pm = performance.now() - t0, t0 = performance.now();
        if (made++ >= a.generate) break;
    }
    made--;
    const gm = performance.now() - t0;
    promptMs.push(pm), genMs.push(gm);
    console.log(`prompt ${a.prompt} tokens: ${pm.toFixed(1)} ms; generate ${made} tokens: ${gm.toFixed(1)} ms, ` +
                `${(1000 * made / gm).toFixed(2)} tokens/s`);
    await context.dispose();
}
const g = median(genMs);
console.log(`median: prompt ${median(promptMs).toFixed(1)} ms, generation ${(1000 * a.generate / g).toFixed(2)} ` +
            `tokens/s (llama.cpp ${llama.llamaCppRelease?.release ?? "?"}, ${a.threads} threads)`);
await model.dispose();
