#include "run/run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "eval/result.h"
#include "fetch/fetch.h"
#include "gguf_model/inspect.h"
#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "pool/pool.h"
#include "report/plot.h"
#include "run/estimate.h"
#include "run/mixes.h"
#include "run/proc.h"
#include "solve/allocate.h"
#include "solve/budget.h"
#include "util/files.h"
#include "util/json.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {
namespace {

using eval::EvalResult;
using run::run_step;
using run::run_tool;
using solve::format_size;

std::string hms(double s) {
  const long t = std::lround(std::max(0.0, s));
  return t < 60 ? fmt::format("{}s", t) : t < 3600 ? fmt::format("{}m{:02}s", t / 60, t % 60)
                                                   : fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
}

// The default calibration text (no --calib): prose and code, about half each, the first bytes of
// war-and-peace.txt and python-calib.txt (whose end, from byte 480,000, experiments/ hold back for
// validation). Measured on Qwen2.5-Coder (results/calib_qwen/, experiments/calib_study.sh): the
// imatrix on both beat prose alone and code alone on the two validation texts together.
constexpr size_t kDefaultCalibProseBytes = 40000, kDefaultCalibCodeBytes = 36000;

// The run's inputs, resolved once: paths in the work directory, the child commands'
// common arguments, the model's size (for estimates) and the stage log.
struct Env {
  explicit Env(const RunOptions& opt) : o(opt) {}
  const RunOptions& o;
  std::string G, T, W, data, model, teacher, imatrix, pool, calib, valid_text, report_text;
  int valid_chunks = 0;
  run::ModelSize ms;
  bool quiet = false;  // pass -q to the steps (not a terminal, or --quiet)
  std::optional<FileLock> lock;  // on the work directory, for the whole run
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  json stages = json::array();

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  // One line per stage: its name and estimated time, then its wall time once done.
  Status stage(const std::string& name, double eta, const std::function<Status()>& fn) {
    std::printf("== %s  [est. %s, run %s]\n", name.c_str(), hms(eta).c_str(), hms(elapsed()).c_str());
    std::fflush(stdout);
    const double s0 = elapsed();
    Status st = fn();
    if (!st.is_ok()) return st;
    const double took = elapsed() - s0;
    std::printf("   done in %s\n", hms(took).c_str());
    std::fflush(stdout);
    stages.push_back({{"stage", name}, {"seconds", took}, {"estimate_seconds", eta}});
    return Status::ok();
  }
  std::vector<std::string> q() const { return quiet ? std::vector<std::string>{"-q"} : std::vector<std::string>{}; }
  // Which text and chunks a measurement is on: "valid-wiki.valid-c512-n8". It names the
  // teacher's base file and every eval result, so a run with another text never reuses one.
  std::string eval_tag(bool validation) const {
    return fmt::format("{}-{}-c{}-n{}", validation ? "valid" : "report",
                       fs::path(validation ? valid_text : report_text).stem().string(), o.eval_ctx,
                       validation ? valid_chunks : o.eval_chunks);
  }
  std::string kld_base(bool validation) const { return W + "/teacher-" + eval_tag(validation) + ".kld"; }
  std::string eval_path(const std::string& stem, bool validation) const {
    return stem + "." + eval_tag(validation) + ".json";
  }
};

// ---- model size, feasible range ------------------------------------------------------------

Result<run::ModelSize> model_size(const std::string& path, int threads) {
  GAMMA_ASSIGN_OR_RETURN(auto m, Model::open(path));
  const json d = describe_model(*m, path);  // gamma inspect's totals
  run::ModelSize s;
  s.params = d["totals"]["params"].get<double>();
  s.linear_params = d["totals"]["linear_params"].get<double>();
  s.n_layer = m->n_layer();
  s.threads = threads;
  return s;
}

// The output head's (or the tied embedding's) type `steps` steps cheaper than `current` that
// its rows fit, or "". Two steps are tried because on Qwen the Q4_K head (two below llama.cpp's
// Q6_K) won validation for every allocator at IQ2_M, Q2_K and IQ3_XXS's sizes
// (results/iq_qwen/table.md): the bytes buy more in the linear modules than in the head.
std::string cheaper_head_type(const Manifest& m, const std::string& head, const std::string& current, int steps = 1) {
  static const std::map<std::string, std::string> kStep = {
      {"Q8_0", "Q5_1"}, {"Q6_K", "Q5_K"}, {"Q5_K", "Q4_K"}, {"Q5_1", "Q4_1"}};
  std::string t = current;
  for (int i = 0; i < steps; ++i) {
    auto it = kStep.find(t);
    if (it == kStep.end() || !check_fixed_type(m, head, it->second).is_ok()) return "";
    t = it->second;
  }
  return t;
}
constexpr int kHeadSteps = 2;  // the cheaper heads variants_at tries: 1 .. kHeadSteps steps

// The smallest file the pool makes with the head at `type`.
Result<uint64_t> min_file_with_head(const Manifest& man, const std::string& head, const std::string& type) {
  GAMMA_ASSIGN_OR_RETURN(solve::Scores st, solve::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, st, {}, {}, {{head, type}}));
  return a.min_file_bytes();
}

struct Range {
  uint64_t min = 0, max = 0;  // the smallest file run can make, and the largest one
};

// Smallest: every module at its lightest candidate, the head at the cheaper of the types run
// tries. Largest: every module at its heaviest candidate.
Result<Range> feasible_range(const Manifest& man) {
  GAMMA_ASSIGN_OR_RETURN(solve::Scores st, solve::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, st, {}));
  Range r;
  r.min = a.min_file_bytes();
  const std::string head = output_head(man);
  const std::string smallest = default_fixed_types(man, 0).at(head);
  for (int k = 1; k <= kHeadSteps; ++k)
    if (auto c = cheaper_head_type(man, head, smallest, k); !c.empty()) {
      GAMMA_ASSIGN_OR_RETURN(uint64_t b, min_file_with_head(man, head, c));
      r.min = std::min(r.min, b);
    }
  solve::Scores heavy = st;
  for (const auto& e : man.modules)
    for (const auto& c : e.candidates) heavy.score[e.name][c.id] = double(c.bytes);
  GAMMA_ASSIGN_OR_RETURN(auto h, solve::Allocator::create(man, heavy, {}));
  solve::Budget all;
  all.kind = solve::Budget::Kind::kFileBytes;
  all.file_bytes = uint64_t(1) << 50;
  GAMMA_ASSIGN_OR_RETURN(auto top, h.solve(all));
  r.max = top.size.file_bytes;
  return r;
}

// ---- scorers --------------------------------------------------------------------------------

struct Scorer {
  std::string name;               // static, hawq, gamma
  std::vector<std::string> args;  // gamma solve's score arguments
};

