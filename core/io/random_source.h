// What the random-model writers share: seeded normal draws identical on every platform, and the byte-level
// tokenizer every random model carries.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace gb {

// N(0, std) from a seeded 64-bit Mersenne Twister with our own Box-Muller, identical on every platform
struct normal_source {
    std::mt19937_64 rng;
    bool have = false;
    double spare = 0;
    explicit normal_source(uint64_t seed) : rng(seed) {}
    double next() {
        if (have) {
            have = false;
            return spare;
        }
        double u1 = ((rng() >> 11) + 1.0) * (1.0 / 9007199254740993.0), u2 = (rng() >> 11) * (1.0 / 9007199254740992.0);
        double r = std::sqrt(-2.0 * std::log(u1));
        spare = r * std::sin(2 * M_PI * u2);
        have = true;
        return r * std::cos(2 * M_PI * u2);
    }
    std::vector<float> fill(size_t n, double std) {
        std::vector<float> v(n);
        for (float& x : v) x = (float)(next() * std);
        return v;
    }
};

// Byte-level vocabulary of V >= 257 tokens, no merges: ids 0..255 the 256 bytes (as GPT-2's vocabulary starts,
// spelled as vocab.json stores them), then unreachable fillers "<|filler_N|>", then <|endoftext|> (BOS and EOS)
// at V - 1. Every text encodes (one token per byte) and every id decodes, whatever V.
tokenizer random_byte_tokenizer(size_t V);

} // namespace gb
