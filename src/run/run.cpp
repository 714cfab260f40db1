// gamma run's steps in order (run.h): the model, the texts and the work directory; the teacher,
// imatrix and pool; the scorers; then at each target size the chosen file, the mixes, the
// summary. The pieces live by concern in the other files of src/run (pipeline.h).
#include "run/run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "decoder/activations.h"
#include "fetch/fetch.h"
#include "gguf_model/model.h"
#include "pool/pool.h"
#include "run/mixes.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "solve/budget.h"
#include "util/data.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {
namespace run {
namespace {

using solve::format_size;

// Flags that need no file to be checked.
Status check_options(const RunOptions& o) {
  if (o.compare != "auto" && o.compare != "none" && !is_standard_mix(o.compare))
    return Status::errorf("--compare {}: not a llama.cpp standard mix (IQ1_S, ..., IQ4_NL, Q2_K, ..., Q8_0)", o.compare);
  for (const auto& s : o.scorers)
    if (s != "static" && s != "hawq" && s != "gamma" && s != "static-cal")
      return Status::errorf("--scorers: unknown scorer {} (static, hawq, gamma or static-cal)", s);
  if (o.scorers.empty()) return Status::error("--scorers: give at least one of static, hawq, gamma, static-cal");
  return Status::ok();
}

// --valid-text, "wiki" when not given.
std::vector<std::string> valid_names(const RunOptions& o) {
  return o.valid_texts.empty() ? std::vector<std::string>{"wiki"} : o.valid_texts;
}

// The texts and the work directory (created unless a dry run).
Status set_up(Env& e) {
  const RunOptions& o = e.o;
  e.G = o.gamma_exe;
  e.data = shared_data_dir();
  e.T = std::to_string(resolve_threads(o.threads));
  e.W = o.work;
  e.quiet = o.quiet || !::isatty(2);
  const int valid_chunks = o.valid_chunks > 0 ? o.valid_chunks : o.eval_chunks;
  e.report = {test_text_path(o.eval_texts.empty() ? "wiki" : o.eval_texts.front()), o.eval_chunks, false};
  std::vector<std::string> texts = {e.report.path};
  for (size_t i = 1; i < o.eval_texts.size(); ++i) {
    e.also.push_back({test_text_path(o.eval_texts[i]), o.eval_chunks, false});
    texts.push_back(e.also.back().path);
  }
  for (const auto& v : valid_names(o)) {
    e.valid.push_back({validation_text_path(v, e.W), valid_chunks, true});
    if (o.race_chunks > 0 && o.race_chunks < valid_chunks) e.race.push_back({e.valid.back().path, o.race_chunks, true});
    texts.push_back(validation_text_source(v));
  }
  if (o.calib.empty())
    for (const auto& p : default_calibration_parts()) texts.push_back(p.path);
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
  // The calibration activations gamma's cache held before this job's first start: those it makes
  // itself are dropped once its scorers are ready (drop_activations), these never.
  if (const std::string before = activations_before_path(e); !file_exists(before)) {
    json j = json_header("gamma.run.activations", 1);
    j["keys_before"] = activation_cache_keys(activation_cache_root({}));
    GAMMA_RETURN_IF_ERROR(write_json(before, j));
  }
  for (const auto& v : valid_names(o)) GAMMA_RETURN_IF_ERROR(make_validation_text(v, e.W));
  if (o.calib.empty() && !file_exists(e.calib)) {  // prose then code, one file: llama-imatrix reads one
    GAMMA_ASSIGN_OR_RETURN(std::string text, default_calibration_text());
    GAMMA_RETURN_IF_ERROR(write_file_atomic(e.calib, text));
  }
  return Status::ok();
}

// True when every tensor of 2+ dims is F32.
// Whether every matrix of the model is F32, or F16 when `f16_ok`: then it is its own teacher.
Result<bool> is_teacher_model(const std::string& path, bool f16_ok) {
  GAMMA_ASSIGN_OR_RETURN(auto m, Model::open(path));
  for (const auto& t : m->tensors())
    if (t.shape.size() >= 2 && t.type != GGML_TYPE_F32 && !(f16_ok && t.type == GGML_TYPE_F16)) return false;
  return true;
}

// The model, and what a pool of it would hold (sizes only: checks the target at once).
Result<Manifest> open_model(Env& e, PoolOptions* po) {
  const RunOptions& o = e.o;
  GAMMA_ASSIGN_OR_RETURN(e.model, resolve_model(o.model, [&] { std::printf("== fetch %s\n", o.model.c_str()); }));
  GAMMA_ASSIGN_OR_RETURN(e.ms, model_size(e.model, std::stoi(e.T)));
  // A model already in F32 (e.g. `gamma dequantize --dither`'s de-gridded teacher), or F16 under
  // --teacher-type f16, is its own teacher: a copy would cost its size in disk and time and change nothing.
  GAMMA_ASSIGN_OR_RETURN(bool own, is_teacher_model(e.model, o.teacher_type == "f16"));
  e.teacher = own ? e.model : e.W + "/teacher-" + o.teacher_type + ".gguf";
  e.pool = e.W + "/pool";
  if (o.imatrix == "auto") e.imatrix = e.W + "/imatrix.gguf";
  else if (o.imatrix != "none") e.imatrix = o.imatrix;
  if (!e.imatrix.empty() && o.imatrix != "auto" && ::access(e.imatrix.c_str(), R_OK) != 0)
    return Status::errorf("cannot read {}: {}", e.imatrix, std::strerror(errno));
  po->model_path = e.model;
  po->types = o.types.empty() ? std::vector<std::string>{auto_types(o)} : o.types;
  po->imatrix_path = e.imatrix;
  po->preview = true;
  return build_pool(*po);
}

// The teacher and the importance matrix, each made once.
Status make_teacher(Env& e) {
  const RunOptions& o = e.o;
  // The teacher: the model dequantized to F32 (for a quantized source, the best reference
  // there is; reported as such), or to F16 (--teacher-type).
  if (!file_exists(e.teacher))
    GAMMA_RETURN_IF_ERROR(e.stage("dequantize -> " + e.teacher, dequantize_seconds(e.ms), [&] {
      return run_step("dequantize", {e.G, "dequantize", e.model, "--type", o.teacher_type, "-o", e.teacher});
    }));
  // The importance matrix, shared by gamma's pool and llama-quantize's mixes.
  if (o.imatrix == "auto" && !file_exists(e.imatrix))
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("llama-imatrix ({} chunks of {} tokens of {}) -> {}", o.imatrix_chunks,
                                              o.eval_ctx, fs::path(e.calib).filename().string(), e.imatrix),
                                  imatrix_seconds(e.ms, double(o.imatrix_chunks) * o.eval_ctx), [&]() -> Status {
      const std::string tmp = e.W + "/imatrix.partial.gguf";
      GAMMA_RETURN_IF_ERROR(run_tool("imatrix",
          {o.llama_bin + "/llama-imatrix", "-m", e.model, "-f", e.calib, "-c", std::to_string(o.eval_ctx), "--chunks",
           std::to_string(o.imatrix_chunks), "-t", e.T, "-o", tmp}, e.W + "/imatrix.log"));
      if (std::rename(tmp.c_str(), e.imatrix.c_str()) != 0) return Status::errorf("cannot write {}", e.imatrix);
      return Status::ok();
    }));
  return Status::ok();
}

