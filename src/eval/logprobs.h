// Per-token math of llama-perplexity (tools/perplexity/perplexity.cpp), reproduced operation
// for operation so gamma's figures equal llama.cpp's, and its --kl-divergence-base file
// format, which gamma uses as its teacher cache (so either tool can read the other's file).
//
// File layout (little-endian, no padding):
//   "_logits_" | u32 n_ctx | i32 n_vocab | i32 n_chunk | i32 tokens[n_ctx * n_chunk]
//   then for each chunk, for each of its n_ctx - 1 - n_ctx/2 scored positions, one row of
//   logprob_row_len(n_vocab) uint16: f32 scale, f32 min_log_prob, then n_vocab uint16 q
//   (padded to even) with log p = scale * q + min_log_prob; log-probs more than 16 below
//   the maximum logit are clamped to the floor.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llama.h"
#include "util/status.h"

namespace gm::eval {

inline int logprob_row_len(int n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }
// Scored positions per chunk: the second half of the window, minus the last token (which
// has no next token inside the chunk).
inline int scored_per_chunk(int n_ctx) { return n_ctx - 1 - n_ctx / 2; }

// -log p(tok) of one logits row as llama-perplexity's plain perplexity computes it.
double row_nll(int n_vocab, const float* logits, int tok);

// Writes the quantized log-probs of one row into `row` and returns -log p(tok) (the value
// llama-perplexity accumulates while writing its base file).
double quantize_row(int n_vocab, const float* logits, uint16_t* row, int tok);

// Sums llama-perplexity's kl_divergence() accumulates, plus the per-token values it sorts
// for its percentiles.
struct KldAccum {
  double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0, sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  float max_p_diff = 0;
  uint64_t n_same_top = 0, count = 0;
  void merge(const KldAccum& o);
};

// Compares one student logits row with one base row; returns {KL(base||student), p - p_base}.
std::pair<double, float> compare_row(int n_vocab, const float* logits, const uint16_t* base_row, int tok,
                                     KldAccum& acc);

struct LogprobFileInfo {
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0;
  int32_t n_chunk = 0;
  std::vector<llama_token> tokens;  // n_ctx * n_chunk, as tokenized (no BOS substitution)
};

class LogprobReader {
 public:
  // Validates magic, header and that the file size is exactly what the header implies.
  static Result<std::unique_ptr<LogprobReader>> open(const std::string& path);
  ~LogprobReader();
  const LogprobFileInfo& info() const { return info_; }
  // Reads the scored rows of the next chunk (scored_per_chunk(n_ctx) rows) into dst.
  Status read_chunk(uint16_t* dst);

 private:
  LogprobReader() = default;
  std::string path_;
  FILE* f_ = nullptr;
  int next_chunk_ = 0;
  LogprobFileInfo info_;
};

class LogprobWriter {
 public:
  // Writes the header at once; rows follow through write_chunk, chunk by chunk.
  static Result<std::unique_ptr<LogprobWriter>> create(const std::string& path, const LogprobFileInfo& info);
  ~LogprobWriter();
  Status write_chunk(const uint16_t* rows);
  // Flushes and checks every chunk was written.
  Status close();

 private:
  LogprobWriter() = default;
  std::string path_;
  FILE* f_ = nullptr;
  int written_ = 0;
  LogprobFileInfo info_;
};

}  // namespace gm::eval
