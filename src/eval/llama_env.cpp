#include "eval/llama_env.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama/backend.h"
#include "util/files.h"
#include "util/threads.h"

namespace gm::eval {
namespace {

std::mutex g_log_mutex;
std::vector<std::string> g_errors;  // ERROR messages since the last clear_llama_errors()
bool g_in_error = false;

// Keeps ERROR messages (which may arrive in CONT pieces); drops everything else.
void log_sink(ggml_log_level level, const char* text, void*) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  if (level == GGML_LOG_LEVEL_ERROR) {
    if (g_errors.size() >= 16) g_errors.erase(g_errors.begin());
    g_errors.emplace_back(text ? text : "");
    g_in_error = true;
  } else if (level == GGML_LOG_LEVEL_CONT && g_in_error && !g_errors.empty()) {
    g_errors.back() += text ? text : "";
  } else {
    g_in_error = false;
  }
}

void clear_llama_errors() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_errors.clear();
}

Status check_readable(const std::string& path, const char* what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::errorf("cannot read {} {}: {}", what, path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Status::errorf("cannot read {} {}: is a directory", what, path);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::errorf("cannot read {} {}: {}", what, path, std::strerror(errno));
  std::fclose(f);
  return Status::ok();
}

}  // namespace

void init_llama() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(log_sink, nullptr);
    gm::llama::init();
  });
  // Re-assert on every call: another component may have installed its own sink.
  llama_log_set(log_sink, nullptr);
}

std::string llama_last_error() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  // The first message usually names the cause (e.g. "invalid magic"), the last the failing call.
  std::string e;
  for (size_t i = 0; i < g_errors.size(); ++i) {
    if (g_errors.size() > 2 && i != 0 && i + 1 != g_errors.size()) continue;
    std::string m = g_errors[i];
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (m.empty()) continue;
    if (!e.empty()) e += "; ";
    e += m;
  }
  for (char& c : e)
    if (c == '\n') c = ' ';  // keep it one line
  return e;
}

// ---------------------------------------------------------------- model

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path, bool vocab_only) {
  GAMMA_RETURN_IF_ERROR(check_readable(path, "model"));
  init_llama();
  llama_model_params mp = gm::llama::model_params();
  mp.vocab_only = vocab_only;
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->path_ = path;
  clear_llama_errors();
  m->model_ = llama_model_load_from_file(path.c_str(), mp);
  if (!m->model_) {
    std::string why = llama_last_error();
    return Status::errorf("cannot load model {}{}{}", path, why.empty() ? "" : ": ", why);
  }
  m->vocab_ = llama_model_get_vocab(m->model_);
  if (llama_vocab_n_tokens(m->vocab_) <= 0) return Status::errorf("model {} has no vocabulary", path);
  return m;
}

LlamaModel::~LlamaModel() {
  if (model_) llama_model_free(model_);
}

int LlamaModel::n_vocab() const { return llama_vocab_n_tokens(vocab_); }
bool LlamaModel::add_bos() const { return llama_vocab_get_add_bos(vocab_); }
llama_token LlamaModel::bos() const { return llama_vocab_bos(vocab_); }
uint64_t LlamaModel::n_params() const { return llama_model_n_params(model_); }
uint64_t LlamaModel::tensor_bytes() const { return llama_model_size(model_); }
int LlamaModel::n_ctx_train() const { return llama_model_n_ctx_train(model_); }

std::string LlamaModel::desc() const {
  char buf[256];
  llama_model_desc(model_, buf, sizeof buf);
  return buf;
}

std::string LlamaModel::vocab_fingerprint() const {
  std::string all = std::to_string(int(llama_vocab_type(vocab_))) + "\n";
  const int n = n_vocab();
  for (int i = 0; i < n; ++i) {
    const char* t = llama_vocab_get_text(vocab_, i);
    all += t ? t : "";
    all.push_back('\0');
  }
  return sha256_hex(all.data(), all.size());
}

int LlamaModel::first_vocab_difference(const LlamaModel& other) const {
  const int n = std::min(n_vocab(), other.n_vocab());
  for (int i = 0; i < n; ++i) {
    const char* a = llama_vocab_get_text(vocab_, i);
    const char* b = llama_vocab_get_text(other.vocab_, i);
    if (std::strcmp(a ? a : "", b ? b : "") != 0) return i;
  }
  return n_vocab() == other.n_vocab() ? -1 : n;
}

Result<std::vector<llama_token>> LlamaModel::tokenize(const std::string& text, bool add_special) const {
  if (text.size() > size_t(INT_MAX) / 2) return Status::error("text too large to tokenize (over 1 GiB)");
  std::vector<llama_token> out(text.size() + 2 * (add_special ? 1 : 0) + 1);
  int n = llama_tokenize(vocab_, text.data(), int(text.size()), out.data(), int(out.size()), add_special,
                         /*parse_special=*/false);
  if (n < 0) {
    out.resize(size_t(-n));
    n = llama_tokenize(vocab_, text.data(), int(text.size()), out.data(), int(out.size()), add_special, false);
  }
  if (n < 0) return Status::errorf("tokenization failed for {}", path_);
  out.resize(size_t(n));
  return out;
}

// ---------------------------------------------------------------- context

Result<std::unique_ptr<LlamaContext>> LlamaContext::create(const LlamaModel& model, const ContextOptions& opt) {
  init_llama();
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
  cp.no_perf = true;
  clear_llama_errors();
  c->ctx_ = llama_init_from_model(model.get(), cp);
  if (!c->ctx_) {
    std::string why = llama_last_error();
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
  clear_llama_errors();
  const int rc = llama_decode(ctx_, batch);
  if (rc != 0) {
    std::string why = llama_last_error();
    return Status::errorf("llama_decode failed (code {}, {} tokens){}{}", rc, batch.n_tokens,
                          why.empty() ? "" : ": ", why);
  }
  return Status::ok();
}

// ---------------------------------------------------------------- batch

Batch::Batch(int capacity, int max_seq_per_token) : capacity_(capacity), max_seq_(max_seq_per_token) {
  b_ = llama_batch_init(capacity, 0, max_seq_per_token);
}
Batch::~Batch() { llama_batch_free(b_); }

int Batch::add(llama_token tok, llama_pos pos, const llama_seq_id* seqs, int n_seqs, bool logits) {
  const int i = b_.n_tokens;
  if (i >= capacity_ || n_seqs > max_seq_ || n_seqs < 1) std::abort();  // caller sized the batch
  b_.token[i] = tok;
  b_.pos[i] = pos;
  b_.n_seq_id[i] = n_seqs;
  for (int s = 0; s < n_seqs; ++s) b_.seq_id[i][s] = seqs[s];
  b_.logits[i] = logits ? 1 : 0;
  b_.n_tokens = i + 1;
  return i;
}

}  // namespace gm::eval
