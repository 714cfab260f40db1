// gamma run's resolved inputs, its stage log, and every evaluation it makes: on the validation
// texts (which choose) and on the report text (which is only reported).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "run/pipeline.h"
#include "run/proc.h"
#include "util/dir_peak.h"
#include "util/proc.h"

namespace fs = std::filesystem;

namespace gm::run {

using eval::EvalResult;

std::string hms(double s) {
  const long t = std::lround(std::max(0.0, s));
  return t < 60 ? fmt::format("{}s", t) : t < 3600 ? fmt::format("{}m{:02}s", t / 60, t % 60)
                                                   : fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
}

double Env::elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }

Status Env::stage(const std::string& name, double eta, const std::function<Status()>& fn) {
  std::printf("== %s  [est. %s, run %s]\n", name.c_str(), hms(eta).c_str(), hms(elapsed()).c_str());
  std::fflush(stdout);
  const double s0 = elapsed();
  const CpuTimes c0 = cpu_times();
  Status st;
  uint64_t inside = 0;  // the work directory and the whole cache, at most, while the stage ran
  {
    DirPeak sampler({W, cache_dir()}, std::chrono::seconds(5));
    st = fn();
    inside = sampler.peak();
  }
  if (!st.is_ok()) return st;
  const double took = elapsed() - s0;
  const double others = other_cores(c0, cpu_times(), took);
  const uint64_t work = dir_bytes(W), cache = dir_bytes(cache_dir());
  const uint64_t added = cache > cache_start ? cache - cache_start : 0;
  peak_disk = std::max({peak_disk, work + added, inside > cache_start ? inside - cache_start : 0});
  std::printf("   done in %s (disk %.1f MiB: work directory %.1f, cache +%.1f)\n", hms(took).c_str(),
              double(work + added) / (1 << 20), double(work) / (1 << 20), double(added) / (1 << 20));
  std::fflush(stdout);
  if (shared_machine(*this, others)) {
    std::printf("   (other jobs took %.1f of this machine's cores meanwhile: a time that says little of it)\n", others);
    std::fflush(stdout);
  }
  stages.push_back({{"stage", name}, {"seconds", took}, {"estimate_seconds", eta}, {"disk_bytes", work},
                    {"cache_added_bytes", added}, {"other_cores", others < 0 ? json(nullptr) : json(others)}});
  record_stage(*this, name, eta, took, others);
  return Status::ok();
}

std::string Env::eval_tag(const EvalText& t) const {
  return fmt::format("{}-{}-c{}-n{}", t.validation ? "valid" : "report", fs::path(t.path).stem().string(), o.eval_ctx,
                     t.chunks);
}

void Env::drop_kld_bases(const std::vector<EvalText>& texts) const {
  for (const auto& t : texts) {
    std::error_code ec;
    fs::remove(kld_base(t), ec);
  }
}

std::string Env::valid_paths() const {
  std::string s;
  for (const auto& t : valid) s += (s.empty() ? "" : ",") + t.path;
  return s;
}

Result<EvalResult> load_eval(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(EvalResult r, EvalResult::load(path));
  if (!r.model.file_bytes || !r.kld || !r.kld->mean || !r.kld->mean_stderr || !r.kld->top1 || !r.perplexity ||
      !r.perplexity->ppl || !r.perplexity->ppl_stderr)
    return Status::errorf(Status::Code::kCorrupt, "{}: lacks the file size, KLD, top-1 or PPL", path);
  return r;
}

Result<EvalResult> eval_file(Env& e, const std::string& gguf, const std::string& stem, const EvalText& t) {
  const std::string base = e.kld_base(t);
  const std::string out = e.eval_path(stem, t);
  if (file_exists(out)) {  // a cached result; a corrupt one (a torn write by another tool) is redone
    auto r = load_eval(out);
    if (r.is_ok() || r.status().code() != Status::Code::kCorrupt) return r;
    std::error_code ec;
    fs::remove(out, ec);
  }
  std::vector<std::string> cmd = {e.G, "eval", gguf, "--teacher", e.teacher, "--kld-base", base, "--text", t.path,
                                  "--ctx", std::to_string(e.o.eval_ctx), "--chunks", std::to_string(t.chunks), "-t", e.T,
                                  "-q", "-o", out};
  const double tokens = double(t.chunks) * e.o.eval_ctx;
  GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("eval {} on {} ({} x {})", fs::path(gguf).filename().string(),
                                            fs::path(t.path).filename().string(), t.chunks, e.o.eval_ctx),
                                eval_seconds(e.ms, tokens, file_exists(base)), [&] { return run_step("eval", cmd); }));
  return load_eval(out);
}

Result<std::vector<EvalResult>> eval_also(Env& e, const std::string& gguf, const std::string& stem) {
  std::vector<EvalResult> out;
  for (const auto& t : e.also) {
    GAMMA_ASSIGN_OR_RETURN(EvalResult r, eval_file(e, gguf, stem, t));
    out.push_back(std::move(r));
  }
  return out;
}

Status copy_file(const std::string& from, const std::string& to) {
  GAMMA_ASSIGN_OR_RETURN(std::string text, read_file(from));
  return write_file_atomic(to, text);
}

Status adopt_measurements(const Env& e, const std::string& from, const std::string& to, const std::vector<EvalText>& texts) {
  for (const auto& t : texts)
    if (!load_eval(e.eval_path(to, t)).is_ok() && load_eval(e.eval_path(from, t)).is_ok())
      GAMMA_RETURN_IF_ERROR(copy_file(e.eval_path(from, t), e.eval_path(to, t)));
  return Status::ok();
}

bool validated(const Env& e, const std::string& stem, const std::vector<EvalText>& texts) {
  return std::all_of(texts.begin(), texts.end(), [&](const EvalText& t) { return load_eval(e.eval_path(stem, t)).is_ok(); });
}

bool validated(const Env& e, const std::string& stem) { return validated(e, stem, e.valid); }

Result<ValidScore> validate(Env& e, const std::string& gguf, const std::string& stem) { return validate(e, gguf, stem, e.valid); }

Result<ValidScore> validate(Env& e, const std::string& gguf, const std::string& stem, const std::vector<EvalText>& texts) {
  ValidScore s;
  for (const auto& t : texts) {
    GAMMA_ASSIGN_OR_RETURN(EvalResult r, eval_file(e, gguf, stem, t));
    s.kld += *r.kld->mean;
    s.err = std::hypot(s.err, *r.kld->mean_stderr);  // exact for one text: hypot(0, x) = x
    s.file_bytes = *r.model.file_bytes;
  }
  return s;
}

json report_row(const std::string& label, const std::string& path, const EvalResult& ev, double valid_kld) {
  return {{"label", label},
          {"path", path},
          {"file_bytes", *ev.model.file_bytes},
          {"valid_kld", valid_kld},
          {"kld_mean", *ev.kld->mean},
          {"kld_stderr", *ev.kld->mean_stderr},
          {"top1", *ev.kld->top1},
          {"ppl", *ev.perplexity->ppl},
          {"ppl_stderr", *ev.perplexity->ppl_stderr}};
}

}  // namespace gm::run
