// Vector lanes of the elementwise and attention loops (GCC/Clang vector extensions, as wide as -march allows),
// and the sizes below which an op stays on one thread. Internal to core/.
#pragma once
#include <cstdint>

namespace gb {

#if defined(__AVX512F__)
constexpr int AL = 16; // floats per vector
#elif defined(__AVX__)
constexpr int AL = 8;
#else
constexpr int AL = 4;
#endif
typedef float avec __attribute__((vector_size(AL * sizeof(float)), aligned(4), may_alias));

// Below this many multiply-adds an op runs on one thread: a parallel region's barrier costs more than it
// saves for tiny models, and much more when the machine is busy.
constexpr int64_t parallel_min_work = 1 << 20;
// Row-wise passes (norms, residual adds) are cheap per element but run 2L+1 times per forward: split the rows
// over the threads from a few rows of GPT-2 width up.
constexpr int64_t parallel_min_rows = 1 << 14;

} // namespace gb
