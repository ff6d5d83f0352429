// Weights kept as stored (F16, BF16, Q8_0): the products equal the fp32 kernel's on the dequantised weights bit for
// bit, the loaders keep each type and say so, memory stays near the file's size, and a model too large for the
// memory is refused before anything large is allocated.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/gguf_writer.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "io/writers.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "model/quant.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/half.h"

namespace {

// values of one stored type for an [rows][cols] matrix stored out-major (blocks along cols), and their
// dequantised f32 twin
struct stored_matrix {
    std::vector<uint8_t> bytes;
    std::vector<float> values; // [rows][cols] dequantised
};

stored_matrix make_stored(uint32_t type, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    stored_matrix m;
    m.values.resize((size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) {
        const float v = nd(rng);
        if (type == gb::GGML_F16) {
            const uint16_t h = gb::f32_to_f16(v);
            m.bytes.push_back(h & 0xff), m.bytes.push_back(h >> 8);
        } else if (type == gb::GGML_BF16) {
            const uint16_t h = gb::f32_to_bf16(v);
            m.bytes.push_back(h & 0xff), m.bytes.push_back(h >> 8);
        }
    }
    int64_t bv = 1, bb = 0;
    gb::ggml_block(type, bv, bb);
    if (bv > 1) { // random blocks whose f16 scales (and mins) are small finite numbers
        std::vector<int> halves = {0};                    // byte offsets of the f16 fields
        if (type == gb::GGML_Q4_1 || type == gb::GGML_Q5_1 || type == gb::GGML_Q4_K || type == gb::GGML_Q5_K) halves = {0, 2};
        if (type == gb::GGML_Q6_K) halves = {208};
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_real_distribution<float> scale(0.001f, 0.05f);
        for (int64_t b = 0; b < rows * cols / bv; b++) {
            const size_t at = m.bytes.size();
            for (int64_t i = 0; i < bb; i++) m.bytes.push_back((uint8_t)byte(rng));
            for (int h : halves) {
                const uint16_t d = gb::f32_to_f16(scale(rng));
                m.bytes[at + h] = d & 0xff, m.bytes[at + h + 1] = d >> 8;
            }
        }
    }
    gb::dequantize(m.values.data(), m.bytes.data(), type, rows * cols);
    return m;
}

// [rows][cols] -> [cols][rows]
std::vector<float> transposed(const std::vector<float>& w, int64_t rows, int64_t cols) {
    std::vector<float> t(w.size());
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) t[(size_t)(c * rows + r)] = w[(size_t)(r * cols + c)];
    return t;
}

} // namespace

TEST(Stored, ProductsEqualTheFp32KernelOnDequantisedWeightsBitForBit) {
    matmul_scope fp32(gb::MATMUL_FP32); // the reference packs the dequantised weights for the fp32 kernel
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (uint32_t type : {gb::GGML_F16, gb::GGML_BF16, gb::GGML_Q8_0, gb::GGML_Q4_0, gb::GGML_Q4_1, gb::GGML_Q5_0,
                          gb::GGML_Q5_1, gb::GGML_Q4_K, gb::GGML_Q5_K, gb::GGML_Q6_K})
        for (int64_t in : {32, 64, 416, 800, 256, 768, 1280}) // one and several slices, blocks throughout
            for (int64_t out : {1, 47, 48, 50, 144, 200}) {
                int64_t bv, bb;
                gb::ggml_block(type, bv, bb);
                if (in % bv) continue;
                SCOPED_TRACE(std::string(gb::ggml_type_name(type)) + " in " + std::to_string(in) + " out " +
                             std::to_string(out));
                stored_matrix s = make_stored(type, out, in, (uint32_t)(in * 1000 + out));
                gb::weight_matrix w = gb::pack_parts({{type, s.bytes.data(), out, true}}, in);
                ASSERT_EQ(w.type, type);
                ASSERT_TRUE(w.data.empty());
                if (bv > 32) { // the file's bytes
                    EXPECT_LE(w.stored.size(), s.bytes.size() * ((out + 47) / 48 * 48) / out);
                }
                const std::vector<float> plain = transposed(s.values, out, in); // [in][out]
                EXPECT_EQ(gb::unpack_matrix(w), plain);
                gb::weight_matrix ref = gb::pack_matrix(plain, in, out, true);
                std::vector<float> bias((size_t)out);
                for (float& b : bias) b = nd(rng);
                for (int n : {1, 3, 8, 9, 64}) {
                    std::vector<float> x((size_t)(n * in)), got((size_t)(n * out)), want((size_t)(n * out));
                    for (float& v : x) v = nd(rng);
                    gb::gemm_scratch gs;
                    for (gb::epilogue epi : {gb::EPILOGUE_NONE, gb::EPILOGUE_GELU}) {
                        gb::gemm(got.data(), x.data(), w, bias, n, gs, epi);
                        gb::gemm(want.data(), x.data(), ref, bias, n, gs, epi);
                        ASSERT_EQ(got, want) << "n " << n;
                    }
                }
            }
}