// The scores of every scorer asked for, measured once (cached in the work directory).
// gamma learn's steps (RunOptions::steps, 0: every layer visited once) and their estimated
// time: a step runs layers_per_step layers, every 2nd also measures each candidate (~K times
// a forward, about doubling the step's cost).
int learn_steps(const Env& e) {
  if (e.o.steps > 0) return e.o.steps;
  const int per = e.o.layers_per_step > 0 ? e.o.layers_per_step : e.ms.n_layer;
  return 1 + (e.ms.n_layer + per - 1) / per * e.o.visit_steps;
}
double learn_estimate(const Env& e) { return 2.0 * run::learn_seconds(e.ms, learn_steps(e), e.o.layers_per_step, 1024); }
// gamma layers: the source's file and one file per layer, each emitted and measured on
// kLayerChunks chunks of the calibration text (Qwen-1.5B: 443 s on 2 cores).
constexpr int kLayerChunks = 4;
double layers_estimate(const Env& e) {
  const double tok = double(kLayerChunks) * e.o.eval_ctx;
  return (e.ms.n_layer + 1) * (run::emit_seconds(e.ms) + run::eval_seconds(e.ms, tok, true)) + run::teacher_seconds(e.ms, tok);
}

// GAMMA learns at `learn_bpw` (its scores are reused at every other budget).
Result<std::vector<Scorer>> prepare_scorers(Env& e, double learn_bpw) {
  std::vector<Scorer> out;
  std::string hawq_file, gamma_file;  // for the blend of the two
  for (const auto& s : e.o.scorers) {
    if (s == "static") {
      out.push_back({s, {"--score-from-manifest"}});
    } else if (s == "hawq") {
      const std::string f = e.W + "/scores-hawq.json";
      if (!file_exists(f)) {
        std::vector<std::string> cmd = {e.G, "hawq", e.pool, "--teacher", e.teacher, "--calib", e.calib, "--samples",
                                        std::to_string(e.o.hawq_samples), "--seqs", "4", "--calib-tokens",
                                        std::to_string(e.o.hawq_calib_tokens), "--seq-len", "256", "-t", e.T, "-o", f};
        for (const auto& x : e.q()) cmd.push_back(x);
        GAMMA_RETURN_IF_ERROR(e.stage("hawq -> " + f, run::hawq_seconds(e.ms, e.o.hawq_samples, e.o.hawq_calib_tokens),
                                      [&] { return run_step("hawq", cmd); }));
      }
      out.push_back({s, {"--scores", f}});
      hawq_file = f;
    } else if (s == "gamma") {
      std::string f = e.o.scores;
      if (f.empty()) {
        const std::string tag = fmt::format("{:.3g}", learn_bpw);
        f = e.W + "/scores-gamma-" + tag + ".json";
        if (!file_exists(f)) {
          std::vector<std::string> cmd = {e.G, "learn", e.pool, "--teacher", e.teacher, "--bpw", tag, "--steps",
                                          std::to_string(learn_steps(e)), "--layers-per-step", std::to_string(e.o.layers_per_step),
                                          "--visit-steps", std::to_string(e.o.visit_steps), "--forcing", "sublayer",
                                          "--estimator", "st", "--measure-every", "2", "--lr", "0.05", "--tau-end", "0.05",
                                          "--layer-loss", "clip",
                                          "--calib-tokens", std::to_string(e.o.calib_tokens), "--calib", e.calib, "-t", e.T, "-o", f};
          for (const auto& x : e.q()) cmd.push_back(x);
          GAMMA_RETURN_IF_ERROR(e.stage("learn at " + tag + " bpw -> " + f, learn_estimate(e), [&] { return run_step("learn", cmd); }));
        }
      }
      // Stage I's measured loss changes: on SmolLM2 (validation) they match HAWQ-V2 and beat
      // size-weighted log p by 1.8-3.8x in KLD (results/measure_smollm2.json). Raw, and fitted
      // per module as a line in rel_err (on Qwen's validation text the raw ones win at the
      // Q2_K size, the fitted ones at IQ3_M's: results/iq_qwen), so validation picks.
      out.push_back({s, {"--scores", f, "--transform", "delta"}});
      out.push_back({s + "-fit", {"--scores", f, "--transform", "delta-fit"}});
      gamma_file = f;
      // And rescaled layer by layer to each layer's measured KLD (gamma layers): on Qwen the
      // layer MSE misjudges the scale between layers, and so rescaled the deltas won every
      // size from IQ2_M to 3.25 bpw on validation and test (results/iq_qwen/goal_table.md).
      const std::string lf = e.W + "/layers.json";
      if (!file_exists(lf)) {
        std::vector<std::string> cmd = {e.G, "layers", e.pool, "--teacher", e.teacher, "--calib", e.calib, "-c",
                                        std::to_string(e.o.eval_ctx), "--chunks", std::to_string(kLayerChunks),
                                        "--kld-base", fmt::format("{}/teacher-calib-{}-c{}-n{}.kld", e.W, fs::path(e.calib).stem().string(),
                                                                  e.o.eval_ctx, kLayerChunks),
                                        "-t", e.T, "-o", lf};
        for (const auto& x : e.q()) cmd.push_back(x);
        GAMMA_RETURN_IF_ERROR(e.stage("layers -> " + lf, layers_estimate(e), [&] { return run_step("layers", cmd); }));
      }
      out.push_back({s + "-cal", {"--scores", f, "--transform", "delta", "--layer-scale", lf}});
    }
  }
  // Stage I's fitted deltas blended with HAWQ-V2's predictions (gamma solve --blend, the
  // geometric mean of the two costs): on Qwen, where the two tie alone (IQ3_XS and up), the
  // blend is below HAWQ-V2 in 6 of 12 test cells, GAMMA alone in 3 (results/iq_qwen/goal_table.md).
  if (!hawq_file.empty() && !gamma_file.empty())
    out.push_back({"gamma-blend", {"--scores", gamma_file, "--transform", "delta-fit", "--blend", hawq_file}});
  return out;
}

// ---- one budget: every scorer x head, chosen on validation ---------------------------------

struct Variant {
  std::string name, scorer, head_type;  // head_type "" = the default for the size
  int head_steps = 0;                    // how many steps cheaper than that default head_type is
  std::string plan;
  uint64_t bytes = 0;
  double kld = 0, kld_err = 0;  // validation
};

// An eval result with the figures run compares by (size, KLD, top-1, PPL); a file without
// them is corrupt here.
Result<EvalResult> load_eval(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(EvalResult r, EvalResult::load(path));
  if (!r.model.file_bytes || !r.kld || !r.kld->mean || !r.kld->mean_stderr || !r.kld->top1 || !r.perplexity ||
      !r.perplexity->ppl || !r.perplexity->ppl_stderr)
    return Status::errorf(Status::Code::kCorrupt, "{}: lacks the file size, KLD, top-1 or PPL", path);
  return r;
}

