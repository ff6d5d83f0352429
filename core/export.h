// Capture export in the CLI's formats (.npy files and JSON), shared by glassbox-cli and the desktop app.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "forward.h"
#include "analysis/compare.h"

namespace gb {

// NumPy .npy v1.0, little-endian, C order. Throws gb::error naming the file on I/O failure.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data);

// tokens.npy int32 [T]; logits.npy float32 [T,V] or [1,V]; attention.npy float32 [L,H,T,T] (layers left out
// by the capture budget are zero; written layer by layer, never as one L*H*T*T buffer); residual_norms.npy
// float32 [2L+1,T]. Creates dir if needed.
void write_capture_npy(const std::string& dir, const record& cap);

// {"model": {...}, "ablation", "tokens": [{"id","text"}], "top_k": [{"id","text","prob"}],
//  "residual_norms": {"labels", "values" [2L+1][T]}, "timing_ms": {...}, "attention_layers_kept": [l, ...]}
// model_json also says "nonfinite_tensor": the first weight holding NaN/Inf, or null.
nlohmann::json model_json(const model& m);
nlohmann::json capture_json(const model& m, const record& cap, const ablation& ab, int top_k);
void write_json(const std::string& path, const nlohmann::json& j);

} // namespace gb
