#include "emit/grid.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace gm {
namespace {

// Byte layouts of ggml's blocks (ggml-common.h); checked against ggml_type_size below.
float half(const uint8_t* p) {
  ggml_fp16_t h;
  std::memcpy(&h, p, sizeof h);
  return ggml_fp16_to_fp32(h);
}

struct Layout { int64_t block, bytes; };
Layout layout(ggml_type t) {
  switch (t) {
    case GGML_TYPE_Q4_0: return {32, 18};
    case GGML_TYPE_Q4_1: return {32, 20};
    case GGML_TYPE_Q5_0: return {32, 22};
    case GGML_TYPE_Q5_1: return {32, 24};
    case GGML_TYPE_Q8_0: return {32, 34};
    case GGML_TYPE_Q2_K: return {256, 84};
    case GGML_TYPE_Q3_K: return {256, 110};
    case GGML_TYPE_Q4_K: return {256, 144};
    case GGML_TYPE_Q5_K: return {256, 176};
    case GGML_TYPE_Q6_K: return {256, 210};
    default: return {0, 0};
  }
}

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: the 16 signed 6-bit scales packed in 12 bytes (ggml's dequantize_row_q3_K).
void scales_q3k(const uint8_t* packed, int8_t out[16]) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(out, aux, 16);
  for (int i = 0; i < 16; ++i) out[i] = int8_t(out[i] - 32);
}

}  // namespace

bool has_uniform_grid(ggml_type type) { return layout(type).block > 0; }

GridRange grid_range(ggml_type t) {
  switch (t) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q4_K: return {0, 15};
    case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q5_K: return {0, 31};
    case GGML_TYPE_Q8_0: return {-127, 127};
    case GGML_TYPE_Q2_K: return {0, 3};
    case GGML_TYPE_Q3_K: return {-4, 3};
    case GGML_TYPE_Q6_K: return {-32, 31};
    default: return {0, 0};
  }
}

int64_t grid_group(ggml_type t) {
  return t == GGML_TYPE_Q2_K || t == GGML_TYPE_Q3_K || t == GGML_TYPE_Q6_K ? 16 : 32;
}

Status grid_of(ggml_type t, const uint8_t* b, int64_t n, float* step, float* offset) {
  const Layout L = layout(t);
  if (!L.block) return Status::errorf("type {} has no uniform grid", ggml_type_name(t));
  if (int64_t(ggml_type_size(t)) != L.bytes || ggml_blck_size(t) != L.block)
    return Status::errorf("ggml's {} block is not the layout gamma knows", ggml_type_name(t));
  if (n % L.block) return Status::errorf("{} weights are not whole {} blocks", n, ggml_type_name(t));
  for (int64_t at = 0; at < n; at += L.block, b += L.bytes, step += L.block, offset += L.block) {
    switch (t) {
      case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: {
        const float d = half(b);
        const float o = t == GGML_TYPE_Q4_0 ? -8 * d : t == GGML_TYPE_Q5_0 ? -16 * d : 0.0f;
        for (int i = 0; i < 32; ++i) step[i] = d, offset[i] = o;
        break;
      }
      case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: {
        const float d = half(b), m = half(b + 2);
        for (int i = 0; i < 32; ++i) step[i] = d, offset[i] = m;
        break;
      }
      case GGML_TYPE_Q2_K: {
        const float d = half(b + 80), dmin = half(b + 82);
        for (int i = 0; i < 256; ++i) {
          const uint8_t sc = b[i / 16];
          step[i] = d * (sc & 0xF);
          offset[i] = -dmin * (sc >> 4);
        }
        break;
      }
      case GGML_TYPE_Q3_K: {
        const float d = half(b + 108);
        int8_t sc[16];
        scales_q3k(b + 96, sc);
        for (int i = 0; i < 256; ++i) step[i] = d * sc[i / 16], offset[i] = 0;
        break;
      }
      case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: {
        const float d = half(b), dmin = half(b + 2);
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          scale_min_k4(j, b + 4, &sc, &m);
          for (int i = 32 * j; i < 32 * (j + 1); ++i) step[i] = d * sc, offset[i] = -dmin * m;
        }
        break;
      }
      case GGML_TYPE_Q6_K: {
        const float d = half(b + 208);
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int i = 0; i < 256; ++i) step[i] = d * sc[i / 16], offset[i] = 0;
        break;
      }
      default: break;
    }
  }
  return Status::ok();
}

}  // namespace gm

namespace gm {

Status grid_codes(ggml_type t, const uint8_t* blocks, const float* v, int64_t n, int* codes) {
  std::vector<float> step(n), offset(n);
  GAMMA_RETURN_IF_ERROR(grid_of(t, blocks, n, step.data(), offset.data()));
  for (int64_t i = 0; i < n; ++i) {
    if (step[i] == 0) {
      codes[i] = 0;
      continue;
    }
    const double c = (double(v[i]) - offset[i]) / step[i];
    const double r = std::nearbyint(c);
    if (std::fabs(c - r) > 0.01)
      return Status::errorf("{} weight {} = {} is off its grid (step {}, offset {})", ggml_type_name(t), i, v[i],
                            step[i], offset[i]);
    codes[i] = int(r);
  }
  return Status::ok();
}

}  // namespace gm