// gamma eval of `gguf` against the teacher on the validation or the report text, into
// STEM.<eval_tag>.json (reused when there).
Result<EvalResult> eval_file(Env& e, const std::string& gguf, const std::string& stem, bool validation) {
  const int chunks = validation ? e.valid_chunks : e.o.eval_chunks;
  const std::string text = validation ? e.valid_text : e.report_text;
  const std::string base = e.kld_base(validation);
  const std::string out = e.eval_path(stem, validation);
  if (file_exists(out)) {  // a cached result; a corrupt one (a torn write by another tool) is redone
    auto r = load_eval(out);
    if (r.is_ok() || r.status().code() != Status::Code::kCorrupt) return r;
    std::error_code ec;
    fs::remove(out, ec);
  }
  {
    std::vector<std::string> cmd = {e.G, "eval", gguf, "--teacher", e.teacher, "--kld-base", base, "--text", text,
                                    "--ctx", std::to_string(e.o.eval_ctx), "--chunks", std::to_string(chunks), "-t", e.T,
                                    "-q", "-o", out};
    const double tokens = double(chunks) * e.o.eval_ctx;
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("eval {} on {}", fs::path(gguf).filename().string(),
                                              fs::path(text).filename().string()),
                                  run::eval_seconds(e.ms, tokens, file_exists(base)), [&] { return run_step("eval", cmd); }));
  }
  return load_eval(out);
}

// The head a rule gives at `size` bytes: "" (the default for that size, `steps` 0) or the type
// `steps` steps cheaper than that default; nullopt when the rule cannot make a file that small
// (near the smallest file only the cheapest heads can).
Result<std::optional<std::string>> head_at(const Manifest& man, const solve::Allocator& stat, uint64_t size,
                                           int steps) {
  const std::string head = output_head(man);
  solve::Budget b;
  b.kind = solve::Budget::Kind::kFileBytes;
  b.file_bytes = size;
  auto at = stat.solve(b);
  if (steps == 0) return at.is_ok() ? std::optional<std::string>("") : std::nullopt;
  const std::string def = at.is_ok() ? at->plan.fixed.at(head) : default_fixed_types(man, 0).at(head);
  const std::string c = cheaper_head_type(man, head, def, steps);
  if (c.empty()) return std::optional<std::string>();
  GAMMA_ASSIGN_OR_RETURN(uint64_t min, min_file_with_head(man, head, c));
  return min <= size ? std::optional<std::string>(c) : std::nullopt;
}

// Solves, emits and measures (validation) every scorer with the default head and with a
// cheaper head (one and two steps) at `size` bytes. Each variant's files live in W/at-SIZE/; the
// candidate GGUFs are removed once measured.
Result<std::vector<Variant>> variants_at(Env& e, const Manifest& man, const solve::Allocator& stat,
                                         const std::vector<Scorer>& scorers, uint64_t size) {
  const std::string dir = e.W + "/at-" + std::to_string(size);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", dir, ec.message());
  const std::string head = output_head(man);
  std::vector<std::pair<std::string, int>> heads;  // type, steps below the default
  for (int k = 0; k <= kHeadSteps; ++k) {
    GAMMA_ASSIGN_OR_RETURN(auto h, head_at(man, stat, size, k));
    if (h) heads.emplace_back(*h, k);
  }
  if (heads.empty())
    return Status::errorf("{} is below the smallest file any head rule can make", format_size(size));
  std::vector<Variant> out;
  for (const auto& s : scorers)
    for (const auto& [h, steps] : heads) {
      Variant v;
      v.scorer = s.name;
      v.head_type = h;
      v.head_steps = steps;
      v.name = s.name + (h.empty() ? "" : "-" + head.substr(0, head.find('.')) + "-" + h);
      v.plan = dir + "/plan-" + v.name + ".json";
      const std::string gguf = dir + "/" + v.name + ".gguf", stem = dir + "/" + v.name;
      if (!load_eval(e.eval_path(stem, true)).is_ok()) {
        GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("solve + emit {} at {}", v.name, format_size(size)), run::emit_seconds(e.ms),
                                      [&]() -> Status {
                                        std::vector<std::string> cmd = {e.G, "solve", e.pool, "--size",
                                                                        std::to_string(size), "-o", v.plan};
                                        cmd.insert(cmd.end(), s.args.begin(), s.args.end());
                                        if (!h.empty()) cmd.insert(cmd.end(), {"--fixed", head + "=" + h});
                                        GAMMA_RETURN_IF_ERROR(run_step("solve", cmd));
                                        return run_step("emit", {e.G, "emit", e.pool, v.plan, "-o", gguf});
                                      }));
      }
      GAMMA_ASSIGN_OR_RETURN(EvalResult r, eval_file(e, gguf, stem, true));
      fs::remove(gguf, ec);
      v.bytes = *r.model.file_bytes;
      v.kld = *r.kld->mean;
      v.kld_err = *r.kld->mean_stderr;
      out.push_back(v);
    }
  return out;
}

const Variant& best_of(const std::vector<Variant>& vs) {
  return *std::min_element(vs.begin(), vs.end(), [](const Variant& a, const Variant& b) { return a.kld < b.kld; });
}

json variant_json(const Variant& v) {
  return {{"name", v.name}, {"scorer", v.scorer}, {"head_type", v.head_type}, {"head_steps", v.head_steps}, {"plan", v.plan},
          {"file_bytes", v.bytes}, {"valid_kld", v.kld}, {"valid_kld_stderr", v.kld_err}};
}

// Emits `v`'s plan to `gguf` unless it is there already.
Status emit_variant(Env& e, const Variant& v, const std::string& gguf) {
  if (file_exists(gguf)) return Status::ok();
  return e.stage("emit " + v.name + " -> " + gguf, run::emit_seconds(e.ms),
                 [&] { return run_step("emit", {e.G, "emit", e.pool, v.plan, "-o", gguf}); });
}

// ---- the target as a size --------------------------------------------------------------------

// --max-kld: the smallest size whose best variant's validation KLD is at most X, by bisection
// over sizes (to 1 % of the size, at most 10 probes). Every probe is recorded.
Result<uint64_t> search_max_kld(Env& e, const Manifest& man, const solve::Allocator& stat,
                                const std::vector<Scorer>& scorers, const Range& range,
                                json& probes) {
  const double X = e.o.max_kld;
  auto probe = [&](uint64_t size) -> Result<double> {
    GAMMA_ASSIGN_OR_RETURN(auto vs, variants_at(e, man, stat, scorers, size));
    const Variant& b = best_of(vs);
    probes.push_back({{"size", size}, {"best", variant_json(b)}});
    std::printf("   probe %s: best %s, validation KLD %.6f (%s %g)\n", format_size(size).c_str(), b.name.c_str(), b.kld,
                b.kld <= X ? "<=" : ">", X);
    return b.kld;
  };
  GAMMA_ASSIGN_OR_RETURN(double top, probe(range.max));
  if (top > X)
    return Status::errorf("--max-kld {:g}: no file reaches it; the largest ({}) has validation KLD {:.6f}, so the feasible "
                          "range is KLD >= {:.6f}",
                          X, format_size(range.max), top, top);
  GAMMA_ASSIGN_OR_RETURN(double bottom, probe(range.min));
  if (bottom <= X) return range.min;
  uint64_t lo = range.min, hi = range.max;
  for (int i = 0; i < 10 && double(hi - lo) > 0.01 * double(hi); ++i) {
    const uint64_t mid = lo + (hi - lo) / 2;
    GAMMA_ASSIGN_OR_RETURN(double k, probe(mid));
    (k <= X ? hi : lo) = mid;
  }
  return hi;
}

