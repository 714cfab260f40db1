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

Result<EmitResult> emit(const std::string& pool_dir, const Plan& plan, const std::string& out_path, int n_threads = 0);

// The llama-quantize recipe: whitespace-separated `regex=type` tokens, one per quantizable
// tensor, anchored so each names exactly one tensor (the vendored parser lowercases names
// and takes the first regex_search match).
std::string tensor_types_text(const std::map<std::string, std::string>& types);

}  // namespace gm
