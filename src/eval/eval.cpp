#include "eval/eval.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "eval/logprobs.h"
#include "eval/perplexity.h"
#include "eval/tasks.h"
#include "llama/backend.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/threads.h"

namespace gm::eval {
namespace {

// After writing a cache, keep as much again free, up to 1 GiB: a 1 GB cache must not fill the
// disk the pool writes to, and a 1 MB one must not be refused on a disk with 900 MB free.
constexpr uint64_t kMaxDiskReserve = 1ull << 30;

bool disk_fits(const std::string& dir, uint64_t bytes) {
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) return false;
  return uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize) > bytes + std::min(bytes, kMaxDiskReserve);
}

uint64_t logprob_file_bytes(int n_ctx, int n_vocab, int n_chunks) {
  return 20 + 4ull * n_ctx * n_chunks + uint64_t(n_chunks) * scored_per_chunk(n_ctx) * logprob_row_len(n_vocab) * 2;
}

Status check_same_vocab(const llama::LlamaModel& student, const llama::LlamaModel& teacher) {
  if (student.n_vocab() != teacher.n_vocab())
    return Status::errorf("vocabulary mismatch: {} has {} tokens, teacher {} has {}", student.path(),
                          student.n_vocab(), teacher.path(), teacher.n_vocab());
  const int d = student.first_vocab_difference(teacher);
  if (d >= 0)
    return Status::errorf("vocabulary mismatch between {} and teacher {}: token {} is '{}' vs '{}'", student.path(),
                          teacher.path(), d, llama_vocab_get_text(student.vocab(), d),
                          llama_vocab_get_text(teacher.vocab(), d));
  if (student.add_bos() != teacher.add_bos())
    return Status::errorf("{} and teacher {} disagree on adding BOS", student.path(), teacher.path());
  return Status::ok();
}

// Reads and tokenizes the text as llama-perplexity's -f does (one trailing newline dropped).
Result<std::vector<llama_token>> tokenize_text(const llama::LlamaModel& model, const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(std::string text, read_text_file(path, "text file"));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty()) return Status::errorf("text file {} is empty", path);
  return model.tokenize(text, true);
}

bool same_prefix(const std::vector<llama_token>& a, const std::vector<llama_token>& b, size_t n) {
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + n, b.begin());
}

EvalResult::Model model_result(const llama::LlamaModel& m, const std::string& sha, uint64_t file_bytes) {
  EvalResult::Model r;
  r.path = m.path();
  r.sha256 = sha;
  r.file_bytes = file_bytes;
  r.desc = m.desc();
  r.n_params = m.n_params();
  r.tensor_bytes = m.tensor_bytes();
  r.bpw = m.n_params() ? 8.0 * double(m.tensor_bytes()) / double(m.n_params()) : 0.0;
  r.n_vocab = uint64_t(m.n_vocab());
  return r;
}

EvalResult::Kld kld_result(const KldStats& k) {
  EvalResult::Kld r;
  r.tokens = k.count;
  r.mean = k.kld_mean, r.mean_stderr = k.kld_stderr, r.median = k.kld_median;
  r.p90 = k.kld_p90, r.p95 = k.kld_p95, r.p99 = k.kld_p99, r.p99_9 = k.kld_p999, r.max = k.kld_max, r.min = k.kld_min;
  r.top1 = k.top1, r.top1_stderr = k.top1_stderr;
  if (!k.chunk_means.empty()) r.chunk_means = k.chunk_means;
  r.delta_p = {k.dp_mean, k.dp_stderr, k.dp_rms, k.dp_rms_stderr, k.dp_median, k.dp_p1, k.dp_p99, k.dp_min, k.dp_max};
  r.ppl = k.ppl_q, r.ppl_stderr = k.ppl_q_stderr, r.ppl_base = k.ppl_base, r.ppl_base_stderr = k.ppl_base_stderr;
  r.ln_ppl_ratio = k.ln_ppl_ratio, r.ln_ppl_ratio_stderr = k.ln_ppl_ratio_stderr;
  r.ppl_ratio = k.ppl_ratio, r.ppl_ratio_stderr = k.ppl_ratio_stderr;
  r.ppl_diff = k.ppl_diff, r.ppl_diff_stderr = k.ppl_diff_stderr, r.ln_ppl_correlation = k.ln_ppl_cor;
  return r;
}

