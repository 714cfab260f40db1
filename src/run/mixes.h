// llama.cpp's standard mixes as `gamma run`'s baselines: which exist, what llama-quantize
// predicts their files weigh (--dry-run: instant, no quantizing), and which to build for a
// budget (every one that fits it and is near it, the nearest one above on request). Building and
// measuring them inside a run: run/pipeline.h.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm::run {

// llama-quantize's standard mixes, K, legacy and IQ, by increasing size on a typical model
// (Q2_K_S, IQ2_* and IQ1_* need an imatrix; llama-quantize's dry run says which, per model).
const std::vector<std::string>& standard_mixes();
bool is_standard_mix(const std::string& name);
// A mix given by name where a size or a speed is asked for (--size Q3_K_M, --min-decode Q4_0):
// the standard mix `text` names, in any case ("q3_k_m" is Q3_K_M), or "" when it names none.
std::string mix_size_name(const std::string& text);

// The file llama-quantize would write for `mix` from `teacher` (with `imatrix` unless empty):
// its --dry-run's "quant size" (tensor data) plus the teacher's header; within a few KiB of
// the real file (tests/test_run.cpp checks it against a real llama-quantize run).
struct MixPrediction {
  uint64_t file_bytes = 0;
  bool needs_imatrix = false;  // the dry run says the real quantization would refuse without one
};
// `teacher_header` is the teacher's header size (gguf_header_bytes), read once for all mixes.
Result<MixPrediction> predict_mix(const std::string& llama_quantize, const std::string& teacher,
                                  const std::string& imatrix, const std::string& mix, uint64_t teacher_header);
// A GGUF's bytes that are not tensor data (header, metadata, tensor directory, padding).
Result<uint64_t> gguf_header_bytes(const std::string& path);

// The mixes to build for a budget of `budget` bytes, given every mix's predicted size:
// those predicted within [near * budget, budget] (the largest max_within sizes of them; mixes
// of one size count once),
// the largest below that range when none lies in it, and the smallest predicted above the
// budget when `with_above` is set or when no mix fits at all. Returned in increasing size.
std::vector<std::string> mixes_for_budget(const std::map<std::string, uint64_t>& predicted, uint64_t budget,
                                          double near = 0.85, int max_within = 6, bool with_above = true);

}  // namespace gm::run
