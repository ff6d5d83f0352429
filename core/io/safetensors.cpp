// Safetensors reading (memory-mapped, every header field checked before use) and writing.
#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/half.h"
#include "util/json_util.h"

namespace gb {

mapped_file::~mapped_file() {
    if (data && size) munmap((void*)data, size);
}

void mapped_file::release() const {
    if (data && size) madvise((void*)data, size, MADV_DONTNEED);
}

void mapped_file::release(const uint8_t* p, size_t n) const {
    if (!data || p < data || p + n > data + size) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = ((uintptr_t)p + page - 1) / page * page, last = ((uintptr_t)p + n) / page * page;
    if (first < last) madvise((void*)first, last - first, MADV_DONTNEED);
}

std::unique_ptr<mapped_file> map_file(const std::string& path) {
    auto f = std::make_unique<mapped_file>();
    f->path = path;
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) throw error("cannot open " + path + ": " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        throw error("cannot open " + path + ": not a regular file");
    }
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void* p = mmap(nullptr, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            throw error("cannot map " + path + ": " + std::strerror(errno));
        }
        f->data = (const uint8_t*)p;
    }
    close(fd);
    return f;
}

static size_t dtype_size(st_dtype d) { return d == ST_F32 ? 4 : 2; }
static const char* dtype_name(st_dtype d) { return d == ST_F32 ? "F32" : d == ST_F16 ? "F16" : "BF16"; }

std::string shape_str(const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); i++) o += (i ? ", " : "") + std::to_string(s[i]);
    return o + "]";
}

safetensors_file open_safetensors(const std::string& path) {
    safetensors_file f;
    f.file = map_file(path);
    const size_t size = f.file->size;
    const uint8_t* base = f.file->data;
    if (size < 8) throw error(path + ": not a safetensors file (" + std::to_string(size) + " bytes, need at least 8)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | base[i]; // little-endian header length
    if (n > size - 8)
        throw error(path + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                    std::to_string(size) + " bytes): truncated or not a safetensors file");
    if (n > 100u * 1024 * 1024) throw error(path + ": header length " + std::to_string(n) + " exceeds 100 MB");
    // nesting bounded (json_util.h); the header's messages say "header" so a reader knows which part is bad
    const nlohmann::json h = parse_json_text((const char*)base + 8, (size_t)n, path + ": header");
    if (!h.is_object()) throw error(path + ": header is not a JSON object");
    const size_t data_size = size - 8 - n;
    const uint8_t* data = base + 8 + n;
    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") continue;
        const nlohmann::json& e = it.value();
        std::string where = path + ": tensor " + name;
        if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
            throw error(where + ": entry needs dtype, shape and data_offsets");
        st_tensor t;
        t.name = name;
        if (!e["dtype"].is_string()) throw error(where + ": dtype is not a string");
        std::string dt = e["dtype"];
        if (dt == "F32") t.dtype = ST_F32;
        else if (dt == "F16") t.dtype = ST_F16;
        else if (dt == "BF16") t.dtype = ST_BF16;
        else throw error(where + ": unsupported dtype " + dt + " (expected F32, F16 or BF16)");
        if (!e["shape"].is_array() || e["shape"].size() > 8) throw error(where + ": shape is not an array of <= 8 dims");
        uint64_t count = 1;
        for (const auto& d : e["shape"]) {
            if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
                throw error(where + ": shape has a negative or non-integer dimension");
            uint64_t v = d.get<uint64_t>();
            if (v > (1ull << 40) || (v && count > (1ull << 40) / v)) throw error(where + ": shape is absurdly large");
            count *= v;
            t.shape.push_back((int64_t)v);
        }
        const auto& off = e["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            throw error(where + ": data_offsets must be two non-negative integers");
        uint64_t b = off[0], end = off[1];
        if (b > end || end > data_size)
            throw error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(end) +
                        "] outside the data section (" + std::to_string(data_size) + " bytes): truncated file?");
        if (end - b != count * dtype_size(t.dtype))
            throw error(where + ": " + std::to_string(end - b) + " bytes for shape " + shape_str(t.shape) + " " + dt +
                        ", expected " + std::to_string(count * dtype_size(t.dtype)));
        t.data = data + b;
        t.nbytes = (size_t)(end - b);
        f.tensors[name] = std::move(t);
    }
    return f;
}

