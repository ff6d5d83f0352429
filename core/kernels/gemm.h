// Dense products of the forward pass. Weights are packed once, at load, into the layout their kernel reads
// (see weight_matrix in model.h); activations are packed per call into a scratch the caller owns.
//
// Two kernels (docs/internals.md "Matrix products"):
// - fp32: packed panels and a register-tiled FMA kernel (AVX-512, AVX2 or SSE, whatever the build targets);
// - AMX: Intel AMX int8 tile products on base-256 digits of fixed-point numbers, recombined in fp32
//   (core/kernels/gemm_amx.cpp). Measured at the logits against a double-precision forward it errs less than
//   fp32 (docs/internals.md "Accuracy"); tests/test_amx_accuracy.cpp holds it to at most twice fp32's error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace gb {

// Packing weights for the kernels (the layouts weight_matrix describes, model.h).
extern const int weight_panel; // floats per panel: three SIMD registers' worth (48 with AVX-512)
// exact: the fp32 layout whatever the kernel, for weights that must come back unchanged (random_gpt2 writes them).
weight_matrix pack_matrix(const std::vector<float>& w, int64_t in, int64_t out, bool exact = false);
std::vector<float> unpack_matrix(const weight_matrix& w);
void unpack_matrix(float* out, const weight_matrix& w); // into [w.in][w.out] floats the caller holds
// The transpose of w [in][out] (floats as unpack_matrix gives them), packed as the [out][in] matrix of x * W^T for
// the process's kernel, as pack_matrix would pack it: the backward's kept W^T (gemm_backward). finite: whether
// every value is finite, as the matrix w came from already knows (weight_matrix::finite).
weight_matrix pack_transposed(const float* w, int64_t in, int64_t out, bool finite);
// One stored matrix as a file holds it, or one part of a fused matrix (q | k | v): out columns of the [in][out]
// product, stored [out][in] when out_major (nn.Linear, GGUF; block types have their blocks along in), else
// [in][out] (GPT-2's Conv1D). The bytes stay the file's.
struct matrix_part {
    uint32_t type = GGML_F32;
    const uint8_t* data = nullptr;
    int64_t out = 0;
    bool out_major = true;
};
// Whether a type is kept as stored in memory (every type quant.h reads but F32, which pack_matrix packs for the
// process's kernel).
bool kept_as_stored(uint32_t type);
// The parts side by side as one [in][sum of outs] matrix. Kept as stored when every part has the same kept type
// and keep_stored; otherwise dequantised to f32 and packed by pack_matrix (AMX or fp32).
weight_matrix pack_parts(const std::vector<matrix_part>& parts, int64_t in, bool keep_stored = true);

// int8: the fp32 kernel, except that products by Q4_K weights kept as stored round their activations to 8 bits a
// block of 256 and run on AVX-512 VNNI or AMX-INT8 tiles (int8_path_now), as llama.cpp does
// (core/kernels/gemm_int8.h): faster prompts, not exact. Never the default.
enum matmul_kind { MATMUL_FP32, MATMUL_AMX, MATMUL_INT8 };
const char* matmul_name(matmul_kind k); // "fp32", "amx", "int8"
// Whether this CPU and OS run the AMX kernel; when not, why ("the CPU has no AMX-INT8", ...).
bool amx_usable(std::string* why = nullptr);
// Whether this build and CPU run the int8 kernel (AVX-512 with VNNI and VBMI; a build for AVX2 without AVX-512: AVX2,
// FMA and F16C); when not, why.
bool int8_usable(std::string* why = nullptr);
// The int8 kernel's integer sums for prompts (more than 8 rows; a single token always takes VNNI rows): on
// AMX-INT8 tiles (TDPBSUD) where int8_usable() and amx_usable(), else on AVX-512 VNNI. The same int32 sums, so the
// same bits (tests/test_int8.cpp). GLASSBOX_INT8=vnni|amx overrides the default (amx where it cannot run: vnni);
// set_int8_path throws where AMX cannot run. Read at every product: it may change between calls.
enum int8_path { INT8_VNNI, INT8_AMX };
const char* int8_path_name(int8_path p); // "vnni", "amx"
bool int8_amx_usable(std::string* why = nullptr);
int8_path int8_path_now();
void set_int8_path(int8_path p);
// The kernel pack_matrix packs new weights for. Default: AMX where usable, else fp32; the environment
// variable GLASSBOX_MATMUL=fp32|amx|int8 overrides it. set_matmul_kind throws where AMX or int8 is not usable.
// Weights already packed keep their kernel: choose before loading a model.
matmul_kind matmul_kind_now();
void set_matmul_kind(matmul_kind k);
// "fp32", "amx", "int8" or "auto" (the default above); throws gb::error naming the bad value.
matmul_kind parse_matmul_kind(const std::string& name);
// The kernel m's weights were packed for, as the front ends name it: AMX when a layer matrix holds digits, int8 when
// a layer matrix is Q4_K marked for the int8 kernel, otherwise fp32. Walks every layer: ask once per model.
matmul_kind matmul_of(const model& m);

