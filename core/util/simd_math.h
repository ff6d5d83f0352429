// Elementwise math on GCC/Clang vector types (any lane count), shared by the GEMM kernels' epilogues.
// Internal linkage: each kernel's translation unit gets its own copy, built for its own instruction set.
#pragma once
#include <cstring>
#include <initializer_list>

namespace gb {

// e^z on every lane, |relative error| < 2e-7: z = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series to
// r^7, 2^n built in the exponent bits. z is clamped to [-87, 88] so 2^n stays a normal float; NaN passes through.
template <class V>
static inline V exp_lanes(V z) {
    typedef int iv __attribute__((vector_size(sizeof(V))));
    const V lo = V{} - 87.0f, hi = V{} + 88.0f;
    z = z < lo ? lo : z;
    z = z > hi ? hi : z;
    // adding 1.5 * 2^23 rounds z / ln2 to an integer, which then sits in the low mantissa bits
    const V shifter = V{} + 12582912.0f;
    const V t = z * 1.44269504088896341f + shifter;
    const V n = t - shifter;
    const V r = (z - n * 0.693145751953125f) - n * 1.428606765330187e-6f; // ln2 in two parts: r is exact-ish
    V p = V{} + (1.0f / 5040);
    for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = p * r + c;
    iv bits;
    std::memcpy(&bits, &t, sizeof(t));
    bits = (bits - 0x4B400000 + 127) << 23; // t's bits minus the shifter's are n; biased, shifted: 2^n
    V scale;
    std::memcpy(&scale, &bits, sizeof(bits));
    return p * scale;
}

// GELU, tanh form (GPT-2's "gelu_new"): 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// The sigmoid form has no 1 + tanh cancellation for negative x; e^(-2u) overflowing to huge gives -0.
template <class V>
static inline V gelu_lanes(V x) {
    const V u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_lanes(-2.0f * u));
}

// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), with erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7):
// erfc(z) = q(t) e^(-z^2), t = 1 / (1 + p |z|). Below zero 1 + erf = erfc(|z|) is used as is, so the tail keeps
// its relative accuracy instead of cancelling against 1.
template <class V>
static inline V gelu_erf_lanes(V x) {
    const V z = x * 0.7071067811865476f;
    const V az = z < 0.0f ? -z : z;
    const V t = 1.0f / (1.0f + 0.3275911f * az);
    V q = V{} + 1.061405429f;
    for (float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f}) q = q * t + c;
    const V erfc = q * t * exp_lanes(-az * az);
    return 0.5f * x * (x >= 0.0f ? 2.0f - erfc : erfc);
}

} // namespace gb
