// Models on this machine and model names (model_sources.h). Each source is a folder layout read without the
// network: the Hugging Face hub cache (models--ORG--NAME/{refs,blobs,snapshots}), Ollama's manifests and blobs,
// LM Studio's publisher/repo folders, llama.cpp's download cache; each model is described from its config or
// header (family, kind, parameters) without loading weights.
//
// Sections: describing one path | the sources | names | resolving a name
#include "io/model_sources.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/gguf.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "model/arch.h"
#include "util/error.h"
#include "util/json_util.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace gb {

static std::string home() { return env_or_empty("HOME"); }

static bool is_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

static bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec); // follows symlinks: a snapshot's links count when their blob is there
}

static bool has_gguf_ext(const fs::path& p) { return to_upper(p.extension().string()) == ".GGUF"; }

// ---------------------------------------------------------------------------------------------
// describing one path
// ---------------------------------------------------------------------------------------------
// Bytes of the files under dir, each distinct target (a blob several links share) counted once
static int64_t folder_bytes(const fs::path& dir) {
    std::set<std::string> seen;
    int64_t n = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (!is_file(it->path())) continue;
        std::string real = fs::canonical(it->path(), ec).string();
        if (ec || !seen.insert(real).second) continue;
        n += (int64_t)fs::file_size(real, ec);
    }
    return n;
}

static int64_t elements(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    return n;
}

// The weights files of a HF folder (model.safetensors, or the shards its index names); throws when absent
static std::vector<fs::path> hf_weights(const fs::path& dir) {
    if (is_file(dir / "model.safetensors")) return {dir / "model.safetensors"};
    const fs::path index = dir / "model.safetensors.index.json";
    if (!is_file(index)) throw error("no model.safetensors (or model.safetensors.index.json)");
    nlohmann::json j = read_json_file(index.string());
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) throw error("index.json has no weight_map");
    std::set<std::string> names;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it)
        if (it.value().is_string()) names.insert(it.value().get<std::string>());
    std::vector<fs::path> out;
    for (const std::string& n : names) {
        if (n.find('/') != std::string::npos || n.find("..") != std::string::npos) throw error("shard name '" + n + "' is not a plain file name");
        if (!is_file(dir / n)) throw error("shard " + n + " is missing");
        out.push_back(dir / n);
    }
    return out;
}

static void describe_hf(found_model& f, const fs::path& dir) {
    f.format = "hf";
    f.bytes = folder_bytes(dir);
    model_config c = read_hf_config((dir / "config.json").string());
    const arch_info& a = arch_table(c.arch);
    f.family = a.name;
    f.kind = kind_table(kind_of(c)).name;
    int64_t n = 0;
    for (const fs::path& w : hf_weights(dir))
        for (const auto& [name, t] : open_safetensors(w.string()).tensors) n += elements(t.shape);
    f.n_params = n;
}

static void describe_gguf(found_model& f, const std::string& path) {
    f.format = "gguf";
    gguf_file g = open_gguf(path);
    auto a = g.meta.find("general.architecture");
    if (a == g.meta.end() || a->second.type != 8) throw error("no general.architecture");
    int64_t n = 0;
    for (const auto& [name, t] : g.tensors) n += elements(t.ne);
    f.n_params = n;
    f.family = a->second.s; // llama.cpp's name, also when Glassbox does not know it
    auto e = g.meta.find(a->second.s + ".expert_count");
    const bool experts = e != g.meta.end() && e->second.type != 8 && e->second.type != 9 && e->second.i > 0;
    arch_id id = arch_from_gguf(a->second.s, experts, path);
    f.family = arch_table(id).name;
    f.kind = kind_table(arch_table(id).kind).name;
}