Result<EvalResult::Teacher> teacher_result(const std::string& path, const std::string& sha) {
  GAMMA_ASSIGN_OR_RETURN(uint64_t bytes, file_size(path));
  return EvalResult::Teacher{path, sha, bytes};
}

}  // namespace

std::string teacher_cache_path(const std::string& teacher_sha, const std::string& text_sha, int n_ctx, int n_batch,
                               int n_ubatch) {
  // Effective sizes, as ChunkRunner derives them.
  const int n_seq = std::max(1, n_batch / n_ctx);
  n_batch = std::min(n_batch, n_seq * n_ctx);
  n_ubatch = std::min(n_ubatch, n_batch);
  const std::string key =
      fmt::format("gamma-kld-base-v1\n{}\n{}\n{}\n{}\n{}\n", teacher_sha, text_sha, n_ctx, n_batch, n_ubatch);
  const std::string dir = cache_dir() + "/eval";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return dir + "/kld-base-" + sha256_hex(key.data(), key.size()).substr(0, 32) + ".logits";
}

// Perplexity, and KLD against the teacher when there is one: the teacher's log-probs come
// from an existing base file (--kld-base), gamma's cache, or the teacher run side by side
// (and written to the base file or the cache when there is room).
Status eval_text_part(const EvalRequest& req, const llama::LlamaModel& model_ref, LogprobReader* reader, EvalResult* out_result) {
  EvalResult& out = *out_result;
  EvalResult::Settings& settings = out.settings;
  const llama::LlamaModel* model = &model_ref;
  TextEvalOptions opt;
  opt.n_batch = req.n_batch;
  opt.n_ubatch = req.n_ubatch;
  opt.n_threads = req.n_threads;
  opt.n_ctx = req.n_ctx > 0 ? req.n_ctx : 512;
  opt.capture = req.capture;
  opt.input = req.input;
  opt.input_boundary = req.input_boundary;
  std::vector<llama_token> tokens;
  std::string text_sha;
  size_t text_tokens = 0;
  if (!req.text.empty()) {
    GAMMA_ASSIGN_OR_RETURN(tokens, tokenize_text(*model, req.text));
    text_tokens = tokens.size();
    GAMMA_ASSIGN_OR_RETURN(text_sha, sha256_file(req.text));
  }
  int n_chunks = 0;
  BaseSource base;
  std::unique_ptr<llama::LlamaModel> teacher;
  std::string base_path;  // file the base log-probs come from or go to
  bool base_reused = false;

  if (reader) {
    // An existing llama-perplexity (or gamma) base file fixes n_ctx and the tokens.
    const auto& in = reader->info();
    if (req.n_ctx > 0 && uint32_t(req.n_ctx) != in.n_ctx)
      return Status::errorf("--ctx {} differs from the n_ctx {} of {}", req.n_ctx, in.n_ctx, req.kld_base);
    if (in.n_vocab != model->n_vocab())
      return Status::errorf("vocabulary mismatch: {} has {} tokens, {} was computed with {}", req.model,
                            model->n_vocab(), req.kld_base, in.n_vocab);
    opt.n_ctx = int(in.n_ctx);
    if (req.n_chunks > in.n_chunk)
      return Status::errorf("--chunks {} asks for more than the {} chunks in {}", req.n_chunks, in.n_chunk,
                            req.kld_base);
    n_chunks = req.n_chunks > 0 ? req.n_chunks : in.n_chunk;
    if (!tokens.empty() && !same_prefix(tokens, in.tokens, size_t(n_chunks) * opt.n_ctx))
      return Status::errorf("{} was computed on other tokens than {} tokenized by {}", req.kld_base, req.text,
                            req.model);
    tokens = in.tokens;
    base.reader = reader;
    base_path = req.kld_base;
    base_reused = true;
  } else {
    GAMMA_ASSIGN_OR_RETURN(n_chunks, chunks_for(tokens.size(), opt.n_ctx, req.n_chunks));
  }

  std::unique_ptr<LogprobReader> cached;
  bool write_base = false;
  if (!reader && !req.teacher.empty()) {
    GAMMA_ASSIGN_OR_RETURN(std::string teacher_sha, sha256_file_cached(req.teacher));
    const uint64_t need = logprob_file_bytes(opt.n_ctx, model->n_vocab(), n_chunks);
    if (!req.kld_base.empty()) {
      base_path = req.kld_base;
      GAMMA_RETURN_IF_ERROR(check_writable_dir(base_path));
      std::string dir = std::filesystem::path(base_path).parent_path().string();
      if (!disk_fits(dir.empty() ? "." : dir, need))
        return Status::errorf("not enough free disk for {} ({:.2f} GB of teacher log-probs)", base_path,
                              double(need) / 1e9);
      write_base = true;
    } else if (req.cache) {
      base_path = teacher_cache_path(teacher_sha, text_sha, opt.n_ctx, opt.n_batch, opt.n_ubatch);
      if (file_exists(base_path)) {
        // Reuse when it covers the request and was made from these very tokens; else redo.
        auto r = LogprobReader::open(base_path);
        if (r && r.value()->info().n_ctx == uint32_t(opt.n_ctx) && r.value()->info().n_chunk >= n_chunks &&
            r.value()->info().n_vocab == model->n_vocab() &&
            same_prefix(tokens, r.value()->info().tokens, size_t(n_chunks) * opt.n_ctx)) {
          cached = std::move(r.value());
          base.reader = cached.get();
          base_reused = true;
        }
      }
      if (!cached) {
        write_base = check_writable_dir(base_path).is_ok() &&
                     disk_fits(std::filesystem::path(base_path).parent_path().string(), need);
        if (!write_base) base_path.clear();  // side by side, nothing saved
      }
    }
    if (!cached) {
      GAMMA_ASSIGN_OR_RETURN(teacher, llama::LlamaModel::load(req.teacher));
      base.teacher = teacher.get();
    }
    GAMMA_ASSIGN_OR_RETURN(out.teacher, teacher_result(req.teacher, teacher_sha));
  } else if (!req.teacher.empty()) {
    GAMMA_ASSIGN_OR_RETURN(std::string teacher_sha, sha256_file_cached(req.teacher));
    GAMMA_ASSIGN_OR_RETURN(out.teacher, teacher_result(req.teacher, teacher_sha));
  }

  const bool kl = base.reader || base.teacher;
  Progress progress(kl ? "eval kld" : "eval ppl", n_chunks);
  Progress* pp = req.progress ? &progress : nullptr;
  Result<TextEvalResult> res = Status::error("not run");
  if (write_base) {
    LogprobFileInfo info;
    info.n_ctx = uint32_t(opt.n_ctx);
    info.n_vocab = model->n_vocab();
    info.n_chunk = n_chunks;
    info.tokens.assign(tokens.begin(), tokens.begin() + size_t(n_chunks) * opt.n_ctx);
    // The base file appears only once complete (temp + rename).
    Status st = write_atomic(base_path, [&](const std::string& tmp) -> Status {
      GAMMA_ASSIGN_OR_RETURN(auto writer, LogprobWriter::create(tmp, info));
      base.writer = writer.get();
      res = eval_text(*model, tokens, n_chunks, opt, &base, pp);
      base.writer = nullptr;
      if (!res) return res.status();
      return writer->close();
    });
    if (!st.is_ok()) return st;  // also when the base file could not even be created
    if (!res) return res.status();
  } else {
    res = eval_text(*model, tokens, n_chunks, opt, kl ? &base : nullptr, pp);
    if (!res) return res.status();
  }
  if (pp) progress.finish();
  const TextEvalResult& r = res.value();

  settings.ctx = uint64_t(opt.n_ctx);
  settings.chunks = uint64_t(n_chunks);
  {
    const int n_seq = std::max(1, opt.n_batch / opt.n_ctx);
    const int nb = std::min(opt.n_batch, n_seq * opt.n_ctx);
    settings.ubatch = uint64_t(std::min(opt.n_ubatch, nb));
  }
  if (!req.text.empty()) settings.text = EvalResult::Text{req.text, text_sha, text_tokens};
  out.perplexity = EvalResult::Perplexity{r.ppl.ppl, r.ppl.ppl_stderr, r.ppl.nll_mean, r.ppl.nll_stderr,
      uint64_t(n_chunks), r.ppl.n_scored, r.seconds,
      r.seconds > 0 ? double(n_chunks) * opt.n_ctx / r.seconds : 0.0};
  if (r.kld) {
    out.kld = kld_result(*r.kld);
    if (!base_path.empty()) out.kld->base_file = base_path;
    out.kld->base_reused = base_reused;
  }
  return Status::ok();
}