// ---- llama.cpp's mixes -----------------------------------------------------------------------

struct MixRow {
  std::string name, path;
  uint64_t bytes = 0, predicted = 0;
  double valid_kld = 0, valid_err = 0;
  EvalResult report;
  bool fits = false;
};

std::vector<std::string> quantize_cmd(const Env& e, const std::string& mix, const std::string& out) {
  std::vector<std::string> cmd = {e.o.llama_bin + "/llama-quantize"};
  if (!e.imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", e.imatrix});
  cmd.insert(cmd.end(), {e.teacher, out, mix, e.T});
  return cmd;
}

// llama-quantize's prediction of every standard mix it can make here (cached: a dry run loads
// the teacher's header, a fraction of a second each).
Result<std::map<std::string, uint64_t>> predict_mixes(Env& e) {
  const std::string cache = e.W + "/mixes-predicted.json";
  std::map<std::string, uint64_t> out;
  if (auto j = read_json(cache, "gamma.run.mixes", 1); j.is_ok() && (*j)["imatrix"] == e.imatrix) {
    for (const auto& [k, v] : (*j)["predicted"].items()) out[k] = v.get<uint64_t>();
    return out;
  }
  GAMMA_ASSIGN_OR_RETURN(uint64_t header, run::gguf_header_bytes(e.teacher));
  for (const auto& mix : run::standard_mixes()) {
    GAMMA_ASSIGN_OR_RETURN(auto p, run::predict_mix(e.o.llama_bin + "/llama-quantize", e.teacher, e.imatrix, mix, header));
    if (p.needs_imatrix && e.imatrix.empty()) continue;
    out[mix] = p.file_bytes;
  }
  json j = json_header("gamma.run.mixes", 1);
  j["imatrix"] = e.imatrix;
  j["predicted"] = out;
  GAMMA_RETURN_IF_ERROR(write_json(cache, j));
  return out;
}

Result<MixRow> make_mix(Env& e, const std::string& mix, uint64_t predicted) {
  MixRow r;
  r.name = mix;
  r.predicted = predicted;
  r.path = e.W + "/llama-" + mix + ".gguf";
  if (!file_exists(r.path)) {
    const std::string tmp = e.W + "/llama-" + mix + ".partial.gguf";
    GAMMA_RETURN_IF_ERROR(e.stage("llama-quantize " + mix + " -> " + r.path, run::mix_seconds(e.ms, mix), [&]() -> Status {
      GAMMA_RETURN_IF_ERROR(run_tool("llama-quantize", quantize_cmd(e, mix, tmp), e.W + "/llama-" + mix + ".log"));
      if (std::rename(tmp.c_str(), r.path.c_str()) != 0) return Status::errorf("cannot write {}", r.path);
      return Status::ok();
    }));
  }
  GAMMA_ASSIGN_OR_RETURN(uint64_t bytes, file_size(r.path));
  r.bytes = bytes;
  GAMMA_ASSIGN_OR_RETURN(EvalResult v, eval_file(e, r.path, e.W + "/llama-" + mix, true));
  r.valid_kld = *v.kld->mean;
  r.valid_err = *v.kld->mean_stderr;
  GAMMA_ASSIGN_OR_RETURN(r.report, eval_file(e, r.path, e.W + "/llama-" + mix, false));
  return r;
}

// `ev` passed load_eval: its figures are there.
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

// ---- the picture -----------------------------------------------------------------------------

Status draw_run_png(const std::string& path, const json& summary) {
  report::LineChart c;
  c.title = fmt::format("{}: KLD vs the teacher on {}", fs::path(summary["model"].get<std::string>()).filename().string(),
                        fs::path(summary["report"]["text"].get<std::string>()).filename().string());
  c.x_label = "file size (MB)";
  c.y_label = "KLD vs teacher";
  c.log_y = true;
  report::Series front{"gamma (" + summary["chosen"]["name"].get<std::string>() + ") at each size", {}, {}, {}, {}};
  std::vector<std::pair<double, double>> pts;
  for (const auto& r : summary["front"]) pts.push_back({r["file_bytes"].get<double>() / 1e6, r["kld_mean"].get<double>()});
  std::sort(pts.begin(), pts.end());
  for (auto [x, y] : pts) front.x.push_back(x), front.y.push_back(y);
  if (!front.x.empty()) c.series.push_back(front);
  // The file the verdict chose is marked: gamma's, or the llama.cpp mix that beat it.
  const json v = summary.value("verdict", json::object());
  const bool mix_won = v.is_object() && v.value("winner", "") == "llama.cpp";
  report::Series chosen{mix_won ? "gamma's best plan" : "gamma's file (chosen)", {}, {}, {}, {}};
  const auto& g = summary["rows"][0];
  chosen.x.push_back(g["file_bytes"].get<double>() / 1e6);
  chosen.y.push_back(g["kld_mean"].get<double>());
  chosen.point_labels.push_back("gamma");
  c.series.push_back(chosen);
  // Mixes that are the same file (llama.cpp falls back to the same types, e.g. Q2_K and Q3_K_S
  // on 576-wide rows) are one point with both names.
  report::Series mixes{"llama.cpp mixes", {}, {}, {}, {}};
  report::Series won{"chosen file (a llama.cpp mix)", {}, {}, {}, {}};
  for (const auto& m : summary["mixes"]) {
    const double x = m["file_bytes"].get<double>() / 1e6, y = m["kld_mean"].get<double>();
    const std::string name = m["label"].get<std::string>().substr(10);  // "llama.cpp "
    if (mix_won && name == v.value("mix", "")) won.x.push_back(x), won.y.push_back(y);  // named by its mixes point
    size_t i = 0;
    while (i < mixes.x.size() && !(mixes.x[i] == x && mixes.y[i] == y)) ++i;
    if (i < mixes.x.size()) {
      mixes.point_labels[i] += " = " + name;
      continue;
    }
    mixes.x.push_back(x), mixes.y.push_back(y), mixes.point_labels.push_back(name);
  }
  if (!mixes.x.empty()) {
    mixes.markers_only = true;
    c.series.push_back(mixes);
  }
  if (!won.x.empty()) {
    won.markers_only = true;
    c.series.push_back(won);
  }
  c.x_lines.push_back({summary["budget_bytes"].get<double>() / 1e6, "budget"});
  GAMMA_ASSIGN_OR_RETURN(report::Image img, report::draw_line_chart(c));
  return img.write_png(path);
}

// ---- dry run ---------------------------------------------------------------------------------

// The estimated pool time of `type`: over the weights of the modules that take it.
double pool_seconds(const Env& e, const Manifest& preview, const std::string& type) {
  double params = 0;
  for (const auto& m : preview.modules)
    if (m.find(type)) params += double(m.n_params);
  return run::pool_type_seconds(e.ms, type, params);
}

Status dry_run(Env& e, const Manifest& preview, const Range& range) {
  const auto& o = e.o;
  double total = 0;
  uint64_t disk = 0;
  auto line = [&](const std::string& what, bool cached, double s, uint64_t bytes) {
    std::printf("  %-44s %10s %12s\n", what.c_str(), cached ? "cached" : hms(s).c_str(),
                bytes ? format_size(bytes).substr(0, format_size(bytes).find(' ') + 4).c_str() : "");
    if (!cached) total += s, disk += bytes;
  };
  std::printf("gamma run --dry-run: %s (%.0fM weights, %.0fM in linear modules, %d layers), %d threads\n",
              fs::path(e.model).filename().c_str(), e.ms.params / 1e6, e.ms.linear_params / 1e6, e.ms.n_layer, e.ms.threads);
  std::printf("files gamma can make from the pool (%s): %s to %s\n",
              e.o.types.empty() ? "auto types" : "given types", format_size(range.min).c_str(), format_size(range.max).c_str());
  if (!o.size.empty()) std::printf("target: --size %s\n", o.size.c_str());
  else if (o.max_kld > 0) std::printf("target: --max-kld %g (bisection: about 8 probes, each every variant)\n", o.max_kld);
  else std::printf("target: --bpw %g of the linear modules (file size from the static plan)\n", o.bpw);
  std::printf("\n  %-44s %10s %12s\n", "step", "time", "disk");
  line("dequantize -> teacher (F32)", file_exists(e.teacher), run::dequantize_seconds(e.ms), uint64_t(4 * e.ms.params));
  if (o.imatrix == "auto")
    line(fmt::format("llama-imatrix ({} x {} tokens)", o.imatrix_chunks, o.eval_ctx), file_exists(e.imatrix),
         run::teacher_seconds(e.ms, double(o.imatrix_chunks) * o.eval_ctx), 4 << 20);
  const bool pool_done = file_exists(e.pool + "/manifest.json");
  for (const auto& t : preview.types) {
    uint64_t bytes = 0;
    for (const auto& m : preview.modules)
      if (auto* c = m.find(t)) bytes += c->file_bytes;
    line("pool " + t, pool_done || file_exists(e.pool + "/cand-" + t + ".gguf"), pool_seconds(e, preview, t), bytes);
  }
  for (const auto& s : o.scorers) {
    if (s == "hawq") line("hawq (HAWQ-V2 traces)", file_exists(e.W + "/scores-hawq.json"),
                          run::hawq_seconds(e.ms, o.hawq_samples, o.hawq_calib_tokens), 0);
    if (s == "gamma" && o.scores.empty())
      line(fmt::format("learn ({} steps)", learn_steps(e)), false, learn_estimate(e), 0);
    if (s == "gamma")
      line(fmt::format("layers ({} files, KLD each)", e.ms.n_layer + 1), file_exists(e.W + "/layers.json"), layers_estimate(e), 0);
  }
  // + gamma-fit and gamma-cal, and gamma-blend with hawq
  const bool has_gamma = std::count(o.scorers.begin(), o.scorers.end(), "gamma") > 0;
  const bool has_hawq = std::count(o.scorers.begin(), o.scorers.end(), "hawq") > 0;
  const int n_scorers = int(o.scorers.size()) + (has_gamma ? 2 : 0) + (has_gamma && has_hawq ? 1 : 0);
  const int variants = n_scorers * (1 + kHeadSteps) * (o.max_kld > 0 ? 8 : 1);
  const double vtok = double(e.valid_chunks) * o.eval_ctx, rtok = double(o.eval_chunks) * o.eval_ctx;
  const uint64_t file = range.max / 2 + range.min / 2;
  line(fmt::format("{} variants: solve + emit + validation eval", variants), false,
       variants * (run::emit_seconds(e.ms) + run::eval_seconds(e.ms, vtok, true)) + run::teacher_seconds(e.ms, vtok), file);
  const int mixes = o.compare == "none" ? 0 : o.compare == "auto" ? o.max_mixes + 1 : 1;
  line(fmt::format("up to {} llama.cpp mixes: quantize + 2 evals", mixes), false,
       mixes * (run::mix_seconds(e.ms, "IQ3_M") + run::eval_seconds(e.ms, vtok + rtok, true)), mixes * file);
  line(fmt::format("gamma at {} sizes on the report text", o.front ? mixes + 1 : 1), false,
       (o.front ? mixes + 1 : 1) * (run::emit_seconds(e.ms) + run::eval_seconds(e.ms, rtok, true)) +
           run::teacher_seconds(e.ms, rtok), file);
  std::printf("\n  %-44s %10s %12s\n", "total (estimate, 2-core reference speeds)", hms(total).c_str(),
              format_size(disk).substr(0, format_size(disk).find(' ') + 4).c_str());
  return Status::ok();
}

// 2-4. The teacher, the importance matrix and the pool, each made once.
Status make_inputs(Env& e, const PoolOptions& po, const Manifest& preview) {
  const RunOptions& o = e.o;
  // 2. The teacher: the model dequantized to F32 (for a quantized source, the best reference
  //    there is; reported as such).
  if (!file_exists(e.teacher))
    GAMMA_RETURN_IF_ERROR(e.stage("dequantize -> " + e.teacher, run::dequantize_seconds(e.ms), [&] {
      return run_step("dequantize", {e.G, "dequantize", e.model, "--type", "f32", "-o", e.teacher});
    }));
  // 3. Importance matrix, shared by gamma's pool and llama-quantize's mixes.
  if (o.imatrix == "auto" && !file_exists(e.imatrix))
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("llama-imatrix ({} chunks of {} tokens of {}) -> {}", o.imatrix_chunks,
                                              o.eval_ctx, fs::path(e.calib).filename().string(), e.imatrix),
                                  run::teacher_seconds(e.ms, double(o.imatrix_chunks) * o.eval_ctx), [&]() -> Status {
      const std::string tmp = e.W + "/imatrix.partial.gguf";
      GAMMA_RETURN_IF_ERROR(run_tool("imatrix",
          {o.llama_bin + "/llama-imatrix", "-m", e.model, "-f", e.calib, "-c", std::to_string(o.eval_ctx), "--chunks",
           std::to_string(o.imatrix_chunks), "-t", e.T, "-o", tmp}, e.W + "/imatrix.log"));
      if (std::rename(tmp.c_str(), e.imatrix.c_str()) != 0) return Status::errorf("cannot write {}", e.imatrix);
      return Status::ok();
    }));
  // 4. Pool (resumes by itself).
  if (!file_exists(e.pool + "/manifest.json")) {
    double eta = 0;
    for (const auto& t : preview.types) eta += pool_seconds(e, preview, t);
    std::string types_csv;
    for (const auto& t : po.types) types_csv += (types_csv.empty() ? "" : ",") + t;
    std::vector<std::string> cmd = {e.G, "pool", e.model, "--types", types_csv, "-o", e.pool, "-t", e.T};
    if (!e.imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", e.imatrix});
    for (const auto& x : e.q()) cmd.push_back(x);
    GAMMA_RETURN_IF_ERROR(e.stage("pool " + types_csv + " -> " + e.pool, eta, [&] { return run_step("pool", cmd); }));
  }
  return Status::ok();
}