std::vector<float> tensor_f32(const safetensors_file& f, const st_tensor& t, const std::vector<int64_t>& shape) {
    if (t.shape != shape)
        throw error(f.file->path + ": tensor " + t.name + ": expected shape " + shape_str(shape) + ", found " +
                    shape_str(t.shape));
    size_t n = t.nbytes / dtype_size(t.dtype);
    std::vector<float> out(n);
    if (n == 0) return out; // an empty tensor has no data to copy (and out.data() may be null)
    if (t.dtype == ST_F32) {
        std::memcpy(out.data(), t.data, n * 4);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(t.data[2 * i] | (t.data[2 * i + 1] << 8));
            out[i] = t.dtype == ST_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
    }
    return out;
}

const size_t st_chunk = (size_t)1 << 20; // values per fill call: 4 MB of floats

void write_safetensors_streaming(const std::string& path, const std::vector<st_spec>& specs, const st_fill_fn& fill) {
    nlohmann::json h = nlohmann::json::object();
    uint64_t offset = 0;
    std::vector<uint64_t> counts;
    for (const st_spec& t : specs) {
        uint64_t count = 1;
        for (int64_t d : t.shape) {
            if (d < 0) throw error("write " + path + ": tensor " + t.name + " has a negative dimension in " + shape_str(t.shape));
            count *= (uint64_t)d;
        }
        if (h.contains(t.name)) throw error("write " + path + ": tensor " + t.name + " named twice");
        uint64_t bytes = count * dtype_size(t.dtype);
        h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        counts.push_back(count);
    }
    std::string header = h.dump();
    header.append((8 - header.size() % 8) % 8, ' ');
    std::ofstream o(path, std::ios::binary);
    if (!o) throw error("cannot write " + path);
    uint64_t n = header.size();
    char len[8];
    for (int i = 0; i < 8; i++) len[i] = (char)((n >> (8 * i)) & 0xff);
    o.write(len, 8);
    o.write(header.data(), (std::streamsize)header.size());
    uint64_t largest = 0;
    for (uint64_t c : counts) largest = std::max(largest, c);
    std::vector<float> buf((size_t)std::min<uint64_t>(st_chunk, largest));
    std::vector<uint16_t> half(buf.size());
    for (size_t i = 0; i < specs.size(); i++) {
        for (uint64_t done = 0; done < counts[i];) {
            const size_t k = (size_t)std::min<uint64_t>(st_chunk, counts[i] - done);
            fill(i, buf.data(), k);
            if (specs[i].dtype == ST_F32) {
                o.write((const char*)buf.data(), (std::streamsize)(k * 4));
            } else {
                for (size_t e = 0; e < k; e++) half[e] = specs[i].dtype == ST_F16 ? f32_to_f16(buf[e]) : f32_to_bf16(buf[e]);
                o.write((const char*)half.data(), (std::streamsize)(k * 2));
            }
            if (!o) throw error("cannot write " + path + " (disk full?)");
            done += k;
        }
    }
    o.close();
    if (!o) throw error("cannot write " + path + " (disk full?)");
}

void write_safetensors(const std::string& path, const std::vector<st_out>& tensors) {
    std::vector<st_spec> specs;
    for (const st_out& t : tensors) {
        uint64_t count = 1;
        for (int64_t d : t.shape) count *= (uint64_t)d;
        if (count != t.data.size())
            throw error("write " + path + ": tensor " + t.name + " has " + std::to_string(t.data.size()) +
                        " values for shape " + shape_str(t.shape));
        specs.push_back({t.name, t.shape, t.dtype});
    }
    // the values in memory, handed out chunk by chunk in file order
    size_t at = 0, last = 0;
    write_safetensors_streaming(path, specs, [&](size_t i, float* out, size_t n) {
        if (i != last) at = 0, last = i;
        std::copy(tensors[i].data.begin() + (std::ptrdiff_t)at, tensors[i].data.begin() + (std::ptrdiff_t)(at + n), out);
        at += n;
    });
}

} // namespace gb
