#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "util/parallel.h"
#include "util/progress.h"

namespace gm::eval {
namespace {

// Decodes up to n_seq chunks at once (one sequence each) and exposes the logits of each
// chunk's positions n_ctx/2 .. n_ctx-1, exactly the outputs llama-perplexity requests.
class ChunkRunner {
 public:
  static Result<std::unique_ptr<ChunkRunner>> create(const llama::LlamaModel& model, const TextEvalOptions& opt) {
    std::unique_ptr<ChunkRunner> r(new ChunkRunner(model, opt));
    if ((opt.capture || opt.input) && (r->n_seq_ != 1 || opt.n_ubatch < opt.n_ctx))
      return Status::errorf("layer states need one chunk per decode and ubatch (batch {}, ubatch {}, ctx {})", opt.n_batch,
                            opt.n_ubatch, opt.n_ctx);
    if (opt.capture && (opt.capture->n_layer() != model.n_layer() || opt.capture->n_embd() != model.n_embd() ||
                        opt.capture->n_ctx() != opt.n_ctx))
      return Status::errorf("{}: its layers or width differ from the layer states it is to fill", model.path());
    if (opt.input) {
      const int b = opt.input_boundary;
      if (b < 1 || b >= opt.input->n_layer() || opt.input->n_layer() - b != model.n_layer() ||
          opt.input->n_embd() != model.n_embd() || opt.input->n_ctx() != opt.n_ctx)
        return Status::errorf("{} ({} layers) is not the layers from {} on of the {}-layer states", model.path(),
                              model.n_layer(), b, opt.input->n_layer());
    }
    llama::ContextOptions co;
    co.n_ctx = r->n_seq_ * r->n_ctx_;
    co.n_batch = r->n_batch_;
    co.n_ubatch = std::min(opt.n_ubatch, r->n_batch_);
    co.n_seq = r->n_seq_;
    co.n_threads = opt.n_threads;
    co.kv_unified = false;  // as llama-perplexity for perplexity/KLD
    if (opt.capture) {
      co.eval_cb = &ChunkRunner::capture_cb;
      co.eval_cb_data = r.get();
    }
    GAMMA_ASSIGN_OR_RETURN(r->ctx_, llama::LlamaContext::create(model, co));
    r->batch_ = std::make_unique<llama::Batch>(r->n_batch_, 1, opt.input ? int(model.n_embd()) : 0);
    return r;
  }

  int n_seq() const { return n_seq_; }

  // Chunks first_chunk .. first_chunk + n - 1 of the text (their indices name their layer states).
  Status run(const llama_token* const* chunks, int n, int first_chunk) {
    const int first = n_ctx_ / 2;
    const int num_batches = (n_ctx_ + n_batch_ - 1) / n_batch_;
    ctx_->clear_memory();
    multi_.clear();
    chunk_ = first_chunk;
    cap_error_.clear();
    for (int j = 0; j < num_batches; ++j) {
      const int batch_start = j * n_batch_;
      const int batch_size = std::min(n_ctx_ - batch_start, n_batch_);
      batch_->clear();
      int n_outputs = 0;
      for (int s = 0; s < n; ++s) {
        const float* states = input_ ? input_->at(input_boundary_, first_chunk + s) : nullptr;
        if (input_ && !states) return Status::errorf("no layer state at boundary {} for chunk {}", input_boundary_, first_chunk + s);
        for (int k = 0; k < batch_size; ++k) {
          const int pos = batch_start + k;
          const bool need = pos >= first;
          if (states) {
            batch_->add_embd(states + size_t(pos) * size_t(n_embd_), pos, s, need);
          } else {
            // BOS replaces the chunk's first token (llama-perplexity's "add BOS for each chunk").
            const llama_token tok = (pos == 0 && add_bos_) ? bos_ : chunks[s][pos];
            batch_->add(tok, pos, s, need);
          }
          n_outputs += need;
        }
      }
      GAMMA_RETURN_IF_ERROR(ctx_->decode(batch_->get()));
      if (!cap_error_.empty()) return Status::error(cap_error_);
      if (num_batches > 1 && n_outputs > 0) {
        const float* l = llama_get_logits(ctx_->get());
        multi_.insert(multi_.end(), l, l + size_t(n_outputs) * n_vocab_);
      }
    }
    base_ = num_batches > 1 ? multi_.data() : llama_get_logits(ctx_->get());
    return Status::ok();
  }

