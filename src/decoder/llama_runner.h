// libllama as tokenizer, teacher and judge, on the llama/ adapter. One sequence at a time
// from an empty KV cache, every layer boundary captured through the eval callback (the
// token_embd get_rows, l_out-N); the context is exact_f32 (F32 KV cache, flash attention
// off), so libllama rounds nothing to F16 and its hidden states are what an exact F32
// forward computes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

struct ggml_tensor;

namespace gm {
namespace llama {
class LlamaModel;
class LlamaContext;
}  // namespace llama

class LlamaRunner {
 public:
  // `n_ctx`: the longest sequence run() will see. n_threads <= 0: all cores.
  static Result<std::unique_ptr<LlamaRunner>> open(const std::string& gguf_path, int n_ctx, int n_threads);
  ~LlamaRunner();

  int n_layer() const { return n_layer_; }
  int64_t n_embd() const { return n_embd_; }
  int64_t n_vocab() const { return n_vocab_; }
  int n_ctx() const { return n_ctx_; }
  // Text to tokens as llama.cpp's tools do it (no BOS added here; see bos()).
  Result<std::vector<int32_t>> tokenize(const std::string& text) const;
  // The BOS token when the vocabulary asks for one at the start of a sequence, else -1.
  int32_t bos() const;

  // What run() captures. hidden[b]: boundary b (0: the token embeddings, b >= 1: the output
  // of layer b-1), n_tokens x n_embd row-major. logits: n_tokens x n_vocab (if requested).
  struct Capture {
    std::vector<std::vector<float>> hidden;
    std::vector<float> logits;
  };
  // Runs `tokens` at positions 0..n-1 (n <= n_ctx) in one ubatch.
  Status run(const std::vector<int32_t>& tokens, Capture* out, bool want_hidden, bool want_logits);

 private:
  LlamaRunner() = default;
  static bool eval_cb(struct ggml_tensor* t, bool ask, void* user);
  std::unique_ptr<llama::LlamaModel> model_;
  std::unique_ptr<llama::LlamaContext> ctx_;  // after model_: freed first
  int n_layer_ = 0, n_ctx_ = 0;
  int64_t n_embd_ = 0, n_vocab_ = 0;
  Capture* cap_ = nullptr;  // target of the callback during run()
  int64_t cap_tokens_ = 0;
  int captured_ = 0;
  std::string cap_error_;
};

}  // namespace gm
