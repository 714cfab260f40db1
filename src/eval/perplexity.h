// Perplexity and KL divergence over a tokenized text, the way llama-perplexity computes them:
// the tokens are cut into chunks of n_ctx, the first token of each chunk is replaced by BOS
// when the vocabulary adds one, n_batch/n_ctx chunks are decoded side by side as separate
// sequences, and only positions n_ctx/2 .. n_ctx-2 are scored (each predicting the next).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/layer_states.h"
#include "eval/logprobs.h"
#include "llama/context.h"
#include "util/status.h"

namespace gm {
class Progress;
}

namespace gm::eval {

struct TextEvalOptions {
  int n_ctx = 512;
  int n_batch = 2048;  // llama-perplexity's default: 4 chunks of 512 per decode
  int n_threads = 0;   // 0 = all cores
  // Physical batch: 512 is llama.cpp's default, and with quantized weights the figures depend on
  // it (a different split of the same batch moves KLD by ~1e-3 relative), so it stays the default
  // for like-for-like numbers. Larger is faster on small models (2048: ~4x on stories260K).
  int n_ubatch = 512;
  // gamma layers (eval/layer_states.h), both with one chunk per decode (n_batch = n_ctx <=
  // n_ubatch): `capture` receives every chunk's state after each layer but the last; with
  // `input` the model is run from `input`'s states at input_boundary instead of from tokens
  // (a file of the layers from input_boundary on).
  LayerStates* capture = nullptr;
  const LayerStates* input = nullptr;
  int input_boundary = 0;
};

// Number of chunks to evaluate: all the text holds when `requested` < 0. Errors when the text
// is shorter than two windows (llama-perplexity's minimum) or holds fewer than `requested`.
Result<int> chunks_for(size_t n_tokens, int n_ctx, int requested);

struct PplStats {
  double ppl = 0, ppl_stderr = 0;  // exp(mean nll) and its standard error (llama's formula)
  double nll_mean = 0, nll_stderr = 0;
  uint64_t n_scored = 0;
};

struct KldStats {
  uint64_t count = 0;
  // PPL of student (Q) and base from the KL pass, as --kl-divergence prints them.
  double ppl_q = 0, ppl_q_stderr = 0, ppl_base = 0, ppl_base_stderr = 0;
  double ln_ppl_ratio = 0, ln_ppl_ratio_stderr = 0, ppl_ratio = 0, ppl_ratio_stderr = 0;
  double ppl_diff = 0, ppl_diff_stderr = 0, ln_ppl_cor = 0;
  double kld_mean = 0, kld_stderr = 0, kld_max = 0, kld_p999 = 0, kld_p99 = 0, kld_p95 = 0, kld_p90 = 0,
         kld_median = 0, kld_p10 = 0, kld_p5 = 0, kld_p1 = 0, kld_p01 = 0, kld_min = 0;
  double dp_mean = 0, dp_stderr = 0, dp_max = 0, dp_p999 = 0, dp_p99 = 0, dp_p95 = 0, dp_p90 = 0, dp_p75 = 0,
         dp_median = 0, dp_p25 = 0, dp_p10 = 0, dp_p5 = 0, dp_p1 = 0, dp_p01 = 0, dp_min = 0;
  double dp_rms = 0, dp_rms_stderr = 0;
  double top1 = 0, top1_stderr = 0;  // "Same top p": argmax agreement with the base
  std::vector<double> chunk_means;    // each chunk's mean KLD, in chunk order
};

// Where a KL pass gets the base (teacher) log-probs of each chunk: a llama-perplexity base
// file, or a teacher model run side by side (optionally saving what it computes).
struct BaseSource {
  LogprobReader* reader = nullptr;
  const llama::LlamaModel* teacher = nullptr;
  LogprobWriter* writer = nullptr;  // only with teacher
};

struct TextEvalResult {
  int n_chunks = 0;
  PplStats ppl;  // of the evaluated model
  std::optional<KldStats> kld;
  double seconds = 0;
};

// Evaluates `model` on chunks [0, n_chunks) of `tokens` (at least n_chunks * n_ctx long).
// With `base`, also the KL divergence against it; `progress` may be null.
Result<TextEvalResult> eval_text(const llama::LlamaModel& model, const std::vector<llama_token>& tokens, int n_chunks,
                                 const TextEvalOptions& opt, const BaseSource* base, Progress* progress);

// Statistics exactly as llama-perplexity's kl_divergence() reports them (values are sorted).
KldStats kld_stats(const KldAccum& acc, std::vector<float> kld_values, std::vector<float> p_diff_values);
PplStats ppl_stats(double sum_nll, double sum_nll2, uint64_t count);

}  // namespace gm::eval