// gamma's chosen scorer and head rule solved at a mix's size and measured on the report text:
// one point of the front in run.png. A plan identical to one measured already (above a size
// where the pool's best is reached, every budget gives the same file) reuses that measurement.
Result<json> front_point(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const Variant& best,
                         const solve::Allocator& stat, const MixRow& m, std::map<std::string, json>* measured) {
  const std::string dir = e.W + "/at-" + std::to_string(m.bytes);
  const std::string plan = dir + "/front-" + best.name + ".json", gguf = dir + "/front-" + best.name + ".gguf";
  const std::string stem = dir + "/front-" + best.name, ej = e.eval_path(stem, false);
  const std::string label = "gamma at " + m.name + "'s size";
  if (!load_eval(ej).is_ok()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    const Scorer& s = *std::find_if(scorers.begin(), scorers.end(), [&](const Scorer& x) { return x.name == best.scorer; });
    std::vector<std::string> cmd = {e.G, "solve", e.pool, "--size", std::to_string(m.bytes), "-o", plan};
    cmd.insert(cmd.end(), s.args.begin(), s.args.end());
    // The same rule: as many steps below the default head at that size.
    GAMMA_ASSIGN_OR_RETURN(auto h, head_at(man, stat, m.bytes, best.head_steps));
    if (!h) return json(nullptr);  // this rule cannot make a file that small: no point there
    if (!h->empty()) cmd.insert(cmd.end(), {"--fixed", output_head(man) + "=" + *h});
    GAMMA_RETURN_IF_ERROR(run_step("solve", cmd));
    GAMMA_ASSIGN_OR_RETURN(Plan pl, Plan::load(plan));
    const std::string key = json{pl.modules, pl.fixed}.dump();
    if (auto it = measured->find(key); it != measured->end()) {
      json row = it->second;
      row["label"] = label;
      row["same_file_as"] = it->second["label"];
      return row;
    }
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("emit {} at {}'s size", best.name, m.name), run::emit_seconds(e.ms),
                                  [&] { return run_step("emit", {e.G, "emit", e.pool, plan, "-o", gguf}); }));
    auto ev = eval_file(e, gguf, stem, false);
    std::error_code ec2;
    fs::remove(gguf, ec2);
    if (!ev.is_ok()) return ev.status();
  }
  GAMMA_ASSIGN_OR_RETURN(EvalResult fj, load_eval(ej));
  json row = report_row(label, plan, fj, NAN);
  if (auto pl = Plan::load(plan); pl.is_ok()) (*measured)[json{pl->modules, pl->fixed}.dump()] = row;
  return row;
}

