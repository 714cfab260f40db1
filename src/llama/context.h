// A llama_context made in one place for every user (eval's scoring, the Stage I activation
// cache), and an owning llama_batch.
#pragma once
#include <memory>

#include "ggml-backend.h"
#include "llama.h"
#include "llama/model.h"
#include "util/status.h"

struct ggml_threadpool;

namespace gm::llama {

struct ContextOptions {
  int n_ctx = 512;      // total KV cells (all sequences)
  int n_batch = 2048;   // logical batch
  int n_ubatch = 512;   // physical batch (llama.cpp's default)
  int n_seq = 1;        // parallel sequences
  int n_threads = 0;    // 0 = all cores (resolve_threads)
  bool kv_unified = false;
  // F32 K/V cache and flash attention off: libllama then rounds nothing to F16, and its
  // hidden states are what an exact F32 forward computes (the activation cache's teacher).
  bool exact_f32 = false;
  // The K/V cache's type (GGML_TYPE_COUNT: llama.cpp's default, F16); ignored with exact_f32.
  ggml_type kv_type = GGML_TYPE_COUNT;
  // Called for every graph node (llama_context_params::cb_eval), e.g. to capture l_out-N.
  ggml_backend_sched_eval_callback eval_cb = nullptr;
  void* eval_cb_data = nullptr;
};

// A llama_context with its own ggml threadpool attached, as llama.cpp's common does (the
// CPU backend otherwise spins up a throwaway pool per graph, which costs speed).
class LlamaContext {
 public:
  static Result<std::unique_ptr<LlamaContext>> create(const LlamaModel& model, const ContextOptions& opt);
  ~LlamaContext();
  LlamaContext(const LlamaContext&) = delete;
  LlamaContext& operator=(const LlamaContext&) = delete;
  llama_context* get() const { return ctx_; }
  const ContextOptions& options() const { return opt_; }
  void clear_memory();
  // llama_decode with a readable error.
  Status decode(const llama_batch& batch);

 private:
  LlamaContext() = default;
  llama_context* ctx_ = nullptr;
  ggml_threadpool* pool_ = nullptr;
  void (*pool_free_)(ggml_threadpool*) = nullptr;
  ContextOptions opt_;
};

// Owning llama_batch with an append API (tokens may belong to several sequences). With n_embd > 0
// its entries are hidden-state rows (llama_batch::embd) instead of token ids: the model's input is
// then those rows where the token embeddings would be (add_embd).
class Batch {
 public:
  Batch(int capacity, int max_seq_per_token, int n_embd = 0);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  void clear() { b_.n_tokens = 0; }
  int size() const { return b_.n_tokens; }
  int capacity() const { return capacity_; }
  // Returns the index of the added token.
  int add(llama_token tok, llama_pos pos, const llama_seq_id* seqs, int n_seqs, bool logits);
  int add(llama_token tok, llama_pos pos, llama_seq_id seq, bool logits) { return add(tok, pos, &seq, 1, logits); }
  // One row of n_embd floats (a batch made with n_embd > 0).
  int add_embd(const float* row, llama_pos pos, llama_seq_id seq, bool logits);
  const llama_batch& get() const { return b_; }

 private:
  llama_batch b_{};
  int capacity_, max_seq_, n_embd_;
};

}  // namespace gm::llama
