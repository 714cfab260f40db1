// `gamma dequantize`: the FP teacher of a quantized model, as a GGUF llama.cpp runs, and
// with --dither a de-gridded one: a full-precision pre-image of the quantized file.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ggml.h"
#include "util/status.h"

namespace gm {

struct DequantizeOptions {
  std::string type = "f32";  // f32 or f16
  // De-gridded: every quantized weight drawn uniformly inside its code's bin (emit/grid.h),
  // so quantizing the teacher to the source's type gives back the source's codes (to within
  // the quantizer's own choice of scales) while no GGUF type holds it exactly. Weights at the
  // type's extreme codes are drawn on the inner half of their bin (beyond it the quantizer
  // clamps); in the min/max types (Q4_0 to Q8_0) one weight per block stays exactly at its
  // lowest and one at its highest code, as a model quantized to this file had them. Reproducible: the draw of
  // a weight depends on the seed, its tensor's name and its index only.
  std::optional<uint64_t> dither_seed;
  // The share of each bin drawn from (centred on the source's value; 1: the whole bin). The
  // whole bin adds noise as large as the quantization's own, so that teacher is a noisier
  // model than the source (docs/design.md "The de-gridded teacher" has the measurements).
  double dither_width = 1.0;
};

struct DequantizeReport {
  // With a dither, per source type: the dithered weights, and how many of them quantizing
  // the teacher to that type (ggml_quantize_chunk, no imatrix) returns to the source's code,
  // and as the quantizer's own baseline how many quantizing the gridded teacher returns.
  struct Count { uint64_t dithered = 0, codes_returned = 0, grid_returned = 0; };
  std::map<std::string, Count> by_type;
};

// Every tensor of 2+ dims to `type` (F32 or F16) through ggml's type traits; 1-D tensors
// (norms, biases) stay as stored. Atomic.
Result<DequantizeReport> dequantize_model(const std::string& in, const std::string& out,
                                          const DequantizeOptions& o = {});

// The de-gridded weights of one quantized tensor (`raw` its bytes, `v` ggml's dequantization
// of them); fails on a type without a uniform grid or a weight off its grid.
Status dither_weights(ggml_type type, const uint8_t* raw, float* v, int64_t n, uint64_t seed, const std::string& name,
                      double width = 1.0);

}  // namespace gm
