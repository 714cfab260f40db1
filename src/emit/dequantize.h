// `gamma dequantize`: the FP teacher of a quantized model, as a GGUF llama.cpp runs.
#pragma once
#include <string>

#include "util/status.h"

namespace gm {

// Every tensor of 2+ dims to `type` (F32 or F16) through ggml's type traits; 1-D tensors
// (norms, biases) stay as stored. Atomic.
Status dequantize_model(const std::string& in, const std::string& out, const std::string& type);

}  // namespace gm
