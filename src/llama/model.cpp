#include "llama/model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "llama/backend.h"
#include "llama/log.h"
#include "util/files.h"

namespace gm::llama {
namespace {

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

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path, bool vocab_only) {
  GAMMA_RETURN_IF_ERROR(check_readable(path, "model"));
  llama_model_params mp = model_params();  // init()s the backend and the log sink
  mp.vocab_only = vocab_only;
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->path_ = path;
  clear_errors();
  m->model_ = llama_model_load_from_file(path.c_str(), mp);
  if (!m->model_) {
    std::string why = last_error();
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
int LlamaModel::n_layer() const { return llama_model_n_layer(model_); }
int64_t LlamaModel::n_embd() const { return llama_model_n_embd(model_); }
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

}  // namespace gm::llama
