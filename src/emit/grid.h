// The uniform grid a quantized weight lies on: in every type below a weight is
// v = step * code + offset, with step and offset fixed per block or sub-block by the block's
// scales, and code an integer in [code_min, code_max]. `gamma dequantize --dither` draws a
// full-precision weight inside its code's bin (step/2 either side) from these.
//
//   Q4_0, Q5_0     step d,             offset -8d / -16d   codes 0..15 / 0..31   (32 per block)
//   Q4_1, Q5_1     step d,             offset m            codes 0..15 / 0..31
//   Q8_0           step d,             offset 0            codes -127..127
//   Q2_K           step d*sc[i/16],    offset -dmin*m      codes 0..3      (256 per super-block)
//   Q3_K           step d*(sc[i/16]-32), offset 0          codes -4..3
//   Q4_K, Q5_K     step d*sc[i/32],    offset -dmin*m      codes 0..15 / 0..31
//   Q6_K           step d*sc[i/16],    offset 0            codes -32..31
//
// The non-uniform IQ and ternary types have no such grid and are refused.
#pragma once
#include <cstdint>

#include "ggml.h"
#include "util/status.h"

namespace gm {

struct GridRange { int code_min, code_max; };

// True for the types listed above.
bool has_uniform_grid(ggml_type type);
// The codes a type's weights take (the quantizer's clamp range).
GridRange grid_range(ggml_type type);
// How many consecutive weights share one step and offset: 32, or 16 for Q2_K, Q3_K, Q6_K.
int64_t grid_group(ggml_type type);
// Step and offset of each of the `n` weights in `blocks` (n a multiple of the block size).
// The code of weight i is round((v_i - offset_i) / step_i), v_i ggml's dequantized value;
// a step of 0 (a sub-block scale of 0) means every weight there equals its offset.
Status grid_of(ggml_type type, const uint8_t* blocks, int64_t n, float* step, float* offset);
// The codes of `n` weights: `v` ggml's dequantization of `blocks`. Fails when a weight is off
// its grid (by more than 1 % of a step), which would mean the layout above is wrong.
Status grid_codes(ggml_type type, const uint8_t* blocks, const float* v, int64_t n, int* codes);

}  // namespace gm
