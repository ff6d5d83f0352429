// Dense products of the forward pass. Weights are packed once, at load, into the layout the kernel reads
// (see weight_matrix in model.h); activations are packed per call into a scratch buffer the caller owns.
#pragma once
#include <vector>

#include "model.h"

namespace gb {

// out [n][w.out] = x [n][w.in] * W (+ bias [w.out] when not empty). a_scratch is grown as needed and
// reused across calls, so a steady stream of calls allocates nothing. Threads split the column panels.
// epi: what is applied to each output element after the bias, while its tile is in cache.
enum epilogue { EPILOGUE_NONE, EPILOGUE_GELU };
void gemm(float* out, const float* x, const weight_matrix& w, const std::vector<float>& bias, int n,
          std::vector<float>& a_scratch, epilogue epi = EPILOGUE_NONE);

// out [n][V] = x [n][d] * emb [V][d]^T: the LM head reads the embedding rows as they are stored. For the few
// positions the forward usually asks for this is a stream over emb (memory bound), so it is a dot per row.
void gemm_rows_transposed(float* out, const float* x, const float* emb, int n, int d, int V);

} // namespace gb
