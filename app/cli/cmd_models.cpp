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

// A count (124M, 1.2B) or a size in bytes (548 MB, 1.2 GB): one decimal from a billion, none below; "?" unknown
std::string short_number(int64_t n, bool bytes) {
    if (n < 0) return "?";
    static const char* const units[2][4] = {{"", "k", "M", "B"}, {" B", " kB", " MB", " GB"}};
    const int u = n >= 1000000000 ? 3 : n >= 1000000 ? 2 : n >= 1000 ? 1 : 0;
    char s[32];
    std::snprintf(s, sizeof s, u == 3 ? "%.1f%s" : "%.0f%s", (double)n / (u == 3 ? 1e9 : u == 2 ? 1e6 : u == 1 ? 1e3 : 1.0),
                  units[bytes][u]);
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
                    f.format.c_str(), f.family.c_str(), f.kind.c_str(), short_number(f.n_params, false).c_str(),
                    short_number(f.bytes, true).c_str(), f.openable ? "yes" : ("no: " + terminal_safe(f.reason, false)).c_str());
    std::printf("\nopen one with --model hf:NAME, --model ollama:NAME or its path\n");
    return 0;
}

} // namespace cli
