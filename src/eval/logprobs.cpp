#include "eval/logprobs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace gm::eval {
namespace {

// llama-perplexity's rounding (valid for |x| < 2^22, which q in [0, 65535] satisfies).
inline int nearest_int(float fval) {
  float val = fval + 12582912.f;
  int i;
  std::memcpy(&i, &val, sizeof(int));
  return (i & 0x007fffff) - 0x00400000;
}

const char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

}  // namespace

double row_nll(int n_vocab, const float* logits, int tok) {
  float max_logit = logits[0];
  for (int i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
  return -(logits[tok] - max_logit - log(sum_exp));
}

double quantize_row(int n_vocab, const float* logits, uint16_t* log_prob, int tok) {
  float max_logit = logits[0];
  float min_logit = logits[0];
  for (int i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = log(sum_exp);
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(log_prob, &scale, sizeof(float));
  std::memcpy(log_prob + 2, &min_log_prob, sizeof(float));
  log_prob += 4;
  if (scale) {
    const float inv_scale = 1 / scale;
    for (int i = 0; i < n_vocab; ++i)
      log_prob[i] = logits[i] > min_logit ? uint16_t(nearest_int(inv_scale * (logits[i] - min_logit))) : 0;
  } else {
    std::memset(log_prob, 0, size_t(n_vocab) * sizeof(uint16_t));
  }
  if (n_vocab % 2) log_prob[n_vocab] = 0;  // padding: keep the file deterministic
  return max_logit + log_sum_exp - logits[tok];
}

void KldAccum::merge(const KldAccum& o) {
  sum_nll += o.sum_nll;
  sum_nll2 += o.sum_nll2;
  sum_nll_base += o.sum_nll_base;
  sum_nll_base2 += o.sum_nll_base2;
  sum_nll_nll_base += o.sum_nll_nll_base;
  sum_kld += o.sum_kld;
  sum_kld2 += o.sum_kld2;
  sum_p_diff += o.sum_p_diff;
  sum_p_diff2 += o.sum_p_diff2;
  sum_p_diff4 += o.sum_p_diff4;
  max_p_diff = std::max(max_p_diff, o.max_p_diff);
  n_same_top += o.n_same_top;
  count += o.count;
}

std::pair<double, float> compare_row(int n_vocab, const float* logits, const uint16_t* base_log_prob, int tok,
                                     KldAccum& kld) {
  float max_logit = logits[0];
  int imax = 0;
  for (int i = 1; i < n_vocab; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  }
  double sum_exp = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = log(sum_exp);
  float scale, min_log_prob;
  std::memcpy(&scale, base_log_prob, sizeof(float));
  std::memcpy(&min_log_prob, base_log_prob + 2, sizeof(float));
  base_log_prob += 4;

  const float nll = max_logit + log_sum_exp - logits[tok];
  kld.sum_nll += nll;
  kld.sum_nll2 += nll * nll;

  const float nll_base = -(scale * base_log_prob[tok] + min_log_prob);
  kld.sum_nll_base += nll_base;
  kld.sum_nll_base2 += nll_base * nll_base;
  kld.sum_nll_nll_base += nll * nll_base;

  max_logit += log_sum_exp;
  double sum = 0;
  int imax_base = -1;
  float p_log_base_max = 0;
  for (int i = 0; i < n_vocab; ++i) {
    const float p_log_base = scale * base_log_prob[i] + min_log_prob;
    if (i == 0 || p_log_base > p_log_base_max) {
      p_log_base_max = p_log_base;
      imax_base = i;
    }
    if (p_log_base > -16.f) {
      const float p_base = expf(p_log_base);
      sum += p_base * (p_log_base - logits[i] + max_logit);
    }
  }
  kld.sum_kld += sum;
  kld.sum_kld2 += sum * sum;
  ++kld.count;
  if (imax == imax_base) ++kld.n_same_top;

  const float p_base = expf(-nll_base);
  const float p = expf(-nll);
  const float p_diff = p - p_base;
  kld.sum_p_diff += p_diff;
  const double p_diff2 = p_diff * p_diff;
  kld.sum_p_diff2 += p_diff2;
  kld.sum_p_diff4 += p_diff2 * p_diff2;
  kld.max_p_diff = std::max(kld.max_p_diff, std::fabs(p_diff));
  return {sum, p_diff};
}

// ---------------------------------------------------------------- reader

Result<std::unique_ptr<LogprobReader>> LogprobReader::open(const std::string& path) {
  std::unique_ptr<LogprobReader> r(new LogprobReader());
  r->path_ = path;
  r->f_ = std::fopen(path.c_str(), "rb");
  if (!r->f_) return Status::errorf("cannot read log-prob file {}: {}", path, std::strerror(errno));
  char magic[8];
  LogprobFileInfo& in = r->info_;
  if (std::fread(magic, 1, 8, r->f_) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    return Status::errorf("{} is not a llama-perplexity log-prob file (bad magic)", path);
  if (std::fread(&in.n_ctx, 4, 1, r->f_) != 1 || std::fread(&in.n_vocab, 4, 1, r->f_) != 1 ||
      std::fread(&in.n_chunk, 4, 1, r->f_) != 1)
    return Status::errorf("{}: truncated header", path);
  if (in.n_ctx < 4 || in.n_ctx > (1u << 24) || in.n_vocab < 2 || in.n_chunk < 1)
    return Status::errorf("{}: implausible header (n_ctx {}, n_vocab {}, n_chunk {})", path, in.n_ctx, in.n_vocab,
                          in.n_chunk);
  const uint64_t n_tok = uint64_t(in.n_ctx) * uint64_t(in.n_chunk);
  const uint64_t expect = 20 + 4 * n_tok +
                          uint64_t(in.n_chunk) * scored_per_chunk(int(in.n_ctx)) * logprob_row_len(in.n_vocab) * 2;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::errorf("cannot stat {}", path);
  if (uint64_t(st.st_size) != expect)
    return Status::errorf("{}: size {} bytes, header implies {} (truncated or not a log-prob file)", path,
                          uint64_t(st.st_size), expect);
  in.tokens.resize(n_tok);
  if (std::fread(in.tokens.data(), 4, n_tok, r->f_) != n_tok) return Status::errorf("{}: truncated tokens", path);
  for (llama_token t : in.tokens)
    if (t < 0 || t >= in.n_vocab) return Status::errorf("{}: token id {} outside the vocabulary", path, t);
  return r;
}

LogprobReader::~LogprobReader() {
  if (f_) std::fclose(f_);
}

Status LogprobReader::read_chunk(uint16_t* dst) {
  if (next_chunk_ >= info_.n_chunk) return Status::errorf("{}: read past the last chunk", path_);
  const size_t n = size_t(scored_per_chunk(int(info_.n_ctx))) * logprob_row_len(info_.n_vocab);
  if (std::fread(dst, 2, n, f_) != n) return Status::errorf("{}: truncated at chunk {}", path_, next_chunk_);
  ++next_chunk_;
  return Status::ok();
}

// ---------------------------------------------------------------- writer

Result<std::unique_ptr<LogprobWriter>> LogprobWriter::create(const std::string& path, const LogprobFileInfo& info) {
  if (info.tokens.size() != size_t(info.n_ctx) * size_t(info.n_chunk))
    return Status::error("log-prob writer: token count does not match n_ctx * n_chunk");
  std::unique_ptr<LogprobWriter> w(new LogprobWriter());
  w->path_ = path;
  w->info_ = info;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (!w->f_) return Status::errorf("cannot write {}: {}", path, std::strerror(errno));
  bool ok = std::fwrite(kMagic, 1, 8, w->f_) == 8 && std::fwrite(&info.n_ctx, 4, 1, w->f_) == 1 &&
            std::fwrite(&info.n_vocab, 4, 1, w->f_) == 1 && std::fwrite(&info.n_chunk, 4, 1, w->f_) == 1 &&
            std::fwrite(info.tokens.data(), 4, info.tokens.size(), w->f_) == info.tokens.size();
  if (!ok) return Status::errorf("cannot write {}: {}", path, std::strerror(errno));
  return w;
}

LogprobWriter::~LogprobWriter() {
  if (f_) std::fclose(f_);
}

Status LogprobWriter::write_chunk(const uint16_t* rows) {
  const size_t n = size_t(scored_per_chunk(int(info_.n_ctx))) * logprob_row_len(info_.n_vocab);
  if (std::fwrite(rows, 2, n, f_) != n) return Status::errorf("cannot write {}: {}", path_, std::strerror(errno));
  ++written_;
  return Status::ok();
}

Status LogprobWriter::close() {
  if (!f_) return Status::ok();
  const bool ok = std::fflush(f_) == 0;
  const int err = errno;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok) return Status::errorf("cannot write {}: {}", path_, std::strerror(err));
  if (written_ != info_.n_chunk)
    return Status::errorf("{}: {} of {} chunks written", path_, written_, info_.n_chunk);
  return Status::ok();
}

}  // namespace gm::eval
