// Vocabulary sources: vocab.json + merges.txt, tokenizer.json (the model type picks the parser in bpe.cpp,
// wordpiece.cpp or unigram.cpp; the post-processor's template is read here), tokenizer_config.json, RoBERTa's
// conventions and which files a Hugging Face folder holds.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/internal.h"
#include "util/error.h"
#include "util/json_util.h"

namespace gb {

void set_vocab(tokenizer& t, const nlohmann::json& v, const std::string& path) {
    if (!v.is_object()) throw error(path + ": vocabulary is not a JSON object of token -> id");
    if ((int64_t)v.size() > max_vocab) throw error(path + ": vocabulary has more than " + std::to_string(max_vocab) + " tokens");
    int max_id = -1;
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (!it.value().is_number_integer()) throw error(path + ": id of token '" + it.key() + "' is not an integer");
        int64_t id = it.value().is_number_unsigned() ? (int64_t)std::min<uint64_t>(it.value().get<uint64_t>(), INT64_MAX)
                                                     : it.value().get<int64_t>();
        if (id < 0 || id >= std::min<int64_t>((int64_t)v.size() * 2 + 1024, max_vocab))
            throw error(path + ": id " + std::to_string(id) + " of token '" + it.key() + "' is out of range");
        max_id = std::max(max_id, (int)id);
    }
    t.vocab.assign(max_id + 1, "");
    for (auto it = v.begin(); it != v.end(); ++it) {
        int id = it.value().get<int>();
        if (!t.vocab[id].empty()) throw error(path + ": id " + std::to_string(id) + " is used twice");
        t.vocab[id] = it.key();
        t.ids[it.key()] = id;
    }
}

void add_merge(tokenizer& t, const std::string& a, const std::string& b, const std::string& path, size_t line) {
    if (!t.ids.count(a) || !t.ids.count(b) || !t.ids.count(a + b))
        throw error(path + ": merge " + std::to_string(line) + " '" + a + " " + b + "' names a token not in the vocabulary");
    t.merge_rank.emplace(a + " " + b, (int)t.merge_rank.size());
}

void find_specials(tokenizer& t) {
    auto it = t.ids.find("<|endoftext|>");
    if (it != t.ids.end()) {
        if (std::find(t.specials.begin(), t.specials.end(), "<|endoftext|>") == t.specials.end())
            t.specials.push_back("<|endoftext|>");
        t.eos_id = it->second;
        if (t.bos_id < 0) t.bos_id = it->second; // GPT-2 uses end-of-text as its BOS too
    }
}

tokenizer load_gpt2_tokenizer(const std::string& vocab_json, const std::string& merges_txt) {
    tokenizer t;
    t.kind = TOK_BYTE_BPE;
    t.split_regex = gpt2_split_regex;
    set_vocab(t, read_json_file(vocab_json), vocab_json);
    std::ifstream f(merges_txt, std::ios::binary);
    if (!f) throw error("cannot open " + merges_txt);
    std::string line;
    size_t n = 0;
    while (std::getline(f, line)) {
        n++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw error(merges_txt + ": line " + std::to_string(n) + " is not 'left right'");
        add_merge(t, line.substr(0, sp), line.substr(sp + 1), merges_txt, n);
    }
    find_specials(t);
    return t;
}

// A pre-tokenizer or normalizer and, for a Sequence, its members (recursively), in order. The recursion is
// bounded by the JSON nesting depth, which read_json_file limits.
void flatten_components(std::vector<const nlohmann::json*>& out, const nlohmann::json& p, const char* members,
                               const std::string& where) {
    if (p.is_null()) return;
    if (!p.is_object()) throw error(where + " is a JSON " + std::string(p.type_name()) + ", expected an object");
    out.push_back(&p);
    if (p.contains(members) && !p[members].is_null()) {
        const nlohmann::json& list = p[members];
        if (!list.is_array()) throw error(where + ": " + members + " is not an array");
        for (const nlohmann::json& q : list) flatten_components(out, q, members, where);
    }
}

