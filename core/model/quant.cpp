// Stored weight types: block formats, dequantisation, finiteness, row tables.
#include "model/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "util/error.h"
#include "util/half.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Block formats: values per block, bytes per block
// ---------------------------------------------------------------------------------------------
bool ggml_block(uint32_t type, int64_t& values, int64_t& bytes) {
    switch (type) {
    case GGML_F32: values = 1, bytes = 4; return true;
    case GGML_F16: values = 1, bytes = 2; return true;
    case GGML_BF16: values = 1, bytes = 2; return true;
    case GGML_Q8_0: values = 32, bytes = 34; return true;   // f16 d, int8 q[32]
    case GGML_Q4_0: values = 32, bytes = 18; return true;   // f16 d, 4-bit q[32] packed in 16 bytes
    case GGML_Q4_1: values = 32, bytes = 20; return true;   // f16 d, f16 m, 4-bit q[32]
    case GGML_Q5_0: values = 32, bytes = 22; return true;   // f16 d, 32 high bits, 4-bit low parts q[32]
    case GGML_Q5_1: values = 32, bytes = 24; return true;   // f16 d, f16 m, 32 high bits, 4-bit low parts
    case GGML_Q5_K: values = 256, bytes = 176; return true; // Q4_K's fields plus 32 bytes of fifth bits
    case GGML_Q4_K: values = 256, bytes = 144; return true; // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes q
    case GGML_Q6_K: values = 256, bytes = 210; return true; // 128 bytes low 4 bits, 64 bytes high 2 bits, int8 scales[16], f16 d
    default: return false;
    }
}

