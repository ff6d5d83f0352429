// Random SAEs and transcoders for the tests (random_sae.h).
#include "random_sae.h"

#include <cmath>

namespace {

float uniform(uint32_t& s, float lo, float hi) {
    s = s * 1664525u + 1013904223u;
    return lo + (hi - lo) * ((s >> 8) / 16777216.0f);
}

} // namespace

gb::sae random_sae(gb::sae_arch arch, int d_in, int d_out, int d_sae, const std::string& in, const std::string& out,
                   int layer, uint32_t seed) {
    gb::sae s;
    s.arch = arch;
    s.k = arch == gb::SAE_TOPK ? 5 : 0;
    s.transcoder = in != out;
    s.hook_in = in, s.hook_out = out, s.layer = layer;
    auto tl = [&](const std::string& p) {
        const std::string L = "blocks." + std::to_string(layer) + ".";
        return p == "mlp_in" ? L + "ln2.hook_normalized" : L + "hook_" + p;
    };
    s.hook_name = tl(in);
    s.apply_b_dec_to_input = arch == gb::SAE_RELU && !s.transcoder;
    s.d_in = d_in, s.d_out = d_out, s.d_sae = d_sae;
    uint32_t r = seed;
    const float ws = 2.0f / std::sqrt((float)d_in);
    for (int i = 0; i < d_in * d_sae; i++) s.W_enc.push_back(uniform(r, -ws, ws));
    for (int i = 0; i < d_sae; i++) s.b_enc.push_back(uniform(r, -0.3f, 0.1f));
    for (int i = 0; i < d_sae * d_out; i++) s.W_dec.push_back(uniform(r, -0.4f, 0.4f));
    for (int i = 0; i < d_out; i++) s.b_dec.push_back(uniform(r, -0.1f, 0.1f));
    if (arch == gb::SAE_JUMPRELU)
        for (int i = 0; i < d_sae; i++) s.threshold.push_back(uniform(r, 0.0f, 0.3f));
    return s;
}

