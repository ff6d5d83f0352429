// NumPy .npy v1.0 files (little-endian, C order), for the CLI's and the app's exports.
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
// dir and its parents, or gb::error naming it.
void make_dir(const std::string& dir);

} // namespace gb
