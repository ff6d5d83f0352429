// NumPy .npy v1.0 files (little-endian, C order), for the CLI's and the app's exports, and reading them back
// (the float arrays of an SAE's .npz).
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gb {

// Whole arrays. Throw gb::error naming the file on I/O failure.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data);
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const double* data);
// Opens path and writes the header for shape and dtype descr ("<f4"); the caller streams the payload. Returns the
// element count the payload must hold.
size_t open_npy(std::ofstream& f, const std::string& path, const std::vector<int64_t>& shape, const char* descr);
// A whole .npy file in memory (header and payload): what .npz members are made of (core/io/npz.h).
std::string npy_bytes(const std::vector<int64_t>& shape, const float* data);

// A .npy read back as float32: shape and values in C order. Reads <f4, <f8 and <f2 (converted), versions 1 to 3;
// throws gb::error naming `what` for anything else (another dtype, Fortran order, a short payload).
struct npy_array {
    std::vector<int64_t> shape;
    std::vector<float> data;
};
npy_array parse_npy(const uint8_t* p, size_t n, const std::string& what);

// dir and its parents, or gb::error naming it.
void make_dir(const std::string& dir);

} // namespace gb