// The pool (resumes by itself), made once: of the candidates plans near `sizes` can take
// (prune.cpp) unless --pool-window -1.
Status make_pool(Env& e, const PoolOptions& po, const Manifest& preview, const std::vector<uint64_t>& sizes) {
  const RunOptions& o = e.o;
  std::string only;
  if (prunes(e) && (!file_exists(e.pool + "/manifest.json") || file_exists(e.W + "/pool-only.json"))) {
    GAMMA_ASSIGN_OR_RETURN(only, pool_only(e, preview, sizes));
  }
  if (!file_exists(e.pool + "/manifest.json")) {
    double eta = e.pool_quantize_s;
    std::string types_csv;
    for (const auto& t : po.types) types_csv += (types_csv.empty() ? "" : ",") + t;
    std::vector<std::string> cmd = {e.G, "pool", e.model, "--types", types_csv, "-o", e.pool, "-t", e.T};
    if (o.stream_pool) {
      cmd.insert(cmd.end(), {"--stream", "--estimate-rows", std::to_string(o.estimate_rows)});
      eta = estimate_pool_seconds(e, preview, o.estimate_rows) * (only.empty() ? 1.0 : window_share(o.pool_window));
    }
    if (!e.imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", e.imatrix});
    if (!only.empty()) cmd.insert(cmd.end(), {"--only", only});
    for (const auto& x : e.q()) cmd.push_back(x);
    GAMMA_RETURN_IF_ERROR(e.stage(std::string("pool ") + (o.stream_pool ? "(streamed) " : "") + types_csv + " -> " + e.pool,
                                  eta, [&] { return run_step("pool", cmd); }));
  }
  return Status::ok();
}

// One target size: gamma's file (the best variant on validation text), the mixes near it, the
// summary in `json_path` and its picture in `png_path`.
Result<json> at_target(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                       const Range& range, uint64_t budget, const std::string& size_text, const std::string& json_path,
                       const std::string& png_path, bool last_target) {
  const RunOptions& o = e.o;
  json probes = json::array();
  if (o.max_kld > 0) {
    GAMMA_ASSIGN_OR_RETURN(budget, search_max_kld(e, man, stat, scorers, range, probes));
  }
  const std::string mix_target = mix_size_name(size_text);
  // The mixes first: each is quantized from the teacher, measured and removed before gamma's
  // variants fill a streamed pool's emit cache. On Qwen-1.5B at Q2_K's size the mixes then took
  // the disk to 8.7 GB, not 10.6; the job's peak (10.6 GB) is now the front's emits beside the
  // full emit cache (results/job_cost_qwen_q2k_stream/resumed/).
  GAMMA_ASSIGN_OR_RETURN(std::vector<MixRow> mixes, compared_mixes(e, budget));
  // --size MIX: the budget was llama-quantize's prediction; once the mix is built it is the
  // file's own size (the prediction is within a few KiB, on either side).
  for (const auto& m : mixes)
    if (m.name == mix_target) budget = m.bytes;
  for (auto& m : mixes) m.fits = m.bytes <= budget;
  GAMMA_ASSIGN_OR_RETURN(auto vs, variants_at(e, man, stat, scorers, std::min(budget, range.max)));
  std::vector<Variant> families;
  if (o.each_scorer) {
    GAMMA_ASSIGN_OR_RETURN(families, family_bests(e, vs, best_of(vs)));
  }
  // Validation is over once the last target's variant is chosen: the teacher's log-probs on
  // those texts go before the front's files are made (the job's peak of disk; Qwen-1.5B: 0.7 GB).
  if (last_target) {
    e.drop_kld_bases(e.valid);
    e.drop_kld_bases(e.race);
  }
  const Variant best = best_of(vs);
  // Named by budget and variant: a rerun that chooses another variant never reports a stale file.
  const std::string out = e.W + "/gamma-" + std::to_string(budget) + budgets_tag(e) + "-" + best.name + ".gguf";
  GAMMA_RETURN_IF_ERROR(emit_variant(e, best, out));
  std::printf("== chosen on validation: %s (KLD %.6f +/- %.6f, %s)\n", best.name.c_str(), best.kld, best.kld_err,
              format_size(best.bytes).c_str());

  GAMMA_ASSIGN_OR_RETURN(json summary,
                         summarize(e, man, scorers, stat, vs, best, out, budget, size_text, range, probes, mixes, families));
  GAMMA_RETURN_IF_ERROR(write_json(json_path, summary));
  if (auto st = draw_run_png(png_path, summary); !st.is_ok())
    std::fprintf(stderr, "gamma: warning: %s: %s\n", fs::path(png_path).filename().c_str(), st.message().c_str());
  print_summary(e, summary, json_path, png_path);
  return summary;
}

// at_target, and when gamma's file measures below a speed budget (the table predicted it would
// not): again with the budget raised by the shortfall, up to --speed-retries times, while a plan
// of the size can reach it. The summary keeps the budget asked and each try's measurement.
Result<json> at_target_measured(Env& e, const Manifest& man, const std::vector<Scorer>& scorers,
                                const solve::Allocator& stat, const Range& range, uint64_t budget,
                                const std::string& size_text, const std::string& json_path,
                                const std::string& png_path, bool last) {
  const Env::SpeedBudgets asked = e.budget;
  json tries = json::array();
  for (int k = 0;; ++k) {
    GAMMA_ASSIGN_OR_RETURN(json s, at_target(e, man, scorers, stat, range, budget, size_text, json_path, png_path, last));
    const json& g = s["rows"][0];
    if (g.contains("tg128"))
      tries.push_back({{"decode_tps", e.budget.decode_tps}, {"prefill_tps", e.budget.prefill_tps}, {"file", g["path"]},
                       {"tg128", g["tg128"]}, {"pp512", g["pp512"]}, {"predicted_tg128", g["predicted_tg128"]},
                       {"predicted_pp512", g["predicted_pp512"]},
                       // what gamma's file was held to in this try's rounds (the budget file's measurement, or the number)
                       {"measured_budget_tg128", measured_decode_budget(e)},
                       {"measured_budget_pp512", measured_prefill_budget(e)}});
    auto done = [&]() -> Result<json> {
      if (tries.size() > 1) {
        s["speed"]["asked"] = {{"decode_tps", asked.decode_tps}, {"prefill_tps", asked.prefill_tps}};
        s["speed"]["tries"] = tries;
        GAMMA_RETURN_IF_ERROR(write_json(json_path, s));
      }
      return s;
    };
    if (k >= e.o.speed_retries || s["verdict"].value("gamma_meets_budgets_measured", true)) return done();
    const Env::SpeedBudgets before = e.budget;
    const double want_tg = measured_decode_budget(e), want_pp = measured_prefill_budget(e);
    if (!raise_by_shortfall(e, g)) return done();
    if (auto reach = head_rules(e, man, stat, budget); !reach.is_ok()) {
      std::printf("== gamma's file measured below the speed budget; no plan of this size reaches the raised budget "
                  "(%s): kept\n", reach.status().message().c_str());
      e.budget = before;
      return done();
    }
    std::printf("\n== gamma's file measured tg128 %.2f / pp512 %.1f against %.2f / %.1f asked: solving again at "
                "decode >= %.2f, prompts >= %.1f by the table (try %d of %d)\n",
                g["tg128"].get<double>(), g["pp512"].get<double>(), want_tg, want_pp, e.budget.decode_tps,
                e.budget.prefill_tps, k + 2, e.o.speed_retries + 1);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace run

// The defaults that depend on the work directory: a run resumes on what an earlier run made
// there (its F32 teacher, its pool as stored or streamed), so a new default never mixes two
// teachers or two pools in one directory.
static RunOptions resolve_work_defaults(const RunOptions& given) {
  RunOptions o = given;
  if (o.teacher_type == "auto") o.teacher_type = file_exists(o.work + "/teacher-f32.gguf") ? "f32" : "f16";
  if (file_exists(o.work + "/pool/manifest.json"))
    if (auto m = Manifest::load(o.work + "/pool"); m.is_ok()) o.stream_pool = m->streamed;
  return o;
}

Status run_pipeline(const RunOptions& given) {
  using namespace run;
  const RunOptions o = resolve_work_defaults(given);
  GAMMA_RETURN_IF_ERROR(check_options(o));
  // Each --size parsed once; a malformed one is reported once the feasible range is known
  // (below), so the one line says what would have worked.
  // A standard mix's name is that mix's file size, known once the imatrix is (it changes some
  // mixes' types: IQ3_XXS on Qwen-1.5B is 750 MiB of tensors without one, 728 with); 0 until then.
  std::vector<uint64_t> sizes;
  bool sizes_named = false;  // some --size is a mix's name, not resolved yet
  auto unresolved = [&](size_t i) { return sizes_named && !mix_size_name(o.sizes[i]).empty(); };
  Status size_error;
  for (const auto& s : o.sizes) {
    if (!mix_size_name(s).empty()) {
      sizes.push_back(0);
      sizes_named = true;
      continue;
    }
    auto b = solve::parse_size(s);
    if (!b.is_ok() && size_error.is_ok()) size_error = b.status().with_context("--size");
    sizes.push_back(b.is_ok() ? *b : 0);
  }
  Env e(o);
  GAMMA_RETURN_IF_ERROR(set_up(e));
  PoolOptions po;
  GAMMA_ASSIGN_OR_RETURN(Manifest preview, open_model(e, &po));
  e.arch = preview.arch;
  choose_scorers(e, preview.arch);
  GAMMA_ASSIGN_OR_RETURN(Range range, feasible_range(preview));
  if (!size_error.is_ok())
    return Status::errorf("{}; the feasible range is {} to {}", size_error.message(), format_size(range.min),
                          format_size(range.max));
  auto check_sizes = [&]() -> Status {
    for (size_t i = 0; i < sizes.size(); ++i)
      if (!unresolved(i) && sizes[i] < range.min)
        return Status::errorf("--size {}{} is below the smallest file this pool can make: the feasible range is {} to {}",
                              o.sizes[i], mix_size_name(o.sizes[i]).empty() ? "" : " (" + format_size(sizes[i]) + ")",
                              format_size(range.min), format_size(range.max));
    return Status::ok();
  };
  GAMMA_RETURN_IF_ERROR(check_sizes());
  GAMMA_RETURN_IF_ERROR(calibrate_machine(e, preview));
  e.pool_quantize_s = pool_quantize_seconds(e, preview);
  e.pool_window_bytes = pool_window_bytes(e, preview);
  // Targets: one per size, or one per speed of a list at the one size (target_count).
  const size_t n_targets = target_count(o);
  auto size_of = [&](size_t t) { return sizes.size() == 1 ? size_t{0} : t; };
  if (o.dry_run) return dry_run(e, preview, range, int(n_targets));
  // The budgets are checked before the pool is quantized, as soon as they are known: the speed
  // table needs only the candidates' types and shapes, and whether any plan reaches the speed at a
  // size does not depend on the scores (the preview's static ones serve); a size or speed given
  // as a mix's name is known once the teacher and imatrix make it.
  bool speed_known = true;
  auto check_budgets = [&](bool teacher_made) -> Status {
    if (!speed_budget(e) && !memory_budget(e)) return Status::ok();
    GAMMA_ASSIGN_OR_RETURN(speed_known, resolve_speed_targets(e, preview, teacher_made));
    if (!speed_known) return Status::ok();
    GAMMA_ASSIGN_OR_RETURN(scores::Scores pst, scores::Scores::from_manifest(preview));
    GAMMA_ASSIGN_OR_RETURN(auto pstat, solve::Allocator::create(preview, pst, {}));
    for (size_t t = 0; t < n_targets && !sizes.empty(); ++t) {
      e.speed_at(t);
      if (unresolved(size_of(t))) continue;
      Status s = head_rules(e, preview, pstat, sizes[size_of(t)]).status();
      if (!s.is_ok() && !e.target_speeds.empty())
        s = s.with_context(fmt::format("--size {}, speed {} of {}", o.sizes[size_of(t)], t + 1, n_targets));
      GAMMA_RETURN_IF_ERROR(s);
    }
    return Status::ok();
  };
  if (speed_budget(e) || memory_budget(e)) {
    GAMMA_RETURN_IF_ERROR(make_speed_table(e, preview));
    GAMMA_RETURN_IF_ERROR(measure_memory(e));
    GAMMA_RETURN_IF_ERROR(check_budgets(false));
  }

  GAMMA_RETURN_IF_ERROR(make_teacher(e));
  const bool were_named = sizes_named;
  for (size_t i = 0; sizes_named && i < sizes.size(); ++i)
    if (const std::string mix = mix_size_name(o.sizes[i]); !mix.empty()) {
      GAMMA_ASSIGN_OR_RETURN(sizes[i], predicted_mix_size(e, mix));
      std::printf("== --size %s: llama.cpp's %s of this model, %s (llama-quantize --dry-run)\n", o.sizes[i].c_str(),
                  mix.c_str(), format_size(sizes[i]).c_str());
    }
  sizes_named = false;
  GAMMA_RETURN_IF_ERROR(check_sizes());
  if (were_named || !speed_known) GAMMA_RETURN_IF_ERROR(check_budgets(true));
  GAMMA_RETURN_IF_ERROR(make_pool(e, po, preview, sizes));
  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(e.pool));
  if (e.table) GAMMA_RETURN_IF_ERROR(e.table->covers(man).with_context(e.speed));
  GAMMA_ASSIGN_OR_RETURN(range, feasible_range(man));
  GAMMA_ASSIGN_OR_RETURN(scores::Scores st, scores::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto stat, solve::Allocator::create(man, st, {}));
  if (sizes.empty()) sizes.push_back(0);  // --bpw or --max-kld: one target, its size found below
  std::vector<uint64_t> budgets;
  for (uint64_t s : sizes) {
    GAMMA_ASSIGN_OR_RETURN(uint64_t b, budget_bytes(o, stat, s));
    budgets.push_back(b);
  }
  // GAMMA learns once, at the middle target (its scores serve every budget).
  GAMMA_ASSIGN_OR_RETURN(double lbpw, learn_bpw(o, stat, budgets[budgets.size() / 2], range));
  GAMMA_ASSIGN_OR_RETURN(std::vector<Scorer> scorers, prepare_scorers(e, lbpw));
  GAMMA_RETURN_IF_ERROR(drop_activations(e));
  {
    std::vector<uint64_t> target_sizes;
    for (size_t t = 0; t < n_targets; ++t) target_sizes.push_back(std::min(budgets[size_of(t)], range.max));
    GAMMA_RETURN_IF_ERROR(keep_made_for_plans(e, man, scorers, stat, target_sizes));
  }

  if (n_targets == 1) {
    e.speed_at(0);
    const std::string size_text = o.sizes.empty() ? "" : o.sizes[0];
    return at_target_measured(e, man, scorers, stat, range, budgets[0], size_text, e.W + "/run.json",
                              e.W + "/run.png", true).status();
  }
  json sweep = json_header("gamma.run.sweep", 1);
  sweep["sizes"] = json::array();
  for (size_t t = 0; t < n_targets; ++t) {
    const size_t i = size_of(t);
    e.speed_at(t);
    std::printf("\n==== size %s%s (%zu of %zu)\n", o.sizes[i].c_str(),
                e.target_speeds.empty() ? "" : fmt::format(", decode >= {:.2f}, prompts >= {:.1f} tokens/s",
                                                           e.budget.decode_tps, e.budget.prefill_tps).c_str(),
                t + 1, n_targets);
    // Named by size and, where they differ between targets, the speed budgets.
    const std::string tag = std::to_string(budgets[i]) + (e.target_speeds.empty() ? "" : budgets_tag(e));
    GAMMA_ASSIGN_OR_RETURN(json s, at_target_measured(e, man, scorers, stat, range, budgets[i], o.sizes[i],
                                             e.W + "/run-" + tag + ".json", e.W + "/run-" + tag + ".png",
                                             t + 1 == n_targets));
    sweep["sizes"].push_back(std::move(s));
  }
  sweep["seconds"] = e.elapsed();
  sweep["peak_disk_bytes"] = e.peak_disk;
  GAMMA_RETURN_IF_ERROR(write_json(e.W + "/sweep.json", sweep));
  const std::string table = sweep_table_md(sweep);
  GAMMA_RETURN_IF_ERROR(write_file_atomic(e.W + "/sweep.md", table));
  if (auto st = draw_sweep_png(e.W + "/sweep.png", sweep); !st.is_ok())
    std::fprintf(stderr, "gamma: warning: sweep.png: %s\n", st.message().c_str());
  print_sweep(e, sweep, table);
  return Status::ok();
}

}  // namespace gm
