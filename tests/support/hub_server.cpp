// The test Hub (hub_server.h): one thread accepts connections one at a time, reads a request, answers it and
// closes the connection ("Connection: close"), so every request is logged in order.
#include "hub_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

struct hub_server::answer {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;        // sent for GET (HEAD: only its length)
    bool cut = false;        // send half of the body, then close
};

void scoped_env::set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::make_unique<std::string>(old) : nullptr);
    if (value) setenv(name.c_str(), value, 1);
    else unsetenv(name.c_str());
}

scoped_env::scoped_env(std::initializer_list<std::pair<std::string, const char*>> vars) {
    for (const auto& [name, value] : vars) set(name, value);
}

scoped_env::scoped_env(const std::vector<std::pair<std::string, std::optional<std::string>>>& vars) {
    for (const auto& [name, value] : vars) set(name, value ? value->c_str() : nullptr);
}

const std::vector<std::string>& model_location_vars() {
    static const std::vector<std::string> v = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                                               "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
                                               "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OLLAMA_MODELS", "LLAMA_CACHE"};
    return v;
}

std::unique_ptr<scoped_env> isolated_machine(const std::string& home,
                                             std::vector<std::pair<std::string, std::optional<std::string>>> set) {
    std::vector<std::pair<std::string, std::optional<std::string>>> vars = {
        {"HOME", home}, {"no_proxy", "127.0.0.1,localhost"}, {"NO_PROXY", "127.0.0.1,localhost"}};
    for (const std::string& v : model_location_vars()) vars.emplace_back(v, std::nullopt);
    vars.insert(vars.end(), set.begin(), set.end()); // later entries win: setenv in order
    return std::make_unique<scoped_env>(vars);
}

scoped_env::~scoped_env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
        if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
        else unsetenv(it->first.c_str());
    }
}

static std::string digest_hex(const EVP_MD* md, const std::string& bytes) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_Digest(bytes.data(), bytes.size(), out, &n, md, nullptr);
    std::string hex;
    char b[3];
    for (unsigned i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", out[i]);
        hex += b;
    }
    return hex;
}

std::string hub_server::git_blob_id(const std::string& bytes) {
    std::string obj = "blob " + std::to_string(bytes.size());
    obj.push_back('\0');
    return digest_hex(EVP_sha1(), obj + bytes);
}

std::string hub_server::sha256_hex(const std::string& bytes) { return digest_hex(EVP_sha256(), bytes); }

hub_server::hub_server() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd_ < 0) throw std::runtime_error("hub_server: socket failed");
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(listen_fd_, (sockaddr*)&a, sizeof a) != 0 || listen(listen_fd_, 16) != 0)
        throw std::runtime_error("hub_server: cannot listen on 127.0.0.1");
    socklen_t len = sizeof a;
    getsockname(listen_fd_, (sockaddr*)&a, &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
}

hub_server::~hub_server() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
}

std::string hub_server::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void hub_server::add_repo(const hub_server_repo& r) {
    std::lock_guard<std::mutex> l(mu_);
    repos_.push_back(r);
}
void hub_server::set_token(const std::string& t) {
    std::lock_guard<std::mutex> l(mu_);
    token_ = t;
}
void hub_server::cut_once(const std::string& file) {
    std::lock_guard<std::mutex> l(mu_);
    cut_ = file;
}
void hub_server::set_chunk_delay_ms(int ms) {
    std::lock_guard<std::mutex> l(mu_);
    chunk_delay_ms_ = ms;
}
void hub_server::set_ignore_range(bool on) {
    std::lock_guard<std::mutex> l(mu_);
    ignore_range_ = on;
}
std::vector<hub_server_request> hub_server::requests() const {
    std::lock_guard<std::mutex> l(mu_);
    return log_;
}
int hub_server::count(const std::string& part) const {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const hub_server_request& r : log_) n += r.target.find(part) != std::string::npos;
    return n;
}
void hub_server::clear_requests() {
    std::lock_guard<std::mutex> l(mu_);
    log_.clear();
}

