// GGUF v2/v3 writer for tests.
#include "gguf_writer.h"

#include <cstring>
#include <fstream>

namespace {

struct buf {
    std::string b;
    template <class T> void put(T v) { b.append((const char*)&v, sizeof v); }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        b += s;
    }
    void pad(size_t a) { b.append((a - b.size() % a) % a, '\0'); }
};

} // namespace

void gguf_out::f32_tensor(const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v) {
    tensor t;
    t.name = name, t.ne = std::move(ne), t.type = 0, t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    tensors.push_back(std::move(t));
}

size_t gguf_out::write(const std::string& path) const {
    std::vector<kv> all = meta;
    if (alignment != 32) {
        kv a = make("general.alignment", 4);
        a.i = alignment;
        all.push_back(a);
    }
    buf h;
    h.b = "GGUF";
    h.put<uint32_t>(version);
    h.put<uint64_t>(tensors.size());
    h.put<uint64_t>(all.size());
    for (const kv& e : all) {
        h.str(e.key);
        h.put<uint32_t>(e.type);
        switch (e.type) {
        case 4: h.put<uint32_t>((uint32_t)e.i); break;
        case 5: h.put<int32_t>((int32_t)e.i); break;
        case 6: h.put<float>(e.f); break;
        case 8: h.str(e.s); break;
        case 9:
            h.put<uint32_t>(e.elem_type);
            if (e.elem_type == 8) {
                h.put<uint64_t>(e.strs.size());
                for (const auto& s : e.strs) h.str(s);
            } else if (e.elem_type == 6) {
                h.put<uint64_t>(e.floats.size());
                for (float f : e.floats) h.put<float>(f);
            } else {
                h.put<uint64_t>(e.ints.size());
                for (int32_t i : e.ints) h.put<int32_t>(i);
            }
            break;
        }
    }
    uint64_t off = 0;
    for (const tensor& t : tensors) {
        h.str(t.name);
        h.put<uint32_t>((uint32_t)t.ne.size());
        for (int64_t v : t.ne) h.put<uint64_t>((uint64_t)v);
        h.put<uint32_t>(t.type);
        h.put<uint64_t>(off);
        off += (t.bytes.size() + alignment - 1) / alignment * alignment;
    }
    const size_t header = h.b.size();
    h.pad(alignment);
    for (const tensor& t : tensors) {
        h.b.append((const char*)t.bytes.data(), t.bytes.size());
        h.pad(alignment);
    }
    std::ofstream(path, std::ios::binary) << h.b;
    return header;
}
