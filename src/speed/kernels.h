// How long ggml's CPU backend takes for one weight matrix, measured through the same kernels
// llama.cpp runs: ggml_mul_mat of a weight of that type and shape by an F32 activation, on the
// buffer type llama.cpp would load it into (the repacked layouts of Q4_0, Q4_K, Q2_K, IQ4_NL...
// when the CPU backend offers them), at the caller's thread count.
//
// Decode streams every weight from memory once per token, so a weight that stays in the cache
// would look too fast: the decode timing runs a chain of copies of the matrix whose total size
// exceeds the last-level cache several times, and divides. Prompt processing is bound by
// arithmetic, so it times a batch of 512 tokens over fewer copies.
#pragma once
#include <cstdint>
#include <string>

#include "util/status.h"

namespace gm::speed {

constexpr int kPrefillBatch = 512;  // llama-bench's pp512 and llama.cpp's default n_batch

struct KernelTime {
  double decode_us = 0;      // one token (a batch of 1), the weight streamed from memory
  double decode_hot_us = 0;  // the same with the weight in the last-level cache
  double prefill_us = 0;     // one batch of kPrefillBatch tokens
  // One token's time in a model whose matmul weights total `model_bytes`: between two tokens
  // the last-level cache keeps a share llc/model_bytes of them (all of a small model).
  double decode_in(uint64_t model_bytes) const;
};

// The last-level cache's size (64 MiB when the system does not say).
uint64_t llc_bytes();

// What this process's ggml does with weights: which CPU features and buffer types it uses.
// Part of the key of every cached timing (another build or CPU measures again).
std::string kernel_signature();

// `type` is a ggml type name; n_in is the row width (ne0), n_out the number of rows.
// `decode_only`: prefill_us is set to decode_us (the output head, which prompt processing
// multiplies by the last token alone).
Result<KernelTime> time_matmul(const std::string& type, int64_t n_in, int64_t n_out, int threads,
                               bool decode_only = false);

}  // namespace gm::speed
