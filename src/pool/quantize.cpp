#include "pool/quantize.h"

#include <algorithm>
#include <cstdlib>

#include "util/parallel.h"

namespace gm {

std::vector<uint8_t> quantize_rows(ggml_type type, const float* src, int64_t n_rows, int64_t row_width,
                                   const float* imatrix, int n_threads, int64_t rows_per_imatrix) {
  const size_t row_size = ggml_row_size(type, row_width);
  std::vector<uint8_t> out(row_size * size_t(n_rows));
  ggml_quantize_init(type);  // not thread-safe on first use: do it before the workers
  const int64_t per_slice = imatrix && rows_per_imatrix > 0 ? rows_per_imatrix : n_rows;
  for (int64_t s0 = 0; s0 < n_rows; s0 += per_slice) {  // one imatrix slice (expert) at a time
    const int64_t n = std::min(per_slice, n_rows - s0);
    const float* im = imatrix ? imatrix + (s0 / per_slice) * row_width : nullptr;
    // One contiguous row range per thread (rows quantize independently).
    const int nt = int(std::max<int64_t>(1, std::min<int64_t>(n_threads, n)));
    parallel_chunks(n, nt, (n + nt - 1) / nt, [&](int64_t r0, int64_t r1, int) {
      ggml_quantize_chunk(type, src + (s0 + r0) * row_width, out.data() + (s0 + r0) * row_size, 0, r1 - r0, row_width,
                          im);
    });
  }
  return out;
}

double weighted_rel_error(ggml_type type, const uint8_t* data, const float* ref, int64_t n_rows,
                          int64_t row_width, const float* imatrix, int n_threads, int64_t rows_per_imatrix) {
  const size_t row_size = ggml_row_size(type, row_width);
  const auto* tr = ggml_get_type_traits(type);
  // The partition fixes the summation order: one row range per thread, partial sums merged
  // in range order, as ever (n_threads <= 0 means one range).
  const int nt = std::max(1, n_threads);
  const int64_t per = (n_rows + nt - 1) / nt;
  std::vector<double> num(size_t(nt) + 1, 0.0), den(size_t(nt) + 1, 0.0);
  parallel_chunks(n_rows, nt, per, [&](int64_t a, int64_t b, int) {
    std::vector<float> q(static_cast<size_t>(row_width));
    double n = 0, d = 0;
    for (int64_t r = a; r < b; ++r) {
      const float* x = ref + r * row_width;
      const float* im = imatrix && rows_per_imatrix > 0 ? imatrix + (r / rows_per_imatrix) * row_width : imatrix;
      if (type == GGML_TYPE_F32) std::copy(reinterpret_cast<const float*>(data + r * row_size),
                                           reinterpret_cast<const float*>(data + r * row_size) + row_width, q.begin());
      else tr->to_float(data + r * row_size, q.data(), row_width);
      for (int64_t j = 0; j < row_width; ++j) {
        const double w = im ? im[j] : 1.0, e = double(x[j]) - q[size_t(j)];
        n += w * e * e;
        d += w * double(x[j]) * x[j];
      }
    }
    num[size_t(a / per)] = n;
    den[size_t(a / per)] = d;
  });
  double N = 0, D = 0;
  for (int t = 0; t < nt; ++t) { N += num[size_t(t)]; D += den[size_t(t)]; }
  return D > 0 ? N / D : 0.0;
}

}  // namespace gm
