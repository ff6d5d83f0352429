// NumPy .npz archives (a zip of .npy members, as numpy.savez writes them): reading the stored (uncompressed)
// members, with zip64 sizes and offsets, and writing them (tests, SAE files).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/npy.h"

namespace gb {

// Every member of the archive at path, by name without ".npy" ("W_enc"), as float32. Throws gb::error naming the
// file: not a zip, a compressed member (numpy.savez_compressed: "save it with numpy.savez"), a bad .npy.
std::map<std::string, npy_array> read_npz(const std::string& path);

// Writes the arrays as a stored zip of NAME.npy members (float32), readable by numpy.load and read_npz.
void write_npz(const std::string& path, const std::map<std::string, npy_array>& arrays);

} // namespace gb
