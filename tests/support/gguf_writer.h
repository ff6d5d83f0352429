// A small GGUF writer for tests: metadata, tensors (any supported type, raw bytes); version 3 or 2 (the same
// layout: v2 made counts and lengths 64-bit, v3 only added big-endian files), any alignment.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct gguf_out {
    struct kv {
        std::string key;
        uint32_t type;                 // 4 u32, 5 i32, 6 f32, 8 string, 9 array
        uint32_t elem_type = 0;        // arrays: 8 string, 6 f32, 5 i32
        int64_t i = 0;
        float f = 0;
        std::string s;
        std::vector<std::string> strs;
        std::vector<float> floats;
        std::vector<int32_t> ints;
    };
    struct tensor {
        std::string name;
        std::vector<int64_t> ne;       // ne[0] fastest
        uint32_t type;
        std::vector<uint8_t> bytes;
    };
    std::vector<kv> meta;
    std::vector<tensor> tensors;
    uint32_t version = 3;
    uint32_t alignment = 32;           // other values are written as general.alignment (u32) after meta
    static kv make(const std::string& k, uint32_t type, uint32_t elem = 0) {
        kv e;
        e.key = k, e.type = type, e.elem_type = elem;
        return e;
    }
    void u32(const std::string& k, uint32_t v) { kv e = make(k, 4); e.i = v; meta.push_back(e); }
    void f32(const std::string& k, float v) { kv e = make(k, 6); e.f = v; meta.push_back(e); }
    void str(const std::string& k, const std::string& v) { kv e = make(k, 8); e.s = v; meta.push_back(e); }
    void strs(const std::string& k, const std::vector<std::string>& v) { kv e = make(k, 9, 8); e.strs = v; meta.push_back(e); }
    void floats(const std::string& k, const std::vector<float>& v) { kv e = make(k, 9, 6); e.floats = v; meta.push_back(e); }
    void ints(const std::string& k, const std::vector<int32_t>& v) { kv e = make(k, 9, 5); e.ints = v; meta.push_back(e); }
    // f32 tensor from values laid out [ne1][ne0]
    void f32_tensor(const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v);
    // Returns the header's size (magic to the last tensor info) before the padding to the alignment.
    size_t write(const std::string& path) const;
};