// llama2.c: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (< 0: unshared), seq_len)
static void describe_llama2c(found_model& f, const std::string& path) {
    f.format = "llama2c";
    f.family = "llama";
    f.kind = kind_table(KIND_DECODER).name;
    std::ifstream in(path, std::ios::binary);
    int32_t h[7];
    if (!in.read((char*)h, sizeof h)) throw error("shorter than a llama2.c header");
    for (int i = 0; i < 7; ++i)
        if (h[i] == 0 || (i != 5 && h[i] < 0) || h[i] == INT32_MIN) throw error("not a llama2.c checkpoint");
    const int64_t d = h[0], ff = h[1], L = h[2], kv = (int64_t)h[4] * (h[0] / h[3]), V = std::abs(h[5]);
    f.n_params = V * d * (h[5] > 0 ? 1 : 2) + L * (2 * d + 2 * d * d + 2 * d * kv + 3 * d * ff) + d;
    const fs::path dir = fs::path(path).parent_path();
    if (!is_file(dir / "tokenizer.bin") && !is_file(dir / ("tok" + std::to_string(V) + ".bin")))
        throw error("no tokenizer.bin (or tok" + std::to_string(V) + ".bin) beside it: llama2.c's tokenizer");
}

found_model describe_model_path(const std::string& path) {
    found_model f;
    f.path = path;
    std::error_code ec;
    try {
        const fs::path p(path);
        if (is_dir(p)) {
            f.format = "hf";
            if (!is_file(p / "config.json")) throw error("no config.json");
            describe_hf(f, p);
        } else if (!is_file(p)) {
            throw error("no such file or directory");
        } else {
            f.bytes = (int64_t)fs::file_size(p, ec);
            if (is_gguf_file(path)) describe_gguf(f, path);
            else if (p.extension() == ".bin") describe_llama2c(f, path);
            else if (p.filename() == "config.json") return describe_model_path(p.parent_path().string());
            else throw error("unknown model format (not a GGUF file, a llama2.c .bin or a Hugging Face folder)");
        }
        f.openable = true;
    } catch (const std::exception& e) {
        f.openable = false;
        std::string why = e.what();
        if (why.rfind(path, 0) == 0) { // the path is in the row already: "config.json: ...", not the whole path
            why = why.substr(path.size());
            while (!why.empty() && (why[0] == '/' || why[0] == ':' || why[0] == ' ')) why = why.substr(1);
        }
        f.reason = why.substr(0, why.find('\n'));
    }
    return f;
}

// ---------------------------------------------------------------------------------------------
// the sources
// ---------------------------------------------------------------------------------------------
static std::vector<fs::path> children(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
    std::sort(out.begin(), out.end());
    return out;
}

static std::string read_small(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::string s(256, '\0');
    f.read(&s[0], (std::streamsize)s.size());
    s.resize((size_t)f.gcount());
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
    return s;
}

static void add(std::vector<found_model>& out, const std::string& source, const std::string& name, const fs::path& path) {
    found_model f = describe_model_path(path.string());
    f.source = source;
    f.name = name;
    out.push_back(f);
}

// One snapshot: a HF folder is one model; otherwise each GGUF in it is one ("ORG/NAME:file.gguf")
static void scan_snapshot(std::vector<found_model>& out, const std::string& name, const fs::path& snap) {
    if (is_file(snap / "config.json")) return add(out, "hf", name, snap);
    bool any = false;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(snap, ec), end; !ec && it != end; it.increment(ec))
        if (has_gguf_ext(it->path()) && is_file(it->path())) {
            add(out, "hf", name + ":" + it->path().lexically_relative(snap).generic_string(), it->path());
            any = true;
        }
    if (!any) {
        found_model f;
        f.source = "hf";
        f.name = name;
        f.path = snap.string();
        f.bytes = folder_bytes(snap);
        f.reason = "no config.json or .gguf file in the snapshot";
        out.push_back(f);
    }
}

