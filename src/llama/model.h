// A libllama model, loaded the one way gamma loads models (llama/backend.h's parameters),
// with tokenization as llama.cpp's tools do it. Everything numeric goes through llama.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llama.h"
#include "util/status.h"

namespace gm::llama {

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
  int n_layer() const;
  int64_t n_embd() const;
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

}  // namespace gm::llama
