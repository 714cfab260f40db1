#include "decoder/llama_runner.h"

#include <cstdlib>
#include <cstring>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama/context.h"

namespace gm {

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::open(const std::string& gguf_path, int n_ctx, int n_threads) {
  if (n_ctx <= 0) return Status::errorf("bad context length {}", n_ctx);
  std::unique_ptr<LlamaRunner> r(new LlamaRunner());
  GAMMA_ASSIGN_OR_RETURN(r->model_, llama::LlamaModel::load(gguf_path));
  llama::ContextOptions co;
  co.n_ctx = co.n_batch = co.n_ubatch = n_ctx;  // one ubatch per sequence: each capture holds all its tokens
  co.n_threads = n_threads;
  co.exact_f32 = true;
  co.eval_cb = &LlamaRunner::eval_cb;
  co.eval_cb_data = r.get();
  GAMMA_ASSIGN_OR_RETURN(r->ctx_, llama::LlamaContext::create(*r->model_, co));
  r->n_layer_ = r->model_->n_layer();
  r->n_embd_ = r->model_->n_embd();
  r->n_vocab_ = r->model_->n_vocab();
  r->n_ctx_ = n_ctx;
  return r;
}

LlamaRunner::~LlamaRunner() = default;

Result<std::vector<int32_t>> LlamaRunner::tokenize(const std::string& text) const {
  GAMMA_ASSIGN_OR_RETURN(auto toks, model_->tokenize(text, /*add_special=*/false));
  return std::vector<int32_t>(toks.begin(), toks.end());
}

int32_t LlamaRunner::bos() const { return model_->add_bos() ? model_->bos() : -1; }

bool LlamaRunner::eval_cb(ggml_tensor* t, bool ask, void* user) {
  auto* self = static_cast<LlamaRunner*>(user);
  if (!self->cap_) return !ask;  // nothing wanted; never cancel the graph
  const char* name = t->name;
  int boundary = -1;
  // The token embeddings: the get_rows of token_embd (the node named inp_embd is only the
  // input for vector embeddings and is not computed on the token path).
  // Gemma's graphs scale them by sqrt(n_embd) into the node inp_scaled, computed after the
  // get_rows: that overwrites boundary 0, so it holds the first layer's input either way.
  if ((t->op == GGML_OP_GET_ROWS && t->src[0] && std::strcmp(t->src[0]->name, "token_embd.weight") == 0) ||
      std::strcmp(name, "inp_scaled") == 0) {
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
  if (dst.empty()) ++self->captured_;
  dst.resize(size_t(self->n_embd_ * self->cap_tokens_));
  ggml_backend_tensor_get(t, dst.data(), 0, dst.size() * sizeof(float));
  return true;
}

Status LlamaRunner::run(const std::vector<int32_t>& tokens, Capture* out, bool want_hidden, bool want_logits) {
  const int n = int(tokens.size());
  if (n <= 0 || n > n_ctx_) return Status::errorf("sequence of {} tokens does not fit the context of {}", n, n_ctx_);
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab_) return Status::errorf("token id {} outside the vocabulary ({})", t, n_vocab_);
  ctx_->clear_memory();
  llama::Batch batch(n, 1);
  // All rows are outputs: the last layer then keeps every token (out_ids selects all).
  for (int i = 0; i < n; ++i) batch.add(tokens[size_t(i)], i, 0, /*logits=*/true);
  if (want_hidden) {
    out->hidden.assign(size_t(n_layer_ + 1), {});
    cap_ = out;
  }
  cap_tokens_ = n;
  captured_ = 0;
  cap_error_.clear();
  const Status st = ctx_->decode(batch.get());
  cap_ = nullptr;
  GAMMA_RETURN_IF_ERROR(st);
  if (!cap_error_.empty()) return Status::error(cap_error_);
  if (want_hidden && captured_ != n_layer_ + 1)
    return Status::errorf("captured {} of {} layer boundaries from libllama", captured_, n_layer_ + 1);
  if (want_logits) {
    out->logits.resize(size_t(n) * size_t(n_vocab_));
    for (int i = 0; i < n; ++i) {
      const float* l = llama_get_logits_ith(ctx_->get(), i);
      if (!l) return Status::errorf("no logits for token {}", i);
      std::memcpy(out->logits.data() + size_t(i) * size_t(n_vocab_), l, size_t(n_vocab_) * sizeof(float));
    }
  }
  return Status::ok();
}

}  // namespace gm
