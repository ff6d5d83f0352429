// llama2.c checkpoint loader (model.bin + tokenizer.bin).
#pragma once
#include <string>

#include "io/loader.h"
#include "model/model.h"

namespace gb {

// Throws gb::error naming the file and what disagrees (header, size, tokenizer).
model load_llama2c(const std::string& path, const std::string& tokenizer_path, const progress_fn& progress);

} // namespace gb
