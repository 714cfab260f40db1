#include "llama/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ggml-cpu.h"
#include "llama/backend.h"
#include "llama/log.h"
#include "util/threads.h"

namespace gm::llama {

Result<std::unique_ptr<LlamaContext>> LlamaContext::create(const LlamaModel& model, const ContextOptions& opt) {
  init();
  std::unique_ptr<LlamaContext> c(new LlamaContext());
  c->opt_ = opt;
  c->opt_.n_threads = resolve_threads(opt.n_threads);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(opt.n_ctx);
  cp.n_batch = uint32_t(opt.n_batch);
  cp.n_ubatch = uint32_t(std::min(opt.n_ubatch, opt.n_batch));
  cp.n_seq_max = uint32_t(opt.n_seq);
  cp.n_threads = c->opt_.n_threads;
  cp.n_threads_batch = c->opt_.n_threads;
  cp.kv_unified = opt.kv_unified;
  if (opt.kv_type != GGML_TYPE_COUNT) cp.type_k = cp.type_v = opt.kv_type;
  if (opt.exact_f32) {
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  cp.cb_eval = opt.eval_cb;
  cp.cb_eval_user_data = opt.eval_cb_data;
  cp.no_perf = true;
  clear_errors();
  c->ctx_ = llama_init_from_model(model.get(), cp);
  if (!c->ctx_) {
    std::string why = last_error();
    return Status::errorf("cannot create a llama context for {} (n_ctx {}, n_seq {}){}{}", model.path(),
                          opt.n_ctx, opt.n_seq, why.empty() ? "" : ": ", why);
  }
  // Same pool llama.cpp's common attaches (hybrid polling), for like-for-like speed.
  if (ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
    auto* pool_new = (decltype(ggml_threadpool_new)*)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    auto* pool_free = (decltype(ggml_threadpool_free)*)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    if (pool_new && pool_free) {
      ggml_threadpool_params tpp = ggml_threadpool_params_default(c->opt_.n_threads);
      c->pool_ = pool_new(&tpp);
      c->pool_free_ = pool_free;
      if (c->pool_) llama_attach_threadpool(c->ctx_, c->pool_, nullptr);
    }
  }
  return c;
}

LlamaContext::~LlamaContext() {
  if (ctx_) {
    if (pool_) llama_detach_threadpool(ctx_);
    llama_free(ctx_);
  }
  if (pool_ && pool_free_) pool_free_(pool_);
}

void LlamaContext::clear_memory() { llama_memory_clear(llama_get_memory(ctx_), true); }

Status LlamaContext::decode(const llama_batch& batch) {
  clear_errors();
  const int rc = llama_decode(ctx_, batch);
  if (rc != 0) {
    std::string why = last_error();
    return Status::errorf("llama_decode failed (code {}, {} tokens){}{}", rc, batch.n_tokens,
                          why.empty() ? "" : ": ", why);
  }
  return Status::ok();
}

Batch::Batch(int capacity, int max_seq_per_token, int n_embd)
    : capacity_(capacity), max_seq_(max_seq_per_token), n_embd_(n_embd) {
  b_ = llama_batch_init(capacity, n_embd, max_seq_per_token);
}
Batch::~Batch() { llama_batch_free(b_); }

int Batch::add(llama_token tok, llama_pos pos, const llama_seq_id* seqs, int n_seqs, bool logits) {
  const int i = b_.n_tokens;
  if (i >= capacity_ || n_seqs > max_seq_ || n_seqs < 1) std::abort();  // caller sized the batch
  if (n_embd_ > 0) std::abort();  // an embedding batch takes rows (add_embd)
  b_.token[i] = tok;
  b_.pos[i] = pos;
  b_.n_seq_id[i] = n_seqs;
  for (int s = 0; s < n_seqs; ++s) b_.seq_id[i][s] = seqs[s];
  b_.logits[i] = logits ? 1 : 0;
  b_.n_tokens = i + 1;
  return i;
}

int Batch::add_embd(const float* row, llama_pos pos, llama_seq_id seq, bool logits) {
  const int i = b_.n_tokens;
  if (i >= capacity_ || n_embd_ <= 0) std::abort();  // caller sized the batch
  std::memcpy(b_.embd + size_t(i) * size_t(n_embd_), row, size_t(n_embd_) * sizeof(float));
  b_.pos[i] = pos;
  b_.n_seq_id[i] = 1;
  b_.seq_id[i][0] = seq;
  b_.logits[i] = logits ? 1 : 0;
  b_.n_tokens = i + 1;
  return i;
}

}  // namespace gm::llama
