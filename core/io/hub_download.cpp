// Downloading from the Hugging Face Hub into its cache, as huggingface_hub's snapshot_download / hf_hub_download
// do (file_download.py): the revision API gives the commit and the file list; each file's `resolve` URL at that
// commit is asked with HEAD (relative redirects followed, the LFS redirect to the CDN not) for its ETag
// (X-Linked-Etag for LFS files), size (X-Linked-Size) and where to GET it; the bytes go to
// blobs/<etag>.incomplete (resumed with Range), are checked (size; sha256 for LFS), renamed to blobs/<etag> and
// linked from snapshots/<commit>/<file> by a relative symlink; refs/<revision> holds the commit.
//
// Sections: environment | HTTP (libcurl) | names and paths | the revision API | needed files | one file | download
#include "io/hub_download.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "util/error.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace gb {

// ---------------------------------------------------------------------------------------------
// environment (huggingface_hub's constants.py)
// ---------------------------------------------------------------------------------------------
static std::string expand_home(const std::string& p) {
    if (p.size() >= 1 && p[0] == '~' && (p.size() == 1 || p[1] == '/')) return env_or_empty("HOME") + p.substr(1);
    return p;
}

// $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
static std::string hf_home() {
    if (!env_or_empty("HF_HOME").empty()) return expand_home(env_or_empty("HF_HOME"));
    std::string xdg = env_or_empty("XDG_CACHE_HOME");
    return (xdg.empty() ? env_or_empty("HOME") + "/.cache" : expand_home(xdg)) + "/huggingface";
}