// models--ORG--NAME/snapshots/<commit>: the commit refs/main names is "ORG/NAME"; other snapshots are
// "ORG/NAME@<ref>" when a ref names them, else "ORG/NAME@<commit>".
static void scan_hf(std::vector<found_model>& out) {
    for (const fs::path& repo : children(hf_hub_cache())) {
        const std::string folder = repo.filename().string();
        if (folder.rfind("models--", 0) != 0 || !is_dir(repo / "snapshots")) continue;
        std::string name = folder.substr(8);
        size_t sep = name.find("--");
        if (sep != std::string::npos) name.replace(sep, 2, "/");
        std::map<std::string, std::string> ref_of; // commit -> a ref naming it ("main" first)
        std::error_code ec;
        for (fs::recursive_directory_iterator it(repo / "refs", ec), end; !ec && it != end; it.increment(ec))
            if (is_file(it->path())) {
                const std::string ref = it->path().lexically_relative(repo / "refs").generic_string();
                const std::string commit = read_small(it->path());
                if (ref == "main" || !ref_of.count(commit)) ref_of[commit] = ref;
            }
        const std::vector<fs::path> snaps = children(repo / "snapshots");
        for (const fs::path& snap : snaps) {
            const std::string commit = snap.filename().string();
            auto r = ref_of.find(commit);
            const bool plain = (r != ref_of.end() && r->second == "main") || (snaps.size() == 1);
            scan_snapshot(out, plain ? name : name + "@" + (r != ref_of.end() ? r->second : commit), snap);
        }
    }
}

static std::vector<fs::path> ollama_dirs() {
    std::vector<fs::path> dirs;
    if (!env_or_empty("OLLAMA_MODELS").empty()) dirs.push_back(env_or_empty("OLLAMA_MODELS"));
    else if (!home().empty()) dirs.push_back(fs::path(home()) / ".ollama/models");
    dirs.push_back("/usr/share/ollama/.ollama/models"); // the Linux service's
    return dirs;
}

// The model layer's blob of an Ollama manifest ("" when it has none); throws on a malformed manifest
static fs::path ollama_blob(const fs::path& dir, const fs::path& manifest) {
    nlohmann::json j = read_json_file(manifest.string());
    if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array()) throw error(manifest.string() + ": no layers");
    for (const nlohmann::json& l : j["layers"]) {
        if (!l.is_object() || !l.contains("mediaType") || l["mediaType"] != "application/vnd.ollama.image.model") continue;
        if (!l.contains("digest") || !l["digest"].is_string()) throw error(manifest.string() + ": the model layer has no digest");
        std::string d = l["digest"].get<std::string>();
        bool ok = d.size() == 71 && d.rfind("sha256:", 0) == 0 &&
                  std::all_of(d.begin() + 7, d.end(), [](char c) { return std::isxdigit((unsigned char)c); });
        if (!ok) throw error(manifest.string() + ": digest '" + d.substr(0, 80) + "' is not sha256:<64 hex>");
        return dir / "blobs" / ("sha256-" + d.substr(7));
    }
    return "";
}

// manifests/<host>/<namespace>/<name>/<tag>; registry.ollama.ai/library/ names are shown as "name:tag"
static std::string ollama_name(const fs::path& rel) {
    std::vector<std::string> parts;
    for (const fs::path& p : rel) parts.push_back(p.string());
    if (parts.size() < 2) return rel.generic_string();
    std::string tag = parts.back(), name;
    parts.pop_back();
    size_t from = 0;
    if (parts.size() >= 3 && parts[0] == "registry.ollama.ai") from = parts[1] == "library" ? 2 : 1;
    for (size_t i = from; i < parts.size(); ++i) name += (name.empty() ? "" : "/") + parts[i];
    return name + ":" + tag;
}

static void scan_ollama(std::vector<found_model>& out) {
    std::set<std::string> seen;
    for (const fs::path& dir : ollama_dirs()) {
        std::error_code ec;
        const fs::path man = dir / "manifests";
        if (!is_dir(man) || !seen.insert(fs::weakly_canonical(dir, ec).string()).second) continue;
        for (fs::recursive_directory_iterator it(man, ec), end; !ec && it != end; it.increment(ec)) {
            if (!is_file(it->path())) continue;
            const std::string name = ollama_name(it->path().lexically_relative(man));
            try {
                fs::path blob = ollama_blob(dir, it->path());
                if (blob.empty()) continue; // an adapter or projector-only manifest: no model
                add(out, "ollama", name, blob);
            } catch (const std::exception& e) {
                found_model f;
                f.source = "ollama";
                f.name = name;
                f.path = it->path().string();
                f.reason = e.what();
                out.push_back(f);
            }
        }
    }
}

