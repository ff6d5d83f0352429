// glassbox-cli download hf:ORG/NAME [--revision R] [--file F]: the files a model needs from the Hugging Face Hub
// into its cache (core/io/hub_download.h), with progress; prints the local path load_model opens.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <cstdio>
#include <filesystem>
#include <string>

#include "io/hub_download.h"
#include "io/model_sources.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

std::string human_bytes(double b) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) b /= 1000, ++u;
    char s[32];
    std::snprintf(s, sizeof s, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
    return s;
}

std::string clock_text(double seconds) {
    if (!(seconds >= 0) || seconds > 359999) return "--:--";
    const long s = (long)(seconds + 0.5);
    char out[32];
    if (s >= 3600) std::snprintf(out, sizeof out, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(out, sizeof out, "%ld:%02ld", s / 60, s % 60);
    return out;
}

} // namespace

gb::download_fn download_printer() {
    struct state {
        std::string file;
        std::chrono::steady_clock::time_point last{};
        bool ended = false;
    };
    auto st = std::make_shared<state>();
    const bool tty = isatty(fileno(stderr));
    return [st, tty](const gb::download_progress& p) {
        const bool fresh = p.file != st->file;
        const bool done = p.total > 0 && p.done >= p.total;
        if (fresh) {
            if (tty && !st->file.empty() && !st->ended) std::fputc('\n', stderr);
            st->file = p.file;
            st->ended = false;
            if (!tty) std::fprintf(stderr, "downloading %s (%s)\n", p.file.c_str(), human_bytes((double)p.total).c_str());
        }
        if (st->ended) return true;
        const auto now = std::chrono::steady_clock::now();
        if (tty && (done || fresh || now - st->last > std::chrono::milliseconds(100))) {
            st->last = now;
            const double frac = p.total > 0 ? (double)p.done / (double)p.total : 0;
            const int width = 24, full = (int)(frac * width);
            std::string bar(full, '#');
            bar.resize(width, ' ');
            const double eta = p.rate > 0 ? (double)(p.total - p.done) / p.rate : -1;
            std::fprintf(stderr, "\r%s [%s] %s / %s  %s/s  ETA %s\x1b[K", p.file.c_str(), bar.c_str(),
                         human_bytes((double)p.done).c_str(), human_bytes((double)p.total).c_str(),
                         human_bytes(p.rate).c_str(), clock_text(eta).c_str());
        }
        if (done) {
            st->ended = true;
            if (tty) std::fputc('\n', stderr);
            else std::fprintf(stderr, "done %s\n", p.file.c_str());
        }
        std::fflush(stderr);
        return true;
    };
}

int cmd_download(const args& a) {
    if (a.positional.empty()) throw usage_error("missing the model: glassbox-cli download hf:ORG/NAME (see --help)");
    const std::string spec = a.positional[0];
    if (spec.rfind("hf:", 0) != 0)
        throw usage_error("'" + spec + "': download takes an hf:ORG/NAME name (Ollama models come with ollama pull)");
    gb::hf_name n = gb::parse_hf_name(spec);
    if (a.has("revision")) {
        if (spec.find('@') != std::string::npos) throw usage_error("--revision: the name has one already (@)");
        n.revision = a.get("revision");
    }
    if (a.has("file")) {
        if (!n.file_or_quant.empty()) throw usage_error("--file: the name has one already (:FILE_OR_QUANT)");
        n.file_or_quant = a.get("file");
    }
    const gb::hub_repo_info info = gb::hub_repo(n.repo, n.revision);
    const std::vector<std::string> files = gb::hub_needed_files(info, n.file_or_quant);
    const std::string snap = gb::hub_download(n.repo, n.revision, files, download_printer());
    std::string ext = std::filesystem::path(files[0]).extension().string();
    for (char& ch : ext) ch = (char)std::tolower((unsigned char)ch);
    const bool one_gguf = files.size() == 1 && ext == ".gguf"; // hub_needed_files: one GGUF, or a folder's files
    std::printf("%s\n", one_gguf ? (std::filesystem::path(snap) / files[0]).c_str() : snap.c_str());
    return 0;
}

} // namespace cli
