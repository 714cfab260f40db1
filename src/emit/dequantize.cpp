#include "emit/dequantize.h"

#include <cmath>
#include <cstring>

#include "emit/grid.h"
#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "llama.h"
#include "pool/quantize.h"
#include "util/random.h"
#include "util/threads.h"

namespace gm {
namespace {

// Weights whose re-quantization to `type` (no imatrix, as llama-quantize without one) lands
// on `source_codes`, the source's codes (grid_codes of its bytes).
Result<uint64_t> codes_returned(ggml_type type, const std::vector<int>& source_codes, const float* w, int64_t n_rows,
                                int64_t width) {
  const int64_t n = n_rows * width;
  const std::vector<uint8_t> q = quantize_rows(type, w, n_rows, width, nullptr, resolve_threads());
  std::vector<float> vq(n);
  ggml_get_type_traits(type)->to_float(q.data(), vq.data(), n);
  std::vector<int> b(n);
  GAMMA_RETURN_IF_ERROR(grid_codes(type, q.data(), vq.data(), n, b.data()));
  uint64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += source_codes[size_t(i)] == b[size_t(i)];
  return same;
}

}  // namespace

Status dither_weights(ggml_type type, const uint8_t* raw, float* v, int64_t n, uint64_t seed,
                      const std::string& name, double width) {
  if (!has_uniform_grid(type))
    return Status::errorf("--dither: {} is {}, which has no uniform grid (it supports Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 "
                          "and Q2_K to Q6_K)", name, ggml_type_name(type));
  std::vector<float> step(n), offset(n);
  std::vector<int> code(n);
  GAMMA_RETURN_IF_ERROR(grid_of(type, raw, n, step.data(), offset.data()));
  GAMMA_RETURN_IF_ERROR(grid_codes(type, raw, v, n, code.data()));
  const GridRange r = grid_range(type);
  const int64_t group = grid_group(type);
  const uint64_t base = splitmix64(seed) ^ fnv1a(name);
  const bool min_max = ggml_blck_size(type) == 32;
  for (int64_t g = 0; g < n; g += group) {
    if (step[g] == 0) continue;  // a zero scale: every weight of the group is its offset
    // Q4_0 to Q8_0 derive a block's scale from its extreme weights, which then sit exactly on
    // the grid: a full-precision model quantized to this file had weights at its lowest and
    // highest code, so one weight of each stays there. (The K types fit their scales by least
    // squares, which puts no weight on the grid.)
    int64_t a = -1, b = -1;
    if (min_max)
      for (int64_t i = g; i < g + group; ++i) {
        if (a < 0 || code[i] < code[a]) a = i;
        if (b < 0 || code[i] > code[b]) b = i;
      }
    // Each weight's shift in code units: anywhere in its bin, or on the inner half at the
    // type's extreme codes (values beyond those are clamped to them: the outer half is not
    // the bin); none for the two anchors.
    for (int64_t i = g; i < g + group; ++i) {
      if (i == a || i == b) continue;
      const double u01 = unit_double(splitmix64(base + uint64_t(i)));  // [0, 1)
      const double u = code[i] <= r.code_min ? 0.5 * u01 : code[i] >= r.code_max ? -0.5 * u01 : u01 - 0.5;
      v[i] = float(double(v[i]) + width * u * step[i]);
    }
  }
  return Status::ok();
}

Result<DequantizeReport> dequantize_model(const std::string& in, const std::string& out, const DequantizeOptions& o) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(o.type));
  if (t != GGML_TYPE_F32 && t != GGML_TYPE_F16) return Status::errorf("--type must be f32 or f16, not {}", o.type);
  if (!(o.dither_width > 0 && o.dither_width <= 1))
    return Status::errorf("--dither-width must be in (0, 1], not {}", o.dither_width);
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(in));
  auto type_of = [&](const TensorInfo& x) { return x.shape.size() >= 2 ? t : x.type; };
  const auto& ts = model->tensors();
  // Dithered: the quantized tensors of 2+ dims (F16/BF16/F32 ones are full precision already).
  auto dithered = [&](const TensorInfo& x) { return o.dither_seed && x.shape.size() >= 2 && ggml_is_quantized(x.type); };
  for (const auto& x : ts)  // refused before anything is written
    if (dithered(x) && !has_uniform_grid(x.type))
      return dither_weights(x.type, nullptr, nullptr, 0, 0, x.name);
  auto w = model_writer(*model, type_of);
  gguf_set_val_u32(w->gguf(), "general.file_type", t == GGML_TYPE_F32 ? LLAMA_FTYPE_ALL_F32 : LLAMA_FTYPE_MOSTLY_F16);
  if (o.dither_seed) {
    // What the teacher is, in the file itself: a run or a report on it names its origin.
    gguf_set_val_u64(w->gguf(), "gamma.teacher.dither_seed", *o.dither_seed);
    if (o.dither_width != 1.0) gguf_set_val_f32(w->gguf(), "gamma.teacher.dither_width", float(o.dither_width));
    gguf_set_val_str(w->gguf(), "gamma.teacher.source_fingerprint", model->fingerprint().c_str());
  }
  DequantizeReport rep;
  GAMMA_RETURN_IF_ERROR(w->write(out, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
    const TensorInfo& x = ts[i];
    const ggml_type want = type_of(x);
    GAMMA_RETURN_IF_ERROR(model->check_fits_memory(x));
    if (x.type == want) {
      buf.resize(x.nbytes);
      return model->read_raw(x, buf.data());
    }
    GAMMA_ASSIGN_OR_RETURN(std::vector<float> f, model->read_f32(x));
    if (dithered(x)) {
      std::vector<uint8_t> raw(x.nbytes);
      GAMMA_RETURN_IF_ERROR(model->read_raw(x, raw.data()));
      std::vector<int> source_codes(f.size());  // f is ggml's dequantization of raw
      GAMMA_RETURN_IF_ERROR(grid_codes(x.type, raw.data(), f.data(), x.n_elements(), source_codes.data()));
      GAMMA_ASSIGN_OR_RETURN(uint64_t grid_same,
                             codes_returned(x.type, source_codes, f.data(), x.n_rows(), x.row_width()));
      GAMMA_RETURN_IF_ERROR(dither_weights(x.type, raw.data(), f.data(), x.n_elements(), *o.dither_seed, x.name,
                                           o.dither_width));
      GAMMA_ASSIGN_OR_RETURN(uint64_t same, codes_returned(x.type, source_codes, f.data(), x.n_rows(), x.row_width()));
      auto& c = rep.by_type[type_name(x.type)];
      c.dithered += uint64_t(x.n_elements());
      c.codes_returned += same;
      c.grid_returned += grid_same;
    }
    if (want == GGML_TYPE_F32) {
      buf.resize(f.size() * sizeof(float));
      std::memcpy(buf.data(), f.data(), buf.size());
    } else {
      buf = quantize_rows(want, f.data(), x.n_rows(), x.row_width(), nullptr, resolve_threads());
    }
    return Status::ok();
  }));
  return rep;
}

}  // namespace gm
