// GGUF files: parsing, tensors, and models (every family of the architecture table, core/model/arch.cpp) with
// their tokenizer from metadata. Block formats are quant.cpp's.
//
// Sections: parsing | tensors | metadata and RoPE | reader | tokenizer | load_gguf
#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/load_weights.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Parsing: a cursor that never reads past the end of the mapping
// ---------------------------------------------------------------------------------------------
struct cursor {
    const uint8_t* p;
    const uint8_t* end;
    const std::string& path;
    size_t pos(const uint8_t* base) const { return (size_t)(p - base); }
    void need(uint64_t n, const char* what) {
        if (n > (uint64_t)(end - p))
            throw error(path + ": truncated while reading " + what + " (needs " + std::to_string(n) + " bytes, " +
                        std::to_string(end - p) + " left)");
    }
    template <class T> T get(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    std::string str(const char* what) {
        uint64_t n = get<uint64_t>(what);
        if (n > (1u << 24)) throw error(path + ": string length " + std::to_string(n) + " in " + what + " is absurd");
        need(n, what);
        std::string s((const char*)p, (size_t)n);
        p += n;
        return s;
    }
};

// Bytes of one element of a numeric (or bool) array; 0 for strings, arrays and unknown types.
static int array_elem_size(uint32_t type) {
    switch (type) {
    case 0: case 1: case 7: return 1;  // u8, i8, bool
    case 2: case 3: return 2;          // u16, i16
    case 4: case 5: case 6: return 4;  // u32, i32, f32
    case 10: case 11: case 12: return 8; // u64, i64, f64
    default: return 0;
    }
}

template <class T> static T load_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

double gguf_array_float(const gguf_value& a, uint64_t k) {
    if (a.type != 9 || !a.raw || k >= a.n) throw error("internal: gguf_array_float outside a numeric array");
    const uint8_t* p = a.raw + k * (uint64_t)array_elem_size(a.elem_type);
    switch (a.elem_type) {
    case 0: case 7: return *p;
    case 1: return (int8_t)*p;
    case 2: return load_le<uint16_t>(p);
    case 3: return load_le<int16_t>(p);
    case 4: return load_le<uint32_t>(p);
    case 5: return load_le<int32_t>(p);
    case 6: return load_le<float>(p);
    case 10: return (double)load_le<uint64_t>(p);
    case 11: return (double)load_le<int64_t>(p);
    case 12: return load_le<double>(p);
    }
    throw error("internal: gguf_array_float of element type " + std::to_string(a.elem_type));
}

int64_t gguf_array_int(const gguf_value& a, uint64_t k) {
    if (a.elem_type == 10 || a.elem_type == 11) { // 64-bit integers do not all survive a double
        if (a.type != 9 || !a.raw || k >= a.n) throw error("internal: gguf_array_int outside a numeric array");
        return load_le<int64_t>(a.raw + k * 8);
    }
    double f = gguf_array_float(a, k); // floats as integers only when representable, as scalars are
    return std::isfinite(f) && std::fabs(f) < 9.2e18 ? (int64_t)f : 0;
}

static gguf_value read_value(cursor& c, uint32_t type, int depth) {
    gguf_value v;
    v.type = type;
    switch (type) {
    case 0: v.i = c.get<uint8_t>("u8"); break;
    case 1: v.i = c.get<int8_t>("i8"); break;
    case 2: v.i = c.get<uint16_t>("u16"); break;
    case 3: v.i = c.get<int16_t>("i16"); break;
    case 4: v.i = c.get<uint32_t>("u32"); break;
    case 5: v.i = c.get<int32_t>("i32"); break;
    case 6: v.f = c.get<float>("f32"); break;
    case 7: v.i = c.get<uint8_t>("bool"); break;
    case 8: v.s = c.str("string value"); break;
    case 9: {
        if (depth > 0) throw error(c.path + ": arrays of arrays are not supported");
        v.elem_type = c.get<uint32_t>("array type");
        const uint64_t n = c.get<uint64_t>("array length"), left = (uint64_t)(c.end - c.p);
        v.n = n;
        if (v.elem_type == 8) {
            // each string takes at least its 8-byte length: a count beyond that is a lie. Strings are copied as
            // they are read, so memory follows the bytes actually there, never the count.
            if (n > left / 8)
                throw error(c.path + ": array of " + std::to_string(n) + " strings (8 bytes or more each) exceeds the " +
                            std::to_string(left) + " bytes left in the file");
            v.strs.reserve((size_t)std::min<uint64_t>(n, 1 << 16));
            for (uint64_t k = 0; k < n; k++) v.strs.push_back(c.str("a string in an array"));
        } else {
            // numbers stay in the mapping (read with gguf_array_int / gguf_array_float): no copy at all
            const int size = array_elem_size(v.elem_type);
            if (size == 0)
                throw error(c.path + ": array element type " + std::to_string(v.elem_type) +
                            (v.elem_type == 9 ? " (arrays of arrays) is not supported" : " is unknown"));
            if (n > left / (uint64_t)size)
                throw error(c.path + ": array of " + std::to_string(n) + " elements of " + std::to_string(size) +
                            " bytes exceeds the " + std::to_string(left) + " bytes left in the file");
            v.raw = c.p;
            c.p += n * (uint64_t)size;
        }
        break;
    }
    case 10: v.i = (int64_t)c.get<uint64_t>("u64"); break;
    case 11: v.i = c.get<int64_t>("i64"); break;
    case 12: v.f = c.get<double>("f64"); break;
    default: throw error(c.path + ": unknown metadata value type " + std::to_string(type));
    }
    if (type == 6 || type == 12) // floats read as integers only when representable (fuzzing found -1.7e38)
        v.i = std::isfinite(v.f) && std::fabs(v.f) < 9.2e18 ? (int64_t)v.f : 0;
    else if (type != 8 && type != 9) v.f = (double)v.i;
    return v;
}

gguf_file open_gguf(const std::string& path) {
    gguf_file g;
    g.file = map_file(path);
    const uint8_t* base = g.file->data;
    cursor c{base, base + g.file->size, path};
    c.need(4, "magic");
    if (std::memcmp(base, "GGUF", 4) != 0) throw error(path + ": not a GGUF file (bad magic)");
    c.p += 4;
    g.version = c.get<uint32_t>("version");
    if (g.version != 2 && g.version != 3)
        throw error(path + ": GGUF version " + std::to_string(g.version) + " is not supported (expected 2 or 3)");
    uint64_t n_tensors = c.get<uint64_t>("tensor count"), n_kv = c.get<uint64_t>("metadata count");
    // each metadata entry and tensor info takes well over 8 bytes: bound the counts by the file size, and by
    // what any model has (a few dozen entries, a few thousand tensors), since each entry costs far more in
    // memory than in the file
    if (n_kv > g.file->size / 8 || n_tensors > g.file->size / 8 || n_kv > (1u << 16) || n_tensors > (1u << 20))
        throw error(path + ": header claims " + std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                    " metadata entries, more than the file can hold (or any model has)");
    for (uint64_t k = 0; k < n_kv; k++) {
        std::string key = c.str("metadata key");
        uint32_t type = c.get<uint32_t>("metadata type");
        g.meta[key] = read_value(c, type, 0);
    }
    uint64_t alignment = 32;
    if (g.meta.count("general.alignment")) {
        int64_t a = g.meta["general.alignment"].i;
        if (a <= 0 || a > 65536 || (a & (a - 1))) throw error(path + ": general.alignment " + std::to_string(a) + " is not a power of two");
        alignment = (uint64_t)a;
    }
    std::vector<std::pair<gguf_tensor, uint64_t>> infos;
    for (uint64_t t = 0; t < n_tensors; t++) {
        gguf_tensor ti;
        ti.name = c.str("tensor name");
        uint32_t nd = c.get<uint32_t>("tensor dims");
        if (nd == 0 || nd > 4) throw error(path + ": tensor " + ti.name + " has " + std::to_string(nd) + " dimensions");
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v = c.get<uint64_t>("tensor shape");
            if (v == 0 || v > (1ull << 40)) throw error(path + ": tensor " + ti.name + " has an absurd dimension " + std::to_string(v));
            ti.ne.push_back((int64_t)v);
        }
        ti.type = c.get<uint32_t>("tensor type");
        uint64_t off = c.get<uint64_t>("tensor offset");
        infos.push_back({ti, off});
    }
    uint64_t data_start = (c.pos(base) + alignment - 1) / alignment * alignment;
    if (data_start > g.file->size) throw error(path + ": truncated before the tensor data");
    const uint64_t data_size = g.file->size - data_start;
    for (auto& [ti, off] : infos) {
        int64_t block_values, block_bytes;
        if (!ggml_block(ti.type, block_values, block_bytes))
            throw error(path + ": tensor " + ti.name + " has type " + std::to_string(ti.type) +
                        " (supported: " + std::string(ggml_supported_names()) + ")");
        uint64_t count = 1;
        for (int64_t v : ti.ne) {
            if (count > (1ull << 40) / (uint64_t)v) throw error(path + ": tensor " + ti.name + " is absurdly large");
            count *= (uint64_t)v;
        }
        if (ti.ne[0] % block_values)
            throw error(path + ": tensor " + ti.name + " row of " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
                        ggml_type_name(ti.type) + " block (" + std::to_string(block_values) + ")");
        uint64_t bytes = count / block_values * block_bytes;
        if (off % alignment) throw error(path + ": tensor " + ti.name + " offset " + std::to_string(off) + " is misaligned");
        if (off > data_size || bytes > data_size - off)
            throw error(path + ": tensor " + ti.name + " data [" + std::to_string(off) + ", +" + std::to_string(bytes) +
                        ") runs past the end of the file: truncated?");
        ti.data = base + data_start + off;
        ti.nbytes = (size_t)bytes;
        g.tensors[ti.name] = ti;
    }
    return g;
}

