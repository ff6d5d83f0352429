// GB_UNROLL before a loop over a register tile's rows or vectors (trip counts that are template arguments):
// unrolled at every level. Left rolled (gcc at -O2, as distributions and the sanitizer builds compile), the
// accumulators stay an array in memory rather than registers and a product runs several times slower (the ASan
// build's attribution graph: 10.0 s rolled, 3.8 s unrolled). Internal to core/kernels.
#pragma once
#define GB_UNROLL _Pragma("GCC unroll 16")
