// The reference side of the llama.cpp parity suite (tests/test_llama_cpp.cpp): runs GGUF files through llama.cpp
// (node-llama-cpp, CPU only) and writes, per file, the next-token distribution at every position of a prompt and
// llama.cpp's greedy continuation, as JSON.
//
//   node eval.mjs OUT.json --tokens 5,17,42 [--continue N] FILE.gguf [FILE.gguf ...]
//
// OUT.json: {"llama_cpp": {"package": "3.21.1", "release": "..."}, "results": [{"path", "ok", "error"?,
// "architecture"?, "probs": [T + N][V], "continuation": [N]}, ...]} in the order of the files: probs[t] is the
// distribution after token t of prompt + continuation.
// A file llama.cpp refuses gets ok false and its error; the others still run.
import {getLlama} from "node-llama-cpp";
import {readFileSync, writeFileSync} from "node:fs";

function parseArgs(argv) {
    const out = {files: [], tokens: null, n_continue: 0, json: null};
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--tokens") out.tokens = argv[++i].split(",").map(Number);
        else if (argv[i] === "--continue") out.n_continue = Number(argv[++i]);
        else if (out.json === null) out.json = argv[i];
        else out.files.push(argv[i]);
    }
    if (!out.json || !out.tokens || out.tokens.some((t) => !Number.isInteger(t) || t < 0) || !out.files.length)
        throw new Error("usage: node eval.mjs OUT.json --tokens 1,2,3 [--continue N] FILE.gguf [FILE.gguf ...]");
    return out;
}

// A distribution as a dense array [V] (node-llama-cpp gives a Map token -> probability over the whole vocabulary)
function dense(map, vocab) {
    const p = new Array(vocab).fill(0);
    for (const [tok, prob] of map) p[tok] = prob;
    return p;
}

// Greedy, with every distribution: llama.cpp's own greedy sampler picks each next token (temperature 0)
const next = {generateNext: {probabilities: true, token: true, options: {temperature: 0}}};

async function evalFile(llama, path, tokens, nContinue) {
    const model = await llama.loadModel({modelPath: path, gpuLayers: 0});
    try {
        const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
        const context = await model.createContext({
            contextSize: Math.max(32, tokens.length + nContinue + 8),
            batchSize: tokens.length + nContinue + 8,
            sequences: 1,
            flashAttention: false,
            experimentalKvCacheKeyType: "F32",
            experimentalKvCacheValueType: "F32",
            threads: 1,
        });
        try {
            const seq = context.getSequence();
            const probs = [], continuation = [];
            const keep = (res) => res.forEach((r) => probs.push(dense(r.next.probabilities, vocab)));
            let res = await seq.controlledEvaluate(tokens.map((t) => [t, next]));
            keep(res);
            for (let k = 0; k < nContinue; k++) {
                const tok = res[res.length - 1].next.token;
                continuation.push(tok);
                res = await seq.controlledEvaluate([[tok, next]]);
                keep(res);
            }
            return {ok: true, architecture: model.fileInfo.metadata.general.architecture, probs, continuation};
        } finally {
            await context.dispose();
        }
    } finally {
        await model.dispose();
    }
}

const args = parseArgs(process.argv.slice(2));
const pkg = JSON.parse(readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url)));
// llama.cpp's own error lines name why a file was refused ("cannot find tokenizer merges ..."); the thrown error
// only says it failed
let errors = [];
const logger = (level, message) => {
    if (level === "error" || level === "fatal") errors.push(message.trim());
};
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: "warn", logger, progressLogs: false});
const out = {llama_cpp: {package: pkg.version, release: llama.llamaCppRelease?.release ?? "?"}, results: []};
for (const path of args.files) {
    errors = [];
    try {
        out.results.push({path, ...(await evalFile(llama, path, args.tokens, args.n_continue))});
    } catch (e) {
        const why = [...new Set(errors.filter((m) => m.length > 0 && !/failed to load model$/.test(m)))];
        out.results.push({path, ok: false, error: [String(e?.message ?? e).split("\n")[0], ...why].join(": ")});
    }
}
writeFileSync(args.json, JSON.stringify(out));