// The table (report text), the verdict in words and where everything is.
void print_summary(const Env& e, const json& summary, double best_kld) {
  const RunOptions& o = e.o;
  const uint64_t budget = summary["budget_bytes"].get<uint64_t>();
  const json& verdict = summary["verdict"];
  const bool mix_wins = verdict["winner"] == "llama.cpp";
  std::printf("\n%s vs its F32 dequantization (teacher); budget %s; chosen on %s (%d chunks), reported on %s (%d chunks of %d):\n",
              fs::path(e.model).filename().c_str(), format_size(budget).c_str(), fs::path(e.valid_text).filename().c_str(),
              e.valid_chunks, fs::path(e.report_text).filename().c_str(), o.eval_chunks, o.eval_ctx);
  std::printf("  %-34s %13s %9s %12s %20s %8s %9s\n", "model", "file bytes", "bpw", "valid KLD", "KLD vs teacher", "top-1", "PPL");
  for (const auto& r : summary["rows"]) {
    const double bpw = 8.0 * r["file_bytes"].get<double>() / e.ms.params;
    const double vk = r["valid_kld"].is_number() ? r["valid_kld"].get<double>() : NAN;
    std::printf("  %-34s %13llu %9.4f %12s %11.6f ± %.6f %7.2f%% %9.4f\n", r["label"].get<std::string>().c_str(),
                (unsigned long long)r["file_bytes"].get<uint64_t>(), bpw,
                std::isnan(vk) ? "" : fmt::format("{:.6f}", vk).c_str(), r["kld_mean"].get<double>(),
                r["kld_stderr"].get<double>(), 100 * r["top1"].get<double>(), r["ppl"].get<double>());
  }
  if (mix_wins)
    std::printf("\nverdict: llama.cpp's %s %s gamma's file on validation (KLD %.6f vs %.6f).\nUse it: %s\n",
                verdict["mix"].get<std::string>().c_str(),
                o.max_kld > 0 ? "meets the KLD in fewer bytes than" : "fits the budget and beats",
                verdict["valid_kld"].get<double>(), best_kld, verdict["llama_quantize"].get<std::string>().c_str());
  else
    std::printf("\nverdict: gamma's file %s (no llama.cpp mix %s beats it on validation)\n",
                verdict["file"].get<std::string>().c_str(), o.max_kld > 0 ? "meets the KLD in fewer bytes and" : "that fits the budget");
  std::printf("summary: %s, picture: %s (total %s)\n", (e.W + "/run.json").c_str(), (e.W + "/run.png").c_str(),
              hms(e.elapsed()).c_str());
}

// Flags that need no file to be checked.
Status check_options(const RunOptions& o) {
  if (o.compare != "auto" && o.compare != "none" && !run::is_standard_mix(o.compare))
    return Status::errorf("--compare {}: not a llama.cpp standard mix (IQ1_S, ..., IQ4_NL, Q2_K, ..., Q8_0)", o.compare);
  for (const auto& s : o.scorers)
    if (s != "static" && s != "hawq" && s != "gamma")
      return Status::errorf("--scorers: unknown scorer {} (static, hawq or gamma)", s);
  if (o.scorers.empty()) return Status::error("--scorers: give at least one of static, hawq, gamma");
  return Status::ok();
}

