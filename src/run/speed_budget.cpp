// gamma run under a speed budget (--min-decode / --min-prefill): the speed table of the pool's
// candidates on this machine (src/speed), made from the pool's preview so that a speed no plan
// of the size reaches fails before the pool is quantized; the head rules that can meet the
// budget at a size (solve/timed.h decides, with the static scores: reachability does not depend
// on the scores); and the report's files measured by llama-bench beside their predictions,
// because the prediction is a model (results/speed_model/: 10-19 % high on some Qwen files).
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf_model/model.h"
#include "pool/pool.h"
#include "run/mixes.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "scores/scores.h"
#include "solve/budget.h"

namespace fs = std::filesystem;

namespace gm {

size_t target_count(const RunOptions& o) {
  return std::max({o.sizes.size(), o.min_decode.size(), o.min_prefill.size(), size_t{1}});
}

}  // namespace gm

namespace gm::run {

namespace {
bool asks_speed(const RunOptions& o) { return !o.min_decode.empty() || !o.min_prefill.empty(); }
}  // namespace

bool speed_budget(const Env& e) { return asks_speed(e.o); }
const char* auto_types(const RunOptions& o) { return asks_speed(o) ? kAutoSpeedTypes : kAutoTypes; }
bool memory_budget(const Env& e) { return e.o.memory_bytes > 0; }

Status measure_memory(Env& e) {
  if (!memory_budget(e)) return Status::ok();
  GAMMA_ASSIGN_OR_RETURN(speed::MemoryUse u, speed::memory_use(e.model, e.o.ctx, e.o.kv_type, std::stoi(e.T)));
  // Each solve of the run reads this measurement instead of making it again.
  e.memory_source = fmt::format("{}/memory-source-c{}{}.json", e.W, e.o.ctx, e.o.kv_type);
  GAMMA_RETURN_IF_ERROR(speed::save_memory_use(e.memory_source, u, e.o.ctx, e.o.kv_type));
  std::printf("   memory budget %s at %d tokens of context: KV cache %s, compute buffers %s (llama.cpp's, on the source)\n",
              solve::format_size(e.o.memory_bytes).c_str(), e.o.ctx, solve::format_size(u.context).c_str(),
              solve::format_size(u.compute).c_str());
  std::fflush(stdout);
  e.source_memory = u;
  return Status::ok();
}

double speed_table_eta(const Env& e, const Manifest& m) {
  std::error_code ec;  // cost_table's reference below: llama-bench reads the whole file
  const uintmax_t bytes = fs::file_size(e.model, ec);
  return speed_table_seconds(e.ms, m.types.size(), ec ? 0.0 : double(bytes));
}

Status make_speed_table(Env& e, const Manifest& m) {
  if (!speed_budget(e)) return Status::ok();
  e.speed = e.W + "/speed.json";
  if (!file_exists(e.speed)) {
    GAMMA_RETURN_IF_ERROR(e.stage("speed table (kernels of every candidate type and shape here) -> " + e.speed, speed_table_eta(e, m),
                                  [&]() -> Status {
      GAMMA_ASSIGN_OR_RETURN(speed::CostModel cm, speed::CostModel::open(std::stoi(e.T)));
      GAMMA_ASSIGN_OR_RETURN(speed::CostTable t, speed::cost_table(m, cm, e.o.llama_bin + "/llama-bench", e.model));
      return t.save(e.speed);
    }));
  }
  GAMMA_ASSIGN_OR_RETURN(speed::CostTable t, speed::CostTable::load(e.speed));
  if (!t.covers(m).is_ok() && t.model_fingerprint == m.model_fingerprint) {
    // The pool gained types since the table was made (a run resumed under a speed budget takes
    // auto-speed's): their kernels are timed into it, the rest and the other prices kept.
    GAMMA_ASSIGN_OR_RETURN(speed::CostModel cm, speed::CostModel::open(std::stoi(e.T)));
    GAMMA_ASSIGN_OR_RETURN(int added, speed::price_candidates(t, m, cm));
    if (added > 0) GAMMA_RETURN_IF_ERROR(t.save(e.speed));
    std::printf("   speed table: %d prices of the pool's new candidates added to %s\n", added, e.speed.c_str());
  }
  GAMMA_RETURN_IF_ERROR(t.covers(m).with_context(e.speed));
  e.table = std::move(t);
  return Status::ok();
}

namespace {
// One pair of budgets: a mix's name replaced by its file (built as the comparison builds it, then
// reused there), a file's types timed into the table (they need not be the pool's candidates: a
// Q4_0 mix, a pool without Q4_0; seconds of kernels, once per file), then each by the table.
Result<Env::SpeedBudgets> resolve_pair(Env& e, const Manifest& m, std::string decode, std::string prefill,
                                       std::optional<speed::CostModel>& cm) {
  Env::SpeedBudgets b;
  for (auto [a, file] : {std::pair{&decode, &b.decode_file}, std::pair{&prefill, &b.prefill_file}}) {
    if (const std::string mix = mix_size_name(*a); !mix.empty()) {
      GAMMA_ASSIGN_OR_RETURN(*a, build_mix(e, mix));
    }
    if (speed::names_file(*a)) *file = *a;
  }
  GAMMA_ASSIGN_OR_RETURN(int added, speed::price_speed_targets(*e.table, m, decode, prefill, cm));
  if (added > 0) GAMMA_RETURN_IF_ERROR(e.table->save(e.speed));
  // A rest measured negative on the run's model (its kernels alone slower than its whole graph
  // in llama-bench: the F32 teacher of Qwen on a 2-core AMD EPYC, 2026-12-05, -22.6 ms a token)
  // prices every plan far too fast. The budget's own file holds the types plans take: the rest
  // is measured on it instead, which also makes the table exact for that file.
  const std::string& ref = !b.decode_file.empty() ? b.decode_file : b.prefill_file;
  if (!ref.empty() && (e.table->rest.decode_us <= 0 || e.table->rest.prefill_us <= 0)) {
    // Twice, the faster kept, as CostModel::calibrate measures the model's reference.
    const std::string llama_bench = e.o.llama_bin + "/llama-bench";
    GAMMA_ASSIGN_OR_RETURN(speed::Speed s, speed::bench(llama_bench, ref, e.table->threads, 3));
    GAMMA_ASSIGN_OR_RETURN(speed::Speed s2, speed::bench(llama_bench, ref, e.table->threads, 3));
    s.decode_tps = std::max(s.decode_tps, s2.decode_tps);
    s.prefill_tps = std::max(s.prefill_tps, s2.prefill_tps);
    const speed::Rest old = e.table->rest;
    GAMMA_RETURN_IF_ERROR(e.table->rest_on(ref, s));
    GAMMA_RETURN_IF_ERROR(e.table->save(e.speed));
    std::printf("   speed table: the rest measured on %s (decode %.0f us, prompts %.0f us a batch), not on %s (%.0f, %.0f)\n",
                ref.c_str(), e.table->rest.decode_us, e.table->rest.prefill_us, old.reference.c_str(), old.decode_us,
                old.prefill_us);
  }
  GAMMA_ASSIGN_OR_RETURN(speed::SpeedTargets st, speed::speed_targets(decode, prefill, m, *e.table));
  b.decode_tps = st.decode_tps;
  b.prefill_tps = st.prefill_tps;
  return b;
}
}  // namespace

Result<bool> resolve_speed_targets(Env& e, const Manifest& m, bool teacher_made) {
  if (!speed_budget(e)) return true;
  const std::vector<std::string>&decs = e.o.min_decode, &pres = e.o.min_prefill;
  // A mix's speed needs the mix, and the mix is built from the teacher.
  bool needs_teacher = false;
  for (const auto* list : {&decs, &pres})
    for (const auto& a : *list) needs_teacher |= a == RunOptions::kSizeMix || !mix_size_name(a).empty();
  if (!teacher_made && needs_teacher) return false;
  // One pair of budgets per target (the CLI checked the forms): the same at every size, a list's
  // i-th at the one size, or "mix": the i-th size's own mix.
  const size_t n = target_count(e.o);
  auto is_mix = [](const std::vector<std::string>& list) { return list.size() == 1 && list[0] == RunOptions::kSizeMix; };
  const bool per_target = decs.size() > 1 || pres.size() > 1 || is_mix(decs) || is_mix(pres);
  auto pick = [&](const std::vector<std::string>& list, size_t i) -> std::string {
    if (list.empty()) return "";
    const std::string& a = list[std::min(i, list.size() - 1)];
    return a == RunOptions::kSizeMix ? e.o.sizes.at(i) : a;
  };
  std::optional<speed::CostModel> cm;
  e.target_speeds.clear();
  for (size_t i = 0; i < (per_target ? n : 1); ++i) {
    GAMMA_ASSIGN_OR_RETURN(Env::SpeedBudgets st, resolve_pair(e, m, pick(decs, i), pick(pres, i), cm));
    if (per_target) e.target_speeds.push_back(st);
    else e.budget = st;
    std::printf("   speed budget%s: decode >= %.2f, prompts >= %.1f tokens/s by the speed table (0: none)\n",
                per_target ? fmt::format(" {} of {}", i + 1, n).c_str() : "", st.decode_tps, st.prefill_tps);
  }
  e.speed_at(0);
  std::fflush(stdout);  // before any error line on stderr
  return true;
}

double measured_decode_budget(const Env& e) {
  return e.budget.decode_file_measured > 0 ? e.budget.decode_file_measured : e.budget.decode_tps;
}
double measured_prefill_budget(const Env& e) {
  return e.budget.prefill_file_measured > 0 ? e.budget.prefill_file_measured : e.budget.prefill_tps;
}

bool raise_by_shortfall(Env& e, const json& gamma_row) {
  if (!speed_budget(e) || !gamma_row.contains("tg128")) return false;
  // The plan's measured / predicted speed, taken to hold for the next plan (of similar types):
  // the budget in the table's units that would have measured the speed asked, and 1 % more.
  bool raised = false;
  for (auto [tps, measured, pred, want] :
       {std::tuple{&e.budget.decode_tps, gamma_row["tg128"].get<double>(), gamma_row["predicted_tg128"].get<double>(),
                   measured_decode_budget(e)},
        std::tuple{&e.budget.prefill_tps, gamma_row["pp512"].get<double>(), gamma_row["predicted_pp512"].get<double>(),
                   measured_prefill_budget(e)}}) {
    if (*tps <= 0 || measured >= want || !(measured > 0 && pred > 0)) continue;
    *tps = std::max(*tps, 1.01 * want * pred / measured);
    raised = true;
  }
  return raised;
}

std::string budgets_tag(const Env& e) {
  std::string t;
  if (e.budget.decode_tps > 0) t += fmt::format("-tg{}", e.budget.decode_tps);
  if (e.budget.prefill_tps > 0) t += fmt::format("-pp{}", e.budget.prefill_tps);
  if (e.o.memory_bytes > 0) t += fmt::format("-mem{}c{}{}", e.o.memory_bytes, e.o.ctx, e.o.kv_type);
  return t;
}

std::vector<std::string> speed_args(const Env& e) {
  std::vector<std::string> a;
  if (memory_budget(e)) {
    a = {"--memory", std::to_string(e.o.memory_bytes), "--ctx", std::to_string(e.o.ctx), "--memory-source", e.memory_source};
    if (!e.o.kv_type.empty()) a.insert(a.end(), {"--kv-type", e.o.kv_type});
  }
  if (!speed_budget(e)) return a;
  a.insert(a.end(), {"--speed", e.speed});
  if (e.budget.decode_tps > 0) a.insert(a.end(), {"--min-decode", fmt::format("{}", e.budget.decode_tps)});
  if (e.budget.prefill_tps > 0) a.insert(a.end(), {"--min-prefill", fmt::format("{}", e.budget.prefill_tps)});
  return a;
}

solve::SpeedBudget solve_limits(const Env& e) {
  solve::SpeedBudget sb;
  if (e.table) sb.table = &*e.table, sb.min_decode_tps = e.budget.decode_tps, sb.min_prefill_tps = e.budget.prefill_tps;
  if (e.source_memory) sb.memory_bytes = e.o.memory_bytes, sb.source = &*e.source_memory;
  return sb;
}

Result<std::vector<HeadRule>> meeting_speed(const Env& e, const Manifest& man, uint64_t size,
                                            const std::vector<HeadRule>& rules) {
  if (!speed_budget(e) && !memory_budget(e)) return rules;
  GAMMA_ASSIGN_OR_RETURN(scores::Scores st, scores::Scores::from_manifest(man));
  const solve::SpeedBudget sb = solve_limits(e);
  std::vector<HeadRule> out;
  Status last;
  for (const auto& r : rules) {
    std::map<std::string, std::string> fixed;
    if (!r.first.empty()) fixed[output_head(man)] = r.first;
    GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, st, {}, {}, fixed));
    auto s = a.solve(solve::Budget::of_file_bytes(size), sb);
    if (s.is_ok()) out.push_back(r);
    else last = s.status();
  }
  // The rules come default head first, then cheaper heads: the last one's failure names the
  // fastest speed of the cheapest head, the most any rule reaches at this size.
  if (out.empty()) return last;
  return out;
}

