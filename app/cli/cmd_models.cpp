// glassbox-cli models [--json FILE]: the models on this machine (core/io/model_sources.h) as a table on stdout:
// source, name, format, family, kind, parameters, bytes on disk, and why Glassbox cannot open one.
#include <cstdio>
#include <string>

#include "analysis/export.h"
#include "io/model_sources.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

// 124M, 1.2B, 7B
std::string count_text(int64_t n) {
    if (n < 0) return "?";
    char s[32];
    if (n >= 1000000000) std::snprintf(s, sizeof s, "%.1fB", n / 1e9);
    else if (n >= 1000000) std::snprintf(s, sizeof s, "%.0fM", n / 1e6);
    else if (n >= 1000) std::snprintf(s, sizeof s, "%.0fk", n / 1e3);
    else std::snprintf(s, sizeof s, "%lld", (long long)n);
    return s;
}

std::string size_text(int64_t b) {
    char s[32];
    if (b >= 1000000000) std::snprintf(s, sizeof s, "%.1f GB", b / 1e9);
    else if (b >= 1000000) std::snprintf(s, sizeof s, "%.0f MB", b / 1e6);
    else if (b >= 1000) std::snprintf(s, sizeof s, "%.0f kB", b / 1e3);
    else std::snprintf(s, sizeof s, "%lld B", (long long)b);
    return s;
}

// {"models": [{source, name, path, format, family, kind, n_params, bytes, openable, reason}]}
nlohmann::json models_json(const std::vector<gb::found_model>& models) {
    nlohmann::json rows = nlohmann::json::array();
    for (const gb::found_model& f : models)
        rows.push_back({{"source", f.source}, {"name", f.name}, {"path", f.path}, {"format", f.format},
                        {"family", f.family}, {"kind", f.kind}, {"n_params", f.n_params}, {"bytes", f.bytes},
                        {"openable", f.openable}, {"reason", f.reason}});
    return {{"models", rows}};
}

} // namespace

int cmd_models(const args& a) {
    const std::vector<gb::found_model> models = gb::scan_models();
    if (a.has("json")) gb::write_json(a.get("json"), models_json(models));
    if (models.empty()) {
        std::printf("no models found (looked in the Hugging Face cache, Ollama, LM Studio and llama.cpp's cache; "
                    "see docs/models.md \"Opening a model\")\n");
        return 0;
    }
    std::printf("%-9s %-44s %-7s %-10s %-8s %7s %9s  %s\n", "SOURCE", "NAME", "FORMAT", "FAMILY", "KIND", "PARAMS",
                "SIZE", "OPENS");
    for (const gb::found_model& f : models)
        std::printf("%-9s %-44s %-7s %-10s %-8s %7s %9s  %s\n", f.source.c_str(), terminal_safe(f.name, false).c_str(),
                    f.format.c_str(), f.family.c_str(), f.kind.c_str(), count_text(f.n_params).c_str(),
                    size_text(f.bytes).c_str(), f.openable ? "yes" : ("no: " + terminal_safe(f.reason, false)).c_str());
    std::printf("\nopen one with --model hf:NAME, --model ollama:NAME or its path\n");
    return 0;
}

} // namespace cli
