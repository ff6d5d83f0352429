// A Hugging Face Hub on 127.0.0.1 for tests (no real network): the revision API, `resolve` URLs answered as the
// Hub does (a small file: a relative 307 to /api/resolve-cache/..., whose 200 carries the git ETag; an LFS file:
// a 302 to another host, "localhost:PORT/cdn/<sha256>", carrying X-Repo-Commit, X-Linked-Etag and
// X-Linked-Size), Range requests (206), a gated repo's 401 / 403 with X-Error-Code GatedRepo, RepoNotFound,
// RevisionNotFound and EntryNotFound; and the paths-info API @huggingface/hub asks (tests/node/hub_download.mjs, the
// reference cache writer). Records every request with its headers; can cut one transfer half-way.
// Used by tests/test_hub_download.cpp, tests/test_model_sources.cpp and the GUI's model picker test.
#pragma once
#include <atomic>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// Environment variables set (a value) or unset (nullptr) for a scope, each put back as it was when it ends:
// the tests point HOME, HF_ENDPOINT, HF_HUB_CACHE, ... at temporary folders and the local server.
struct scoped_env {
    explicit scoped_env(std::initializer_list<std::pair<std::string, const char*>> vars);
    explicit scoped_env(const std::vector<std::pair<std::string, std::optional<std::string>>>& vars);
    ~scoped_env();
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    void set(const std::string& name, const char* value);
    std::vector<std::pair<std::string, std::unique_ptr<std::string>>> saved_; // name, old value (null: was unset)
};

// Every variable that points the model scanners or the hub somewhere (caches, tokens, endpoint, offline mode,
// proxies' exceptions aside): a test that builds its own machine unsets them all.
const std::vector<std::string>& model_location_vars();
// A machine of the test's own: HOME = home, every model_location_vars() variable unset, then `set` on top (a
// value, or std::nullopt to unset), and no proxy for 127.0.0.1 (curl honours no_proxy).
std::unique_ptr<scoped_env> isolated_machine(const std::string& home,
                                             std::vector<std::pair<std::string, std::optional<std::string>>> set);

struct hub_server_file {
    std::string path;  // "config.json", "sub/model.gguf"
    std::string bytes; // the content
    bool lfs = false;  // served through the CDN redirect (ETag: sha256 of the bytes)
    std::string sent;  // when not empty: what a GET sends instead of bytes (a corrupted transfer; headers as for bytes)
};

struct hub_server_repo {
    std::string repo;                   // "ORG/NAME"
    std::string commit;                 // 40 hex
    std::string branch = "main";        // the revision name that resolves to commit (besides commit itself)
    bool gated = false;                 // files need "Authorization: Bearer <token>" (the API does not)
    std::vector<hub_server_file> files;
};

struct hub_server_request {
    std::string method;                         // "GET" | "HEAD" | "POST"
    std::string target;                         // path and query as sent ("/api/models/...")
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;                           // a POST's body
    int status = 0;                             // what was answered
};

class hub_server {
public:
    hub_server();  // listens on 127.0.0.1, an ephemeral port, from a thread of its own
    ~hub_server(); // stops it
    hub_server(const hub_server&) = delete;
    hub_server& operator=(const hub_server&) = delete;

    int port() const { return port_; }
    std::string endpoint() const; // "http://127.0.0.1:PORT" (what HF_ENDPOINT is set to)

    void add_repo(const hub_server_repo& r);
    void set_token(const std::string& t);          // the token that opens gated repos (others get 403)
    void cut_once(const std::string& file);        // the next GET of that file's bytes stops half-way
    void set_chunk_delay_ms(int ms);               // sleeps between 16 KiB chunks of a body (cancel tests)
    void set_ignore_range(bool on);                // answer Range requests with the whole file (200), as some servers do

    std::vector<hub_server_request> requests() const;
    int count(const std::string& target_part) const; // requests whose target contains target_part
    void clear_requests();

    // The ETag the Hub gives a small file: git's blob id, sha1("blob <n>\0" + bytes), in hex
    static std::string git_blob_id(const std::string& bytes);
    static std::string sha256_hex(const std::string& bytes);

    struct answer; // one response (hub_server.cpp)

private:
    void serve();
    void handle(int fd);
    answer respond(const hub_server_request& rq);

    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    mutable std::mutex mu_;
    std::vector<hub_server_repo> repos_;
    std::vector<hub_server_request> log_;
    std::string token_;
    std::string cut_;
    int chunk_delay_ms_ = 0;
    bool ignore_range_ = false;
};