Result<std::vector<HeadRule>> head_rules(const Env& e, const Manifest& man, const solve::Allocator& stat, uint64_t size) {
  std::vector<HeadRule> rules;
  for (int k = 0; k <= kHeadSteps; ++k) {
    GAMMA_ASSIGN_OR_RETURN(auto h, head_at(man, stat, size, k));
    if (h) rules.emplace_back(*h, k);
  }
  if (rules.empty()) return Status::errorf("{} is below the smallest file any head rule can make", solve::format_size(size));
  return meeting_speed(e, man, size, rules);
}

Status bench_rows(Env& e, const Manifest& man, json& summary, uint64_t budget) {
  if (!speed_budget(e) && !memory_budget(e)) return Status::ok();
  std::vector<std::string> files;
  for (const auto& r : summary["rows"]) {
    const std::string p = r.value("path", "");
    // Once each: the chosen file is also the front's point at its own size.
    if (!p.empty() && file_exists(p) && p.size() > 5 && p.substr(p.size() - 5) == ".gguf" &&
        std::find(files.begin(), files.end(), p) == files.end())
      files.push_back(p);
  }
  if (files.empty()) return Status::ok();
  // A budget given as a file is measured in the same rounds: "as fast as that file" is then
  // checked by measurement on both sides, not the file's prediction against gamma's measurement.
  for (const std::string* f : {&e.budget.decode_file, &e.budget.prefill_file})
    if (speed_budget(e) && !f->empty() && std::find(files.begin(), files.end(), *f) == files.end()) files.push_back(*f);
  const std::string out = e.W + "/speed-check-" + std::to_string(budget) + budgets_tag(e) + ".json";
  auto same_files = [&]() {  // a check of these files with what is asked is there: resumed, not measured again
    auto j = read_json(out, "gamma.speed.check", 1);
    if (!j.is_ok()) return false;
    // Every file asked for, with what is asked (a check of fewer files, or of one twice, is not it).
    for (const auto& want : files) {
      bool found = false;
      for (const auto& f : (*j)["files"])
        found = found || (f.value("file", "") == want && (!speed_budget(e) || f.contains("tg128")) &&
                          (!memory_budget(e) || f.contains("memory")));
      if (!found) return false;
    }
    return true;
  };
  if (!same_files()) {
    std::vector<std::string> cmd = {e.G, "speed"};
    cmd.insert(cmd.end(), files.begin(), files.end());
    cmd.insert(cmd.end(), {"--reference", e.model, "-t", e.T, "--llama-bin", e.o.llama_bin, "-o", out});
    if (speed_budget(e)) cmd.insert(cmd.end(), {"--bench", "--rounds", std::to_string(e.o.bench_rounds)});
    if (memory_budget(e)) cmd.insert(cmd.end(), {"--ctx", std::to_string(e.o.ctx)});
    if (!speed_budget(e)) cmd.push_back("--memory-only");
    if (memory_budget(e) && !e.o.kv_type.empty()) cmd.insert(cmd.end(), {"--kv-type", e.o.kv_type});
    const double eta = bench_seconds(e.ms, files.size(), e.o.bench_rounds);
    GAMMA_RETURN_IF_ERROR(e.stage(speed_budget(e) ? fmt::format("llama-bench of {} files ({} rounds)", files.size(), e.o.bench_rounds)
                                                  : fmt::format("memory of {} files at {} tokens (llama.cpp's own)", files.size(), e.o.ctx),
                                  speed_budget(e) ? eta : 5.0 * double(files.size() + 1),
                                  [&] { return run_step("speed", cmd); }));
  }
  GAMMA_ASSIGN_OR_RETURN(json check, read_json(out, "gamma.speed.check", 1));
  // Measured: llama-bench's. Predicted: by the table the plans were solved with (what the
  // budget was held to), each file's weights at their types; gamma speed's own prediction in
  // the check is calibrated on the same rounds it measures, so it is not what the solver saw.
  // A mix's types the pool lacks (Q5_0 in SmolLM2's Q3_K_M) and the source's are timed into the
  // table first, as a budget's file is, so every row's prediction is in the one unit the budget
  // is: a column of two units read as a 2x error on SmolLM2, where kernels timed alone run ~2x
  // faster than in llama-bench's whole graph.
  std::map<std::string, speed::Speed> by_table;
  if (e.table && speed_budget(e)) {
    std::vector<std::string> priced = files;
    priced.push_back(e.model);
    std::optional<speed::CostModel> cm;
    int added = 0;
    for (const auto& f : priced) {
      if (!cm) {
        GAMMA_ASSIGN_OR_RETURN(cm, speed::CostModel::open(e.table->threads));
      }
      // A file the table cannot price (another model's, say) keeps gamma speed's prediction.
      if (auto n = speed::price_file(*e.table, man, f, *cm); n.is_ok()) added += *n;
      auto model = Model::open(f);
      if (!model.is_ok()) return model.status();
      if (auto p = e.table->predict(**model); p.is_ok()) by_table[f] = *p;
    }
    if (added > 0) GAMMA_RETURN_IF_ERROR(e.table->save(e.speed));
  }
  for (const char* list : {"rows", "mixes", "front"})
    for (auto& r : summary[list])
      for (const auto& f : check["files"]) {
        const std::string path = f.value("file", "");
        if (path != r.value("path", "")) continue;
        if (f.contains("memory")) r["memory"] = f["memory"];
        if (!speed_budget(e)) continue;
        r["tg128"] = f["tg128"];
        r["pp512"] = f["pp512"];
        const bool priced = by_table.count(path) > 0;
        // gamma speed leaves out a prediction its rest makes non-positive (cmd_speed.cpp).
        if (!priced && !f.contains("predicted_tg128")) {
          r["predicted_by"] = "none (neither the table nor gamma speed's rest prices this file)";
          continue;
        }
        r["predicted_tg128"] = priced ? by_table[path].decode_tps : f["predicted_tg128"].get<double>();
        r["predicted_pp512"] = priced ? by_table[path].prefill_tps : f["predicted_pp512"].get<double>();
        r["predicted_by"] = priced ? "speed table" : "gamma speed (the table does not price this file's types)";
      }
  e.budget.decode_file_measured = e.budget.prefill_file_measured = 0;
  for (const auto& f : check["files"]) {
    if (!speed_budget(e) || !f.contains("tg128")) continue;
    if (f.value("file", "") == e.budget.decode_file) e.budget.decode_file_measured = f["tg128"].get<double>();
    if (f.value("file", "") == e.budget.prefill_file) e.budget.prefill_file_measured = f["pp512"].get<double>();
  }
  if (memory_budget(e))
    summary["memory"] = {{"memory_bytes", e.o.memory_bytes}, {"ctx", e.o.ctx}, {"kv_type", e.o.kv_type.empty() ? "f16" : e.o.kv_type},
                         {"source", e.source_memory->to_json()}, {"check", out}};
  summary["threads"] = std::stoi(e.T);
  if (!speed_budget(e)) return Status::ok();
  summary["speed"] = {{"table", e.speed},
                      {"min_decode_tps", e.budget.decode_tps},
                      {"min_prefill_tps", e.budget.prefill_tps},
                      {"min_decode_given", fmt::format("{}", fmt::join(e.o.min_decode, ","))},
                      {"min_prefill_given", fmt::format("{}", fmt::join(e.o.min_prefill, ","))},
                      {"check", out},
                      {"bench_rounds", e.o.bench_rounds}};
  // The table's scale here: the source by the table and by llama-bench in the same rounds.
  for (const auto& f : check["files"])
    if (f.value("file", "") == e.model && f.contains("tg128") && by_table.count(e.model))
      summary["speed"]["reference"] = {{"file", e.model}, {"tg128", f["tg128"]}, {"pp512", f["pp512"]},
                                       {"predicted_tg128", by_table[e.model].decode_tps},
                                       {"predicted_pp512", by_table[e.model].prefill_tps}};
  for (auto [key, file, measured] : {std::tuple{"min_decode_file", &e.budget.decode_file, e.budget.decode_file_measured},
                                     std::tuple{"min_prefill_file", &e.budget.prefill_file, e.budget.prefill_file_measured}})
    if (!file->empty()) summary["speed"][key] = {{"file", *file}, {"measured_tps", measured}};
  return Status::ok();
}

}  // namespace gm::run
