// Quantizing one weight matrix at one type with ggml (all cores), and measuring the
// importance-weighted relative error of the result.
#pragma once
#include <cstdint>
#include <vector>

#include "ggml.h"

namespace gm {

// Rows are split across `n_threads` workers, each calling ggml_quantize_chunk, exactly as
// llama-quantize does (so the bytes match its output for the same data and imatrix).
// `rows_per_imatrix` > 0: the imatrix holds one row_width slice per that many rows (a MoE
// tensor's experts, each with its own importance, as llama-imatrix writes them and
// llama-quantize reads them); 0: one slice for every row.
std::vector<uint8_t> quantize_rows(ggml_type type, const float* src, int64_t n_rows, int64_t row_width,
                                   const float* imatrix, int n_threads, int64_t rows_per_imatrix = 0);

// sum_j w_j (x - q)^2 / sum_j w_j x^2 over all elements, w_j the imatrix value of column j
// (1 without one), q the dequantized `data` of `type`.
double weighted_rel_error(ggml_type type, const uint8_t* data, const float* ref, int64_t n_rows,
                          int64_t row_width, const float* imatrix, int n_threads, int64_t rows_per_imatrix = 0);

}  // namespace gm