  // Logits row for position first + k of chunk s.
  const float* row(int s, int k) const {
    return base_ + (size_t(s) * size_t(n_ctx_ - n_ctx_ / 2) + size_t(k)) * size_t(n_vocab_);
  }

 private:
  ChunkRunner(const llama::LlamaModel& model, const TextEvalOptions& opt)
      : n_ctx_(opt.n_ctx),
        n_seq_(std::max(1, opt.n_batch / opt.n_ctx)),
        n_batch_(std::min(opt.n_batch, n_seq_ * opt.n_ctx)),
        n_vocab_(model.n_vocab()),
        n_embd_(model.n_embd()),
        add_bos_(model.add_bos()),
        bos_(model.bos()),
        capture_(opt.capture),
        input_(opt.input),
        input_boundary_(opt.input_boundary) {}

  // The eval callback of a capturing run: l_out-N, the output of layer N, is boundary N + 1 of the
  // chunk being decoded (one chunk, one ubatch: its n_ctx rows in position order). The last
  // layer's is not kept (it holds only the scored rows, and no file starts after it).
  static bool capture_cb(ggml_tensor* t, bool ask, void* user) {
    auto* self = static_cast<ChunkRunner*>(user);
    if (std::strncmp(t->name, "l_out-", 6) != 0) return !ask;
    const int boundary = std::atoi(t->name + 6) + 1;
    float* dst = self->capture_->at(boundary, self->chunk_);
    if (ask) return dst != nullptr;
    if (!dst) return true;
    if (t->type != GGML_TYPE_F32 || t->ne[0] != self->n_embd_ || t->ne[1] != self->n_ctx_ || !ggml_is_contiguous(t)) {
      self->cap_error_ = std::string("unexpected shape or type of the captured tensor ") + t->name;
      return true;
    }
    ggml_backend_tensor_get(t, dst, 0, size_t(self->n_ctx_) * size_t(self->n_embd_) * sizeof(float));
    self->capture_->mark(boundary, self->chunk_);
    return true;
  }

  int n_ctx_, n_seq_, n_batch_, n_vocab_;
  int64_t n_embd_;
  bool add_bos_;
  llama_token bos_;
  LayerStates* capture_;
  const LayerStates* input_;
  int input_boundary_;
  int chunk_ = 0;
  std::string cap_error_;
  std::unique_ptr<llama::LlamaContext> ctx_;
  std::unique_ptr<llama::Batch> batch_;
  std::vector<float> multi_;  // logits gathered over several decodes when n_batch < n_ctx
  const float* base_ = nullptr;
};

std::pair<double, double> mean_and_uncertainty(double sum, double sum2, size_t count) {
  if (count < 1) return {0., 0.};
  double f = sum / count;
  double df = sum2 / count - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / (count - 1)) : 0.;
  return {f, df};
}

double covariance(double suma, double sumb, double sumab, size_t count) {
  if (count < 10) return 0.0;
  double var = sumab / count - (suma / count) * (sumb / count);
  var /= count - 1;
  return var;
}

// llama-perplexity's interpolated percentile (float arithmetic on purpose).
float percentile(const std::vector<float>& values, float fraction) {
  if (values.empty()) return 0;
  if (fraction <= 0) return values.front();
  if (fraction >= 1) return values.back();
  float p = fraction * (values.size() - 1);
  size_t ip = size_t(p);
  p -= ip;
  return (1 - p) * values[ip] + p * values[std::min(ip + 1, values.size() - 1)];
}

float median(const std::vector<float>& v) {
  if (v.empty()) return 0;
  return v.size() % 2 == 0 ? 0.5f * (v[v.size() / 2] + v[v.size() / 2 - 1]) : v[v.size() / 2];
}

}  // namespace