TEST(Stored, FusedPartsAndConv1DLayoutMatchThePlainMatrix) {
    // q | k | v from three out-major F16 parts, and a Conv1D [in][out] F16 matrix
    const int64_t in = 64;
    stored_matrix q = make_stored(gb::GGML_F16, 64, in, 1), k = make_stored(gb::GGML_F16, 16, in, 2),
                  v = make_stored(gb::GGML_F16, 16, in, 3);
    gb::weight_matrix w = gb::pack_parts(
        {{gb::GGML_F16, q.bytes.data(), 64, true}, {gb::GGML_F16, k.bytes.data(), 16, true}, {gb::GGML_F16, v.bytes.data(), 16, true}},
        in);
    ASSERT_EQ(w.out, 96);
    std::vector<float> got = gb::unpack_matrix(w);
    for (int64_t i = 0; i < in; i++)
        for (int64_t o = 0; o < 96; o++) {
            const float want = o < 64 ? q.values[(size_t)(o * in + i)]
                               : o < 80 ? k.values[(size_t)((o - 64) * in + i)]
                                        : v.values[(size_t)((o - 80) * in + i)];
            ASSERT_EQ(got[(size_t)(i * 96 + o)], want) << i << "," << o;
        }
    stored_matrix c = make_stored(gb::GGML_F16, in, 40, 4); // bytes read as [in][out]
    EXPECT_EQ(gb::unpack_matrix(gb::pack_parts({{gb::GGML_F16, c.bytes.data(), 40, false}}, in)), c.values);
    // parts of different stored types (llama.cpp's Q4_K_M puts v in Q6_K): each kept in its own type, the
    // product the same as the dequantised whole's
    const int64_t kin = 256;
    stored_matrix q4 = make_stored(gb::GGML_Q4_K, 64, kin, 6), k4 = make_stored(gb::GGML_Q4_K, 16, kin, 7),
                  v6 = make_stored(gb::GGML_Q6_K, 16, kin, 8);
    {
        matmul_scope fp32(gb::MATMUL_FP32);
        gb::weight_matrix mixed = gb::pack_parts({{gb::GGML_Q4_K, q4.bytes.data(), 64, true},
                                                  {gb::GGML_Q4_K, k4.bytes.data(), 16, true},
                                                  {gb::GGML_Q6_K, v6.bytes.data(), 16, true}},
                                                 kin);
        ASSERT_EQ(mixed.parts.size(), 3u);
        EXPECT_EQ(mixed.parts[2].type, (uint32_t)gb::GGML_Q6_K);
        std::vector<float> plain = gb::unpack_matrix(mixed);
        gb::weight_matrix ref = gb::pack_matrix(plain, kin, 96, true);
        for (int64_t i = 0; i < kin; i++)
            ASSERT_EQ(plain[(size_t)(i * 96 + 90)], v6.values[(size_t)((90 - 80) * kin + i)]);
        std::vector<float> x((size_t)(5 * kin)), bias(96), got(5 * 96), want(5 * 96);
        for (size_t i = 0; i < x.size(); i++) x[i] = (float)std::cos(0.1 * (double)i);
        for (size_t i = 0; i < bias.size(); i++) bias[i] = 0.01f * (float)i;
        gb::gemm_scratch gs;
        gb::gemm(got.data(), x.data(), mixed, bias, 5, gs);
        gb::gemm(want.data(), x.data(), ref, bias, 5, gs);
        EXPECT_EQ(got, want);
    }
    // a part stored F32 among them, or keep_stored = false: dequantised and packed for the process's kernel
    std::vector<float> f32v(16 * in, 0.5f);
    gb::weight_matrix mixed = gb::pack_parts({{gb::GGML_F16, q.bytes.data(), 64, true}, {gb::GGML_F32, (const uint8_t*)f32v.data(), 16, true}}, in);
    EXPECT_EQ(mixed.type, (uint32_t)gb::GGML_F32);
    EXPECT_TRUE(mixed.parts.empty());
    EXPECT_EQ(gb::pack_parts({{gb::GGML_F16, q.bytes.data(), 64, true}}, in, false).type, (uint32_t)gb::GGML_F32);
    // a NaN or Inf is noticed as stored
    std::vector<uint8_t> inf = q.bytes;
    inf[2 * 77] = 0x00, inf[2 * 77 + 1] = 0x7c; // +Inf in F16
    EXPECT_FALSE(gb::pack_parts({{gb::GGML_F16, inf.data(), 64, true}}, in).finite);
    EXPECT_TRUE(w.finite);
    // in a block type, by its f16 scale fields: a NaN in one block
    for (uint32_t type : {gb::GGML_Q4_K, gb::GGML_Q6_K, gb::GGML_Q4_1, gb::GGML_Q8_0}) {
        SCOPED_TRACE(gb::ggml_type_name(type));
        stored_matrix m = make_stored(type, 16, 256, 9);
        EXPECT_TRUE(gb::pack_parts({{type, m.bytes.data(), 16, true}}, 256).finite);
        int64_t bv, bb;
        gb::ggml_block(type, bv, bb);
        const size_t field = type == gb::GGML_Q6_K ? 208 : type == gb::GGML_Q8_0 ? 0 : 2; // d, or the minimum's scale
        m.bytes[(size_t)(3 * bb) + field] = 0x00, m.bytes[(size_t)(3 * bb) + field + 1] = 0x7e; // NaN in block 3
        EXPECT_FALSE(gb::pack_parts({{type, m.bytes.data(), 16, true}}, 256).finite);
    }
}