// Every .gguf under dir (depth <= 4), named by its path below dir
static void scan_gguf_tree(std::vector<found_model>& out, const std::string& source, const fs::path& dir) {
    if (!is_dir(dir)) return;
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
        if (it.depth() > 4) it.disable_recursion_pending();
        if (has_gguf_ext(it->path()) && is_file(it->path())) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) add(out, source, f.lexically_relative(dir).generic_string(), f);
}

std::vector<found_model> scan_models(const scan_options& opt) {
    std::vector<found_model> out;
    scan_hf(out);
    scan_ollama(out);
    if (!home().empty()) {
        scan_gguf_tree(out, "lmstudio", fs::path(home()) / ".lmstudio/models");
        scan_gguf_tree(out, "lmstudio", fs::path(home()) / ".cache/lm-studio/models"); // LM Studio before 0.3
    }
    const std::string llama = !env_or_empty("LLAMA_CACHE").empty() ? env_or_empty("LLAMA_CACHE") : home().empty() ? "" : home() + "/.cache/llama.cpp";
    if (!llama.empty()) scan_gguf_tree(out, "llamacpp", llama);
    std::set<std::string> listed;
    for (const found_model& f : out) listed.insert(f.path);
    for (const std::string& r : opt.recent) {
        if (r.empty() || listed.count(r) || is_model_name(r)) continue;
        std::error_code ec;
        if (!fs::exists(r, ec)) continue; // gone since: not a model on this machine any more
        listed.insert(r);
        add(out, "recent", fs::path(r).filename().string(), r);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// names
// ---------------------------------------------------------------------------------------------
bool is_model_name(const std::string& s) { return s.rfind("hf:", 0) == 0 || s.rfind("ollama:", 0) == 0; }

hf_name parse_hf_name(const std::string& spec) {
    if (spec.rfind("hf:", 0) != 0) throw error("'" + spec + "' is not an hf: name (hf:ORG/NAME[@REVISION][:FILE_OR_QUANT])");
    std::string rest = spec.substr(3);
    hf_name n;
    const size_t colon = rest.find(':');
    if (colon != std::string::npos) {
        n.file_or_quant = rest.substr(colon + 1);
        rest = rest.substr(0, colon);
        if (n.file_or_quant.empty()) throw error(spec + ": nothing after ':' (a file or a quant such as Q4_K_M)");
    }
    const size_t at = rest.find('@');
    n.repo = rest.substr(0, at);
    n.revision = at == std::string::npos ? "main" : rest.substr(at + 1);
    if (n.revision.empty()) throw error(spec + ": nothing after '@' (a branch, tag or commit)");
    if (n.revision.find("..") != std::string::npos || n.revision[0] == '/' || n.revision.back() == '/')
        throw error(spec + ": '" + n.revision + "' is not a revision name");
    try {
        check_hf_repo_id(n.repo);
    } catch (const error& e) {
        throw error(spec + ": " + e.what());
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// resolving a name
// ---------------------------------------------------------------------------------------------
// The GGUF in a snapshot that file_or_quant picks, as hub_needed_files would from the file list; "" when none
static std::string pick_cached_gguf(const fs::path& snap, const std::string& file_or_quant) {
    hub_repo_info r;
    r.repo = "cache";
    std::error_code ec;
    for (fs::recursive_directory_iterator it(snap, ec), end; !ec && it != end; it.increment(ec))
        if (is_file(it->path())) r.files.push_back({it->path().lexically_relative(snap).generic_string(), 0, false});
    try {
        std::vector<std::string> f = hub_needed_files(r, file_or_quant);
        if (f.size() == 1 && has_gguf_ext(f[0])) return (snap / f[0]).string();
    } catch (const error&) {
    }
    return "";
}

// The cached model an hf: name stands for, "" when its revision or files are not in the cache
static std::string hf_from_cache(const hf_name& n) {
    const fs::path repo = hf_repo_folder(n.repo);
    std::string commit = is_commit_hash(n.revision) ? n.revision : read_small(repo / "refs" / n.revision);
    if (!is_commit_hash(commit)) return "";
    const fs::path snap = repo / "snapshots" / commit;
    if (!is_dir(snap)) return "";
    if (n.file_or_quant.empty() && is_file(snap / "config.json")) {
        try {
            hf_weights(snap); // every shard there
            return snap.string();
        } catch (const error&) {
            return "";
        }
    }
    return pick_cached_gguf(snap, n.file_or_quant);
}

static std::string resolve_hf(const std::string& spec, const resolve_options& opt) {
    const hf_name n = parse_hf_name(spec);
    const std::string cached = hf_from_cache(n);
    if (!cached.empty()) return cached;
    if (hf_offline() || !opt.allow_download)
        throw error(spec + ": not in the Hugging Face cache (" + hf_hub_cache() + ")" +
                    (hf_offline() ? ", and HF_HUB_OFFLINE is set" : "") + "; download it with glassbox-cli download");
    const hub_repo_info info = hub_repo(n.repo, n.revision);
    const std::vector<std::string> files = hub_needed_files(info, n.file_or_quant);
    const std::string snap = hub_download(n.repo, n.revision, files, opt.progress);
    if (files.size() == 1 && has_gguf_ext(files[0])) return (fs::path(snap) / files[0]).string();
    return snap;
}

// ollama:NAME[:TAG] -> manifests/registry.ollama.ai/library/NAME/TAG ("ns/name" and "host/ns/name" too)
static std::string resolve_ollama(const std::string& spec) {
    std::string rest = spec.substr(7);
    std::string name = rest, tag = "latest";
    const size_t colon = rest.rfind(':');
    if (colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
        name = rest.substr(0, colon);
        tag = rest.substr(colon + 1);
    }
    std::vector<std::string> parts;
    for (size_t i = 0; i <= name.size();) {
        size_t j = std::min(name.find('/', i), name.size());
        parts.push_back(name.substr(i, j - i));
        i = j + 1;
    }
    bool ok = !tag.empty() && tag.find('/') == std::string::npos && tag != "." && tag != ".." && parts.size() <= 3;
    for (const std::string& p : parts) ok = ok && !p.empty() && p != "." && p != "..";
    if (!ok) throw error(spec + ": not an Ollama model name (ollama:NAME[:TAG], e.g. ollama:llama3.2:latest)");
    if (parts.size() == 1) parts.insert(parts.begin(), "library");
    if (parts.size() == 2) parts.insert(parts.begin(), "registry.ollama.ai");
    std::string where;
    for (const fs::path& dir : ollama_dirs()) {
        fs::path manifest = dir / "manifests" / parts[0] / parts[1] / parts[2] / tag;
        where += (where.empty() ? "" : ", ") + dir.string();
        if (!is_file(manifest)) continue;
        fs::path blob = ollama_blob(dir, manifest);
        if (blob.empty()) throw error(spec + ": its manifest has no model layer (" + manifest.string() + ")");
        if (!is_file(blob)) throw error(spec + ": its model blob is missing (" + blob.string() + ")");
        return blob.string();
    }
    throw error(spec + ": not found in " + where + " (fetch it with: ollama pull " + rest + ")");
}

std::string resolve_model(const std::string& spec, const resolve_options& opt) {
    if (spec.rfind("hf:", 0) == 0) return resolve_hf(spec, opt);
    if (spec.rfind("ollama:", 0) == 0) return resolve_ollama(spec);
    return spec;
}

} // namespace gb
