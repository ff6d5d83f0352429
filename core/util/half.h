// Half-precision floats: IEEE binary16 (F16) and bfloat16 (BF16), as safetensors, GGUF and the kernels store
// them; conversions to f32 are exact, from f32 round to nearest even (NaN stays NaN, overflow becomes Inf).
#pragma once
#include <cstdint>

namespace gb {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

} // namespace gb
