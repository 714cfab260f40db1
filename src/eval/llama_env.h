// libllama plumbing for evaluation: quiet backend setup, RAII model/context/batch wrappers,
// tokenization as llama.cpp's tools do it. Everything numeric goes through llama.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llama.h"
#include "util/status.h"
#include "util/threads.h"

struct ggml_threadpool;

namespace gm::eval {

// Initialises the llama backend once per process and routes llama/ggml logs into a buffer
// (nothing printed) so a failure becomes one Status line carrying llama's last error.
void init_llama();
std::string llama_last_error();

class LlamaModel {
 public:
  // vocab_only loads just the tokenizer (cheap: used to check a cached teacher's vocab).
  static Result<std::unique_ptr<LlamaModel>> load(const std::string& path, bool vocab_only = false);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  llama_model* get() const { return model_; }
  const llama_vocab* vocab() const { return vocab_; }
  const std::string& path() const { return path_; }
  int n_vocab() const;
  bool add_bos() const;
  llama_token bos() const;
  std::string desc() const;  // e.g. "llama ?B all F32"
  uint64_t n_params() const;
  uint64_t tensor_bytes() const;
  int n_ctx_train() const;
  // sha256 over the tokenizer type and every token's text: equal iff the vocabularies agree.
  std::string vocab_fingerprint() const;
  // First token id whose text differs from `other`'s, or -1 when none (sizes must match).
  int first_vocab_difference(const LlamaModel& other) const;

  // llama_tokenize with parse_special=false, the way llama-perplexity tokenizes its -f text.
  Result<std::vector<llama_token>> tokenize(const std::string& text, bool add_special) const;

 private:
  LlamaModel() = default;
  std::string path_;
  llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
};

struct ContextOptions {
  int n_ctx = 512;      // total KV cells (all sequences)
  int n_batch = 2048;   // logical batch
  int n_ubatch = 512;   // physical batch (llama.cpp's default)
  int n_seq = 1;        // parallel sequences
  int n_threads = 0;    // 0 = all cores
  bool kv_unified = false;
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

// Owning llama_batch with an append API (tokens may belong to several sequences).
class Batch {
 public:
  Batch(int capacity, int max_seq_per_token);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  void clear() { b_.n_tokens = 0; }
  int size() const { return b_.n_tokens; }
  int capacity() const { return capacity_; }
  // Returns the index of the added token.
  int add(llama_token tok, llama_pos pos, const llama_seq_id* seqs, int n_seqs, bool logits);
  int add(llama_token tok, llama_pos pos, llama_seq_id seq, bool logits) { return add(tok, pos, &seq, 1, logits); }
  const llama_batch& get() const { return b_; }

 private:
  llama_batch b_{};
  int capacity_, max_seq_;
};

// Runs fn(i, thread) for i in [0, n) on `threads` threads (dynamic scheduling, chunks of
// `grain`); fn must only write per-i or per-thread state.
template <typename Fn>
void parallel_for(int64_t n, int threads, int64_t grain, Fn&& fn);

}  // namespace gm::eval

#include "eval/parallel.inl"