std::string hf_hub_cache() {
    for (const char* k : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
        if (!env_or_empty(k).empty()) return expand_home(env_or_empty(k));
    return hf_home() + "/hub";
}

std::string hf_endpoint() {
    std::string e = env_or_empty("HF_ENDPOINT");
    while (!e.empty() && e.back() == '/') e.pop_back();
    return e.empty() ? "https://huggingface.co" : e;
}

static std::string trim(std::string s) {
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
    return s.substr(i);
}

std::string hf_token() {
    for (const char* k : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
        if (!trim(env_or_empty(k)).empty()) return trim(env_or_empty(k));
    std::string path = env_or_empty("HF_TOKEN_PATH").empty() ? hf_home() + "/token" : expand_home(env_or_empty("HF_TOKEN_PATH"));
    std::ifstream f(path, std::ios::binary);
    if (!f) return "";
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return trim(s.substr(0, 4096));
}

static bool env_true(const char* name) {
    std::string v = env_or_empty(name);
    for (char& c : v) c = (char)std::toupper((unsigned char)c);
    return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

bool hf_offline() { return env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE"); }

// ---------------------------------------------------------------------------------------------
// HTTP (libcurl; TLS verified; redirects followed by hand so the token never leaves the Hub's host)
// ---------------------------------------------------------------------------------------------
namespace {

struct http_request {
    std::string method = "GET";  // "GET" | "HEAD"
    std::string url;
    bool auth = false;           // send the token as a Bearer header
    int64_t range_from = -1;     // "Range: bytes=N-" when >= 0
    FILE* sink = nullptr;        // 2xx bodies go here when set (else into body)
    std::function<bool(int64_t, bool)> on_bytes; // body bytes written to the sink so far, and whether the sink
                                                 // was emptied first (a 200 to a range request); false aborts
};

struct http_response {
    long status = 0;                            // the status line's code of the response being read
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;                           // bodies not sent to the sink (errors, JSON), at most 8 MB kept
    int64_t received = 0;                       // body bytes of a 2xx response written to the sink
    int write_errno = 0;                        // set when writing to the sink failed
    bool restarted = false;                     // a 200 answered a range request: the sink was emptied first
    CURLcode code = CURLE_OK;
    std::string curl_message;                   // curl's words for code
};

struct transfer {
    http_response* resp;
    const http_request* req;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    http_response& r = *(http_response*)user;
    std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) { // a new response (after a 100 Continue, say): start over
        r.headers.clear();
        size_t sp = line.find(' ');
        r.status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
        return size * n;
    }
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
        std::string key = line.substr(0, colon);
        for (char& c : key) c = (char)std::tolower((unsigned char)c);
        r.headers[key] = trim(line.substr(colon + 1));
    }
    return size * n;
}

bool to_sink(const transfer& t) { return t.req->sink && t.resp->status >= 200 && t.resp->status < 300; }

size_t on_body(char* data, size_t size, size_t n, void* user) {
    transfer& t = *(transfer*)user;
    const size_t bytes = size * n;
    if (to_sink(t)) {
        if (t.req->range_from > 0 && t.resp->status == 200 && t.resp->received == 0 && !t.resp->restarted) {
            // the server ignored the range and sends the whole file: start the file over (opened for append)
            t.resp->restarted = true;
            std::fflush(t.req->sink);
            if (ftruncate(fileno(t.req->sink), 0) != 0) {
                t.resp->write_errno = errno;
                return 0;
            }
        }
        errno = 0;
        if (std::fwrite(data, 1, bytes, t.req->sink) != bytes) {
            t.resp->write_errno = errno ? errno : EIO;
            return 0; // curl stops with CURLE_WRITE_ERROR
        }
        t.resp->received += (int64_t)bytes;
        return bytes;
    }
    const size_t cap = 8u << 20;
    if (t.resp->body.size() < cap) t.resp->body.append(data, std::min(bytes, cap - t.resp->body.size()));
    return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    transfer& t = *(transfer*)user;
    if (t.req->on_bytes && to_sink(t) && !t.req->on_bytes(t.resp->received, t.resp->restarted)) return 1; // cancelled
    return 0;
}

std::once_flag curl_once;

// One request; no redirect is followed. Transport failures are left in resp.code for the caller to word.
http_response perform(const http_request& req, const std::string& token) {
    std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    http_response resp;
    transfer t{&resp, &req};
    CURL* h = curl_easy_init();
    if (!h) throw error("cannot start an HTTP client (curl_easy_init failed)");
    curl_slist* hdrs = nullptr;
    hdrs = curl_slist_append(hdrs, "Accept-Encoding: identity"); // sizes and ranges are of the bytes stored
    if (req.auth && !token.empty()) hdrs = curl_slist_append(hdrs, ("Authorization: Bearer " + token).c_str());
    const std::string range = req.range_from >= 0 ? std::to_string(req.range_from) + "-" : "";
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "glassbox");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L); // a stalled transfer fails after a minute
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (req.method == "HEAD") curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (!range.empty()) curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &resp);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    resp.code = curl_easy_perform(h);
    long st = 0;
    if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st) == CURLE_OK && st) resp.status = st;
    resp.curl_message = errbuf[0] ? errbuf : curl_easy_strerror(resp.code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return resp;
}

// "scheme://host[:port]" of an absolute http(s) URL, lower-cased ("" when url is not one)
std::string origin_of(const std::string& url) {
    size_t p = url.find("://");
    if (p == std::string::npos) return "";
    std::string o = url.substr(0, url.find_first_of("/?#", p + 3));
    for (char& c : o) c = (char)std::tolower((unsigned char)c);
    if (o.rfind("http://", 0) != 0 && o.rfind("https://", 0) != 0) return "";
    return o;
}

// A Location against the URL it answered (the Hub's relative ones are absolute paths: "/api/resolve-cache/...")
std::string join_location(const std::string& url, const std::string& location) {
    if (!origin_of(location).empty()) return location;
    if (!location.empty() && location[0] == '/') return origin_of(url) + location;
    std::string base = url.substr(0, url.find_first_of("?#", origin_of(url).size()));
    return base.substr(0, base.rfind('/') + 1) + location;
}

std::string header(const http_response& r, const char* name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? "" : it->second;
}

int64_t header_int(const http_response& r, const char* name) {
    std::string v = header(r, name);
    if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit((unsigned char)c); }) || v.size() > 18)
        return -1;
    return std::stoll(v);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// names and paths
