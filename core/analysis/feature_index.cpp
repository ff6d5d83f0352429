// Building, caching and reading a corpus index of an SAE's features.
#include "analysis/feature_index.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gb {
namespace fs = std::filesystem;

namespace {

const int index_version = 1;

uint64_t fnv(uint64_t h, const void* p, size_t n) {
    const uint8_t* b = (const uint8_t*)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
uint64_t fnv(uint64_t h, const std::string& s) { return fnv(h, s.data(), s.size()); }

// Keeps top[i] the per_feature highest (act) of what it was offered, as a min-heap until sorted.
void offer(std::vector<feature_context>& heap, int n, const feature_context& c) {
    auto cmp = [](const feature_context& a, const feature_context& b) { return a.act > b.act; };
    if ((int)heap.size() < n) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), cmp);
    } else if (c.act > heap.front().act) {
        std::pop_heap(heap.begin(), heap.end(), cmp);
        heap.back() = c;
        std::push_heap(heap.begin(), heap.end(), cmp);
    }
}

template <class T> void put(std::ofstream& f, T v) { f.write((const char*)&v, sizeof v); }
template <class T> bool get(std::ifstream& f, T& v) { return (bool)f.read((char*)&v, sizeof v); }

void save_index(const feature_index& ix, const std::string& path) {
    std::ofstream f(path + ".tmp", std::ios::binary);
    f.write("GBFI", 4);
    put<int32_t>(f, index_version), put<uint64_t>(f, ix.key), put<int32_t>(f, ix.window), put<int32_t>(f, ix.per_feature);
    put<int32_t>(f, ix.d_sae), put<int32_t>(f, (int32_t)ix.chunks.size());
    for (const auto& c : ix.chunks) {
        put<int32_t>(f, (int32_t)c.size());
        f.write((const char*)c.data(), (std::streamsize)(c.size() * 4));
    }
    for (const auto& t : ix.top) {
        put<int32_t>(f, (int32_t)t.size());
        for (const feature_context& c : t) put<int32_t>(f, c.window), put<int32_t>(f, c.position), put<float>(f, c.act);
    }
    f.close();
    if (!f) throw error("cannot write " + path);
    fs::rename(path + ".tmp", path);
}

bool load_index(feature_index& ix, const std::string& path, uint64_t key, int d_sae) {
    std::ifstream f(path, std::ios::binary);
    char magic[4];
    int32_t version = 0, n = 0;
    if (!f.read(magic, 4) || std::memcmp(magic, "GBFI", 4) != 0 || !get(f, version) || version != index_version) return false;
    int32_t w, per, d;
    if (!get(f, ix.key) || ix.key != key || !get(f, w) || !get(f, per) || !get(f, d) || d != d_sae || !get(f, n) || n < 0) return false;
    ix.window = w, ix.per_feature = per, ix.d_sae = d;
    ix.chunks.assign(n, {});
    for (auto& c : ix.chunks) {
        int32_t len;
        if (!get(f, len) || len < 0 || len > w) return false;
        c.resize(len);
        if (!f.read((char*)c.data(), (std::streamsize)len * 4)) return false;
    }
    ix.top.assign(d, {});
    for (auto& t : ix.top) {
        int32_t len;
        if (!get(f, len) || len < 0 || len > per) return false;
        t.resize(len);
        for (feature_context& c : t)
            if (!get(f, c.window) || !get(f, c.position) || !get(f, c.act) || c.window < 0 || c.window >= n ||
                c.position < 0 || c.position >= (int)ix.chunks[c.window].size())
                return false;
    }
    return true;
}

} // namespace

