// NumPy .npy v1.0 files: the header, and whole arrays or a payload streamed by the caller.
#include "util/npy.h"

#include <cstring>
#include <filesystem>
#include <sstream>

#include "util/error.h"
#include "util/half.h"

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

std::string npy_bytes(const std::vector<int64_t>& shape, const float* data) {
    std::string dims;
    size_t count = 1;
    for (size_t i = 0; i < shape.size(); i++) {
        dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
        count *= (size_t)shape[i];
    }
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::string out = std::string("\x93NUMPY\x01\x00", 8);
    out += (char)(header.size() & 0xff);
    out += (char)(header.size() >> 8);
    out += header;
    out.append((const char*)data, count * 4);
    return out;
}

// The value of 'key': in a .npy header dict, up to the next comma outside parentheses (or the closing brace).
static std::string header_value(const std::string& h, const std::string& key, const std::string& what) {
    const size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) throw error(what + ": the .npy header has no '" + key + "'");
    size_t i = h.find(':', k);
    if (i == std::string::npos) throw error(what + ": malformed .npy header");
    i++;
    while (i < h.size() && h[i] == ' ') i++;
    size_t j = i;
    int depth = 0;
    for (; j < h.size(); j++) {
        if (h[j] == '(') depth++;
        if (h[j] == ')') depth--;
        if (depth == 0 && (h[j] == ',' || h[j] == '}')) break;
    }
    return h.substr(i, j - i);
}

npy_array parse_npy(const uint8_t* p, size_t n, const std::string& what) {
    if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) throw error(what + ": not a .npy array (no \\x93NUMPY magic)");
    const int major = p[6];
    size_t hlen = 0, off = 0;
    if (major == 1) hlen = p[8] | (p[9] << 8), off = 10;
    else if (major == 2 || major == 3) {
        if (n < 12) throw error(what + ": truncated .npy header");
        hlen = p[8] | (p[9] << 8) | ((size_t)p[10] << 16) | ((size_t)p[11] << 24), off = 12;
    } else throw error(what + ": .npy version " + std::to_string(major) + " is not supported");
    if (off + hlen > n) throw error(what + ": truncated .npy header");
    const std::string h((const char*)p + off, hlen);
    const std::string descr = header_value(h, "descr", what);
    if (header_value(h, "fortran_order", what) != "False")
        throw error(what + ": Fortran-ordered .npy arrays are not supported (save it C-contiguous)");
    std::string dims = header_value(h, "shape", what);
    npy_array a;
    for (char& c : dims)
        if (c == '(' || c == ')' || c == ',') c = ' ';
    std::istringstream ss(dims);
    long long d;
    size_t count = 1;
    while (ss >> d) {
        if (d < 0 || d > (1ll << 40)) throw error(what + ": bad .npy shape");
        a.shape.push_back(d);
        count *= (size_t)d;
    }
    size_t esize = descr == "'<f4'" ? 4 : descr == "'<f8'" ? 8 : descr == "'<f2'" ? 2 : 0;
    if (!esize) throw error(what + ": .npy dtype " + descr + " is not supported (float32, float64 or float16)");
    const uint8_t* data = p + off + hlen;
    if (count > (n - off - hlen) / esize)
        throw error(what + ": .npy payload holds " + std::to_string((n - off - hlen) / esize) + " values, its shape needs " +
                    std::to_string(count));
    a.data.resize(count);
    for (size_t i = 0; i < count; i++) {
        if (esize == 4) std::memcpy(&a.data[i], data + 4 * i, 4);
        else if (esize == 8) {
            double v;
            std::memcpy(&v, data + 8 * i, 8);
            a.data[i] = (float)v;
        } else {
            uint16_t v;
            std::memcpy(&v, data + 2 * i, 2);
            a.data[i] = f16_to_f32(v);
        }
    }
    return a;
}

void make_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create directory " + dir + ": " + ec.message());
}

} // namespace gb