// The tensor, its shape checked against ne (trailing 1s of the file's shape ignored)
static const gguf_tensor& shaped(const gguf_file& g, const std::string& name, const std::vector<int64_t>& ne) {
    auto it = g.tensors.find(name);
    if (it == g.tensors.end()) throw error(g.file->path + ": missing tensor " + name);
    const gguf_tensor& t = it->second;
    std::vector<int64_t> have = t.ne;
    while (have.size() > ne.size() && have.back() == 1) have.pop_back();
    if (have != ne)
        throw error(g.file->path + ": tensor " + name + ": expected shape (ne) " + shape_str(ne) + ", found " + shape_str(t.ne));
    return t;
}

std::vector<float> gguf_tensor_f32(const gguf_file& g, const std::string& name, const std::vector<int64_t>& ne) {
    const gguf_tensor& t = shaped(g, name, ne);
    int64_t n = 1;
    for (int64_t v : ne) n *= v;
    std::vector<float> out((size_t)n);
    dequantize(out.data(), t.data, t.type, n);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Metadata and RoPE
// ---------------------------------------------------------------------------------------------
static const gguf_value* meta(const gguf_file& g, const std::string& key) {
    auto it = g.meta.find(key);
    return it == g.meta.end() ? nullptr : &it->second;
}

static int meta_int(const gguf_file& g, const std::string& key, int lo, int hi, int def = -1) {
    const gguf_value* v = meta(g, key);
    if (!v || v->type == 8 || v->type == 9) {
        if (def >= 0) return def;
        throw error(g.file->path + ": missing metadata " + key);
    }
    if (v->i < lo || v->i > hi)
        throw error(g.file->path + ": " + key + " = " + std::to_string(v->i) + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    return (int)v->i;
}

static float meta_float(const gguf_file& g, const std::string& key, float def) {
    const gguf_value* v = meta(g, key);
    if (!v || v->type == 8 || v->type == 9) return def;
    if (!(v->f > 0) || !std::isfinite(v->f)) throw error(g.file->path + ": " + key + " must be positive");
    return (float)v->f;
}

// RoPE: {arch}.rope.dimension_count leading dimensions of each head rotate (all by default; GPT-NeoX's
// partial rotary fewer); {arch}.rope.scaling.type "none" or "linear" (with .rope.scaling.factor, or the older
// .rope.scale_linear), anything else (yarn, longrope) refused by name; the tensor rope_freqs.weight [d_head/2]
// holds Llama 3.1/3.2's per-pair frequency divisors (llama.cpp's converter writes the llama3 rule there):
// freq_i = theta^(-2i/d) / rope_freqs[i].
static void gguf_rope(model_config& c, const gguf_file& g, const std::string& arch) {
    const std::string& path = g.file->path;
    if (c.d_head % 2) throw error(path + ": head size " + std::to_string(c.d_head) + " is odd (RoPE rotates pairs)");
    int rot = meta_int(g, arch + ".rope.dimension_count", 1, 1 << 20, c.d_head);
    if (rot > c.d_head || rot % 2)
        throw error(path + ": " + arch + ".rope.dimension_count " + std::to_string(rot) + " must be even and at most the head size " +
                    std::to_string(c.d_head));
    c.rope_dims = rot;
    const gguf_value* type = meta(g, arch + ".rope.scaling.type");
    std::string t = type && type->type == 8 ? type->s : "none";
    if (t == "linear") {
        c.rope_scaling = ROPE_SCALING_LINEAR;
        c.rope_factor = meta_float(g, arch + ".rope.scaling.factor", 1.0f);
    } else if (t != "none") {
        throw error(path + ": " + arch + ".rope.scaling.type '" + t + "' is not supported (supported: none, linear)");
    } else if (meta(g, arch + ".rope.scale_linear")) {
        c.rope_scaling = ROPE_SCALING_LINEAR;
        c.rope_factor = meta_float(g, arch + ".rope.scale_linear", 1.0f);
    }
    std::vector<float> divisors;
    if (g.tensors.count("rope_freqs.weight")) {
        if (c.rope_scaling != ROPE_SCALING_NONE)
            throw error(path + ": both rope_freqs.weight and linear RoPE scaling: which one applies is ambiguous");
        divisors = gguf_tensor_f32(g, "rope_freqs.weight", {c.rope_dims / 2});
        for (size_t i = 0; i < divisors.size(); i++)
            if (!(divisors[i] > 0) || !std::isfinite(divisors[i]))
                throw error(path + ": rope_freqs.weight[" + std::to_string(i) + "] = " + std::to_string(divisors[i]) +
                            " (frequency divisors must be positive)");
    }
    rope_init_freqs(c, divisors);
}

// The file's tensors for load_weights: shapes in GGUF order (ne = {in, out}), bytes in place
struct gguf_reader : tensor_reader {
    const gguf_file& g;
    bool keep_stored;
    gguf_reader(const gguf_file& f, bool keep) : g(f), keep_stored(keep) { gguf = true; }
    const std::string& path() const override { return g.file->path; }
    bool has(const std::string& name) const override { return g.tensors.count(name) > 0; }
    std::vector<float> floats(const std::string& name, int64_t n) const override { return gguf_tensor_f32(g, name, {n}); }
    std::vector<float> floats2(const std::string& name, int64_t rows, int64_t cols) const override {
        return gguf_tensor_f32(g, name, {cols, rows});
    }
    matrix_part part(const std::string& name, int64_t in, int64_t out) const override {
        const gguf_tensor& t = shaped(g, name, {in, out});
        return {t.type, t.data, out, true};
    }
    matrix_part expert_part(const std::string& name, int64_t in, int64_t out, int64_t n_expert, int e) const override {
        const gguf_tensor& t = shaped(g, name, {in, out, n_expert});
        return {t.type, t.data + ggml_bytes(t.type, (int64_t)e * out * in), out, true};
    }
    // in place in the mapping when its type is read as stored, else dequantised to an owned f32 copy
    row_table table(const std::string& name, int64_t rows, int64_t cols) const override {
        matrix_part p = part(name, cols, rows);
        if (p.type == GGML_F32 || (keep_stored && kept_as_stored(p.type))) return table_view(p.type, p.data, rows, cols, g.file);
        return table_from_f32(gguf_tensor_f32(g, name, {cols, rows}), rows, cols);
    }
    weight_matrix matrix(const std::vector<matrix_part>& parts, int64_t in) const override { // then the pages are dropped
        weight_matrix wm = pack_parts(parts, in, keep_stored);
        for (const matrix_part& p : parts) g.file->release(p.data, ggml_bytes(p.type, in * p.out));
        return wm;
    }
};

// ---------------------------------------------------------------------------------------------
// Tokenizer from metadata
// ---------------------------------------------------------------------------------------------
static const char* llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
static const char* qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

static tokenizer gguf_tokenizer(const gguf_file& g, int vocab_size) {
    const std::string& path = g.file->path;
    const gguf_value* model = meta(g, "tokenizer.ggml.model");
    const gguf_value* tokens = meta(g, "tokenizer.ggml.tokens");
    if (!model || !tokens || tokens->type != 9 || tokens->elem_type != 8)
        throw error(path + ": no tokenizer in the metadata (tokenizer.ggml.model / tokenizer.ggml.tokens)");
    if ((int64_t)tokens->strs.size() > vocab_size)
        throw error(path + ": tokenizer has " + std::to_string(tokens->strs.size()) + " tokens, the model " + std::to_string(vocab_size));
    tokenizer t;
    t.vocab = tokens->strs;
    for (size_t i = 0; i < t.vocab.size(); i++) t.ids.emplace(t.vocab[i], (int)i);
    const gguf_value* types = meta(g, "tokenizer.ggml.token_type");
    if (model->s == "gpt2") {
        t.kind = TOK_BYTE_BPE;
        const gguf_value* pre = meta(g, "tokenizer.ggml.pre");
        std::string p = pre ? pre->s : "gpt-2";
        // llama.cpp's pre-tokenizer types (llama-vocab.cpp): Llama 3 (with ignore_merges, as its tokenizer.json),
        // Qwen2, GPT-2's pattern after cutting out single digits (SmolLM, StarCoder, ...), else GPT-2's
        const bool llama3 = p == "llama-bpe" || p == "llama3" || p == "llama-v3" || p == "falcon3";
        const bool digits = p == "smollm" || p == "starcoder" || p == "refact" || p == "command-r" ||
                            p == "codeshell" || p == "exaone" || p == "minerva";
        t.split_regex = llama3 ? llama3_regex : p == "qwen2" ? qwen2_regex : digits ? gpt2_digits_split_regex(true) : "";
        t.ignore_merges = llama3;
        t.nfc = p == "qwen2";
        const gguf_value* merges = meta(g, "tokenizer.ggml.merges");
        if (merges && (merges->type != 9 || merges->elem_type != 8))
            throw error(path + ": tokenizer.ggml.merges is not an array of strings");
        if (merges)
            for (size_t i = 0; i < merges->strs.size(); i++) {
                const std::string& m = merges->strs[i];
                size_t sp = m.find(' ');
                if (sp == std::string::npos) throw error(path + ": merge " + std::to_string(i) + " is not 'left right'");
                t.merge_rank.emplace(m, (int)i);
            }
    } else if (model->s == "llama") {
        t.kind = TOK_SPM_BPE;
        // llama.cpp puts a space before each piece of text (also after a special token) unless
        // tokenizer.ggml.add_space_prefix is false
        const gguf_value* sp = meta(g, "tokenizer.ggml.add_space_prefix");
        t.dummy_prefix = !sp || sp->i != 0;
        t.space_is_underline = true;
        t.add_bos = true;
        const gguf_value* scores = meta(g, "tokenizer.ggml.scores");
        if (!scores || scores->type != 9 || !scores->raw || scores->n != tokens->strs.size())
            throw error(path + ": tokenizer.ggml.scores missing, not numbers, or of the wrong length");
        t.scores.resize(scores->n);
        for (uint64_t k = 0; k < scores->n; k++) {
            float s = (float)gguf_array_float(*scores, k);
            t.scores[k] = std::isfinite(s) ? s : -1e30f; // as the llama2.c reader: a NaN must not order merges
        }
    } else {
        throw error(path + ": tokenizer.ggml.model '" + model->s + "' is not supported (expected gpt2 or llama)");
    }
    // control and user-defined tokens (types 3 and 4) are matched verbatim in text
    if (types && (types->type != 9 || !types->raw))
        throw error(path + ": tokenizer.ggml.token_type is not an array of integers");
    if (types)
        for (uint64_t i = 0; i < types->n && i < t.vocab.size(); i++) {
            int64_t ty = gguf_array_int(*types, i);
            if ((ty == 3 || ty == 4) && !t.vocab[i].empty()) t.specials.push_back(t.vocab[i]);
        }
    auto id = [&](const char* key) {
        const gguf_value* v = meta(g, key);
        return v && v->i >= 0 && v->i < (int64_t)t.vocab.size() ? (int)v->i : -1;
    };
    t.bos_id = id("tokenizer.ggml.bos_token_id");
    t.eos_id = id("tokenizer.ggml.eos_token_id");
    if (const gguf_value* ab = meta(g, "tokenizer.ggml.add_bos_token")) t.add_bos = ab->i != 0;
    return t;
}

// ---------------------------------------------------------------------------------------------
// load_gguf
// ---------------------------------------------------------------------------------------------
static bool meta_bool(const gguf_file& g, const std::string& key, bool def) {
    const gguf_value* v = meta(g, key);
    return v && v->type != 8 && v->type != 9 ? v->i != 0 : def;
}

// A positive value, or 0 (none) when the file says 0; def when the key is missing
static float meta_float0(const gguf_file& g, const std::string& key, float def) {
    const gguf_value* v = meta(g, key);
    if (!v || v->type == 8 || v->type == 9) return def;
    return v->f != 0 ? meta_float(g, key, 0) : 0;
}

model load_gguf(const std::string& path, const load_options& opt) {
    gguf_file g = open_gguf(path);
    const gguf_value* a = meta(g, "general.architecture");
    if (!a || a->type != 8) throw error(path + ": no general.architecture");
    const std::string arch = a->s;
    model m;
    m.format = "gguf";
    model_config& c = m.config;
    c.model_type = arch;
    c.arch = arch_from_gguf(arch, meta_int(g, arch + ".expert_count", 0, 4096, 0) > 0, path);
    const arch_info& info = arch_table(c.arch);
    c.n_layer = meta_int(g, arch + ".block_count", 1, 1000);
    c.d_model = meta_int(g, arch + ".embedding_length", 1, 65536);
    c.d_ff = meta_int(g, arch + ".feed_forward_length", 0, 1 << 20, 0);
    c.n_head = meta_int(g, arch + ".attention.head_count", 1, 1024);
    c.n_kv_head = meta_int(g, arch + ".attention.head_count_kv", 1, 1024, c.n_head);
    c.n_ctx = meta_int(g, arch + ".context_length", 1, 1 << 22);
    if (c.n_head % c.n_kv_head)
        throw error(path + ": " + std::to_string(c.n_head) + " heads / " + std::to_string(c.n_kv_head) + " kv heads do not divide");
    // Gemma and Qwen3 give the head size (key_length); elsewhere it is embedding_length / heads
    c.d_head = meta_int(g, arch + ".attention.key_length", 1, 4096, 0);
    if (c.d_head == 0) {
        if (c.d_model % c.n_head) throw error(path + ": " + std::to_string(c.d_model) + " is not divisible by " + std::to_string(c.n_head) + " heads");
        c.d_head = c.d_model / c.n_head;
    }
    const gguf_value* tokens = meta(g, "tokenizer.ggml.tokens");
    int vocab_from_tok = tokens && tokens->type == 9 ? (int)std::min<uint64_t>(tokens->n, 1 << 30) : -1;
    auto emb = g.tensors.find("token_embd.weight");
    if (emb == g.tensors.end()) throw error(path + ": missing tensor token_embd.weight");
    c.vocab_size = meta_int(g, arch + ".vocab_size", 1, 4000000, emb->second.ne.size() > 1 ? (int)emb->second.ne[1] : vocab_from_tok);
    c.norm_eps = info.norm == NORM_LAYERNORM ? meta_float(g, arch + ".attention.layer_norm_epsilon", 1e-5f)
                                             : meta_float(g, arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
    c.qkv_bias = g.tensors.count("blk.0.attn_q.bias") || g.tensors.count("blk.0.attn_qkv.bias");
    c.mlp_bias = g.tensors.count("blk.0.ffn_up.bias") > 0;
    c.parallel = c.arch == ARCH_GPT_NEOX && meta_bool(g, arch + ".use_parallel_residual", true);
    if (info.pos == POS_ROPE) {
        // llama.cpp's default for every architecture (Qwen's own 1e6 is always in its files)
        c.rope_theta = meta_float(g, arch + ".rope.freq_base", 10000.0f);
        c.rope = gguf_rope_adjacent(arch) ? ROPE_ADJACENT : ROPE_HALF;
        gguf_rope(c, g, arch);
    }
    // Gemma 2's window and caps where its file has none: llama.cpp's defaults (Gemma 2's own values)
    const bool gemma2 = c.arch == ARCH_GEMMA2;
    c.sliding_window = meta_int(g, arch + ".attention.sliding_window", 0, 1 << 24, gemma2 ? 4096 : 0);
    if (gemma2) {
        c.window_every = 2;
        c.attn_softcap = meta_float0(g, arch + ".attn_logit_softcapping", 50.0f);
        // GGUF keeps no query_pre_attn_scalar: head_dim for Gemma 2 2B and 9B, d_model / heads (144, not the head
        // size 128) for 27B, the one with 46 layers (llama.cpp tells them apart the same way)
        if (c.n_layer == 46 && c.d_model % c.n_head == 0 && c.d_model / c.n_head != c.d_head)
            c.attn_scale = 1.0f / std::sqrt((float)(c.d_model / c.n_head));
        c.final_softcap = meta_float0(g, arch + ".final_logit_softcapping", 30.0f);
    }
    if (info.kind == KIND_MOE) {
        c.n_expert = meta_int(g, arch + ".expert_count", 1, 4096);
        c.n_expert_used = meta_int(g, arch + ".expert_used_count", 1, c.n_expert);
        c.d_ff_expert = meta_int(g, arch + ".expert_feed_forward_length", 1, 1 << 20, c.d_ff);
        c.d_ff_shared = meta_int(g, arch + ".expert_shared_feed_forward_length", 0, 1 << 20, 0);
        // llama.cpp renormalises the chosen weights for Mixtral and Qwen3-MoE, not for Qwen2-MoE and OLMoE
        c.norm_topk = meta_bool(g, arch + ".expert_weights_norm", c.arch == ARCH_MIXTRAL || c.arch == ARCH_QWEN3_MOE);
        c.d_ff = std::max(c.d_ff_expert, c.d_ff_shared);
    }
    if (c.d_ff <= 0) throw error(path + ": missing metadata " + arch + ".feed_forward_length");
    c.tied_lm_head = !g.tensors.count("output.weight");

    int64_t need = 0, dequantised = 0; // bytes, before anything large is allocated
    for (const auto& [name, t] : g.tensors) {
        int64_t values = 1;
        for (int64_t v : t.ne) values *= v;
        need += resident_estimate(t.type, values, opt.keep_stored);
        if (t.type != GGML_F32 && (!opt.keep_stored || !kept_as_stored(t.type))) dequantised += values;
    }
    check_memory(path, need, opt);
    gguf_reader r(g, opt.keep_stored);
    load_weights(m.weights, c, r, opt.progress);
    m.tok = gguf_tokenizer(g, c.vocab_size);
    g.file->release(); // the matrices are packed; tables read in place fault their pages back as they are read
    if (dequantised) { // types not (yet) read as stored
        char note[200];
        snprintf(note, sizeof note, "%.0f M values of types not kept as stored (only F16, BF16, Q8_0 are) dequantised to "
                 "f32 at load: %.0f MB in memory for a %.0f MB file",
                 dequantised / 1e6, weight_bytes(m) / 1e6, g.file->size / 1e6);
        m.source_note = note;
    }
    return m;
}

} // namespace gb