feature_index build_feature_index(const model& m, const bound_sae& b, const std::string& text, bool bos, int window,
                                  int per_feature, const index_progress& progress) {
    const sae& s = *b.s;
    feature_index ix;
    ix.window = window, ix.per_feature = per_feature, ix.d_sae = s.d_sae;
    const std::vector<int> ids = encode(m.tok, text);
    const int body = bos ? window - 1 : window;
    if (bos && m.tok.bos_id < 0) throw error("--bos: the model has no BOS token");
    for (size_t i = 0; i < ids.size(); i += body) {
        std::vector<int> c;
        if (bos) c.push_back(m.tok.bos_id);
        c.insert(c.end(), ids.begin() + i, ids.begin() + std::min(ids.size(), i + body));
        ix.chunks.push_back(std::move(c));
    }
    if (ix.chunks.empty()) throw error("the corpus holds no tokens");
    ix.top.assign(s.d_sae, {});
    forward_options opt;
    opt.keep.points = hook_bit(b.in);
    opt.keep.layers.assign(m.config.n_layer, 0);
    opt.keep.layers[b.layer] = 1;
    opt.keep.resid_norms = false;
    std::vector<float> f;
    for (size_t w = 0; w < ix.chunks.size(); w++) {
        record rec;
        run_forward(rec, m, ix.chunks[w], {}, opt);
        const int T = rec.n_tokens;
        sae_encode(f, s, rec.get(b.in, b.layer), T, b.enc.get());
        for (int t = 0; t < T; t++)
            for (int i = 0; i < s.d_sae; i++) {
                const float a = f[(size_t)t * s.d_sae + i];
                if (a > 0) offer(ix.top[i], per_feature, {(int)w, t, a});
            }
        if (progress) progress((int)w + 1, (int)ix.chunks.size());
    }
    for (auto& t : ix.top)
        std::sort(t.begin(), t.end(), [](const feature_context& a, const feature_context& c) { return a.act > c.act; });
    return ix;
}

feature_index cached_feature_index(const model& m, const bound_sae& b, const std::string& corpus_path, bool bos,
                                   const index_progress& progress, bool& built, std::string& path, std::string& note) {
    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) throw error("--corpus: cannot open " + corpus_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const int window = std::min(64, m.config.n_ctx), per_feature = 32;
    uint64_t key = fnv(1469598103934665603ull, text);
    key = fnv(key, fs::absolute(m.path.empty() ? "default" : m.path).string());
    key = fnv(key, fs::absolute(b.s->path).string());
    // what the activations depend on, so that an SAE retrained into the same folder gets a new index
    for (const std::vector<float>* w : {&b.s->W_enc, &b.s->b_enc, &b.s->b_dec, &b.s->threshold})
        key = fnv(key, w->data(), w->size() * sizeof(float));
    const int32_t how[] = {(int32_t)b.s->arch, b.s->k, b.s->apply_b_dec_to_input};
    key = fnv(key, how, sizeof how);
    const int32_t dims[] = {m.config.n_layer, m.config.d_model, m.config.vocab_size, window, per_feature, bos, b.s->d_sae};
    key = fnv(key, dims, sizeof dims);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)key);
    const fs::path dir = fs::is_directory(b.s->path) ? fs::path(b.s->path) : fs::path(b.s->path).parent_path();
    path = (dir / ("glassbox-index-" + std::string(hex) + ".bin")).string();
    feature_index ix;
    if (load_index(ix, path, key, b.s->d_sae)) {
        built = false;
        return ix;
    }
    ix = build_feature_index(m, b, text, bos, window, per_feature, progress);
    ix.key = key;
    built = true;
    try {
        save_index(ix, path);
    } catch (const std::exception& e) {
        note = std::string("the index was not cached: ") + e.what();
    }
    return ix;
}

std::string context_text(const model& m, const feature_index& ix, const feature_context& c, int before, int after) {
    const std::vector<int>& ids = ix.chunks[c.window];
    const int a = std::max(0, c.position - before), e = std::min((int)ids.size(), c.position + after + 1);
    return decode(m.tok, std::vector<int>(ids.begin() + a, ids.begin() + c.position)) + "[[" +
           decode(m.tok, {ids[c.position]}) + "]]" +
           decode(m.tok, std::vector<int>(ids.begin() + c.position + 1, ids.begin() + e));
}

} // namespace gb
