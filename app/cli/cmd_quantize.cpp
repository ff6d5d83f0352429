// glassbox-cli quantize: a copy of a model with its matrices in another stored type (F16 vs Q4_K of one model,
// for compare), written as one GGUF file.
#include <algorithm>
#include <cstdio>
#include <string>

#include "io/gguf_writer.h"
#include "model/quant.h"

#include "args.h"
#include "commands.h"

namespace cli {

int cmd_quantize(const args& a) {
    const std::string dtype = a.need("dtype"), out = a.need("out");
    const std::vector<uint32_t>& types = gb::ggml_types();
    auto it = std::find_if(types.begin(), types.end(), [&](uint32_t t) { return dtype == gb::ggml_type_name(t); });
    if (it == types.end())
        throw usage_error("--dtype: expected " + std::string(gb::ggml_supported_names()) + ", got '" + dtype + "'");
    if (out.size() < 5 || out.compare(out.size() - 5, 5, ".gguf") != 0)
        throw usage_error("--out: quantize writes one GGUF file, a path ending in .gguf; got '" + out + "'");
    const gb::model m = open_model(a);
    const int64_t n = gb::write_model_gguf(out, m, *it);
    std::printf("wrote %s: %s with its matrices in %s (%lld parameters; norms, biases and positions F32)\n", out.c_str(),
                m.path.c_str(), dtype.c_str(), (long long)n);
    return 0;
}

} // namespace cli