// ---------------------------------------------------------------------------------------------
// huggingface_hub's validate_repo_id: "NAME" or "ORG/NAME" of [A-Za-z0-9._-], no "--" or "..", at most 96 chars
void check_hf_repo_id(const std::string& repo) {
    bool ok = !repo.empty() && repo.size() <= 96 && repo.find("--") == std::string::npos &&
              repo.find("..") == std::string::npos && std::count(repo.begin(), repo.end(), '/') <= 1 &&
              repo.front() != '/' && repo.back() != '/' && repo.front() != '.' && repo.front() != '-';
    for (char c : repo) ok = ok && (std::isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' || c == '/');
    if (!ok) throw error("'" + repo + "' is not a Hugging Face repo id (expected ORG/NAME of letters, digits, '.', '_', '-')");
}

// A file name from the Hub (or the user) as a path inside the snapshot: relative, no "..", "." or empty parts,
// no backslash. Throws naming it.
static void check_repo_path(const std::string& repo, const std::string& f) {
    bool ok = !f.empty() && f.size() < 4096 && f[0] != '/' && f.find('\\') == std::string::npos &&
              f.find('\0') == std::string::npos;
    for (size_t i = 0; ok && i <= f.size();) {
        size_t j = std::min(f.find('/', i), f.size());
        const std::string part = f.substr(i, j - i);
        ok = !part.empty() && part != "." && part != "..";
        i = j + 1;
    }
    if (!ok) throw error(repo + ": refusing the file name '" + f + "': it is absolute or climbs out of the snapshot");
}

// Percent-encodes all but unreserved characters (and '/' when keep_slash), as urllib's quote
static std::string quote(const std::string& s, bool keep_slash) {
    std::string out;
    char buf[4];
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out += (char)c;
        } else {
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

// The repo's folder in the cache: models--ORG--NAME
static fs::path repo_folder(const std::string& repo) {
    check_hf_repo_id(repo);
    std::string name = "models--" + repo;
    for (size_t p; (p = name.find('/')) != std::string::npos;) name.replace(p, 1, "--");
    return fs::path(hf_hub_cache()) / name;
}

std::string hf_repo_folder(const std::string& repo) { return repo_folder(repo).string(); }

// _normalize_etag: a W/ prefix and the quotes dropped. The result names a file, so only [A-Za-z0-9._-] passes.
static std::string normalize_etag(const std::string& repo, const std::string& file, std::string e) {
    if (e.rfind("W/", 0) == 0) e = e.substr(2);
    e.erase(std::remove(e.begin(), e.end(), '"'), e.end());
    bool ok = !e.empty() && e.size() <= 128 && e[0] != '.';
    for (char c : e) ok = ok && (std::isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-');
    if (!ok) throw error(repo + ": " + file + ": the Hub gave no usable ETag");
    return e;
}

// Why a Hub request failed, in one line (X-Error-Code as huggingface_hub's hf_raise_for_status reads it).
static std::string hub_failure(const std::string& repo, const std::string& what, const http_response& r) {
    const std::string code = header(r, "x-error-code");
    if (code == "GatedRepo")
        return repo + " is gated: accept its licence on its page and set HF_TOKEN" +
               (r.status == 403 ? std::string(" (the token given has no access yet)") : std::string());
    if (code == "RepoNotFound" || (r.status == 401 && code.empty()))
        return repo + ": no such model on the Hub (or it is private: set HF_TOKEN)";
    if (code == "RevisionNotFound") return repo + ": no revision " + what + " on the Hub";
    if (code == "EntryNotFound" || r.status == 404) return repo + ": " + what + " is not in the repo";
    if (code == "DisabledRepo") return repo + " has been disabled on the Hub";
    return repo + ": " + what + ": HTTP " + std::to_string(r.status) + " from " + origin_of(hf_endpoint());
}

static void check_transport(const std::string& url, const http_response& r) {
    if (r.code != CURLE_OK) throw error("cannot reach " + origin_of(url) + ": " + r.curl_message);
}

static void need_online(const std::string& what) {
    if (hf_offline()) throw error("HF_HUB_OFFLINE is set: the Hub is not asked for " + what);
}

// ---------------------------------------------------------------------------------------------
// the revision API
// ---------------------------------------------------------------------------------------------
hub_repo_info hub_repo(const std::string& repo, const std::string& revision) {
    check_hf_repo_id(repo);
    const std::string rev = revision.empty() ? "main" : revision;
    need_online(repo + "@" + rev);
    http_request req;
    req.url = hf_endpoint() + "/api/models/" + repo + "/revision/" + quote(rev, false) + "?blobs=true";
    req.auth = true;
    http_response r = perform(req, hf_token());
    check_transport(req.url, r);
    if (r.status != 200) throw error(hub_failure(repo, rev, r));
    hub_repo_info info;
    info.repo = repo;
    info.revision = rev;
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false, true);
    if (j.is_discarded() || !j.is_object() || !j.contains("sha") || !j["sha"].is_string())
        throw error(repo + "@" + rev + ": the Hub's revision answer is not the expected JSON (no sha)");
    info.commit = j["sha"].get<std::string>();
    if (!is_commit_hash(info.commit)) throw error(repo + "@" + rev + ": the Hub's commit '" + info.commit.substr(0, 64) + "' is not 40 hex digits");
    if (j.contains("siblings") && j["siblings"].is_array())
        for (const nlohmann::json& s : j["siblings"]) {
            if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
            hub_file f;
            f.path = s["rfilename"].get<std::string>();
            if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
            if (s.contains("lfs") && s["lfs"].is_object()) {
                f.lfs = true;
                if (s["lfs"].contains("size") && s["lfs"]["size"].is_number_integer()) f.size = s["lfs"]["size"].get<int64_t>();
            }
            info.files.push_back(f);
        }
    return info;
}

// ---------------------------------------------------------------------------------------------
// needed files
// ---------------------------------------------------------------------------------------------
// Whether quant ("Q4_K_M") appears in a file name as a whole word (between non-alphanumerics)
static bool names_quant(const std::string& file, const std::string& quant) {
    const std::string f = to_upper(file.substr(file.rfind('/') + 1)), q = to_upper(quant);
    for (size_t p = f.find(q); p != std::string::npos; p = f.find(q, p + 1)) {
        bool left = p == 0 || !std::isalnum((unsigned char)f[p - 1]);
        size_t e = p + q.size();
        bool right = e >= f.size() || !std::isalnum((unsigned char)f[e]);
        if (left && right) return true;
    }
    return false;
}

static std::string gguf_choice(const hub_repo_info& r, const std::vector<std::string>& ggufs, const std::string& quant) {
    std::vector<std::string> hits;
    for (const std::string& g : ggufs)
        if (quant.empty() ? names_quant(g, "Q8_0") : names_quant(g, quant)) hits.push_back(g);
    if (quant.empty() && hits.empty() && ggufs.size() == 1) hits = ggufs;
    if (hits.size() == 1) return hits[0];
    std::string list;
    for (const std::string& g : (hits.empty() ? ggufs : hits)) list += (list.empty() ? "" : ", ") + g;
    if (quant.empty()) throw error(r.repo + " has several GGUF files; pick one with :QUANT or --file (" + list + ")");
    if (hits.empty()) throw error(r.repo + ": no GGUF file for '" + quant + "' (there are: " + list + ")");
    throw error(r.repo + ": '" + quant + "' matches several GGUF files; name one with --file (" + list + ")");
}

std::vector<std::string> hub_needed_files(const hub_repo_info& r, const std::string& file_or_quant) {
    auto has = [&](const std::string& p) {
        return std::any_of(r.files.begin(), r.files.end(), [&](const hub_file& f) { return f.path == p; });
    };
    std::vector<std::string> ggufs;
    for (const hub_file& f : r.files)
        if (ends_with(to_upper(f.path), ".GGUF")) ggufs.push_back(f.path);
    if (!file_or_quant.empty() && has(file_or_quant)) {
        check_repo_path(r.repo, file_or_quant);
        if (!ends_with(to_upper(file_or_quant), ".GGUF"))
            throw error(r.repo + ": " + file_or_quant + " is not a .gguf file (a file named here must be a GGUF model)");
        return {file_or_quant};
    }
    const bool hf = has("config.json") && (has("model.safetensors") || has("model.safetensors.index.json"));
    if (!file_or_quant.empty() || !hf) {
        if (ggufs.empty()) {
            if (!file_or_quant.empty()) throw error(r.repo + ": no file or GGUF quant '" + file_or_quant + "' in the repo");
            if (has("config.json"))
                throw error(r.repo + " has no safetensors weights (Glassbox reads model.safetensors, not pytorch_model.bin)");
            throw error(r.repo + " has no model Glassbox can open (no config.json + model.safetensors, no .gguf)");
        }
        return {gguf_choice(r, ggufs, file_or_quant)};
    }
    // a Hugging Face folder: config, weights (shards come in through the index), tokenizer, preprocessor
    std::vector<std::string> out;
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
                          "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                          "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model",
                          "sentencepiece.bpe.model", "source.spm", "target.spm", "preprocessor_config.json"})
        if (has(f) && !(std::string(f) == "model.safetensors.index.json" && has("model.safetensors"))) out.push_back(f);
    return out;
}

