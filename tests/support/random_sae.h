// Random SAEs and transcoders for the tests (test_sae, test_gui_features), written with gb::write_sae_saelens.
#pragma once
#include <cstdint>
#include <string>

#include "io/sae.h"

// A random SAE of arch reading `in` and writing `out` (our point names) at layer, its weights from a seeded LCG;
// pre-activations are about half positive.
gb::sae random_sae(gb::sae_arch arch, int d_in, int d_out, int d_sae, const std::string& in, const std::string& out,
                   int layer, uint32_t seed);