Result<int> chunks_for(size_t n_tokens, int n_ctx, int requested) {
  if (n_ctx < 8) return Status::errorf("--ctx {} is too small (minimum 8)", n_ctx);
  if (n_tokens < size_t(2) * n_ctx)
    return Status::errorf("the text tokenizes to {} tokens; a context of {} needs at least {}", n_tokens, n_ctx,
                          2 * n_ctx);
  const size_t max_chunks = n_tokens / size_t(n_ctx);
  if (requested == 0) return Status::error("--chunks must be positive");
  if (requested > 0 && size_t(requested) > max_chunks)
    return Status::errorf("--chunks {} asks for more than the text holds: {} tokens make {} chunks of {}", requested,
                          n_tokens, max_chunks, n_ctx);
  return requested > 0 ? requested : int(std::min<size_t>(max_chunks, size_t(INT32_MAX)));
}

PplStats ppl_stats(double nll, double nll2, uint64_t count) {
  PplStats s;
  s.n_scored = count;
  if (count == 0) return s;
  nll2 /= count;
  nll /= count;
  s.nll_mean = nll;
  s.ppl = std::exp(nll);
  nll2 -= nll * nll;
  if (nll2 > 0 && count > 1) s.nll_stderr = std::sqrt(nll2 / (count - 1));
  s.ppl_stderr = s.nll_stderr * s.ppl;
  return s;
}

KldStats kld_stats(const KldAccum& kld, std::vector<float> kld_values, std::vector<float> p_diff_values) {
  KldStats r;
  r.count = kld.count;
  if (kld.count == 0) return r;
  std::sort(kld_values.begin(), kld_values.end());
  std::sort(p_diff_values.begin(), p_diff_values.end());

  auto log_ppl = mean_and_uncertainty(kld.sum_nll, kld.sum_nll2, kld.count);
  r.ppl_q = std::exp(log_ppl.first);
  r.ppl_q_stderr = r.ppl_q * log_ppl.second;
  auto log_ppl_base = mean_and_uncertainty(kld.sum_nll_base, kld.sum_nll_base2, kld.count);
  r.ppl_base = std::exp(log_ppl_base.first);
  r.ppl_base_stderr = r.ppl_base * log_ppl_base.second;
  const double log_ppl_cov = covariance(kld.sum_nll, kld.sum_nll_base, kld.sum_nll_nll_base, kld.count);
  const double denom = log_ppl.second * log_ppl_base.second;
  r.ln_ppl_cor = denom > 0 ? log_ppl_cov / denom : 0;
  r.ln_ppl_ratio = log_ppl.first - log_ppl_base.first;
  const double v = log_ppl.second * log_ppl.second + log_ppl_base.second * log_ppl_base.second - 2.0 * log_ppl_cov;
  r.ln_ppl_ratio_stderr = v > 0 ? std::sqrt(v) : 0;
  r.ppl_ratio = std::exp(r.ln_ppl_ratio);
  r.ppl_ratio_stderr = r.ppl_ratio * r.ln_ppl_ratio_stderr;
  const double ppl_cov = r.ppl_q * r.ppl_base * log_ppl_cov;
  r.ppl_diff = r.ppl_q - r.ppl_base;
  const double vd = r.ppl_q_stderr * r.ppl_q_stderr + r.ppl_base_stderr * r.ppl_base_stderr - 2.0 * ppl_cov;
  r.ppl_diff_stderr = vd > 0 ? std::sqrt(vd) : 0;

  auto kl_div = mean_and_uncertainty(kld.sum_kld, kld.sum_kld2, kld.count);
  r.kld_mean = kl_div.first;
  r.kld_stderr = kl_div.second;
  r.kld_max = kld_values.back();
  r.kld_p999 = percentile(kld_values, 0.999f);
  r.kld_p99 = percentile(kld_values, 0.990f);
  r.kld_p95 = percentile(kld_values, 0.950f);
  r.kld_p90 = percentile(kld_values, 0.900f);
  r.kld_median = median(kld_values);
  r.kld_p10 = percentile(kld_values, 0.100f);
  r.kld_p5 = percentile(kld_values, 0.050f);
  r.kld_p1 = percentile(kld_values, 0.010f);
  r.kld_p01 = percentile(kld_values, 0.001f);
  r.kld_min = kld_values.front();

  auto p_diff = mean_and_uncertainty(kld.sum_p_diff, kld.sum_p_diff2, kld.count);
  r.dp_mean = p_diff.first;
  r.dp_stderr = p_diff.second;
  r.dp_max = p_diff_values.back();
  r.dp_p999 = percentile(p_diff_values, 0.999f);
  r.dp_p99 = percentile(p_diff_values, 0.990f);
  r.dp_p95 = percentile(p_diff_values, 0.950f);
  r.dp_p90 = percentile(p_diff_values, 0.900f);
  r.dp_p75 = percentile(p_diff_values, 0.750f);
  r.dp_median = median(p_diff_values);
  r.dp_p25 = percentile(p_diff_values, 0.250f);
  r.dp_p10 = percentile(p_diff_values, 0.100f);
  r.dp_p5 = percentile(p_diff_values, 0.050f);
  r.dp_p1 = percentile(p_diff_values, 0.010f);
  r.dp_p01 = percentile(p_diff_values, 0.001f);
  r.dp_min = p_diff_values.front();
  auto p_diff_mse = mean_and_uncertainty(kld.sum_p_diff2, kld.sum_p_diff4, kld.count);
  r.dp_rms = std::sqrt(p_diff_mse.first);
  r.dp_rms_stderr = r.dp_rms > 0 ? 0.5 / r.dp_rms * p_diff_mse.second : 0;

  r.top1 = 1.0 * kld.n_same_top / kld.count;
  r.top1_stderr = kld.count > 1 ? std::sqrt(r.top1 * (1.0 - r.top1) / (kld.count - 1)) : 0;
  return r;
}

