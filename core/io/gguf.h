// GGUF (v2/v3) files: header, metadata, tensor infos, and the model loader (block formats: quant.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/loader.h"
#include "io/safetensors.h" // mapped_file
#include "model/model.h"
#include "model/quant.h"

namespace gb {

// One metadata value. Arrays (of numbers, bools or strings; not of arrays) keep their element type and count:
// numeric elements stay in the mapping (gguf_array_int / gguf_array_float read them), strings are copied.
// So memory follows the bytes the file holds, never a count it claims.
struct gguf_value {
    uint32_t type = 0;              // GGUF value type (0 u8 ... 8 string, 9 array, 10 u64, 11 i64, 12 f64)
    int64_t i = 0;                  // integers and bools
    double f = 0;                   // floats
    std::string s;                  // strings
    uint32_t elem_type = 0;         // arrays
    uint64_t n = 0;                 // arrays: element count
    const uint8_t* raw = nullptr;   // arrays of numbers / bools: n little-endian elements inside the mapping
    std::vector<std::string> strs;  // arrays of strings [n]
};
// Element k (< n) of a numeric array; integers of floats only where representable (else 0).
double gguf_array_float(const gguf_value& a, uint64_t k);
int64_t gguf_array_int(const gguf_value& a, uint64_t k);

struct gguf_tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<int64_t> ne;     // GGUF order: ne[0] varies fastest (a [out][in] matrix has ne = {in, out})
    const uint8_t* data = nullptr;
    size_t nbytes = 0;
};

struct gguf_file {
    std::shared_ptr<mapped_file> file; // shared: row tables may point into the mapping (quant.h)
    uint32_t version = 0;
    std::map<std::string, gguf_value> meta;
    std::map<std::string, gguf_tensor> tensors;
};

// Validates every count, string length, tensor shape, type and offset against the file size before use.
gguf_file open_gguf(const std::string& path);
// f32 copy of a tensor in row-major order of its shape (rows = ne[1], row length = ne[0]); checks the shape
// given as {ne[0], ne[1], ...}.
std::vector<float> gguf_tensor_f32(const gguf_file& g, const std::string& name, const std::vector<int64_t>& ne);

model load_gguf(const std::string& path, const load_options& opt);

} // namespace gb