// ---------------------------------------------------------------------------------------------
// one file
// ---------------------------------------------------------------------------------------------
// What HEAD on a file's resolve URL says (get_hf_file_metadata): relative redirects followed, others not.
struct file_meta {
    std::string commit;   // X-Repo-Commit
    std::string etag;     // X-Linked-Etag, else ETag; normalised
    int64_t size = -1;    // X-Linked-Size, else Content-Length
    std::string location; // where to GET the bytes: the absolute redirect's target, else the last URL asked
    bool lfs = false;     // X-Linked-Etag given: the etag is the sha256 of the bytes
};

static file_meta head_file(const std::string& repo, const std::string& commit, const std::string& file,
                           const std::string& token) {
    http_request req;
    req.method = "HEAD";
    req.url = hf_endpoint() + "/" + repo + "/resolve/" + quote(commit, false) + "/" + quote(file, true);
    req.auth = true;
    file_meta m;
    for (int hop = 0;; ++hop) {
        http_response r = perform(req, token);
        check_transport(req.url, r);
        if (!header(r, "x-repo-commit").empty()) m.commit = header(r, "x-repo-commit");
        const std::string loc = header(r, "location");
        if (r.status >= 300 && r.status < 400 && !loc.empty() && origin_of(loc).empty()) { // same host: follow
            if (hop >= 10) throw error(repo + ": " + file + ": too many redirects");
            req.url = join_location(req.url, loc);
            continue;
        }
        if (r.status >= 400 || (r.status >= 300 && loc.empty())) throw error(hub_failure(repo, file, r));
        std::string etag = header(r, "x-linked-etag");
        m.lfs = !etag.empty();
        if (etag.empty()) etag = header(r, "etag");
        m.etag = normalize_etag(repo, file, etag);
        m.size = header_int(r, "x-linked-size");
        if (m.size < 0) m.size = header_int(r, "content-length");
        m.location = r.status >= 300 ? loc : req.url;
        if (m.commit.empty()) m.commit = commit;
        if (m.commit != commit)
            throw error(repo + ": " + file + ": the Hub answered commit " + m.commit + " for " + commit);
        return m;
    }
}