TEST(Stored, TableRowsAndTheLmHeadReadEveryType) {
    for (uint32_t type : {gb::GGML_F16, gb::GGML_BF16, gb::GGML_Q8_0, gb::GGML_Q4_K, gb::GGML_Q6_K}) {
        SCOPED_TRACE(gb::ggml_type_name(type));
        const int64_t V = 301, d = type == gb::GGML_Q4_K || type == gb::GGML_Q6_K ? 512 : 64; // a last group of one row
        stored_matrix s = make_stored(type, V, d, 7);
        auto keep = std::make_shared<std::vector<uint8_t>>(s.bytes);
        gb::row_table t = gb::table_view(type, keep->data(), V, d, keep);
        EXPECT_EQ(gb::table_f32(t), s.values);
        gb::row_table f = gb::table_from_f32(s.values, V, d);
        for (int n : {1, 4, 7}) {
            std::vector<float> x((size_t)(n * d)), got((size_t)(n * V)), want((size_t)(n * V));
            for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.37 * (double)i);
            gb::gemm_table(got.data(), x.data(), t, n);
            gb::gemm_table(want.data(), x.data(), f, n);
            if (n <= 4) {
                EXPECT_EQ(got, want); // the same dot products on the same values
            } else {
                // blocked differently: fp32 rounding of d terms, bounded by their magnitudes
                for (int r = 0; r < n; r++)
                    for (int64_t v = 0; v < V; v++) {
                        double mag = 0;
                        for (int64_t k = 0; k < d; k++)
                            mag += std::fabs((double)x[(size_t)(r * d + k)] * s.values[(size_t)(v * d + k)]);
                        const size_t i = (size_t)(r * V + v);
                        ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + mag));
                    }
            }
        }
    }
}

namespace {

// Every kept point and the logits of two loads of one model: kept as stored vs dequantised at load on the fp32
// kernel. Equal bit for bit except the all-positions LM head (blocked differently), compared to 1e-5.
void expect_same_forward(const std::string& path) {
    matmul_scope fp32(gb::MATMUL_FP32);
    gb::model a = gb::load_model(path);
    gb::load_options lo;
    lo.keep_stored = false;
    gb::model b = gb::load_model(path, lo);
    ASSERT_NE(a.weights.layers[0].w_qkv.type, (uint32_t)gb::GGML_F32);
    ASSERT_EQ(b.weights.layers[0].w_qkv.type, (uint32_t)gb::GGML_F32);
    ASSERT_LT(gb::weight_bytes(a), gb::weight_bytes(b));
    std::vector<int> tokens = {1, 40, 41, 42, 100, 7, 9, 250};
    for (bool all : {false, true}) {
        gb::forward_options opt;
        opt.all_logits = all;
        opt.keep.points = ~0u;
        opt.keep.resid_stream = true;
        gb::record ra, rb;
        gb::run_forward(ra, a, tokens, {}, opt);
        gb::run_forward(rb, b, tokens, {}, opt);
        for (int p = 0; p < gb::HOOK_COUNT; p++) {
            if (p == gb::HOOK_LOGITS || p == gb::HOOK_FINAL_NORM) continue;
            EXPECT_EQ(ra.flat((gb::hook_point)p), rb.flat((gb::hook_point)p)) << "point " << p;
        }
        ASSERT_EQ(ra.logits.size(), rb.logits.size());
        if (!all) {
            EXPECT_EQ(ra.logits, rb.logits);
        }
        for (size_t i = 0; i < ra.logits.size(); i++) ASSERT_NEAR(ra.logits[i], rb.logits[i], 1e-5 * (1 + std::fabs(rb.logits[i])));
    }
}

} // namespace