void hub_server::serve() {
    while (!stop_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) continue;
        handle(fd);
        close(fd);
    }
}

static bool send_all(int fd, const char* data, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, data, n, MSG_NOSIGNAL);
        if (k <= 0) return false;
        data += k;
        n -= (size_t)k;
    }
    return true;
}

static std::string url_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            out += (char)std::stoi(s.substr(i + 1, 2), nullptr, 16);
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

void hub_server::handle(int fd) {
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos && in.size() < 65536) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) return;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) return;
        in.append(buf, (size_t)k);
    }
    hub_server_request rq;
    size_t eol = in.find("\r\n");
    std::string line = in.substr(0, eol);
    size_t s1 = line.find(' '), s2 = line.rfind(' ');
    if (s1 == std::string::npos || s2 <= s1) return;
    rq.method = line.substr(0, s1);
    rq.target = line.substr(s1 + 1, s2 - s1 - 1);
    for (size_t pos = eol + 2; pos < in.size();) {
        size_t e = in.find("\r\n", pos);
        if (e == std::string::npos || e == pos) break;
        std::string h = in.substr(pos, e - pos);
        size_t c = h.find(':');
        if (c != std::string::npos) {
            std::string k = h.substr(0, c);
            for (char& ch : k) ch = (char)std::tolower((unsigned char)ch);
            size_t v = h.find_first_not_of(' ', c + 1);
            rq.headers[k] = v == std::string::npos ? "" : h.substr(v);
        }
        pos = e + 2;
    }
    // a body (paths-info's JSON): Content-Length bytes after the headers
    const size_t head_end = in.find("\r\n\r\n") + 4;
    auto cl = rq.headers.find("content-length");
    const size_t body_len = cl == rq.headers.end() ? 0 : std::min<size_t>(std::stoull(cl->second), 1 << 20);
    while (in.size() < head_end + body_len) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) return;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) return;
        in.append(buf, (size_t)k);
    }
    rq.body = in.substr(head_end, body_len);
    answer a = respond(rq);
    rq.status = a.status;
    int delay = 0;
    {
        std::lock_guard<std::mutex> l(mu_);
        log_.push_back(rq);
        delay = chunk_delay_ms_;
    }
    static const std::map<int, const char*> reasons = {{200, "OK"}, {206, "Partial Content"}, {302, "Found"},
        {307, "Temporary Redirect"}, {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
        {416, "Range Not Satisfiable"}};
    std::string head = "HTTP/1.1 " + std::to_string(a.status) + " " +
                       (reasons.count(a.status) ? reasons.at(a.status) : "Status") + "\r\n";
    for (const auto& [k, v] : a.headers) head += k + ": " + v + "\r\n";
    head += "Content-Length: " + std::to_string(a.body.size()) + "\r\nConnection: close\r\n\r\n";
    if (!send_all(fd, head.data(), head.size()) || rq.method == "HEAD") return;
    const size_t n = a.cut ? a.body.size() / 2 : a.body.size();
    for (size_t off = 0; off < n; off += 16384) {
        if (!send_all(fd, a.body.data() + off, std::min<size_t>(16384, n - off))) return;
        if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    if (a.cut) shutdown(fd, SHUT_RDWR);
}

// The revision API's answer: {"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs"?}]}
static std::string revision_json(const hub_server_repo& r) {
    nlohmann::json j = {{"id", r.repo}, {"sha", r.commit}, {"gated", r.gated ? "manual" : "false"}};
    j["siblings"] = nlohmann::json::array();
    for (const hub_server_file& f : r.files) {
        nlohmann::json s = {{"rfilename", f.path}, {"size", f.bytes.size()}, {"blobId", hub_server::git_blob_id(f.bytes)}};
        if (f.lfs) s["lfs"] = {{"sha256", hub_server::sha256_hex(f.bytes)}, {"size", f.bytes.size()}, {"pointerSize", 134}};
        j["siblings"].push_back(s);
    }
    return j.dump();
}

// paths-info (POST {"paths": [...], "expand": true}), what @huggingface/hub's downloadFileToCacheDir asks first:
// [{"type", "path", "size", "oid", "lfs"?, "lastCommit"}] for the paths the repo has
static std::string paths_info_json(const hub_server_repo& r, const std::string& body) {
    nlohmann::json in = nlohmann::json::parse(body, nullptr, false);
    nlohmann::json out = nlohmann::json::array();
    if (!in.is_object() || !in.contains("paths") || !in["paths"].is_array()) return out.dump();
    for (const nlohmann::json& want : in["paths"])
        for (const hub_server_file& f : r.files) {
            if (!want.is_string() || want.get<std::string>() != f.path) continue;
            nlohmann::json e = {{"type", "file"}, {"path", f.path}, {"size", f.bytes.size()}, {"oid", hub_server::git_blob_id(f.bytes)},
                                {"lastCommit", {{"id", r.commit}, {"title", "tiny"}, {"date", "2026-01-01T00:00:00.000Z"}}}};
            if (f.lfs) e["lfs"] = {{"oid", hub_server::sha256_hex(f.bytes)}, {"size", f.bytes.size()}, {"pointerSize", 134}};
            out.push_back(e);
        }
    return out.dump();
}

// A body, or its range ("bytes=N-") as a 206; 416 past the end
static void serve_bytes(hub_server::answer& a, const hub_server_request& rq, const std::string& bytes, bool ignore_range);

hub_server::answer hub_server::respond(const hub_server_request& rq) {
    std::lock_guard<std::mutex> l(mu_);
    answer a;
    auto fail = [&](int status, const std::string& code) {
        a.status = status;
        a.headers.push_back({"X-Error-Code", code});
        a.headers.push_back({"X-Error-Message", code});
        a.body = "{\"error\":\"" + code + "\"}";
        return a;
    };
    std::string path = rq.target.substr(0, rq.target.find('?'));
    auto find_repo = [&](const std::string& id) -> const hub_server_repo* {
        for (const hub_server_repo& r : repos_)
            if (r.repo == id) return &r;
        return nullptr;
    };
    auto find_file = [&](const hub_server_repo& r, const std::string& f) -> const hub_server_file* {
        for (const hub_server_file& x : r.files)
            if (x.path == f) return &x;
        return nullptr;
    };
    auto allowed = [&](const hub_server_repo& r, answer& out) {
        if (!r.gated) return true;
        auto it = rq.headers.find("authorization");
        if (it != rq.headers.end() && it->second == "Bearer " + token_ && !token_.empty()) return true;
        out = fail(it == rq.headers.end() ? 401 : 403, "GatedRepo");
        return false;
    };
    // /api/models/ORG/NAME/revision/REV and /api/models/ORG/NAME/paths-info/REV
    for (const char* api : {"/revision/", "/paths-info/"}) {
        if (path.rfind("/api/models/", 0) != 0 || path.find(api) == std::string::npos) continue;
        const std::string rest = path.substr(12);
        const size_t p = rest.find(api);
        const hub_server_repo* r = find_repo(rest.substr(0, p));
        if (!r) return fail(401, "RepoNotFound");
        const std::string rev = url_decode(rest.substr(p + std::strlen(api)));
        if (rev != r->branch && rev != r->commit) return fail(404, "RevisionNotFound");
        a.headers.push_back({"Content-Type", "application/json"});
        a.body = std::string(api) == "/revision/" ? revision_json(*r) : paths_info_json(*r, rq.body);
        return a;
    }
    // /api/resolve-cache/models/ORG/NAME/COMMIT/FILE: a small file's bytes
    if (path.rfind("/api/resolve-cache/models/", 0) == 0) {
        std::string rest = url_decode(path.substr(26));
        for (const hub_server_repo& r : repos_) {
            const std::string pre = r.repo + "/" + r.commit + "/";
            if (rest.rfind(pre, 0) != 0) continue;
            if (!allowed(r, a)) return a;
            const hub_server_file* f = find_file(r, rest.substr(pre.size()));
            if (!f) return fail(404, "EntryNotFound");
            a.headers.push_back({"ETag", "\"" + git_blob_id(f->bytes) + "\""});
            a.headers.push_back({"X-Repo-Commit", r.commit});
            serve_bytes(a, rq, f->sent.empty() ? f->bytes : f->sent, ignore_range_);
            if (rq.method == "GET" && cut_ == f->path) a.cut = true, cut_.clear();
            return a;
        }
        return fail(404, "EntryNotFound");
    }
    // /cdn/SHA256: an LFS file's bytes on "another host"; no token needed
    if (path.rfind("/cdn/", 0) == 0) {
        for (const hub_server_repo& r : repos_)
            for (const hub_server_file& f : r.files)
                if (f.lfs && sha256_hex(f.bytes) == path.substr(5)) {
                    a.headers.push_back({"ETag", "\"" + sha256_hex(f.bytes) + "\""});
                    serve_bytes(a, rq, f.sent.empty() ? f.bytes : f.sent, ignore_range_);
                    if (rq.method == "GET" && cut_ == f.path) a.cut = true, cut_.clear();
                    return a;
                }
        return fail(404, "EntryNotFound");
    }
    // /ORG/NAME/resolve/REV/FILE
    size_t p = path.find("/resolve/");
    if (p == std::string::npos) return fail(404, "EntryNotFound");
    const hub_server_repo* r = find_repo(path.substr(1, p - 1));
    if (!r) return fail(401, "RepoNotFound");
    if (!allowed(*r, a)) return a;
    std::string rest = path.substr(p + 9);
    size_t slash = rest.find('/');
    std::string rev = url_decode(rest.substr(0, slash));
    if (rev != r->branch && rev != r->commit) return fail(404, "RevisionNotFound");
    const hub_server_file* f = slash == std::string::npos ? nullptr : find_file(*r, url_decode(rest.substr(slash + 1)));
    if (!f) return fail(404, "EntryNotFound");
    a.headers.push_back({"X-Repo-Commit", r->commit});
    if (f->lfs) {
        a.status = 302;
        a.headers.push_back({"Location", "http://localhost:" + std::to_string(port_) + "/cdn/" + sha256_hex(f->bytes)});
        a.headers.push_back({"ETag", "\"" + git_blob_id("version https://git-lfs.github.com/spec/v1\n") + "\""});
        a.headers.push_back({"X-Linked-Etag", "\"" + sha256_hex(f->bytes) + "\""});
        a.headers.push_back({"X-Linked-Size", std::to_string(f->bytes.size())});
    } else {
        a.status = 307;
        a.headers.push_back({"Location", "/api/resolve-cache/models/" + r->repo + "/" + r->commit + "/" + f->path});
    }
    return a;
}

static void serve_bytes(hub_server::answer& a, const hub_server_request& rq, const std::string& bytes, bool ignore_range) {
    auto it = rq.headers.find("range");
    if (ignore_range || it == rq.headers.end() || it->second.rfind("bytes=", 0) != 0) {
        a.body = bytes;
        return;
    }
    // "bytes=FROM-" or "bytes=FROM-TO" (TO inclusive, cut to the end)
    const std::string spec = it->second.substr(6);
    const size_t from = std::stoull(spec);
    const size_t dash = spec.find('-');
    size_t to = bytes.empty() ? 0 : bytes.size() - 1;
    if (dash != std::string::npos && dash + 1 < spec.size()) to = std::min<size_t>(to, std::stoull(spec.substr(dash + 1)));
    if (from >= bytes.size() || to < from) {
        a.status = 416;
        a.headers.push_back({"Content-Range", "bytes */" + std::to_string(bytes.size())});
        return;
    }
    a.status = 206;
    a.headers.push_back({"Content-Range", "bytes " + std::to_string(from) + "-" + std::to_string(to) + "/" +
                                              std::to_string(bytes.size())});
    a.body = bytes.substr(from, to + 1 - from);
}