// tokenizer.json "added_tokens": each extends the vocabulary (or names an entry already in it) and is matched
// verbatim in the raw text; lstrip / rstrip: the token absorbs the white space before / after it.
void read_added_tokens(tokenizer& t, const nlohmann::json& j, const std::string& path) {
    if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) return;
    // an id beyond the base vocabulary plus the number of added tokens is a lie that would size the vocabulary
    const nlohmann::json& added = j["added_tokens"];
    const int64_t base = (int64_t)t.vocab.size(), limit = std::min<int64_t>(base + (int64_t)added.size(), max_vocab);
    for (const auto& a : added) {
        if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["id"].is_number_integer() ||
            !a["content"].is_string())
            throw error(path + ": added_tokens entry needs id and content");
        int64_t id64 = a["id"].is_number_unsigned() ? (int64_t)std::min<uint64_t>(a["id"].get<uint64_t>(), INT64_MAX)
                                                    : a["id"].get<int64_t>();
        std::string content = a["content"];
        if (id64 < 0 || id64 >= limit)
            throw error(path + ": added token '" + content.substr(0, 40) + "' has id " + std::to_string(id64) +
                        ", outside 0.." + std::to_string(limit - 1) + " (" + std::to_string(base) +
                        " vocabulary entries + " + std::to_string(added.size()) + " added tokens)");
        const int id = (int)id64;
        if (id >= (int)t.vocab.size()) t.vocab.resize(id + 1);
        t.vocab[id] = content;
        t.ids[content] = id;
        t.specials.push_back(content);
        const std::string where = path + ": added token '" + content.substr(0, 40) + "'";
        if (json_bool(a, "lstrip", false, where)) t.lstrip_specials.push_back(content);
        if (json_bool(a, "rstrip", false, where)) t.rstrip_specials.push_back(content);
    }
}

// A Metaspace pre-tokenizer (HF): spaces become "▁"; a "▁" is prepended unless the piece already starts with
// one, with scheme "first" only to the piece at the very start of the input; split cuts words before each "▁".
// Files from before prepend_scheme say add_prefix_space (true: always).
void read_metaspace(tokenizer& t, const nlohmann::json& p, const std::string& where) {
    std::string scheme = json_string(p, "prepend_scheme", "", where);
    if (scheme.empty()) scheme = json_bool(p, "add_prefix_space", true, where) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
        throw error(where + ": Metaspace prepend_scheme '" + scheme + "' is not one of always, first, never");
    t.dummy_prefix = scheme != "never";
    t.prefix_first_only = scheme == "first";
    t.prefix_unless_space = true;
    t.split_words = json_bool(p, "split", true, where);
}

// The id of a token the file names (a post-processor's special token, the model's unk_token).
static int named_token_id(const tokenizer& t, const std::string& token, const std::string& where) {
    auto it = t.ids.find(token);
    if (it == t.ids.end()) throw error(where + ": token '" + token.substr(0, 40) + "' is not in the vocabulary");
    return it->second;
}

// A post-processor's special tokens around a single text: prefix (before $A) and suffix (after it).
struct post_template {
    std::vector<int> prefix, suffix;
    bool encoder_style = false; // BertProcessing / RobertaProcessing: only encoders use these
    int cls = -1, sep = -1;     // their cls / sep token
};

// BertProcessing / RobertaProcessing name their tokens as ["[CLS]", 101]; the id is what the model sees.
static int processing_token(const tokenizer& t, const nlohmann::json& p, const char* key, const std::string& where) {
    if (!p.contains(key) || !p[key].is_array() || p[key].size() != 2 || !p[key][0].is_string() ||
        !p[key][1].is_number_integer())
        throw error(where + ": " + key + " is not [\"token\", id]");
    const int64_t id = p[key][1].is_number_unsigned() ? (int64_t)std::min<uint64_t>(p[key][1].get<uint64_t>(), INT64_MAX)
                                                      : p[key][1].get<int64_t>();
    if (id < 0 || id >= (int64_t)t.vocab.size())
        throw error(where + ": " + key + " id " + std::to_string(id) + " is outside the vocabulary (0.." +
                    std::to_string((int)t.vocab.size() - 1) + ")");
    return (int)id;
}