static std::string sha256_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    std::vector<char> buf(1 << 20);
    while (f) {
        f.read(buf.data(), (std::streamsize)buf.size());
        if (f.gcount() > 0) EVP_DigestUpdate(ctx, buf.data(), (size_t)f.gcount());
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    std::string hex;
    char b[3];
    for (unsigned i = 0; i < len; ++i) {
        std::snprintf(b, sizeof b, "%02x", md[i]);
        hex += b;
    }
    return hex;
}

static int64_t file_size_or(const fs::path& p, int64_t def) {
    std::error_code ec;
    auto n = fs::file_size(p, ec);
    return ec ? def : (int64_t)n;
}

// GETs m.location into blob + ".incomplete", resuming what is there with a Range request, retrying a cut
// transfer (as huggingface_hub's http_get does, 5 tries); the token goes only to the Hub's own host (through
// further redirects too). Leaves the complete bytes in the .incomplete file.
static void get_bytes(const std::string& repo, const std::string& file, const file_meta& m, const fs::path& part,
                      const std::string& token, const download_fn& progress) {
    const std::string hub = origin_of(hf_endpoint());
    const auto t0 = std::chrono::steady_clock::now();
    for (int attempt = 0;; ++attempt) {
        int64_t have = file_size_or(part, 0);
        if (m.size >= 0 && have > m.size) have = 0; // longer than the file: start over
        if (m.size >= 0 && have == m.size) return;
        FILE* out = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
        if (!out) throw error("cannot write " + part.string() + ": " + std::strerror(errno));
        http_request req;
        req.url = m.location;
        req.range_from = have > 0 ? have : -1;
        req.sink = out;
        const int64_t base = have;
        http_response r;
        req.on_bytes = [&](int64_t got, bool restarted) {
            if (!progress) return true;
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const int64_t done = restarted ? got : base + got;
            return progress({file, done, std::max<int64_t>(m.size, 0), s > 0 ? got / s : 0});
        };
        for (int hop = 0;; ++hop) {
            req.auth = origin_of(req.url) == hub;
            r = perform(req, token);
            const std::string loc = header(r, "location");
            if (r.code != CURLE_OK || r.status < 300 || r.status >= 400 || loc.empty() || hop >= 10) break;
            req.url = join_location(req.url, loc);
        }
        const bool closed_ok = std::fclose(out) == 0;
        if (r.write_errno) throw error("cannot write " + part.string() + ": " + std::strerror(r.write_errno));
        if (!closed_ok) throw error("cannot write " + part.string() + ": " + std::strerror(errno));
        if (r.code == CURLE_ABORTED_BY_CALLBACK) throw error(repo + ": " + file + ": download cancelled");
        if (r.code == CURLE_OK && r.status == 416 && m.size >= 0 && file_size_or(part, 0) == m.size) return;
        if (r.code == CURLE_OK && r.status >= 400) throw error(hub_failure(repo, file, r));
        if (r.code == CURLE_OK) return;
        const bool cut = r.code == CURLE_PARTIAL_FILE || r.code == CURLE_RECV_ERROR || r.code == CURLE_GOT_NOTHING ||
                         r.code == CURLE_OPERATION_TIMEDOUT || r.code == CURLE_SEND_ERROR;
        if (!cut || attempt >= 4) check_transport(req.url, r);
    }
}