Result<TextEvalResult> eval_text(const llama::LlamaModel& model, const std::vector<llama_token>& tokens, int n_chunks,
                                 const TextEvalOptions& opt, const BaseSource* base, Progress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n_ctx = opt.n_ctx;
  if (n_chunks < 1 || tokens.size() < size_t(n_chunks) * n_ctx)
    return Status::errorf("{} chunks of {} need {} tokens, have {}", n_chunks, n_ctx, size_t(n_chunks) * n_ctx,
                          tokens.size());
  const bool kl = base && (base->reader || base->teacher);
  const llama::LlamaModel* teacher = kl ? base->teacher : nullptr;
  const int n_vocab = model.n_vocab();
  if (teacher && teacher->n_vocab() != n_vocab)
    return Status::errorf("vocabulary mismatch: {} has {} tokens, teacher {} has {}", model.path(), n_vocab,
                          teacher->path(), teacher->n_vocab());
  if (base && base->reader) {
    const auto& in = base->reader->info();
    if (in.n_vocab != n_vocab)
      return Status::errorf("vocabulary mismatch: {} has {} tokens, the log-prob file {}", model.path(), n_vocab,
                            in.n_vocab);
    if (int(in.n_ctx) != n_ctx) return Status::errorf("log-prob file has n_ctx {}, not {}", in.n_ctx, n_ctx);
  }
  for (size_t i = 0; i < size_t(n_chunks) * n_ctx; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab) return Status::errorf("token id {} outside the vocabulary", tokens[i]);

  const int threads = resolve_threads(opt.n_threads);
  GAMMA_ASSIGN_OR_RETURN(auto student, ChunkRunner::create(model, opt));
  std::unique_ptr<ChunkRunner> teach;
  if (teacher) {
    TextEvalOptions topt = opt;  // the teacher runs from tokens and keeps no states
    topt.capture = nullptr, topt.input = nullptr, topt.input_boundary = 0;
    GAMMA_ASSIGN_OR_RETURN(teach, ChunkRunner::create(*teacher, topt));
  }

  const int n_seq = student->n_seq();
  const int first = n_ctx / 2;
  const int scored = scored_per_chunk(n_ctx);
  const size_t nv = size_t(logprob_row_len(n_vocab));
  std::vector<uint16_t> base_rows(kl ? size_t(n_seq) * scored * nv : 0);
  std::vector<double> nll(size_t(n_seq) * scored);
  std::vector<KldAccum> acc_rows(kl ? size_t(n_seq) * scored : 0);
  std::vector<float> kld_values(kl ? size_t(n_chunks) * scored : 0), p_diff_values(kld_values.size());

  double sum_nll = 0, sum_nll2 = 0;
  uint64_t count = 0;
  KldAccum kld;
  std::vector<const llama_token*> ptrs(n_seq);

  for (int i = 0; i < n_chunks; i += n_seq) {
    const int n = std::min(n_seq, n_chunks - i);
    const int64_t n_rows = int64_t(n) * scored;
    for (int s = 0; s < n; ++s) ptrs[s] = tokens.data() + size_t(i + s) * n_ctx;
    auto tok_at = [&](int64_t r) { return ptrs[r / scored][first + r % scored + 1]; };

    if (kl && base->reader) {
      for (int s = 0; s < n; ++s)
        GAMMA_RETURN_IF_ERROR(base->reader->read_chunk(base_rows.data() + size_t(s) * scored * nv));
    } else if (teacher) {
      GAMMA_RETURN_IF_ERROR(teach->run(ptrs.data(), n, i));
      parallel_for(n_rows, threads, 4, [&](int64_t r, int) {
        quantize_row(n_vocab, teach->row(int(r / scored), int(r % scored)), base_rows.data() + size_t(r) * nv,
                     tok_at(r));
      });
      if (base->writer)
        for (int s = 0; s < n; ++s)
          GAMMA_RETURN_IF_ERROR(base->writer->write_chunk(base_rows.data() + size_t(s) * scored * nv));
    }

    GAMMA_RETURN_IF_ERROR(student->run(ptrs.data(), n, i));
    const size_t off = size_t(i) * scored;
    if (kl) {
      parallel_for(n_rows, threads, 4, [&](int64_t r, int) {
        acc_rows[r] = KldAccum();
        auto v = compare_row(n_vocab, student->row(int(r / scored), int(r % scored)),
                             base_rows.data() + size_t(r) * nv, tok_at(r), acc_rows[r]);
        kld_values[off + r] = float(v.first);
        p_diff_values[off + r] = v.second;
      });
      // Merge in row order so results do not depend on thread scheduling.
      for (int64_t r = 0; r < n_rows; ++r) kld.merge(acc_rows[r]);
    } else {
      parallel_for(n_rows, threads, 4, [&](int64_t r, int) {
        nll[r] = row_nll(n_vocab, student->row(int(r / scored), int(r % scored)), tok_at(r));
      });
      for (int64_t r = 0; r < n_rows; ++r) {
        sum_nll += nll[r];
        sum_nll2 += nll[r] * nll[r];
      }
      count += uint64_t(n_rows);
    }
    if (progress) {
      const double ppl = kl ? std::exp(kld.sum_nll / double(kld.count)) : std::exp(sum_nll / double(count));
      std::string extra = fmt::format("PPL {:.4f}", ppl);
      if (kl) extra += fmt::format(" KLD {:.5f}", kld.sum_kld / double(kld.count));
      progress->update(i + n, extra);
    }
  }

  if (opt.capture && opt.capture->n_chunks() == n_chunks && !opt.capture->complete())
    return Status::errorf("{}: libllama's graph named no l_out of some layer; its states were not kept", model.path());
  TextEvalResult res;
  res.n_chunks = n_chunks;
  if (kl) {
    std::vector<double> chunk_means(size_t(n_chunks), 0.0);
    for (size_t v = 0; v < kld_values.size(); ++v) chunk_means[v / size_t(scored)] += kld_values[v] / double(scored);
    res.kld = kld_stats(kld, std::move(kld_values), std::move(p_diff_values));
    res.kld->chunk_means = std::move(chunk_means);
    // In a KL pass llama-perplexity's PPL(Q) comes from the same rows; report that figure.
    res.ppl.ppl = res.kld->ppl_q;
    res.ppl.ppl_stderr = res.kld->ppl_q_stderr;
    auto m = mean_and_uncertainty(kld.sum_nll, kld.sum_nll2, kld.count);
    res.ppl.nll_mean = m.first;
    res.ppl.nll_stderr = m.second;
    res.ppl.n_scored = kld.count;
  } else {
    res.ppl = ppl_stats(sum_nll, sum_nll2, count);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace gm::eval
