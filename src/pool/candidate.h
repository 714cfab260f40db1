// One candidate's bytes, made from the source the one way the pool makes them: the source's own
// bytes for its own type, else its F32 weights quantized at the type (imatrix-weighted, a MoE
// tensor's experts each with their own importance). The pool writes them to its part files; a
// streamed pool (Manifest::streamed) has no part files, and its readers (Stage I's candidate
// store, HAWQ-V2, emit) make each candidate with this when they need it: the same bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf_model/model.h"
#include "pool/manifest.h"
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

// Made bytes are kept beside the pool so that a job quantizes each tensor at each type once:
// kind "stream", a streamed pool's candidates (Stage I makes its window's when it first loads a
// layer, and gamma layers and every emit after it read them: on Qwen-1.5B the emits had made
// 772 of the 1,405 window candidates again, 585 s, results/job_cost_qwen_q2k_stream); kind
// "fixed", a tensor outside the pool at another type than the model's (a head rule: Qwen-0.5B's
// tied embedding at IQ4_NL was 25 s of the 28 each emit took). Named by
// the model's fingerprint and the imatrix's hash, so a pool rebuilt from another model or
// imatrix in the same directory never reads them. The source's own type is never kept (its
// bytes are a copy).
std::string made_bytes_path(const Manifest& man, const std::string& kind, const std::string& tensor, ggml_type t);
// Bytes from `path` when it holds exactly `nbytes`, else made by `make` and written there
// (atomically; a cache that cannot be written is only a cost). *on_disk, when given, says
// whether `path` holds them now.
Status cached_bytes(const std::string& path, uint64_t nbytes, std::vector<uint8_t>& buf,
                    const std::function<Result<std::vector<uint8_t>>()>& make, bool* on_disk = nullptr);

// How many bytes of made candidates a streamed pool's reader keeps in memory for its later
// passes when they cannot be kept on disk (Stage I reads every layer's candidates four times:
// its MSE at the start, step 0, the layer's visit, its MSE at the end): a quarter of this
// machine's physical memory. The first made stay; past it, a candidate is made again each time
// it is asked for.
uint64_t stream_keep_bytes();

}  // namespace gm
