// gamma eval: perplexity, KL divergence against a teacher, and zero-shot multiple choice of
// one GGUF, all through libllama, written as a "gamma.eval" v1 JSON (docs/formats.md).
//
// Teacher log-probs are cached in llama-perplexity's --kl-divergence-base format under
// cache_dir()/eval/, keyed by sha256 of (teacher file, text file, n_ctx, batch sizes); a cache holding at
// least the requested chunks is reused, so a sweep pays for the teacher once. Without a
// usable cache (--no-cache, or too little disk) teacher and student run side by side.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "eval/layer_states.h"
#include "eval/result.h"
#include "util/status.h"

namespace gm::eval {

struct EvalRequest {
  std::string model;
  std::string teacher;   // --teacher GGUF
  std::string kld_base;  // --kld-base FILE: read if it exists, else written from --teacher
  std::string text;      // --text FILE
  int n_ctx = 0;         // 0: 512, or the base file's
  int n_chunks = -1;     // -1: all the text holds
  int n_batch = 2048;
  int n_ubatch = 512;  // see TextEvalOptions
  int n_threads = 0;  // 0: all cores
  bool cache = true;
  std::vector<std::string> tasks;  // names in tasks_dir, or .jsonl paths
  std::string tasks_dir;           // empty: default_tasks_dir()
  int limit = -1;
  std::optional<std::string> delimiter;
  bool progress = true;
  // gamma layers' states between layers (TextEvalOptions; one chunk per decode: n_batch = n_ctx).
  LayerStates* capture = nullptr;
  const LayerStates* input = nullptr;
  int input_boundary = 0;
};

// Validates every input before any decoding, then evaluates.
Result<EvalResult> run_eval(const EvalRequest& req);

// Human-readable lines for the terminal.
std::string summarize(const EvalResult& results);

// Where the teacher cache for this key lives (created on demand). Batch sizes are part of the
// key because llama.cpp's figures depend on them in the last digits.
std::string teacher_cache_path(const std::string& teacher_sha, const std::string& text_sha, int n_ctx, int n_batch,
                               int n_ubatch);

}  // namespace gm::eval
