// glassbox-cli info: the model as JSON (architecture, sizes, parameters, stored types, the matmul kernel).
#include <cstdio>
#include <string>

#include "analysis/export.h"
#include "kernels/gemm.h"
#include "model/model.h"

#include "args.h"
#include "commands.h"

namespace cli {

int cmd_info(const args& a) {
    gb::model m = open_model(a);
    nlohmann::json j = gb::model_json(m);
    gb::param_counts p = gb::count_params(m);
    j["params"] = {{"embeddings", p.embeddings}, {"attention", p.attention}, {"mlp", p.mlp}, {"norms", p.norms}};
    j["d_ff"] = m.config.d_ff;
    const gb::weight_types t = gb::stored_types(m);
    j["stored_types"] = {{"attention", t.attention}, {"mlp", t.mlp}, {"embedding", t.embedding}, {"head", t.head}};
    j["resident_bytes"] = gb::weight_bytes(m);
    j["matmul"] = gb::matmul_name(gb::matmul_kind_now());
    std::string why;
    if (gb::matmul_kind_now() == gb::MATMUL_INT8 && gb::matmul_of(m) != gb::MATMUL_INT8)
        j["matmul_note"] = "int8 changes only Q4_K products and this model holds no Q4_K layer matrix: all are fp32";
    else if (!gb::amx_usable(&why)) j["matmul_note"] = "no AMX kernel: " + why;
    if (!m.source_note.empty()) j["note"] = m.source_note;
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
}

} // namespace cli