// Reads a post_processor (recursively through Sequence; ByteLevel adds no tokens). A later processor in a
// Sequence wraps what the earlier ones produced.
static void read_post_processor(post_template& out, const tokenizer& t, const nlohmann::json& p, const std::string& where) {
    if (p.is_null()) return;
    if (!p.is_object()) throw error(where + " is a JSON " + std::string(p.type_name()) + ", expected an object");
    const std::string type = json_string(p, "type", "", where);
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        out.cls = processing_token(t, p, "cls", where + " " + type);
        out.sep = processing_token(t, p, "sep", where + " " + type);
        out.prefix.insert(out.prefix.begin(), out.cls);
        out.suffix.push_back(out.sep);
        out.encoder_style = true;
    } else if (type == "TemplateProcessing") {
        // "single": [{"SpecialToken": {"id": "[CLS]", ...}}, {"Sequence": {"id": "A", ...}}, ...]; a special
        // token's ids come from "special_tokens" (they may be several), else from the vocabulary
        const std::string w = where + " TemplateProcessing";
        if (!p.contains("single") || !p["single"].is_array()) throw error(w + ": no \"single\" template");
        std::vector<int> before, after;
        bool seen_text = false;
        for (const nlohmann::json& item : p["single"]) {
            if (item.is_object() && item.contains("Sequence")) {
                const std::string id = json_string(item["Sequence"], "id", "A", w + ": Sequence");
                if (id != "A") throw error(w + ": the single template names sequence " + id + " (expected A)");
                seen_text = true;
                continue;
            }
            if (!item.is_object() || !item.contains("SpecialToken"))
                throw error(w + ": a template item is neither SpecialToken nor Sequence");
            const std::string name = json_string(item["SpecialToken"], "id", "", w + ": SpecialToken");
            std::vector<int> ids;
            const nlohmann::json* st = p.contains("special_tokens") && p["special_tokens"].is_object() &&
                                               p["special_tokens"].contains(name)
                                           ? &p["special_tokens"][name]
                                           : nullptr;
            if (st && st->is_object() && st->contains("ids") && (*st)["ids"].is_array()) {
                for (const nlohmann::json& v : (*st)["ids"]) {
                    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t)t.vocab.size())
                        throw error(w + ": special token '" + name + "' has an id outside the vocabulary");
                    ids.push_back(v.get<int>());
                }
            } else {
                ids.push_back(named_token_id(t, name, w));
            }
            std::vector<int>& side = seen_text ? after : before;
            side.insert(side.end(), ids.begin(), ids.end());
        }
        if (!seen_text) throw error(w + ": the single template has no $A (the text)");
        out.prefix.insert(out.prefix.begin(), before.begin(), before.end());
        out.suffix.insert(out.suffix.end(), after.begin(), after.end());
    } else if (type == "Sequence") {
        if (!p.contains("processors") || !p["processors"].is_array()) throw error(where + ": processors is not an array");
        for (const nlohmann::json& q : p["processors"]) read_post_processor(out, t, q, where);
    } else if (type != "ByteLevel") {
        throw error(where + ": post-processor '" + type + "' is not supported (expected TemplateProcessing, "
                            "BertProcessing, RobertaProcessing, ByteLevel or a Sequence of them)");
    }
}

