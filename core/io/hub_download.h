// Downloading from the Hugging Face Hub into its shared cache, laid out as huggingface_hub writes it so every
// other tool reuses what Glassbox fetched:
//   <cache>/models--ORG--NAME/blobs/<etag>                      the bytes (etag: X-Linked-Etag for LFS files)
//   <cache>/models--ORG--NAME/blobs/<etag>.incomplete           while downloading (resumed with Range)
//   <cache>/models--ORG--NAME/snapshots/<commit>/<file>         -> ../../blobs/<etag> (relative symlink)
//   <cache>/models--ORG--NAME/refs/<revision>                   the commit hash (no newline)
// HTTP through libcurl, TLS verified. Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN,
// HF_TOKEN_PATH, $HF_HOME/token (Bearer; never sent to another host, printed or logged), HF_HUB_OFFLINE=1
// (no network: throws), HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME (and the older HUGGINGFACE_HUB_CACHE).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gb {

struct hub_file {
    std::string path;  // relative path inside the repo ("model.safetensors", "onnx/model.onnx")
    int64_t size = 0;  // bytes
    bool lfs = false;  // stored with LFS (downloaded from a redirect, sha256 checked)
};

struct hub_repo_info {
    std::string repo;             // "ORG/NAME"
    std::string revision;         // as asked ("main", a tag or a commit)
    std::string commit;           // 40 hex
    std::vector<hub_file> files;  // every file of the repo at that commit
};

// The revision API: GET {endpoint}/api/models/{repo}/revision/{revision}. Throws one line on a missing or gated
// repo, no network, offline mode, or a malformed answer.
hub_repo_info hub_repo(const std::string& repo, const std::string& revision = "main");

// Only the files a model needs: config.json, generation_config.json, the weights (model.safetensors, or the
// shards a model.safetensors.index.json names -- the index is read by hub_download, see below), tokenizer files,
// preprocessor_config.json. For a GGUF repo: the one GGUF file_or_quant picks (a path, or a quant such as
// "Q4_K_M" matched case-insensitively as a whole word of the file names); an empty file_or_quant there picks
// the Q8_0 file, else the only GGUF. Throws one line when nothing or several fit (naming the GGUF files).
std::vector<std::string> hub_needed_files(const hub_repo_info& r, const std::string& file_or_quant);

struct download_progress {
    std::string file;     // repo path being downloaded
    int64_t done = 0;     // bytes of this file so far (a resumed part included)
    int64_t total = 0;    // bytes of this file (0 when unknown)
    double rate = 0;      // bytes/s over this transfer
};
// Called often from the downloading thread; return false to cancel (the download throws "cancelled").
using download_fn = std::function<bool(const download_progress&)>;

// Downloads files (repo paths) of repo at revision into the hub cache and returns the snapshot folder
// (<cache>/models--ORG--NAME/snapshots/<commit>). A file already in the snapshot is not fetched again; a
// model.safetensors.index.json among files brings in the shards it names. Names that are absolute or climb out
// of the snapshot are refused. Throws one line; nothing half-written is left in snapshots/ (partial bytes stay
// in blobs/<etag>.incomplete for the next try).
std::string hub_download(const std::string& repo, const std::string& revision,
                         const std::vector<std::string>& files, const download_fn& progress = {});

// The hub cache folder: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub.
std::string hf_hub_cache();

// The Hub's address: $HF_ENDPOINT without a trailing '/', else "https://huggingface.co".
std::string hf_endpoint();

// The token: $HF_TOKEN (or the older $HUGGING_FACE_HUB_TOKEN), else the file $HF_TOKEN_PATH, else
// $HF_HOME/token (HF_HOME defaulting to $XDG_CACHE_HOME/huggingface, then ~/.cache/huggingface); "" if none.
std::string hf_token();

// Throws one line unless repo is a Hub repo id as huggingface_hub accepts it ("NAME" or "ORG/NAME" of letters,
// digits, '.', '_', '-'; no "--" or ".."): what keeps a name from reaching outside the cache folder.
void check_hf_repo_id(const std::string& repo);
// The repo's folder in the hub cache: hf_hub_cache()/models--ORG--NAME (repo checked first)
std::string hf_repo_folder(const std::string& repo);

// True when HF_HUB_OFFLINE (or the older TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE.
bool hf_offline();

} // namespace gb