// The texts and the work directory (created unless a dry run).
Status set_up(Env& e) {
  const RunOptions& o = e.o;
  e.G = o.gamma_exe;
  e.data = o.data_dir.empty() ? shared_data_dir() : o.data_dir;
  e.T = std::to_string(resolve_threads(o.threads));
  e.W = o.work;
  e.quiet = o.quiet || !::isatty(2);
  e.valid_chunks = o.valid_chunks > 0 ? o.valid_chunks : o.eval_chunks;
  e.report_text = o.eval_text.empty() ? e.data + "/text/wiki.test.raw" : o.eval_text;
  e.valid_text = o.valid_text.empty() ? e.data + "/text/wiki.valid.tokens" : o.valid_text;
  const std::vector<std::pair<std::string, size_t>> parts = {
      {e.data + "/text/war-and-peace.txt", kDefaultCalibProseBytes}, {e.data + "/text/python-calib.txt", kDefaultCalibCodeBytes}};
  std::vector<std::string> texts = {e.report_text, e.valid_text};
  if (o.calib.empty())
    for (const auto& p : parts) texts.push_back(p.first);
  else
    texts.push_back(o.calib);
  for (const auto& f : texts) {
    if (::access(f.c_str(), R_OK) != 0) return Status::errorf("cannot read {}: {}", f, std::strerror(errno));
    GAMMA_RETURN_IF_ERROR(check_text_file(f, "text"));
  }
  e.calib = o.calib.empty() ? e.W + "/calib.txt" : o.calib;
  if (o.dry_run) return Status::ok();
  std::error_code ec;
  fs::create_directories(e.W, ec);
  if (ec) return Status::errorf("cannot create work directory {}: {}", e.W, ec.message());
  if (::access(e.W.c_str(), W_OK) != 0) return Status::errorf("cannot write to work directory {}", e.W);
  // Two runs in one work directory would write the same files (llama-quantize's partial
  // outputs have fixed names): the second is refused while the first holds the lock.
  GAMMA_ASSIGN_OR_RETURN(auto lock, FileLock::try_acquire(e.W + "/.gamma-run.lock"));
  if (!lock) return Status::errorf("work directory {} is in use by another gamma run", e.W);
  e.lock.emplace(std::move(*lock));
  if (o.calib.empty() && !file_exists(e.calib)) {  // prose then code, one file: llama-imatrix reads one
    std::string text;
    for (const auto& [path, bytes] : parts) {  // byte for byte the sweep's calib-mix.txt
      GAMMA_ASSIGN_OR_RETURN(std::string t, read_text_file(path, "calibration text"));
      if (!text.empty() && text.back() != '\n') text += '\n';
      text += t.substr(0, bytes);
    }
    GAMMA_RETURN_IF_ERROR(write_file_atomic(e.calib, text));
  }
  return Status::ok();
}

// 1. The model, and what a pool of it would hold (sizes only: checks the target at once).
Result<Manifest> open_model(Env& e, PoolOptions* po) {
  const RunOptions& o = e.o;
  e.model = o.model;
  if (!file_exists(e.model) || fs::is_directory(e.model)) {
    std::printf("== fetch %s\n", o.model.c_str());
    GAMMA_ASSIGN_OR_RETURN(e.model, fetch_model(o.model));
  }
  GAMMA_ASSIGN_OR_RETURN(e.ms, model_size(e.model, std::stoi(e.T)));
  e.teacher = e.W + "/teacher-f32.gguf";
  e.pool = e.W + "/pool";
  if (o.imatrix == "auto") e.imatrix = e.W + "/imatrix.gguf";
  else if (o.imatrix != "none") e.imatrix = o.imatrix;
  if (!e.imatrix.empty() && o.imatrix != "auto" && ::access(e.imatrix.c_str(), R_OK) != 0)
    return Status::errorf("cannot read {}: {}", e.imatrix, std::strerror(errno));
  po->model_path = e.model;
  po->types = o.types.empty() ? std::vector<std::string>{"auto"} : o.types;
  po->imatrix_path = e.imatrix;
  po->preview = true;
  return build_pool(*po);
}

// 5. The budget as a file size (--bpw: the static plan's file at that linear bpw; --max-kld:
//    none yet, 0), and the linear bpw GAMMA learns at (the static plan's at the budget).
Result<std::pair<uint64_t, double>> budget_of(const RunOptions& o, const solve::Allocator& stat, uint64_t size_target,
                                              const Range& range) {
  uint64_t budget = size_target;
  double learn_bpw = o.bpw;
  if (o.max_kld <= 0 && budget == 0) {
    solve::Budget b;
    b.bpw = o.bpw;
    GAMMA_ASSIGN_OR_RETURN(auto a, stat.solve(b));
    budget = a.size.file_bytes;
  }
  if (learn_bpw <= 0) {
    solve::Budget b;
    b.kind = solve::Budget::Kind::kFileBytes;
    b.file_bytes = budget ? budget : range.min / 2 + range.max / 2;
    GAMMA_ASSIGN_OR_RETURN(auto a, stat.solve(b));
    learn_bpw = a.size.linear_bpw;
  }
  return std::make_pair(budget, learn_bpw);
}

// 7. llama.cpp's mixes near the budget (or the one asked for), on the same chunks.
Result<std::vector<MixRow>> compared_mixes(Env& e, uint64_t budget) {
  const RunOptions& o = e.o;
  std::vector<MixRow> mixes;
  if (o.compare == "none") return mixes;
  GAMMA_ASSIGN_OR_RETURN(auto predicted, predict_mixes(e));
  std::vector<std::string> names;
  if (o.compare == "auto") {
    names = run::mixes_for_budget(predicted, budget, 0.85, o.max_mixes);
  } else if (!predicted.count(o.compare)) {
    return Status::errorf("--compare {}: llama-quantize makes it only with an imatrix (not with --imatrix none)", o.compare);
  } else {
    names = {o.compare};
  }
  for (const auto& n : names) {
    GAMMA_ASSIGN_OR_RETURN(MixRow r, make_mix(e, n, predicted.at(n)));
    r.fits = r.bytes <= budget;
    mixes.push_back(std::move(r));
  }
  return mixes;
}

// 9. The verdict: gamma's file unless a mix that fits the budget (for --max-kld: one that
//    meets the KLD in fewer bytes) is better on validation.
json verdict_of(const Env& e, const std::vector<MixRow>& mixes, const Variant& best, const std::string& out) {
  const RunOptions& o = e.o;
  const MixRow* winner = nullptr;
  for (const auto& m : mixes) {
    const bool beats = o.max_kld > 0 ? (m.valid_kld <= o.max_kld && m.bytes < best.bytes)
                                     : (m.fits && m.valid_kld < best.kld);
    if (beats && (!winner || (o.max_kld > 0 ? m.bytes < winner->bytes : m.valid_kld < winner->valid_kld))) winner = &m;
  }
  json verdict = {{"winner", winner ? "llama.cpp" : "gamma"}, {"file", winner ? winner->path : out}};
  if (winner) {
    std::string cmd;
    for (const auto& a : quantize_cmd(e, winner->name, "OUT.gguf")) cmd += (cmd.empty() ? "" : " ") + a;
    verdict["mix"] = winner->name;
    verdict["valid_kld"] = winner->valid_kld;
    verdict["llama_quantize"] = cmd;
  }
  return verdict;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t disk = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) disk += it->file_size(ec);
  return disk;
}

