// .npz reading and writing: a zip's central directory (zip64 included) and its stored members.
#include "io/npz.h"

#include <cstring>
#include <fstream>

#include "io/safetensors.h"
#include "util/error.h"

namespace gb {
namespace {

uint64_t le(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint32_t crc32(const std::string& s) {
    static uint32_t table[256];
    static bool made = false;
    if (!made) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        made = true;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char b : s) c = table[(c ^ b) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

void put(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) out += (char)((v >> (8 * i)) & 0xff);
}

// The central directory's offset and entry count, from the end record (or its zip64 twin).
void find_directory(const mapped_file& f, uint64_t& cd_offset, uint64_t& entries) {
    const uint8_t* p = f.data;
    const size_t n = f.size;
    if (n < 22) throw error(f.path + ": not a zip (.npz) archive: too short");
    size_t eocd = std::string::npos;
    for (size_t i = n - 22 + 1; i-- > 0 && n - i < 22 + 65536;)
        if (le(p + i, 4) == 0x06054b50) {
            eocd = i;
            break;
        }
    if (eocd == std::string::npos) throw error(f.path + ": not a zip (.npz) archive: no end of central directory");
    entries = le(p + eocd + 10, 2);
    cd_offset = le(p + eocd + 16, 4);
    if (cd_offset == 0xFFFFFFFFu || entries == 0xFFFF) { // zip64: the locator sits just before the end record
        if (eocd < 20 || le(p + eocd - 20, 4) != 0x07064b50) throw error(f.path + ": zip64 locator missing");
        const uint64_t z = le(p + eocd - 20 + 8, 8);
        if (z + 56 > n || le(p + z, 4) != 0x06064b50) throw error(f.path + ": zip64 end record out of place");
        entries = le(p + z + 32, 8);
        cd_offset = le(p + z + 48, 8);
    }
    if (cd_offset >= n) throw error(f.path + ": central directory outside the file");
}

} // namespace

std::map<std::string, npy_array> read_npz(const std::string& path) {
    const std::unique_ptr<mapped_file> f = map_file(path);
    const uint8_t* p = f->data;
    const size_t n = f->size;
    uint64_t at = 0, entries = 0;
    find_directory(*f, at, entries);
    std::map<std::string, npy_array> out;
    for (uint64_t e = 0; e < entries; e++) {
        if (at + 46 > n || le(p + at, 4) != 0x02014b50) throw error(path + ": central directory entry " + std::to_string(e) + " is malformed");
        const int method = (int)le(p + at + 10, 2);
        uint64_t csize = le(p + at + 20, 4), usize = le(p + at + 24, 4), local = le(p + at + 42, 4);
        const size_t nlen = le(p + at + 28, 2), xlen = le(p + at + 30, 2), clen = le(p + at + 32, 2);
        if (at + 46 + nlen + xlen > n) throw error(path + ": central directory entry runs past the end");
        const std::string name((const char*)p + at + 46, nlen);
        for (size_t x = at + 46 + nlen; x + 4 <= at + 46 + nlen + xlen;) { // zip64 extra: the 0xFFFFFFFF fields in order
            const uint64_t id = le(p + x, 2), len = le(p + x + 2, 2);
            size_t q = x + 4;
            if (id == 1) {
                if (usize == 0xFFFFFFFFu && q + 8 <= x + 4 + len) usize = le(p + q, 8), q += 8;
                if (csize == 0xFFFFFFFFu && q + 8 <= x + 4 + len) csize = le(p + q, 8), q += 8;
                if (local == 0xFFFFFFFFu && q + 8 <= x + 4 + len) local = le(p + q, 8), q += 8;
            }
            x += 4 + len;
        }
        at += 46 + nlen + xlen + clen;
        if (method != 0)
            throw error(path + ": member " + name + " is compressed (numpy.savez_compressed); save it with numpy.savez");
        if (local + 30 > n || le(p + local, 4) != 0x04034b50) throw error(path + ": member " + name + "'s header is out of place");
        const uint64_t data = local + 30 + le(p + local + 26, 2) + le(p + local + 28, 2);
        if (data > n || csize > n - data || csize != usize) throw error(path + ": member " + name + " runs past the end");
        std::string key = name;
        if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
        out[key] = parse_npy(p + data, (size_t)csize, path + " member " + name);
    }
    return out;
}

void write_npz(const std::string& path, const std::map<std::string, npy_array>& arrays) {
    std::string file, dir;
    int count = 0;
    for (const auto& kv : arrays) {
        const std::string name = kv.first + ".npy";
        const std::string body = npy_bytes(kv.second.shape, kv.second.data.data());
        if (body.size() >= 0xFFFFFFFFu || file.size() >= 0xFFFFFFFFu) throw error(path + ": too large for a plain zip");
        const uint32_t crc = crc32(body);
        const uint64_t offset = file.size();
        for (int central = 0; central < 2; central++) {
            std::string& h = central ? dir : file;
            put(h, central ? 0x02014b50 : 0x04034b50, 4);
            if (central) put(h, 20, 2); // version made by
            put(h, 20, 2), put(h, 0, 2), put(h, 0, 2), put(h, 0, 2), put(h, 0x21, 2); // version, flags, stored, time, date
            put(h, crc, 4), put(h, body.size(), 4), put(h, body.size(), 4), put(h, name.size(), 2), put(h, 0, 2);
            if (central) put(h, 0, 2), put(h, 0, 2), put(h, 0, 2), put(h, 0, 4), put(h, offset, 4);
            h += name;
        }
        file += body;
        count++;
    }
    const uint64_t cd = file.size();
    file += dir;
    put(file, 0x06054b50, 4), put(file, 0, 2), put(file, 0, 2), put(file, count, 2), put(file, count, 2);
    put(file, dir.size(), 4), put(file, cd, 4), put(file, 0, 2);
    std::ofstream o(path, std::ios::binary);
    o.write(file.data(), (std::streamsize)file.size());
    if (!o) throw error("cannot write " + path);
}

} // namespace gb
