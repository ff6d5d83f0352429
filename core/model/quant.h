// Stored weight types: ggml's block formats (the types GGUF files hold; safetensors' F32/F16/BF16 are the same
// bytes), their dequantisation, and row tables (embeddings, the unembedding) kept in their stored type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gb {

// ggml type ids, as GGUF writes them
enum ggml_type_id {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_BF16 = 30,
};
// Values per block and bytes per block of a type; false for a type not read here.
bool ggml_block(uint32_t type, int64_t& values, int64_t& bytes);
const char* ggml_type_name(uint32_t type);  // "Q8_0"; "unsupported" for unknown ids
const char* ggml_supported_names();         // "F32, F16, ..." for error messages
const std::vector<uint32_t>& ggml_types();   // every type read here, in ggml_supported_names' order
// Bytes of n values of a type (n a multiple of its block).
size_t ggml_bytes(uint32_t type, int64_t n);

// Dequantises n values (a multiple of the type's block size) of one ggml type.
void dequantize(float* out, const uint8_t* src, uint32_t type, int64_t n);
// The K types' (Q4_K, Q5_K) dequantised value d * q - m (d, m: a sub-block's scale and min; q its level),
// rounded once where the CPU has FMA. The one definition dequantize and the vector kernels that convert in
// registers (kernels/stored_values.h) share, so their values agree bit for bit.
inline float k_value(float d, float q, float m) {
#if defined(__FMA__)
    return __builtin_fmaf(d, q, -m);
#else
    return d * q - m;
#endif
}
// Quantises n values (a multiple of the block size) to any type ggml_block knows (random models): each block's
// scale from its own values, each value rounded to the nearest level. Q8_0: d = max |x| / 127; Q4_0 / Q5_0: the
// value of largest magnitude at the lowest level; Q4_1 / Q5_1: the block's range; Q4_K / Q5_K: each 32-value
// sub-block's range, its scale and minimum in 6 bits of the block's two f16 scales; Q6_K: each 16-value
// sub-block's int8 scale of the block's f16 d.
void quantize(uint8_t* out, const float* x, uint32_t type, int64_t n);

// No NaN or Inf among the n stored values (a multiple of the block size) once dequantised.
bool stored_finite(const uint8_t* src, uint32_t type, int64_t n);

// A [rows][cols] table read one row at a time (token embeddings, the unembedding), kept in its stored type:
// each row is cols values of `type` (blocks along the row). It either points into the model file's mapping
// (the layout on disk is already this one) or owns its bytes; `keep` holds whichever it is alive.
struct row_table {
    uint32_t type = GGML_F32;
    int64_t rows = 0, cols = 0;
    const uint8_t* data = nullptr;    // [rows][row_bytes()]
    std::shared_ptr<const void> keep; // the mapping, or the owned buffer
    bool mapped = false;              // data lies in the file's mapping (page cache), not in owned memory
    size_t row_bytes() const { return ggml_bytes(type, cols); }
    size_t bytes() const { return (size_t)rows * row_bytes(); }
    size_t size() const { return (size_t)rows * cols; }
    bool empty() const { return rows == 0; }
};
// out [cols] = row r, dequantised.
void table_row(float* out, const row_table& t, int64_t r);
// The whole table as f32 [rows][cols] (tests, writers).
std::vector<float> table_f32(const row_table& t);
// An owned F32 table from values [rows][cols].
row_table table_from_f32(std::vector<float> values, int64_t rows, int64_t cols);
// A table over bytes owned elsewhere (a mapping): keep holds them alive.
row_table table_view(uint32_t type, const uint8_t* data, int64_t rows, int64_t cols, std::shared_ptr<const void> keep);

} // namespace gb