// 8. The report text: gamma's file, each mix, and gamma's chosen variant at each mix's size
//    (the front), with everything the run decided: run.json's body.
Result<json> summarize(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                       const std::vector<Variant>& vs, const Variant& best, const std::string& out, uint64_t budget,
                       const Range& range, const json& probes, const std::vector<MixRow>& mixes) {
  const RunOptions& o = e.o;
  json summary = json_header("gamma.run", 2);
  summary["model"] = e.model;
  summary["teacher"] = e.teacher;
  summary["imatrix"] = e.imatrix;
  summary["calibration"] = e.calib;
  summary["target"] = {{"size", o.size}, {"bpw", o.bpw}, {"max_kld", o.max_kld}};
  summary["budget_bytes"] = budget;
  summary["feasible_bytes"] = {range.min, range.max};
  summary["validation"] = {{"text", e.valid_text}, {"ctx", o.eval_ctx}, {"chunks", e.valid_chunks}};
  summary["report"] = {{"text", e.report_text}, {"ctx", o.eval_ctx}, {"chunks", o.eval_chunks}};
  summary["scorers"] = json::array();
  for (const auto& s : scorers) summary["scorers"].push_back({{"name", s.name}, {"solve_args", s.args}});
  summary["tried"] = json::array();
  for (const auto& v : vs) summary["tried"].push_back(variant_json(v));
  summary["chosen"] = variant_json(best);
  summary["max_kld_probes"] = probes;
  GAMMA_ASSIGN_OR_RETURN(EvalResult mine, eval_file(e, out, out.substr(0, out.size() - 5), false));
  summary["rows"] = json::array({report_row("gamma (" + best.name + ")", out, mine, best.kld)});
  summary["mixes"] = json::array();
  summary["front"] = json::array({summary["rows"][0]});
  std::map<std::string, json> measured;  // plan (modules + fixed types) -> its report row
  if (auto pl = Plan::load(best.plan); pl.is_ok()) measured[json{pl->modules, pl->fixed}.dump()] = summary["rows"][0];
  for (const auto& m : mixes) {
    json row = report_row("llama.cpp " + m.name, m.path, m.report, m.valid_kld);
    row["predicted_bytes"] = m.predicted;
    row["fits_budget"] = m.fits;
    summary["mixes"].push_back(row);
    summary["rows"].push_back(row);
    if (!o.front || m.bytes < range.min || m.bytes == best.bytes) continue;
    GAMMA_ASSIGN_OR_RETURN(json frow, front_point(e, man, scorers, best, stat, m, &measured));
    if (frow.is_null()) continue;
    summary["front"].push_back(frow);
    summary["rows"].push_back(frow);
  }
  summary["verdict"] = verdict_of(e, mixes, best, out);
  summary["stages"] = e.stages;
  summary["seconds"] = e.elapsed();
  summary["work_dir_bytes"] = dir_bytes(e.W);
  return summary;
}

}  // namespace

Status run_pipeline(const RunOptions& o) {
  GAMMA_RETURN_IF_ERROR(check_options(o));
  // A malformed --size is reported once the feasible range is known (below), so the one
  // line says what would have worked.
  uint64_t size_target = 0;
  Status size_error;
  if (!o.size.empty()) {
    auto s = solve::parse_size(o.size);
    if (s.is_ok()) size_target = *s;
    else size_error = s.status().with_context("--size");
  }
  Env e(o);
  GAMMA_RETURN_IF_ERROR(set_up(e));
  PoolOptions po;
  GAMMA_ASSIGN_OR_RETURN(Manifest preview, open_model(e, &po));
  GAMMA_ASSIGN_OR_RETURN(Range range, feasible_range(preview));
  if (!size_error.is_ok())
    return Status::errorf("{}; the feasible range is {} to {}", size_error.message(), format_size(range.min),
                          format_size(range.max));
  if (!o.size.empty() && size_target < range.min)
    return Status::errorf("--size {} is below the smallest file this pool can make: the feasible range is {} to {}",
                          o.size, format_size(range.min), format_size(range.max));
  if (o.dry_run) return dry_run(e, preview, range);

  GAMMA_RETURN_IF_ERROR(make_inputs(e, po, preview));
  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(e.pool));
  GAMMA_ASSIGN_OR_RETURN(range, feasible_range(man));
  GAMMA_ASSIGN_OR_RETURN(solve::Scores st, solve::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto stat, solve::Allocator::create(man, st, {}));
  GAMMA_ASSIGN_OR_RETURN(auto bl, budget_of(o, stat, size_target, range));
  uint64_t budget = bl.first;
  GAMMA_ASSIGN_OR_RETURN(std::vector<Scorer> scorers, prepare_scorers(e, bl.second));

  // 6. gamma's file: the best variant at the budget on validation text.
  json probes = json::array();
  if (o.max_kld > 0) {
    GAMMA_ASSIGN_OR_RETURN(budget, search_max_kld(e, man, stat, scorers, range, probes));
  }
  GAMMA_ASSIGN_OR_RETURN(auto vs, variants_at(e, man, stat, scorers, std::min(budget, range.max)));
  const Variant best = best_of(vs);
  // Named by budget and variant: a rerun that chooses another variant never reports a stale file.
  const std::string out = e.W + "/gamma-" + std::to_string(budget) + "-" + best.name + ".gguf";
  GAMMA_RETURN_IF_ERROR(emit_variant(e, best, out));
  std::printf("== chosen on validation: %s (KLD %.6f +/- %.6f, %s)\n", best.name.c_str(), best.kld, best.kld_err,
              format_size(best.bytes).c_str());

  GAMMA_ASSIGN_OR_RETURN(std::vector<MixRow> mixes, compared_mixes(e, budget));
  GAMMA_ASSIGN_OR_RETURN(json summary, summarize(e, man, scorers, stat, vs, best, out, budget, range, probes, mixes));
  GAMMA_RETURN_IF_ERROR(write_json(e.W + "/run.json", summary));
  if (auto st2 = draw_run_png(e.W + "/run.png", summary); !st2.is_ok())
    std::fprintf(stderr, "gamma: warning: run.png: %s\n", st2.message().c_str());
  print_summary(e, summary, best.kld);
  return Status::ok();
}

}  // namespace gm