// Zero-shot multiple choice on each task.
Status eval_tasks_part(const EvalRequest& req, const llama::LlamaModel& model_ref, const std::vector<McTask>& tasks,
                       EvalResult* out) {
  const llama::LlamaModel* model = &model_ref;
  McOptions mo;
  mo.n_threads = req.n_threads;
  mo.n_batch = 512;  // one ubatch per decode: unified-KV attention stays a small share
  out->tasks.emplace();
  for (const McTask& task : tasks) {
    Progress progress(task.name, int64_t(task.items.size()));
    GAMMA_ASSIGN_OR_RETURN(McResult r, score_task(*model, task, mo, req.progress ? &progress : nullptr));
    if (req.progress) progress.finish(fmt::format("acc {:.4f} acc_norm {:.4f}", r.acc, r.acc_norm));
    GAMMA_ASSIGN_OR_RETURN(std::string task_sha, sha256_file(task.path));
    out->tasks->push_back({task.name, task.path, task_sha, uint64_t(r.n), uint64_t(task.n_in_file), task.delimiter,
                           r.acc, r.acc_stderr, r.acc_norm, r.acc_norm_stderr, r.correct, r.correct_norm,
                           r.n_tokens, r.seconds});
  }
  if (req.limit > 0) out->settings.limit = uint64_t(req.limit);
  return Status::ok();
}

