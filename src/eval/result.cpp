#include "eval/result.h"

#include <cmath>

namespace gm::eval {
namespace {

// Each section's fields once, in the order eval writes them: the same list reads and writes,
// so the two cannot drift apart. `f(key, field)` is Read or Write below.
template <typename M, typename F>
void model_fields(M& m, F&& f) {
  f("path", m.path), f("sha256", m.sha256), f("file_bytes", m.file_bytes), f("desc", m.desc);
  f("n_params", m.n_params), f("tensor_bytes", m.tensor_bytes), f("bpw", m.bpw), f("n_vocab", m.n_vocab);
}

template <typename T, typename F>
void teacher_fields(T& t, F&& f) {
  f("path", t.path), f("sha256", t.sha256), f("file_bytes", t.file_bytes);
}

template <typename P, typename F>
void perplexity_fields(P& p, F&& f) {
  f("ppl", p.ppl), f("ppl_stderr", p.ppl_stderr), f("nll_mean", p.nll_mean), f("nll_stderr", p.nll_stderr);
  f("chunks", p.chunks), f("tokens_scored", p.tokens_scored), f("seconds", p.seconds);
  f("tokens_per_second", p.tokens_per_second);
}

// kld: these, then "delta_p", then kld_tail_fields.
template <typename K, typename F>
void kld_head_fields(K& k, F&& f) {
  f("tokens", k.tokens), f("mean", k.mean), f("stderr", k.mean_stderr), f("median", k.median), f("p90", k.p90);
  f("p95", k.p95), f("p99", k.p99), f("p99_9", k.p99_9), f("max", k.max), f("min", k.min), f("top1", k.top1);
  f("top1_stderr", k.top1_stderr);
}

template <typename D, typename F>
void delta_p_fields(D& d, F&& f) {
  f("mean", d.mean), f("stderr", d.mean_stderr), f("rms", d.rms), f("rms_stderr", d.rms_stderr);
  f("median", d.median), f("p1", d.p1), f("p99", d.p99), f("min", d.min), f("max", d.max);
}

template <typename K, typename F, typename G>
void kld_tail_fields(K& k, F&& f, G&& added) {
  f("ppl", k.ppl), f("ppl_stderr", k.ppl_stderr), f("ppl_base", k.ppl_base), f("ppl_base_stderr", k.ppl_base_stderr);
  f("ln_ppl_ratio", k.ln_ppl_ratio), f("ln_ppl_ratio_stderr", k.ln_ppl_ratio_stderr), f("ppl_ratio", k.ppl_ratio);
  f("ppl_ratio_stderr", k.ppl_ratio_stderr), f("ppl_diff", k.ppl_diff), f("ppl_diff_stderr", k.ppl_diff_stderr);
  f("ln_ppl_correlation", k.ln_ppl_correlation), f("base_file", k.base_file), f("base_reused", k.base_reused);
  added("chunk_means", k.chunk_means);
}

// `added` takes the fields that came after version 1 was published (written only where set, so
// files of earlier gammas read and write unchanged).
template <typename T, typename F, typename G>
void task_fields(T& t, F&& f, G&& added) {
  f("path", t.path), f("sha256", t.sha256), f("n", t.n), f("n_in_file", t.n_in_file), f("delimiter", t.delimiter);
  f("acc", t.acc), f("acc_stderr", t.acc_stderr), f("acc_norm", t.acc_norm), f("acc_norm_stderr", t.acc_norm_stderr);
  added("correct", t.correct), added("correct_norm", t.correct_norm);
  f("tokens", t.tokens), f("seconds", t.seconds);
}

template <typename T, typename F>
void text_fields(T& t, F&& f) {
  f("path", t.path), f("sha256", t.sha256), f("tokens", t.tokens);
}

struct Read {
  const FieldReader& r;
  template <typename T>
  void operator()(const char* key, std::optional<T>& v) const { r.get(key, &v); }
};

struct Write {
  json& j;
  template <typename T>
  void operator()(const char* key, const std::optional<T>& v) const { j[key] = or_null(v); }
};

struct WriteIfSet {
  json& j;
  template <typename T>
  void operator()(const char* key, const std::optional<T>& v) const {
    if (v) j[key] = *v;
  }
};

}  // namespace

const EvalResult::Task* EvalResult::task(const std::string& name) const {
  if (tasks)
    for (const auto& t : *tasks)
      if (t.name == name) return &t;
  return nullptr;
}

json EvalResult::to_json() const {
  json j = json_header(kSchema, kVersion);
  json& m = j["model"] = json::object();
  model_fields(model, Write{m});
  if (model.fingerprint) m["fingerprint"] = *model.fingerprint;
  if (teacher) teacher_fields(*teacher, Write{j["teacher"] = json::object()});
  if (perplexity) perplexity_fields(*perplexity, Write{j["perplexity"] = json::object()});
  if (kld) {
    json& k = j["kld"] = json::object();
    kld_head_fields(*kld, Write{k});
    delta_p_fields(kld->delta_p, Write{k["delta_p"] = json::object()});
    kld_tail_fields(*kld, Write{k}, WriteIfSet{k});
  }
  if (tasks) {
    json& t = j["tasks"] = json::object();
    for (const auto& task : *tasks) {
      json& tj = t[task.name] = json::object();
      task_fields(task, Write{tj}, WriteIfSet{tj});
    }
  }
  json& s = j["settings"] = json::object();
  Write w{s};
  w("threads", settings.threads), w("batch", settings.batch);
  if (perplexity || kld) {
    w("ctx", settings.ctx), w("chunks", settings.chunks), w("ubatch", settings.ubatch);
    s["text"] = nullptr;
    if (settings.text) text_fields(*settings.text, Write{s["text"] = json::object()});
  }
  if (tasks) w("limit", settings.limit);
  j["seconds"] = or_null(seconds);
  return j;
}

Result<EvalResult> EvalResult::from_json(const json& j) {
  EvalResult e;
  Status st;
  const FieldReader r(j, &st);
  const FieldReader m = r.object("model");
  model_fields(e.model, Read{m});
  m.get("fingerprint", &e.model.fingerprint);
  if (const FieldReader t = r.object("teacher"); t.present()) teacher_fields(e.teacher.emplace(), Read{t});
  if (const FieldReader p = r.object("perplexity"); p.present()) perplexity_fields(e.perplexity.emplace(), Read{p});
  if (const FieldReader k = r.object("kld"); k.present()) {
    Kld& kld = e.kld.emplace();
    kld_head_fields(kld, Read{k});
    delta_p_fields(kld.delta_p, Read{k.object("delta_p")});
    kld_tail_fields(kld, Read{k}, Read{k});
  }
  if (const FieldReader t = r.object("tasks"); t.present()) {
    e.tasks.emplace();
    for (const auto& [name, tr] : t.members()) {
      Task& task = e.tasks->emplace_back();
      task.name = name;
      if (!tr.present()) tr.fail("not an object");
      task_fields(task, Read{tr}, Read{tr});
    }
  }
  const FieldReader s = r.object("settings");
  s.get("threads", &e.settings.threads), s.get("batch", &e.settings.batch), s.get("ctx", &e.settings.ctx);
  s.get("chunks", &e.settings.chunks), s.get("ubatch", &e.settings.ubatch), s.get("limit", &e.settings.limit);
  if (const FieldReader t = s.object("text"); t.present()) text_fields(e.settings.text.emplace(), Read{t});
  r.get("seconds", &e.seconds);
  if (!st.is_ok()) return st;
  return e;
}

Result<EvalResult> EvalResult::load(const std::string& path) { return load_typed<EvalResult>(path); }

Status EvalResult::save(const std::string& path) const { return write_json(path, to_json()); }

Result<PairedDiff> paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return Status::errorf("paired chunks: {} against {} chunks", a.size(), b.size());
  if (a.size() < 2) return Status::error("paired chunks: at least two chunks are needed for an error");
  PairedDiff d;
  d.n = a.size();
  for (size_t i = 0; i < d.n; ++i) d.mean += a[i] - b[i];
  d.mean /= double(d.n);
  double ss = 0;
  for (size_t i = 0; i < d.n; ++i) ss += (a[i] - b[i] - d.mean) * (a[i] - b[i] - d.mean);
  d.stderr_ = std::sqrt(ss / double(d.n - 1)) / std::sqrt(double(d.n));
  return d;
}

Result<PairedDiff> paired_difference(const EvalResult& a, const EvalResult& b) {
  if (!a.kld || !a.kld->chunk_means || !b.kld || !b.kld->chunk_means)
    return Status::error("paired chunks: both evaluations need each chunk's KLD (gamma eval --teacher)");
  const auto& x = a.settings;
  const auto& y = b.settings;
  const bool same_text = x.text && y.text && x.text->sha256 && y.text->sha256 && *x.text->sha256 == *y.text->sha256;
  if (!same_text || x.ctx != y.ctx)
    return Status::error("paired chunks: the two evaluations are not on the same text and context");
  return paired_difference(*a.kld->chunk_means, *b.kld->chunk_means);
}

}  // namespace gm::eval