const char* ggml_supported_names() { return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"; }

const std::vector<uint32_t>& ggml_types() {
    static const std::vector<uint32_t> t = {GGML_F32,  GGML_F16,  GGML_BF16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_1,
                                            GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    return t;
}

size_t ggml_bytes(uint32_t type, int64_t n) {
    int64_t values, bytes;
    if (!ggml_block(type, values, bytes)) return 0;
    return (size_t)(n / values * bytes);
}

const char* ggml_type_name(uint32_t type) {
    switch (type) {
    case GGML_F32: return "F32";
    case GGML_F16: return "F16";
    case GGML_BF16: return "BF16";
    case GGML_Q8_0: return "Q8_0";
    case GGML_Q4_0: return "Q4_0";
    case GGML_Q4_1: return "Q4_1";
    case GGML_Q5_0: return "Q5_0";
    case GGML_Q5_1: return "Q5_1";
    case GGML_Q5_K: return "Q5_K";
    case GGML_Q4_K: return "Q4_K";
    case GGML_Q6_K: return "Q6_K";
    default: return "unsupported";
    }
}

static float half(const uint8_t* p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

// Q4_K packs 8 six-bit scales and 8 six-bit mins into 12 bytes
static void q4k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K (and Q5_K with five): 4 groups of 64, low nibbles with one scale/min, high nibbles with the next; Q5_K
// adds each value's fifth bit from qh, group g using bits 2g (low nibbles) and 2g+1 (high). A template, so the
// Q4_K loops carry no test for the fifth bit.
template <bool five>
static void dequantize_k4(float* y, const uint8_t* x) {
    float d = half(x), dmin = half(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qh = x + 16; // Q5_K only
    const uint8_t* q = x + (five ? 48 : 16);
    for (int g = 0; g < 4; g++) {
        int sc, m;
        q4k_scale_min(2 * g, scales, sc, m);
        float d1 = d * sc, m1 = dmin * m;
        q4k_scale_min(2 * g + 1, scales, sc, m);
        float d2 = d * sc, m2 = dmin * m;
        const uint8_t lo_bit = (uint8_t)(1u << (2 * g)), hi_bit = (uint8_t)(2u << (2 * g));
        for (int l = 0; l < 32; l++) y[l] = k_value(d1, (float)((q[l] & 0xF) + (five && (qh[l] & lo_bit) ? 16 : 0)), m1);
        for (int l = 0; l < 32; l++) y[32 + l] = k_value(d2, (float)((q[l] >> 4) + (five && (qh[l] & hi_bit) ? 16 : 0)), m2);
        q += 32;
        y += 64;
    }
}

void dequantize(float* y, const uint8_t* x, uint32_t type, int64_t n) {
    int64_t values, bytes;
    if (!ggml_block(type, values, bytes) || n % values) throw error("internal: dequantize of " + std::string(ggml_type_name(type)));
    if (type == GGML_F32) return (void)std::memcpy(y, x, (size_t)n * 4);
    if (type == GGML_F16 || type == GGML_BF16) { // whole rows at once: the LM head converts its table this way
        int64_t i = 0;
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i*)(x + 2 * i));
            if (type == GGML_F16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
            else _mm512_storeu_si512((__m512i*)(y + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
#elif defined(__F16C__) && defined(__AVX2__)
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm_loadu_si128((const __m128i*)(x + 2 * i));
            if (type == GGML_F16) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
            else _mm256_storeu_si256((__m256i*)(y + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        }
#endif
        for (; i < n; i++) {
            const uint16_t h = (uint16_t)(x[2 * i] | x[2 * i + 1] << 8);
            y[i] = type == GGML_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        return;
    }
    const int64_t blocks = n / values;
    for (int64_t b = 0; b < blocks; b++, x += bytes) {
        switch (type) {
        case GGML_F32: std::memcpy(y++, x, 4); break;
        case GGML_F16: *y++ = half(x); break;
        case GGML_BF16: *y++ = bf16_to_f32((uint16_t)(x[0] | x[1] << 8)); break;
        case GGML_Q8_0: {
            float d = half(x);
            for (int i = 0; i < 32; i++) *y++ = d * (int8_t)x[2 + i];
            break;
        }
        case GGML_Q4_0: { // low nibbles are values 0..15, high nibbles 16..31; offset 8
            float d = half(x);
            const uint8_t* q = x + 2;
            for (int i = 0; i < 16; i++) y[i] = d * ((q[i] & 0xF) - 8), y[i + 16] = d * ((q[i] >> 4) - 8);
            y += 32;
            break;
        }
        case GGML_Q4_1:   // y = d q + m, q the nibbles as in Q4_0 (no offset)
        case GGML_Q5_0:   // q = nibble + 16 * its bit of the 32 high bits, offset 16
        case GGML_Q5_1: { // y = d q + m, q as in Q5_0 without the offset
            const bool has_min = type != GGML_Q5_0, five = type != GGML_Q4_1;
            const float d = half(x), m = has_min ? half(x + 2) : 0.0f;
            const uint8_t* p = x + (has_min ? 4 : 2);
            uint32_t high = 0;
            if (five) high = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24, p += 4;
            const int offset = type == GGML_Q5_0 ? 16 : 0;
            for (int i = 0; i < 16; i++) {
                const int lo = (p[i] & 0xF) | (five ? (int)((high >> i) & 1) << 4 : 0);
                const int hi = (p[i] >> 4) | (five ? (int)((high >> (i + 16)) & 1) << 4 : 0);
                y[i] = has_min ? d * lo + m : d * (lo - offset);
                y[i + 16] = has_min ? d * hi + m : d * (hi - offset);
            }
            y += 32;
            break;
        }
        case GGML_Q4_K: dequantize_k4<false>(y, x), y += 256; break;
        case GGML_Q5_K: dequantize_k4<true>(y, x), y += 256; break;
        case GGML_Q6_K: { // 2 halves of 128: 6-bit values from 4 low + 2 high bits, offset 32, int8 scales per 16
            const uint8_t* ql = x;
            const uint8_t* qh = x + 128;
            const int8_t* sc = (const int8_t*)(x + 192);
            float d = half(x + 208);
            for (int h = 0; h < 2; h++) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * sc[is] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
                y += 128;
                ql += 64;
                qh += 32;
                sc += 8;
            }
            break;
        }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Quantisation (random models): each block's scale from its own range, each value rounded to the nearest step
// ---------------------------------------------------------------------------------------------
static void put_half(uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    p[0] = (uint8_t)(h & 0xff), p[1] = (uint8_t)(h >> 8);
}

// round(x / step) clamped to [lo, hi]; 0 where the step is 0 (an all-zero block)
static int steps(float x, float step, int lo, int hi) {
    return step != 0 ? (int)std::clamp(std::lround(x / step), (long)lo, (long)hi) : 0;
}

// The value of largest magnitude, with its sign: Q4_0 / Q5_0 / Q6_K map it to the most negative level, which
// has one step more room than the positive side
static float signed_max(const float* x, int n) {
    float m = 0;
    for (int i = 0; i < n; i++)
        if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    return m;
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1, one block of 32: level q (4 or 5 bits) of value i stands for d * (q - offset) + m.
// Low 4 bits of value i < 16 in byte i's low nibble, of value i + 16 in its high nibble; Q5's fifth bits in a
// little-endian u32, bit i for value i.
static void quantize_32(uint8_t* y, const float* x, bool with_min, bool five) {
    const int top = five ? 31 : 15;
    float d, m = 0;
    int offset = 0;
    if (with_min) {
        const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
        put_half(y, (hi - lo) / top), put_half(y + 2, lo);
        d = half(y), m = half(y + 2);
    } else {
        offset = five ? 16 : 8;
        put_half(y, signed_max(x, 32) / -offset);
        d = half(y);
    }
    int q[32];
    for (int i = 0; i < 32; i++) q[i] = steps(x[i] - m, d, -offset, top - offset) + offset;
    uint8_t* p = y + (with_min ? 4 : 2);
    if (five) {
        uint32_t high = 0;
        for (int i = 0; i < 32; i++) high |= (uint32_t)(q[i] >> 4) << i;
        for (int b = 0; b < 4; b++) p[b] = (uint8_t)(high >> (8 * b));
        p += 4;
    }
    for (int i = 0; i < 16; i++) p[i] = (uint8_t)((q[i] & 0xF) | (q[i + 16] & 0xF) << 4);
}

// Q4_K / Q5_K, one block of 256: 8 sub-blocks of 32, each x ~ scale * q - min with q in 0..15 (0..31), scale and
// min as 6-bit multiples of the block's f16 d and dmin (packed as q4k_scale_min reads them); 4 groups of 64,
// sub-block 2g in the low nibbles, 2g + 1 in the high ones; Q5_K's fifth bits in qh, bit 2g / 2g + 1 of byte l.
template <bool five>
static void quantize_k4(uint8_t* y, const float* x) {
    const int top = five ? 31 : 15;
    float scale[8], min[8];
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = 0;
        for (int i = 0; i < 32; i++) lo = std::min(lo, x[32 * j + i]), hi = std::max(hi, x[32 * j + i]);
        scale[j] = (hi - lo) / top, min[j] = -lo;
    }
    put_half(y, *std::max_element(scale, scale + 8) / 63), put_half(y + 2, *std::max_element(min, min + 8) / 63);
    const float d = half(y), dmin = half(y + 2);
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) sc[j] = steps(scale[j], d, 0, 63), mn[j] = steps(min[j], dmin, 0, 63);
    uint8_t* s = y + 4; // sub-blocks 0-3: 6 bits each in bytes 0-3 / 4-7; 4-7: low 4 bits in bytes 8-11,
    for (int j = 0; j < 4; j++) { // top 2 bits in the spare top bits of bytes 0-7
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
    uint8_t* qh = y + 16; // Q5_K only
    uint8_t* q = y + (five ? 48 : 16);
    if (five) std::memset(qh, 0, 32);
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int v[2];
            for (int h = 0; h < 2; h++) {
                const int j = 2 * g + h;
                v[h] = steps(x[32 * j + l] + dmin * mn[j], d * sc[j], 0, top);
                if (five) qh[l] |= (uint8_t)((v[h] >> 4) << (2 * g + h));
            }
            q[32 * g + l] = (uint8_t)((v[0] & 0xF) | (v[1] & 0xF) << 4);
        }
}

// Q6_K, one block of 256: 16 sub-blocks of 16, x ~ d * sc * (q - 32) with q in 0..63 and sc an int8; in each half
// of 128, value l + 32 k (l < 32) keeps its low 4 bits in ql[l + 32 (k & 1)] (low nibble for k < 2, high for
// k >= 2) and its top 2 bits in qh[l] at bit 2k; the f16 d last.
static void quantize_q6k(uint8_t* y, const float* x) {
    float sub[16];
    for (int j = 0; j < 16; j++) sub[j] = signed_max(x + 16 * j, 16) / -32;
    put_half(y + 208, signed_max(sub, 16) / -128);
    const float d = half(y + 208);
    int8_t* sc = (int8_t*)(y + 192);
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)steps(sub[j], d, -128, 127);
    std::memset(y, 0, 192);
    for (int h = 0; h < 2; h++) {
        uint8_t* ql = y + 64 * h;
        uint8_t* qh = y + 128 + 32 * h;
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int v = 128 * h + 32 * k + l;
                const int q = steps(x[v], d * sc[v / 16], -32, 31) + 32;
                ql[l + 32 * (k & 1)] |= (uint8_t)((q & 0xF) << (k >= 2 ? 4 : 0));
                qh[l] |= (uint8_t)((q >> 4) << (2 * k));
            }
    }
}

void quantize(uint8_t* y, const float* x, uint32_t type, int64_t n) {
    int64_t values, bytes;
    if (!ggml_block(type, values, bytes) || n % values) throw error("internal: quantize of " + std::string(ggml_type_name(type)));
    if (type == GGML_F32) return (void)std::memcpy(y, x, (size_t)n * 4);
    if (type == GGML_F16 || type == GGML_BF16) {
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = type == GGML_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
            y[2 * i] = (uint8_t)(h & 0xff), y[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    }
    for (int64_t b = 0; b < n / values; b++, x += values, y += bytes) {
        switch (type) {
        case GGML_Q8_0: {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[i]));
            put_half(y, amax / 127);
            const float d = half(y); // as the reader will see it
            for (int i = 0; i < 32; i++) y[2 + i] = (uint8_t)(int8_t)steps(x[i], d, -127, 127);
            break;
        }
        case GGML_Q4_0: quantize_32(y, x, false, false); break;
        case GGML_Q4_1: quantize_32(y, x, true, false); break;
        case GGML_Q5_0: quantize_32(y, x, false, true); break;
        case GGML_Q5_1: quantize_32(y, x, true, true); break;
        case GGML_Q4_K: quantize_k4<false>(y, x); break;
        case GGML_Q5_K: quantize_k4<true>(y, x); break;
        case GGML_Q6_K: quantize_q6k(y, x); break;
        }
    }
}

// A stored value is NaN or Inf exactly when its dequantised value is: F16/BF16 by their exponent bits; a block
// type by its scales (finite scales times small integers stay finite), so only those are looked at.
bool stored_finite(const uint8_t* x, uint32_t type, int64_t n) {
    int64_t values, bytes;
    if (!ggml_block(type, values, bytes) || n % values) throw error("internal: stored_finite of " + std::string(ggml_type_name(type)));
    bool ok = true;
    switch (type) {
    case GGML_F32:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            std::memcpy(&u, x + 4 * i, 4);
            ok &= (u & 0x7f800000u) != 0x7f800000u;
        }
        return ok;
    case GGML_F16:
        for (int64_t i = 0; i < n; i++) ok &= (x[2 * i + 1] & 0x7c) != 0x7c;
        return ok;
    case GGML_BF16:
        for (int64_t i = 0; i < n; i++) ok &= ((x[2 * i + 1] & 0x7f) != 0x7f) || ((x[2 * i] & 0x80) == 0);
        return ok;
    default: { // block types: only the f16 scale (and minimum) fields can be NaN or Inf; a finite scale times an
               // integer of at most 16 bits cannot overflow
        const int fields_q6k[] = {208}, fields_one[] = {0}, fields_two[] = {0, 2};
        const bool two = type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K;
        const int* fields = type == GGML_Q6_K ? fields_q6k : two ? fields_two : fields_one;
        const int n_fields = two ? 2 : 1;
        for (int64_t b = 0; b < n / values; b++)
            for (int f = 0; f < n_fields; f++) ok &= (x[b * bytes + fields[f] + 1] & 0x7c) != 0x7c;
        return ok;
    }
    }
}

// ---------------------------------------------------------------------------------------------
// Row tables
// ---------------------------------------------------------------------------------------------
void table_row(float* out, const row_table& t, int64_t r) {
    if (r < 0 || r >= t.rows) throw error("internal: row " + std::to_string(r) + " of a table of " + std::to_string(t.rows));
    const uint8_t* src = t.data + (size_t)r * t.row_bytes();
    if (t.type == GGML_F32) std::memcpy(out, src, (size_t)t.cols * 4);
    else dequantize(out, src, t.type, t.cols);
}

std::vector<float> table_f32(const row_table& t) {
    std::vector<float> out(t.size());
    for (int64_t r = 0; r < t.rows; r++) table_row(&out[(size_t)(r * t.cols)], t, r);
    return out;
}

row_table table_from_f32(std::vector<float> values, int64_t rows, int64_t cols) {
    if ((int64_t)values.size() != rows * cols)
        throw error("internal: table of " + std::to_string(values.size()) + " values as [" + std::to_string(rows) + "][" +
                    std::to_string(cols) + "]");
    row_table t;
    t.type = GGML_F32;
    t.rows = values.empty() ? 0 : rows;
    t.cols = cols;
    auto owned = std::make_shared<std::vector<float>>(std::move(values));
    t.data = (const uint8_t*)owned->data();
    t.keep = owned;
    return t;
}

row_table table_view(uint32_t type, const uint8_t* data, int64_t rows, int64_t cols, std::shared_ptr<const void> keep) {
    row_table t;
    t.type = type;
    t.rows = rows;
    t.cols = cols;
    t.data = data;
    t.keep = std::move(keep);
    t.mapped = true;
    return t;
}

} // namespace gb