TEST(Stored, HfGpt2AndLlamaKeepTheirDtypeAndComputeTheSame) {
    for (const char* dtype : {"F16", "BF16"}) {
        SCOPED_TRACE(dtype);
        tiny_spec s;
        s.dtype = dtype;
        s.tied = false;
        tiny_model tm = write_tiny_gpt2(test_temp_dir(std::string("stored_gpt2_") + dtype), s);
        expect_same_forward(tm.dir);
        gb::model_config c;
        c.n_layer = 2, c.n_head = 4, c.n_kv_head = 2, c.d_model = 64, c.d_ff = 96, c.vocab_size = 300, c.n_ctx = 64;
        for (bool tied : {true, false}) {
            c.tied_lm_head = tied;
            const std::string dir = test_temp_dir(std::string("stored_llama_") + dtype);
            gb::write_random_llama_hf(dir, c, 11, dtype);
            expect_same_forward(dir);
            gb::model m = gb::load_model(dir);
            gb::weight_types t = gb::stored_types(m);
            EXPECT_EQ(t.attention, dtype);
            EXPECT_EQ(t.mlp, dtype);
            EXPECT_EQ(t.embedding, dtype);
            EXPECT_EQ(t.head, tied ? "tied" : dtype);
        }
    }
}

TEST(Stored, ResidentBytesStayNearTheFileSize) {
    // dimensions a multiple of the panel width, as real models' are (padding is then nil)
    gb::model_config c;
    c.n_layer = 2, c.n_head = 4, c.n_kv_head = 2, c.d_model = 192, c.d_ff = 480, c.vocab_size = 1000, c.n_ctx = 64;
    for (const char* dtype : {"F16", "BF16"}) {
        const std::string dir = test_temp_dir(std::string("stored_size_") + dtype);
        gb::write_random_llama_hf(dir, c, 3, dtype);
        matmul_scope fp32(gb::MATMUL_FP32);
        gb::model m = gb::load_model(dir);
        const double file = (double)std::filesystem::file_size(dir + "/model.safetensors");
        EXPECT_LE(gb::weight_bytes(m), 1.25 * file) << dtype;
        EXPECT_GE(gb::weight_bytes(m), 0.9 * file) << dtype;
    }
}

TEST(Stored, ModelsTooLargeForTheMemoryAreRefusedWithTheSizes) {
    tiny_spec s;
    s.dtype = "F16";
    tiny_model tm = write_tiny_gpt2(test_temp_dir("stored_refuse"), s);
    gb::load_options lo;
    lo.mem_available = 1000;
    expect_gb_error([&] { gb::load_model(tm.dir, lo); }, "GB of memory, 0.0 GB available");
    lo.mem_available = 1 << 30;
    EXPECT_NO_THROW(gb::load_model(tm.dir, lo));
    // dequantising asks for more: 4 bytes a value instead of the file's 2
    const int64_t file = (int64_t)std::filesystem::file_size(tm.dir + "/model.safetensors");
    lo.mem_available = file * 3 / 2;
    EXPECT_NO_THROW(gb::load_model(tm.dir, lo));
    lo.keep_stored = false;
    expect_gb_error([&] { gb::load_model(tm.dir, lo); }, "available");
}

