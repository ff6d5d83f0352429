// Filling a model's weights from a file by the architecture table's tensor names (core/model/arch.h): the
// reader interface each format implements (safetensors, GGUF, llama2.c) and the one loader over it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/loader.h"
#include "kernels/gemm.h"
#include "model/arch.h"

namespace gb {

// What a loader provides: tensors by name, in the file's bytes. Shapes are given as (rows, cols) of the
// logical [out][in] matrix (or n values for vectors); each reader checks them in its own file's order.
struct tensor_reader {
    bool gguf = false;                 // names from tensor_names::gguf (else hf)
    bool conv1d = false;               // HF GPT-2: matrices stored [in][out]
    virtual ~tensor_reader() = default;
    virtual const std::string& path() const = 0;
    virtual bool has(const std::string& name) const = 0;
    // n values as f32: a vector [n], or [1][n] / [n][1]
    virtual std::vector<float> floats(const std::string& name, int64_t n) const = 0;
    // [rows][cols] as f32, row-major (learned positions)
    virtual std::vector<float> floats2(const std::string& name, int64_t rows, int64_t cols) const = 0;
    // a [out][in] matrix as stored, shape checked (bytes stay the file's)
    virtual matrix_part part(const std::string& name, int64_t in, int64_t out) const = 0;
    // expert e's [out][in] matrix inside a stacked [E][out][in] tensor (GGUF's *_exps)
    virtual matrix_part expert_part(const std::string& name, int64_t in, int64_t out, int64_t n_expert, int e) const = 0;
    // any shape, as f32 (the vision models' [1][n][d] tokens and [d][C][P][P] convolution); HF files only
    virtual std::vector<float> floats_shaped(const std::string& name, const std::vector<int64_t>& shape) const;
    // an embedding-like [rows][cols] table, read in place where its type allows
    virtual row_table table(const std::string& name, int64_t rows, int64_t cols) const = 0;
    // the parts side by side as one [in][sum of outs] matrix (pack_parts), the file's pages then released
    virtual weight_matrix matrix(const std::vector<matrix_part>& parts, int64_t in) const = 0;
};

// Fills w from r by the table's names for c.arch: the one place that knows which tensors a family has, how
// fused ones split (q|k|v, GPT-NeoX's per-head q,k,v, Phi-3's gate|up, stacked experts) and what a family's
// stored gains mean (Gemma's 1 + w). c must be complete (shapes, biases, experts). Progress from 0.1 to 0.95.
void load_weights(model_weights& w, const model_config& c, const tensor_reader& r, const progress_fn& progress);

} // namespace gb
