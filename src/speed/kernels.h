// How long ggml's CPU backend takes for one weight matrix, measured through the same kernels
// llama.cpp runs: ggml_mul_mat of a weight of that type and shape by an F32 activation, on the
// buffer type llama.cpp would load it into (the repacked layouts of Q4_0, Q4_K, Q2_K, IQ4_NL...
// when the CPU backend offers them), at the caller's thread count.
//
// Decode streams every weight from memory once per token, so a weight that stays in the cache
// would look too fast: the decode timing runs a chain of copies of the matrix whose total size
// exceeds the last-level cache several times, and divides. Prompt processing is bound by
// arithmetic, so it times a batch of 512 tokens over fewer copies. Kernels are then put in
// context per type (time_layers).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "util/status.h"

namespace gm::speed {

constexpr int kPrefillBatch = 512;  // llama-bench's pp512 and llama.cpp's default n_batch

struct KernelTime {
  double decode_us = 0;   // one token (a batch of 1)
  double prefill_us = 0;  // one batch of kPrefillBatch tokens
  // No run had this process's threads' worth of CPU (other jobs held the cores): the figure is
  // likely slow, and is not cached.
  bool loaded = false;
};

// The last-level cache's size (64 MiB when the system does not say).
uint64_t llc_bytes();

struct MatSpec {
  std::string type;  // ggml type name
  int64_t n_in = 0, n_out = 0;
};
// Seconds for one graph of ggml_mul_mat over these weights (each on its loader buffer type)
// by an F32 activation of `batch` columns, the fastest of `reps` runs after a warm-up that had
// the threads' CPU (runs under other jobs' load are repeated, a few seconds at most; `loaded`
// says whether none had it, and then the fastest loaded run is returned).
Result<double> time_chain(const std::vector<MatSpec>& chain, int64_t batch, int reps, int threads,
                          bool* loaded = nullptr);

// One layer's weights at `type` (the shapes it can hold), timed in context: a chain of
// min(n_layer, enough layers to stream 4x the last-level cache) layers for decode (a small model
// is the whole model, its cache behaviour included), ~16 MiB for prompt processing; per layer.
// Kernels timed alone do not add up to this (measured: -15 % to +32 % on SmolLM2), so the
// speed model scales each type's kernels by it (speed.h, CostModel::type_scale).
Result<KernelTime> time_layers(const std::string& type, const std::vector<MatSpec>& layer, int n_layer, int threads);

// A weight of this type and shape with real quantized bytes: one block of 64 random rows,
// quantized and tiled to the whole matrix, each later row's blocks in a random order so that no
// page repeats (a host that merges identical pages makes repeated data decode faster). The kernels
// do not branch on the values, and quantizing a whole matrix (minutes for IQ2 types) buys nothing.
std::vector<uint8_t> tiled_weight(ggml_type type, int64_t n_in, int64_t n_out);

// Whether llama.cpp's loader puts a weight of this type and shape in a repacked buffer (an extra
// CPU buffer type: Q4_0, Q4_K, IQ4_NL... in an interleaved layout). Such a weight is held twice
// in llama.cpp's accounting: the mapped file and the repacked copy (speed/memory.h).
bool repacked(const std::string& type, int64_t n_in, int64_t n_out);

// What this process's ggml does with weights: which CPU features and buffer types it uses.
// Part of the key of every cached timing (another build or CPU measures again).
std::string kernel_signature();

// `type` is a ggml type name; n_in is the row width (ne0), n_out the number of rows.
// `decode_only`: prefill_us is set to decode_us (the output head, which prompt processing
// multiplies by the last token alone).
Result<KernelTime> time_matmul(const std::string& type, int64_t n_in, int64_t n_out, int threads,
                               bool decode_only = false);

}  // namespace gm::speed