// The block types added for stored weights, decoded by hand from their layout (ggml's block formats)
TEST(Stored, NewBlockTypesDequantiseByHand) {
    auto put16 = [](std::vector<uint8_t>& b, size_t at, float v) {
        const uint16_t h = gb::f32_to_f16(v);
        b[at] = h & 0xff, b[at + 1] = h >> 8;
    };
    float y[256];
    { // Q4_1: d = 0.5, m = -1; nibble i = i % 16 low, 15 - i % 16 high
        std::vector<uint8_t> b(20);
        put16(b, 0, 0.5f), put16(b, 2, -1.0f);
        for (int i = 0; i < 16; i++) b[4 + i] = (uint8_t)(i | (15 - i) << 4);
        gb::dequantize(y, b.data(), gb::GGML_Q4_1, 32);
        for (int i = 0; i < 16; i++) {
            EXPECT_EQ(y[i], 0.5f * i - 1) << i;
            EXPECT_EQ(y[i + 16], 0.5f * (15 - i) - 1) << i;
        }
    }
    { // Q5_0: d = 0.25; value j has low nibble j % 16 and fifth bit set for odd j; offset 16
        std::vector<uint8_t> b(22);
        put16(b, 0, 0.25f);
        uint32_t high = 0;
        for (int j = 0; j < 32; j++) high |= (uint32_t)(j & 1) << j;
        for (int k = 0; k < 4; k++) b[2 + k] = (uint8_t)(high >> (8 * k));
        for (int i = 0; i < 16; i++) b[6 + i] = (uint8_t)(i | i << 4);
        gb::dequantize(y, b.data(), gb::GGML_Q5_0, 32);
        for (int j = 0; j < 32; j++) EXPECT_EQ(y[j], 0.25f * ((j % 16) + 16 * (j & 1) - 16)) << j;
        // Q5_1: the same bits with d = 0.25, m = 2 and no offset
        std::vector<uint8_t> c(24);
        put16(c, 0, 0.25f), put16(c, 2, 2.0f);
        std::copy(b.begin() + 2, b.end(), c.begin() + 4);
        gb::dequantize(y, c.data(), gb::GGML_Q5_1, 32);
        for (int j = 0; j < 32; j++) EXPECT_EQ(y[j], 0.25f * ((j % 16) + 16 * (j & 1)) + 2.0f) << j;
    }
    { // Q5_K: d = 1, dmin = 0.5, every sub-block scale 2 and min 1 (six-bit fields, sub-blocks 0-3 in bytes 0-7),
      // low nibbles 3, high nibbles 5, fifth bits set for group 1's high half only
        std::vector<uint8_t> b(176, 0);
        put16(b, 0, 1.0f), put16(b, 2, 0.5f);
        for (int j = 0; j < 4; j++) b[4 + j] = 2, b[8 + j] = 1;   // scales / mins of sub-blocks 0-3
        for (int j = 0; j < 4; j++) b[12 + j] = (uint8_t)(2 | 1 << 4); // sub-blocks 4-7: low 4 bits scale, high 4 min
        for (int l = 0; l < 32; l++) b[16 + l] = 1 << 3;                // qh: bit 3 = group 1, high nibble
        for (int l = 0; l < 128; l++) b[48 + l] = 3 | 5 << 4;
        gb::dequantize(y, b.data(), gb::GGML_Q5_K, 256);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                EXPECT_EQ(y[64 * g + l], 2.0f * 3 - 0.5f) << g << "," << l;
                EXPECT_EQ(y[64 * g + 32 + l], 2.0f * (5 + (g == 1 ? 16 : 0)) - 0.5f) << g << "," << l;
            }
    }
}

TEST(Stored, QuantiseRoundTripsWithinEachTypesStep) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    std::vector<float> x(1024), y(1024);
    for (float& v : x) v = nd(rng);
    x[7] = 0.3f; // an outlier: its block's step grows, the others' do not
    double sum2 = 0;
    for (float v : x) sum2 += (double)v * v;
    const double rms = std::sqrt(sum2 / x.size());
    // each type's rms error relative to the values' rms: about half a step of its levels (8 bits: 1 %, 4 bits:
    // ~10 %); a misplaced bit or nibble would give errors of the values' own size
    const std::pair<uint32_t, double> types[] = {
        {gb::GGML_F32, 0},      {gb::GGML_F16, 1e-3},  {gb::GGML_BF16, 5e-3}, {gb::GGML_Q8_0, 0.02},
        {gb::GGML_Q6_K, 0.05},  {gb::GGML_Q5_0, 0.08}, {gb::GGML_Q5_1, 0.06}, {gb::GGML_Q5_K, 0.08},
        {gb::GGML_Q4_0, 0.15},  {gb::GGML_Q4_1, 0.12}, {gb::GGML_Q4_K, 0.15}};
    for (auto [type, bound] : types) {
        SCOPED_TRACE(gb::ggml_type_name(type));
        std::vector<uint8_t> q(gb::ggml_bytes(type, (int64_t)x.size()));
        gb::quantize(q.data(), x.data(), type, (int64_t)x.size());
        gb::dequantize(y.data(), q.data(), type, (int64_t)x.size());
        double err2 = 0;
        for (size_t i = 0; i < x.size(); i++) err2 += (double)(y[i] - x[i]) * (y[i] - x[i]);
        const double rel = std::sqrt(err2 / x.size()) / rms;
        if (type == gb::GGML_F32) {
            EXPECT_EQ(y, x);
        }
        EXPECT_LE(rel, bound);
        if (type == gb::GGML_Q8_0) // within half a step of each block's own scale (the outlier's block only grows)
            for (size_t b = 0; b < x.size(); b += 32) {
                float amax = 0;
                for (size_t i = b; i < b + 32; i++) amax = std::max(amax, std::fabs(x[i]));
                for (size_t i = b; i < b + 32; i++) ASSERT_LE(std::fabs(y[i] - x[i]), 0.51f * amax / 127) << i;
            }
    }
}

