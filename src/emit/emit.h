// `gamma emit POOL PLAN -o OUT.gguf`: the mixed-precision GGUF. Linear tensors are copied
// from the pool's candidate files, the other tensors quantized from the source at the
// plan's types (imatrix-weighted when the pool has one), metadata and tokenizer copied from
// the source. Also writes OUT.tensor-types.txt, a recipe llama-quantize's
// --tensor-type-file accepts to reproduce the same per-tensor types from the teacher.
#pragma once
#include <cstdint>
#include <string>

#include "plan/plan.h"
#include "util/status.h"

namespace gm {

struct EmitResult {
  uint64_t file_bytes = 0;  // predicted before writing; equals the written size
  double linear_bpw = 0;
  std::string tensor_types_path;
};

// first_layer > 0: the file of the layers from first_layer on alone, for gamma layers (eval/
// layer_states.h): blk.N renamed blk.N-first_layer, <arch>.block_count lowered, every other
// tensor kept; its size is not the plan's and no recipe is written. Only where
// starts_at_any_layer(arch).
Result<EmitResult> emit(const std::string& pool_dir, const Plan& plan, const std::string& out_path, int n_threads = 0,
                        int first_layer = 0);

// Whether llama.cpp runs a model of this architecture cut before a layer as the rest of the
// whole: its graph treats every layer alike (nothing depends on the layer's number, such as
// Gemma 3's sliding-window pattern) and takes hidden states where the token embeddings go,
// unscaled (models/llama.cpp, qwen2.cpp, qwen3.cpp of the vendored llama.cpp).
bool starts_at_any_layer(const std::string& arch);

// The llama-quantize recipe: whitespace-separated `regex=type` tokens, one per quantizable
// tensor, anchored so each names exactly one tensor (the vendored parser lowercases names
// and takes the first regex_search match).
std::string tensor_types_text(const std::map<std::string, std::string>& types);

}  // namespace gm
