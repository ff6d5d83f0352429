// Safetensors: memory-mapped, validated reading; plain writing (tests, random models, the trainer's twin).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gb {

enum st_dtype { ST_F32, ST_F16, ST_BF16 };

struct st_tensor {
    std::string name;
    st_dtype dtype = ST_F32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr; // inside the mapping, already checked against the file size
    size_t nbytes = 0;
};

// A read-only memory mapping that unmaps itself.
struct mapped_file {
    std::string path;
    const uint8_t* data = nullptr;
    size_t size = 0;
    mapped_file() = default;
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file();
    // Lets the kernel drop the pages read so far from this process (they stay in the page cache): after the
    // matrices are packed only the tables read in place are used, and those pages come back as they are read.
    void release() const;
    // The same for the whole pages inside [p, p + n), a range of this mapping (one tensor just packed), so the
    // file's pages and the packed copy are not both held while a large model loads.
    void release(const uint8_t* p, size_t n) const;
};
// Throws gb::error("cannot open FILE: reason") on failure.
std::unique_ptr<mapped_file> map_file(const std::string& path);

struct safetensors_file {
    std::shared_ptr<mapped_file> file; // shared: row tables may point into the mapping (quant.h)
    std::map<std::string, st_tensor> tensors;
};
// Validates header length, JSON, dtypes, shapes vs byte sizes and every offset against the file size.
safetensors_file open_safetensors(const std::string& path);

// "[2, 3]": a shape in error messages (all loaders)
std::string shape_str(const std::vector<int64_t>& shape);

// Converts a tensor to f32 (F32, F16, BF16), checking its shape; throws naming file, tensor, expected vs found.
std::vector<float> tensor_f32(const safetensors_file& f, const st_tensor& t, const std::vector<int64_t>& shape);

// For writing: f32 data stored as the given dtype.
struct st_out {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
    st_dtype dtype = ST_F32;
};
void write_safetensors(const std::string& path, const std::vector<st_out>& tensors);

// Streaming writing, for files too large to hold as floats (a random 1B-parameter model): the header from the
// names, shapes and dtypes alone, then each tensor's values in file order, asked of fill(i, out, n) a chunk of
// n <= st_chunk values at a time (the next n values of tensor i, row-major). Memory stays one chunk.
struct st_spec {
    std::string name;
    std::vector<int64_t> shape;
    st_dtype dtype = ST_F32;
};
using st_fill_fn = std::function<void(size_t tensor, float* out, size_t n)>;
extern const size_t st_chunk;
void write_safetensors_streaming(const std::string& path, const std::vector<st_spec>& specs, const st_fill_fn& fill);

} // namespace gb