// Per-call activation packing, grown as needed and reused across calls (a steady stream allocates nothing).
struct gemm_scratch {
    aligned_vector<float> rows;    // fp32: [slices][blocks][kc][MR] rows of x
    aligned_vector<int8_t> digits; // AMX: [row blocks][ceil(in/64)][4][16][64] digits of x's rows
    std::vector<float> row_exp; // AMX: [row blocks * 16] each row's scale exponent (NaN: row not finite)
    aligned_vector<int8_t> q8;      // int8: [n][in] x rounded to 8 bits
    std::vector<float> q8_scale;    // int8: [n][in / 256] each block's scale
    std::vector<int16_t> q8_sums;   // int8: [n][in / 32] sums of 32 rounded values
};

// out [n][w.out] = x [n][w.in] * W (+ bias [w.out] when not empty), with W's kernel. Threads split the columns.
// epi: what is applied to each output element after the bias, while its tile is in cache.
// A row of x holding NaN or Inf gives a row of NaN on the AMX kernel (the fp32 kernel propagates them as IEEE does).
enum epilogue { EPILOGUE_NONE, EPILOGUE_GELU };
void gemm(float* out, const float* x, const weight_matrix& w, const std::vector<float>& bias, int n,
          gemm_scratch& scratch, epilogue epi = EPILOGUE_NONE);

// The transposed product of the backward pass (core/run/backward.h): out [n][w.in] = g [n][w.out] * W^T (+= with
// accumulate), W exactly as the forward's product multiplies by it (unpack_matrix's values: fp32 panels read in
// place, AMX digits and stored types converted a cache-sized slice at a time and transposed in registers), on the
// fp32 micro-kernel (core/kernels/gemm_backward.cpp); from the matrix's third product on, a forward product by its
// kept W^T. Threads split out's columns.
void gemm_backward(float* out, const float* g, const weight_matrix& w, int n, gemm_scratch& scratch,
                   bool accumulate = false);
// The second gemm_backward over a matrix keeps W^T with it, packed for the process's kernel (pack_transposed, about
// 4 bytes a weight, freed with the matrix), for it and the later ones, while all kept W^T together stay within the
// budget (default 1 GiB; 0 keeps none). (The names say tiles: W^T was once kept as the first product's tiles.)
size_t backward_tiles_bytes(); // held now
size_t backward_tiles_budget();
void set_backward_tiles_budget(size_t bytes);

// The LM head for the AMX kernel: an F32 table emb [V][d] as the [d][V] matrix of x * emb^T, in digits. Empty
// (and the LM head stays on gemm_table) when the kernel is fp32, the table is stored F16/BF16/Q8_0, or it holds
// NaN/Inf. Under --matmul int8 a Q4_K table's head holds no data but is marked int8: gemm_head then rounds x to 8
// bits as the int8 kernel does for the layers (the tied embedding is a fifth of a 1B model's weights).
weight_matrix pack_head(const row_table& emb);
// out [n][V] = x [n][d] * emb^T: on the AMX digits, the int8 kernel, or gemm_table, as pack_head chose for head
void gemm_head(float* out, const float* x, const weight_matrix& head, const row_table& emb, int n, gemm_scratch& gs);

// out [n][V] = x [n][d] * emb [V][d]^T: the LM head reads the embedding rows as they are stored. For the few
// positions the forward usually asks for this is a stream over emb (memory bound), so it is a dot per row.
void gemm_rows_transposed(float* out, const float* x, const float* emb, int n, int d, int V);
// out [n][t.rows] = x [n][t.cols] * t^T for a table in any stored type (gemm_rows_transposed for F32; other types
// are dequantised a group of rows at a time, so the result is the dequantised table's).
void gemm_table(float* out, const float* x, const row_table& t, int n);

} // namespace gb