// Brings one file into blobs/ and links it from the snapshot (a no-op when the link is there).
static void fetch_file(const std::string& repo, const std::string& commit, const std::string& file,
                       const std::string& token, const download_fn& progress) {
    check_repo_path(repo, file);
    const fs::path folder = repo_folder(repo);
    const fs::path pointer = folder / "snapshots" / commit / file;
    std::error_code ec;
    if (fs::exists(pointer, ec)) return;
    const file_meta m = head_file(repo, commit, file, token);
    const fs::path blob = folder / "blobs" / m.etag;
    fs::create_directories(blob.parent_path(), ec);
    if (ec) throw error("cannot create " + blob.parent_path().string() + ": " + ec.message());
    if (!fs::exists(blob, ec) || (m.size >= 0 && file_size_or(blob, -1) != m.size)) {
        const fs::path part = blob.string() + ".incomplete";
        get_bytes(repo, file, m, part, token, progress);
        const int64_t got = file_size_or(part, -1);
        if (m.size >= 0 && got != m.size) {
            fs::remove(part, ec);
            throw error(repo + ": " + file + ": got " + std::to_string(got) + " bytes, the Hub said " + std::to_string(m.size));
        }
        if (m.lfs && m.etag.size() == 64 && sha256_file(part.string()) != m.etag) {
            fs::remove(part, ec);
            throw error(repo + ": " + file + ": the bytes' sha256 is not the Hub's " + m.etag + " (removed; try again)");
        }
        fs::rename(part, blob, ec);
        if (ec) throw error("cannot move " + part.string() + " to " + blob.string() + ": " + ec.message());
    }
    if (progress) progress({file, m.size, m.size, 0});
    // the relative link, written under a temporary name and renamed over: a reader sees all of it or none
    fs::create_directories(pointer.parent_path(), ec);
    if (ec) throw error("cannot create " + pointer.parent_path().string() + ": " + ec.message());
    const fs::path target = blob.lexically_relative(pointer.parent_path());
    const fs::path tmp = pointer.string() + ".glassbox-" + std::to_string(getpid());
    fs::remove(tmp, ec);
    fs::create_symlink(target, tmp, ec);
    if (!ec) fs::rename(tmp, pointer, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw error("cannot link " + pointer.string() + " -> " + target.string() + ": " + ec.message());
    }
}

