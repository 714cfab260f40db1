// One candidate's bytes, made from the source the one way the pool makes them: the source's own
// bytes for its own type, else its F32 weights quantized at the type (imatrix-weighted, a MoE
// tensor's experts each with their own importance). The pool writes them to its part files; a
// streamed pool (Manifest::streamed) has no part files, and its readers (Stage I's candidate
// store, HAWQ-V2, emit) make each candidate with this when they need it: the same bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "ggml.h"
#include "gguf_model/model.h"
#include "util/status.h"

namespace gm {

// Rows sharing one imatrix slice: a 3-D (MoE) tensor's imatrix has one slice per expert, as
// llama-imatrix writes it; 0 when one slice serves every row (or there is no imatrix).
int64_t rows_per_imatrix(const TensorInfo& t, const std::vector<float>* imatrix);

// `ref` is t's weights in F32 (Model::read_f32), or null to have them read here only when they
// are needed (not for the source's own type, which is a copy); `imatrix` its importance entry or null.
Result<std::vector<uint8_t>> candidate_bytes(const Model& m, const TensorInfo& t, ggml_type type,
                                             const std::vector<float>* ref, const std::vector<float>* imatrix,
                                             int n_threads);

// How many bytes of made candidates a streamed pool's reader keeps in memory for its later
// passes (Stage I reads every layer's candidates four times: its MSE at the start, step 0, the
// layer's visit, its MSE at the end): a quarter of this machine's physical memory. The first
// made stay; past it, a candidate is made again each time it is asked for.
uint64_t stream_keep_bytes();

}  // namespace gm