Result<EvalResult> run_eval(const EvalRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  llama::init();

  // ---- validate everything cheap before any decoding
  const bool base_exists = file_exists(req.kld_base);
  const bool text_mode = !req.text.empty() || base_exists || !req.teacher.empty();
  if (!text_mode && req.tasks.empty())
    return Status::error("nothing to evaluate: give --text (perplexity/KLD), --kld-base, or --tasks");
  if (!req.teacher.empty() && req.text.empty() && !base_exists)
    return Status::error("--teacher needs --text (or an existing --kld-base file)");
  if (!req.kld_base.empty() && !base_exists && req.teacher.empty())
    return Status::errorf("--kld-base {} does not exist and there is no --teacher to compute it", req.kld_base);
  if (req.n_ctx < 0 || req.n_ctx == 1) return Status::errorf("--ctx {} is invalid", req.n_ctx);
  if (req.n_chunks == 0 || req.n_chunks < -1) return Status::errorf("--chunks {} is invalid", req.n_chunks);
  if (req.n_batch < 1) return Status::errorf("--batch {} is invalid", req.n_batch);
  if (req.n_ubatch < 1) return Status::errorf("--ubatch {} is invalid", req.n_ubatch);
  if (req.n_threads < 0) return Status::errorf("--threads {} is invalid", req.n_threads);
  if (!req.text.empty()) {
    GAMMA_ASSIGN_OR_RETURN(uint64_t tb, file_size(req.text));
    (void)tb;
  }
  std::vector<McTask> tasks;
  const std::string tasks_dir = req.tasks_dir.empty() ? default_tasks_dir() : req.tasks_dir;
  for (const auto& t : req.tasks) {
    GAMMA_ASSIGN_OR_RETURN(std::string path, resolve_task(t, tasks_dir));
    GAMMA_ASSIGN_OR_RETURN(McTask task, load_task(path, req.delimiter, req.limit));
    for (const auto& prev : tasks)
      if (prev.name == task.name) return Status::errorf("task '{}' given twice", task.name);
    tasks.push_back(std::move(task));
  }
  std::unique_ptr<LogprobReader> reader;
  if (base_exists) {
    GAMMA_ASSIGN_OR_RETURN(reader, LogprobReader::open(req.kld_base));
  }

  GAMMA_ASSIGN_OR_RETURN(auto model, llama::LlamaModel::load(req.model));
  if (llama_vocab_get_add_eos(model->vocab()))
    return Status::errorf("{}: its tokenizer appends EOS, which llama.cpp's perplexity does not support", req.model);
  std::unique_ptr<llama::LlamaModel> teacher_vocab;
  if (!req.teacher.empty()) {
    GAMMA_ASSIGN_OR_RETURN(teacher_vocab, llama::LlamaModel::load(req.teacher, /*vocab_only=*/true));
    GAMMA_RETURN_IF_ERROR(check_same_vocab(*model, *teacher_vocab));
  }

  GAMMA_ASSIGN_OR_RETURN(std::string model_sha, sha256_file_cached(req.model));
  GAMMA_ASSIGN_OR_RETURN(uint64_t model_bytes, file_size(req.model));

  EvalResult out;
  out.model = model_result(*model, model_sha, model_bytes);
  out.settings.threads = uint64_t(resolve_threads(req.n_threads));
  out.settings.batch = uint64_t(req.n_batch);

  if (text_mode) GAMMA_RETURN_IF_ERROR(eval_text_part(req, *model, reader.get(), &out));
  if (!tasks.empty()) GAMMA_RETURN_IF_ERROR(eval_tasks_part(req, *model, tasks, &out));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string summarize(const EvalResult& r) {
  auto v = [](const std::optional<double>& x) { return x.value_or(NAN); };
  std::string s;
  if (const auto& p = r.perplexity)
    s += fmt::format("PPL = {:.4f} +/- {:.5f} ({} chunks of {}, {:.1f} s)\n", v(p->ppl), v(p->ppl_stderr),
                     p->chunks.value_or(0), r.settings.ctx.value_or(0), v(p->seconds));
  if (const auto& k = r.kld)
    s += fmt::format("PPL(base) = {:.4f}; KLD mean {:.6f} +/- {:.6f}, median {:.6f}, p99 {:.6f}; same top {:.3f} +/- "
                     "{:.3f} %; mean dp {:.3f} +/- {:.3f} %\n",
                     v(k->ppl_base), v(k->mean), v(k->mean_stderr), v(k->median), v(k->p99), 100 * v(k->top1),
                     100 * v(k->top1_stderr), 100 * v(k->delta_p.mean), 100 * v(k->delta_p.mean_stderr));
  if (r.tasks)
    for (const auto& t : *r.tasks)
      s += fmt::format("{}: acc {:.4f} +/- {:.4f}, acc_norm {:.4f} +/- {:.4f} (n={}, {:.1f} s)\n", t.name, v(t.acc),
                       v(t.acc_stderr), v(t.acc_norm), v(t.acc_norm_stderr), t.n.value_or(0), v(t.seconds));
  return s;
}

}  // namespace gm::eval
