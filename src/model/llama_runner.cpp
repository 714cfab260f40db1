#include "model/llama_runner.h"

#include <cstdio>
#include <cstring>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf_model/model.h"
#include "llama.h"
#include "llama/backend.h"
#include "util/threads.h"

namespace gm {
Result<std::unique_ptr<LlamaRunner>> LlamaRunner::open(const std::string& gguf_path, int n_ctx, int n_threads) {
  if (n_ctx <= 0) return Status::errorf("bad context length {}", n_ctx);
  n_threads = resolve_threads(n_threads);
  std::unique_ptr<LlamaRunner> r(new LlamaRunner());
  const llama_model_params mp = gm::llama::model_params();
  r->model_ = llama_model_load_from_file(gguf_path.c_str(), mp);
  if (!r->model_) {
    const std::string why = last_ggml_error();
    return Status::errorf("libllama cannot load {}{}{}", gguf_path, why.empty() ? "" : ": ", why);
  }
  auto cp = llama_context_default_params();
  cp.n_ctx = uint32_t(n_ctx);
  cp.n_batch = uint32_t(n_ctx);
  cp.n_ubatch = uint32_t(n_ctx);  // one ubatch per sequence: each capture holds all its tokens
  cp.n_seq_max = 1;
  cp.n_threads = n_threads;
  cp.n_threads_batch = n_threads;
  cp.type_k = GGML_TYPE_F32;  // no F16 rounding of K and V
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.cb_eval = &LlamaRunner::eval_cb;
  cp.cb_eval_user_data = r.get();
  cp.no_perf = true;
  r->ctx_ = llama_init_from_model(r->model_, cp);
  if (!r->ctx_) {
    const std::string why = last_ggml_error();
    return Status::errorf("libllama cannot create a context for {}{}{}", gguf_path, why.empty() ? "" : ": ", why);
  }
  r->n_layer_ = llama_model_n_layer(r->model_);
  r->n_embd_ = llama_model_n_embd(r->model_);
  r->n_vocab_ = llama_vocab_n_tokens(llama_model_get_vocab(r->model_));
  r->n_ctx_ = n_ctx;
  return r;
}

LlamaRunner::~LlamaRunner() {
  if (ctx_) llama_free(ctx_);
  if (model_) llama_model_free(model_);
}

Result<std::vector<int32_t>> LlamaRunner::tokenize(const std::string& text) const {
  const llama_vocab* vocab = llama_model_get_vocab(model_);
  if (text.size() > size_t(INT32_MAX) - 8) return Status::error("text too long to tokenize in one piece");
  std::vector<llama_token> toks(text.size() + 8);
  int32_t n = llama_tokenize(vocab, text.data(), int32_t(text.size()), toks.data(), int32_t(toks.size()),
                             /*add_special=*/false, /*parse_special=*/false);
  if (n < 0) return Status::error("tokenization failed");
  toks.resize(size_t(n));
  return std::vector<int32_t>(toks.begin(), toks.end());
}

int32_t LlamaRunner::bos() const {
  const llama_vocab* vocab = llama_model_get_vocab(model_);
  return llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : -1;
}

bool LlamaRunner::eval_cb(ggml_tensor* t, bool ask, void* user) {
  auto* self = static_cast<LlamaRunner*>(user);
  if (!self->cap_) return !ask;  // nothing wanted; never cancel the graph
  const char* name = t->name;
  int boundary = -1;
  // The token embeddings: the get_rows of token_embd (the node named inp_embd is only the
  // input for vector embeddings and is not computed on the token path).
  if (t->op == GGML_OP_GET_ROWS && t->src[0] && std::strcmp(t->src[0]->name, "token_embd.weight") == 0) {
    boundary = 0;
  } else if (std::strncmp(name, "l_out-", 6) == 0) {
    boundary = std::atoi(name + 6) + 1;
  }
  if (ask) return boundary >= 0;
  if (boundary < 0 || boundary > self->n_layer_) return true;
  if (t->type != GGML_TYPE_F32 || t->ne[0] != self->n_embd_ || t->ne[1] != self->cap_tokens_ ||
      !ggml_is_contiguous(t)) {
    self->cap_error_ = std::string("unexpected shape or type of captured tensor ") + name;
    return true;
  }
  auto& dst = self->cap_->hidden[size_t(boundary)];
  dst.resize(size_t(self->n_embd_ * self->cap_tokens_));
  ggml_backend_tensor_get(t, dst.data(), 0, dst.size() * sizeof(float));
  ++self->captured_;
  return true;
}

Status LlamaRunner::run(const std::vector<int32_t>& tokens, Capture* out, bool want_hidden, bool want_logits) {
  const int n = int(tokens.size());
  if (n <= 0 || n > n_ctx_) return Status::errorf("sequence of {} tokens does not fit the context of {}", n, n_ctx_);
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab_) return Status::errorf("token id {} outside the vocabulary ({})", t, n_vocab_);
  llama_memory_clear(llama_get_memory(ctx_), true);
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = tokens[size_t(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    // All rows are outputs: the last layer then keeps every token (out_ids selects all).
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (want_hidden) {
    out->hidden.assign(size_t(n_layer_ + 1), {});
    cap_ = out;
  }
  cap_tokens_ = n;
  captured_ = 0;
  cap_error_.clear();
  const int rc = llama_decode(ctx_, batch);
  cap_ = nullptr;
  llama_batch_free(batch);
  if (rc != 0) return Status::errorf("llama_decode failed ({}){}{}", rc, last_ggml_error().empty() ? "" : ": ", last_ggml_error());
  if (!cap_error_.empty()) return Status::error(cap_error_);
  if (want_hidden && captured_ != n_layer_ + 1)
    return Status::errorf("captured {} of {} layer boundaries from libllama", captured_, n_layer_ + 1);
  if (want_logits) {
    out->logits.resize(size_t(n) * size_t(n_vocab_));
    for (int i = 0; i < n; ++i) {
      const float* l = llama_get_logits_ith(ctx_, i);
      if (!l) return Status::errorf("no logits for token {}", i);
      std::memcpy(out->logits.data() + size_t(i) * size_t(n_vocab_), l, size_t(n_vocab_) * sizeof(float));
    }
  }
  return Status::ok();
}

}  // namespace gm