// encoder: honour a TemplateProcessing template also for a BPE model (the folder is a BERT-family encoder).
static tokenizer parse_tokenizer_json(const nlohmann::json& j, const std::string& path, bool encoder) {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
        throw error(path + ": no \"model\" object (not a tokenizer.json?)");
    const nlohmann::json& m = j["model"];
    std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    // older files (distilbert's) leave out the type: a WordPiece model is the one with a subword prefix, no merges
    if (type.empty() && m.contains("continuing_subword_prefix") && m.contains("unk_token") && !m.contains("merges"))
        type = "WordPiece";
    // and T5's older files leave it out of a Unigram model, whose vocab is a list of [piece, score]
    if (type.empty() && m.contains("vocab") && m["vocab"].is_array()) type = "Unigram";
    if (type != "BPE" && type != "WordPiece" && type != "Unigram")
        throw error(path + ": model type '" + type + "' is not supported (expected BPE, WordPiece or Unigram)");
    tokenizer t = type == "WordPiece" ? parse_wordpiece_json(j, m, path)
                  : type == "Unigram" ? parse_unigram_json(j, m, path)
                                      : parse_bpe_json(j, m, path);
    if (t.unk_id < 0 && m.contains("unk_token") && m["unk_token"].is_string()) {
        auto u = t.ids.find(m["unk_token"].get<std::string>());
        if (u != t.ids.end()) t.unk_id = u->second;
    }
    for (const char* mask : {"[MASK]", "<mask>"}) {
        auto it = t.ids.find(mask);
        if (t.mask_id < 0 && it != t.ids.end()) t.mask_id = it->second;
    }
    // The post-processor's template. Decoder LMs (Llama's "<s> $A") keep their BOS in bos_id / add_bos, which a
    // caller can turn off, and must not get an EOS closing every prompt: only encoders take the template, and
    // Unigram tokenizers, which belong to encoders and encoder-decoders (T5's "$A </s>", mBART-50's
    // "en_XX $A </s>").
    post_template pt;
    const bool needs_template = t.kind == TOK_WORDPIECE || t.kind == TOK_UNIGRAM || encoder;
    if (j.contains("post_processor")) {
        try {
            read_post_processor(pt, t, j["post_processor"], path + ": post_processor");
        } catch (const error&) {
            if (needs_template) throw;
            pt = post_template{}; // a decoder LM's template is not used: an odd one must not stop it loading
        } catch (const nlohmann::json::exception&) {
            if (needs_template) throw;
            pt = post_template{};
        }
    }
    if (needs_template || pt.encoder_style) {
        t.prefix_ids = pt.prefix;
        t.suffix_ids = pt.suffix;
    }
    if (pt.encoder_style && t.kind != TOK_WORDPIECE) { // RoBERTa: <s> and </s> are its BOS and EOS
        if (t.bos_id < 0 || t.vocab[t.bos_id] == "<|endoftext|>") t.bos_id = pt.cls;
        if (t.eos_id < 0 || t.vocab[t.eos_id] == "<|endoftext|>") t.eos_id = pt.sep;
    }
    return t;
}

static tokenizer load_tokenizer_json_as(const std::string& path, bool encoder) {
    const nlohmann::json j = read_json_file(path);
    return json_guard(path, [&] { return parse_tokenizer_json(j, path, encoder); });
}

tokenizer load_tokenizer_json(const std::string& path) { return load_tokenizer_json_as(path, false); }