// The levels of each block type land where dequantize reads them: a block of values already on the type's levels
// (spread over its whole range, at a scale f16 holds exactly) comes back exactly
TEST(Stored, QuantiseKeepsValuesAlreadyOnTheLevels) {
    struct level_case {
        uint32_t type;
        int lo, hi; // the levels' range, in steps of d
    };
    for (level_case t : {level_case{gb::GGML_Q8_0, -127, 127}, {gb::GGML_Q4_0, -8, 7}, {gb::GGML_Q5_0, -16, 15},
                         {gb::GGML_Q6_K, -32, 31}}) {
        SCOPED_TRACE(gb::ggml_type_name(t.type));
        int64_t values, bytes;
        ASSERT_TRUE(gb::ggml_block(t.type, values, bytes));
        std::vector<float> x(values), y(values);
        const int n_levels = t.hi - t.lo + 1;
        for (int64_t i = 0; i < values; i++) x[i] = 0.25f * (float)(t.lo + (i * 7) % n_levels);
        x[0] = 0.25f * (float)t.lo;                       // the extreme that sets the scale
        if (t.type == gb::GGML_Q8_0) x[0] = 0.25f * (float)t.hi; // Q8_0 is symmetric: max |x| = 127 steps
        if (t.type == gb::GGML_Q6_K)                      // each 16-value sub-block sets its own int8 scale
            for (int64_t j = 0; j < values; j += 16) x[j] = 0.25f * (float)t.lo;
        std::vector<uint8_t> q(bytes);
        gb::quantize(q.data(), x.data(), t.type, values);
        gb::dequantize(y.data(), q.data(), t.type, values);
        for (int64_t i = 0; i < values; i++) ASSERT_FLOAT_EQ(y[i], x[i]) << i;
    }
}

TEST(Stored, RandomGgufInEveryWrittenTypeKeepsItAndMatchesTheDequantisedLoad) {
    gb::model_config shape;
    shape.n_layer = 2, shape.n_head = 4, shape.n_kv_head = 2, shape.d_model = 256, shape.d_ff = 512;
    shape.vocab_size = 300, shape.n_ctx = 64;
    for (uint32_t type : gb::ggml_types()) {
        if (type == gb::GGML_F32) continue;
        for (bool tied : {true, false}) {
            SCOPED_TRACE(std::string(gb::ggml_type_name(type)) + (tied ? " tied" : " untied"));
            shape.tied_lm_head = tied;
            const std::string path = test_temp_dir("stored_gguf") + "/m.gguf";
            gb::random_gguf_options o;
            o.type = type, o.seed = 4;
            gb::write_random_gguf(path, gb::random_gguf_config("llama", shape), o);
            gb::model m = gb::load_model(path);
            const std::string name = gb::ggml_type_name(type);
            const gb::weight_types t = gb::stored_types(m);
            EXPECT_EQ(t.attention, name);
            EXPECT_EQ(t.mlp, name);
            EXPECT_EQ(t.embedding, name);
            EXPECT_EQ(t.head, tied ? "tied" : name);
            EXPECT_LE(gb::weight_bytes(m), 1.25 * (double)std::filesystem::file_size(path));
            expect_same_forward(path);
        }
    }
    shape.d_model = 96; // Q4_K blocks of 256 cannot tile a row of 96
    gb::random_gguf_options o;
    o.type = gb::GGML_Q4_K;
    expect_gb_error([&] { gb::write_random_gguf(test_temp_dir("stored_gguf_bad") + "/m.gguf", gb::random_gguf_config("llama", shape), o); },
                    "do not divide");
}
