// NumPy .npy v1.0 files: the header, and whole arrays or a payload streamed by the caller.
#include "util/npy.h"

#include <filesystem>

#include "util/error.h"

namespace gb {

size_t open_npy(std::ofstream& f, const std::string& path, const std::vector<int64_t>& shape, const char* descr) {
    std::string dims;
    size_t count = 1;
    for (size_t i = 0; i < shape.size(); i++) {
        dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
        count *= (size_t)shape[i];
    }
    std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending in \n
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    f.open(path, std::ios::binary);
    if (!f) throw error("cannot write " + path);
    const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    f.write(magic, 8);
    uint16_t len = (uint16_t)header.size();
    const char len_le[2] = {(char)(len & 0xff), (char)(len >> 8)};
    f.write(len_le, 2);
    f.write(header.data(), (std::streamsize)header.size());
    return count;
}

static void write_npy_raw(const std::string& path, const std::vector<int64_t>& shape, const char* descr,
                          const void* data, size_t elem_size) {
    std::ofstream f;
    size_t count = open_npy(f, path, shape, descr);
    f.write((const char*)data, (std::streamsize)(count * elem_size));
    if (!f) throw error("cannot write " + path + " (disk full?)");
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    write_npy_raw(path, shape, "<f4", data, 4);
}
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data) {
    write_npy_raw(path, shape, "<i4", data, 4);
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const double* data) {
    write_npy_raw(path, shape, "<f8", data, 8);
}

void make_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create directory " + dir + ": " + ec.message());
}

} // namespace gb