// A token a tokenizer_config.json names: "[MASK]" or {"content": "[MASK]", ...}; "" when absent or null.
std::string config_token(const nlohmann::json& j, const char* key) {
    if (!j.contains(key) || j[key].is_null()) return "";
    const nlohmann::json& v = j[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return "";
}

static void apply_tokenizer_config_json(tokenizer& t, const nlohmann::json& j, const std::string& path) {
    if (!j.is_object()) throw error(path + ": not a JSON object");
    auto token_of = [&](const char* key) -> int {
        if (!j.contains(key) || j[key].is_null()) return -2;
        std::string s = config_token(j, key);
        auto it = t.ids.find(s);
        if (it == t.ids.end()) throw error(path + ": " + key + " '" + s + "' is not in the vocabulary");
        return it->second;
    };
    int b = token_of("bos_token"), e = token_of("eos_token");
    if (b >= 0) t.bos_id = b;
    if (b == -2 && t.kind == TOK_BYTE_BPE && t.bos_id >= 0 && t.vocab[t.bos_id] != "<|endoftext|>" && t.prefix_ids.empty())
        t.bos_id = -1;
    if (e >= 0) t.eos_id = e;
    if (j.contains("add_bos_token") && !j["add_bos_token"].is_null()) t.add_bos = json_bool(j, "add_bos_token", false, path);
    else if (b >= 0 && t.vocab[b] == "<|begin_of_text|>") t.add_bos = true; // Llama 3 adds it in its post-processor
    // the mask token, where the file names one the vocabulary has (a stray name is no reason to refuse a model)
    auto m = t.ids.find(config_token(j, "mask_token"));
    if (m != t.ids.end() && !m->first.empty()) t.mask_id = m->second;
}

void apply_tokenizer_config(tokenizer& t, const std::string& path) {
    if (!std::ifstream(path)) return; // no tokenizer_config.json: nothing to change
    const nlohmann::json j = read_json_file(path);
    json_guard(path, [&] { apply_tokenizer_config_json(t, j, path); });
}

// RoBERTa's vocab.json + merges.txt (no tokenizer.json): GPT-2's byte-level BPE and the conventions of HF's
// RobertaTokenizer: <s> text </s>, <mask> absorbing the white space before it; ids from the vocabulary.
static void apply_roberta_conventions(tokenizer& t, const std::string& vocab_json) {
    for (const char* s : {"<s>", "</s>"})
        if (!t.ids.count(s)) throw error(vocab_json + ": no '" + std::string(s) + "' token (RoBERTa puts <s> text </s>)");
    for (const char* s : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"})
        if (t.ids.count(s) && std::find(t.specials.begin(), t.specials.end(), s) == t.specials.end()) t.specials.push_back(s);
    if (t.ids.count("<mask>")) t.lstrip_specials.push_back("<mask>"), t.mask_id = t.ids["<mask>"];
    if (t.ids.count("<unk>")) t.unk_id = t.ids["<unk>"];
    t.prefix_ids = {t.ids["<s>"]};
    t.suffix_ids = {t.ids["</s>"]};
    if (t.bos_id < 0 || t.vocab[t.bos_id] == "<|endoftext|>") t.bos_id = t.ids["<s>"];
    if (t.eos_id < 0 || t.vocab[t.eos_id] == "<|endoftext|>") t.eos_id = t.ids["</s>"];
}

tokenizer load_folder_tokenizer(const std::string& dir, const std::string& model_type) {
    auto is_file = [](const std::string& p) {
        std::error_code ec;
        return std::filesystem::is_regular_file(p, ec);
    };
    const std::string json = dir + "/tokenizer.json", vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
    const std::string config = dir + "/tokenizer_config.json";
    const bool have_json = is_file(json), have_bpe = is_file(vocab) && is_file(merges);
    const bool bert = model_type == "bert" || model_type == "distilbert", roberta = model_type == "roberta";
    if (have_json) {
        if (!(have_bpe && model_type == "gpt2")) {
            tokenizer t = load_tokenizer_json_as(json, bert || roberta);
            apply_tokenizer_config(t, config);
            return t;
        }
    } else if (bert) {
        if (is_file(dir + "/vocab.txt")) return load_wordpiece_vocab(dir + "/vocab.txt", config);
        throw error(dir + ": no tokenizer for " + model_type + " (looked for tokenizer.json, then vocab.txt)");
    } else if (roberta && have_bpe) {
        tokenizer t = load_gpt2_tokenizer(vocab, merges);
        apply_tokenizer_config(t, config);
        apply_roberta_conventions(t, vocab);
        return t;
    }
    if (have_bpe) return load_gpt2_tokenizer(vocab, merges);
    for (const char* spm : {"spiece.model", "source.spm", "sentencepiece.bpe.model", "tokenizer.model"})
        if (is_file(dir + "/" + spm))
            throw error(dir + ": no tokenizer.json, and SentencePiece's own model file (" + spm +
                        ") is not read: convert it to a tokenizer.json (Hugging Face's fast tokenizer)");
    std::string missing = is_file(vocab) ? " (merges.txt is missing)" : is_file(merges) ? " (vocab.json is missing)" : "";
    throw error(dir + ": no tokenizer (looked for tokenizer.json, or vocab.json + merges.txt" + missing + ")");
}

} // namespace gb