// ---------------------------------------------------------------------------------------------
// download
// ---------------------------------------------------------------------------------------------
// refs/<revision> = commit, written as huggingface_hub does (no newline), through a temporary file
static void write_ref(const std::string& repo, const std::string& revision, const std::string& commit) {
    if (revision == commit) return;
    check_repo_path(repo, revision); // branch names may hold '/', never ".."
    const fs::path ref = repo_folder(repo) / "refs" / revision;
    std::error_code ec;
    fs::create_directories(ref.parent_path(), ec);
    std::ifstream in(ref, std::ios::binary);
    std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (old == commit) return;
    const fs::path tmp = ref.string() + ".glassbox-" + std::to_string(getpid());
    {
        std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
        o << commit;
        if (!o.flush()) throw error("cannot write " + ref.string());
    }
    fs::rename(tmp, ref, ec);
    if (ec) throw error("cannot write " + ref.string() + ": " + ec.message());
}

// The shard names a safetensors index lists (each checked as a path inside the snapshot)
static std::vector<std::string> index_shards(const std::string& repo, const fs::path& index) {
    std::ifstream in(index, std::ios::binary);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false, true);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw error(index.string() + ": no weight_map object");
    std::vector<std::string> out;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it.value().is_string()) throw error(index.string() + ": weight_map entry " + it.key() + " is not a file name");
        std::string f = it.value();
        check_repo_path(repo, f);
        if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
    return out;
}

// Offline (HF_HUB_OFFLINE), as huggingface_hub: the snapshot the cache has for the revision (a commit, or the one
// refs/<revision> names) when every file is there (an index's shards too); else one line saying what is missing.
static std::string cached_snapshot(const std::string& repo, const std::string& rev, const std::vector<std::string>& files) {
    const fs::path folder = repo_folder(repo);
    std::string commit = rev;
    if (!is_commit_hash(rev)) {
        check_repo_path(repo, rev);
        std::ifstream in(folder / "refs" / rev, std::ios::binary);
        std::getline(in, commit);
    }
    const fs::path snap = folder / "snapshots" / commit;
    std::error_code ec;
    std::vector<std::string> need = files;
    for (size_t i = 0; is_commit_hash(commit) && i < need.size(); ++i) {
        if (!fs::exists(snap / need[i], ec)) break;
        if (fs::path(need[i]).filename() == "model.safetensors.index.json")
            for (const std::string& s : index_shards(repo, snap / need[i])) need.push_back((fs::path(need[i]).parent_path() / s).generic_string());
        if (i + 1 == need.size()) return snap.string();
    }
    throw error(repo + "@" + rev + ": not (all) in the Hugging Face cache (" + hf_hub_cache() +
                "), and HF_HUB_OFFLINE is set: the Hub is not asked");
}

std::string hub_download(const std::string& repo, const std::string& revision, const std::vector<std::string>& files,
                         const download_fn& progress) {
    check_hf_repo_id(repo);
    const std::string rev = revision.empty() ? "main" : revision;
    for (const std::string& f : files) check_repo_path(repo, f);
    if (hf_offline()) return cached_snapshot(repo, rev, files);
    const hub_repo_info info = hub_repo(repo, rev);
    const std::string token = hf_token();
    const fs::path snap = repo_folder(repo) / "snapshots" / info.commit;
    std::vector<std::string> todo = files;
    for (size_t i = 0; i < todo.size(); ++i) {
        fetch_file(repo, info.commit, todo[i], token, progress);
        if (fs::path(todo[i]).filename() == "model.safetensors.index.json")
            for (const std::string& s : index_shards(repo, snap / todo[i])) {
                const std::string p = (fs::path(todo[i]).parent_path() / s).generic_string();
                if (std::find(todo.begin(), todo.end(), p) == todo.end()) todo.push_back(p);
            }
    }
    write_ref(repo, rev, info.commit);
    return snap.string();
}

} // namespace gb
