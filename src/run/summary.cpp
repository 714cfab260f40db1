// gamma run's outcome: the report table (gamma's file, each mix, gamma at each mix's size), the
// verdict, run.json and run.png; and, for several sizes, one line per size.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "plan/plan.h"
#include "report/plot.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "solve/budget.h"

namespace fs = std::filesystem;

namespace gm::run {

using eval::EvalResult;
using solve::format_size;

namespace {

// gamma's chosen scorer and head rule solved at a mix's size and measured on the report text:
// one point of the front in run.png. A plan identical to one measured already (above a size
// where the pool's best is reached, every budget gives the same file) reuses that measurement.
Result<json> front_point(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const Variant& best,
                         const solve::Allocator& stat, const MixRow& m, std::map<std::string, json>* measured) {
  const std::string dir = e.W + "/at-" + std::to_string(m.bytes) + budgets_tag(e);
  const std::string plan = dir + "/front-" + best.name + ".json", gguf = dir + "/front-" + best.name + ".gguf";
  const std::string stem = dir + "/front-" + best.name, ej = e.eval_path(stem, e.report);
  const std::string label = "gamma at " + m.name + "'s size";
  if (!load_eval(ej).is_ok()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    Variant at = best;  // the same scorer, and the same rule: as many steps below the default head at
    at.plan = plan;      // that size, under the same speed budget
    at.scorer_args = std::find_if(scorers.begin(), scorers.end(), [&](const Scorer& x) { return x.name == best.scorer; })->args;
    GAMMA_ASSIGN_OR_RETURN(auto h, head_at(man, stat, m.bytes, best.head_steps));
    if (!h) return json(nullptr);  // this rule cannot make a file that small: no point there
    if (!meeting_speed(e, man, m.bytes, {{*h, best.head_steps}}).is_ok()) return json(nullptr);  // nor that fast
    at.head_type = *h;
    GAMMA_RETURN_IF_ERROR(solve_variant(e, man, at, m.bytes));
    GAMMA_ASSIGN_OR_RETURN(Plan pl, Plan::load(plan));
    const std::string key = plan_key(pl);
    if (auto it = measured->find(key); it != measured->end()) {
      json row = it->second;
      row["label"] = label;
      row["same_file_as"] = it->second["label"];
      return row;
    }
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("emit {} at {}'s size", best.name, m.name), emit_seconds(e.ms),
                                  [&] { return run_step("emit", {e.G, "emit", e.pool, plan, "-o", gguf}); }));
    auto ev = eval_file(e, gguf, stem, e.report);
    std::error_code ec2;
    fs::remove(gguf, ec2);
    if (!ev.is_ok()) return ev.status();
  }
  GAMMA_ASSIGN_OR_RETURN(EvalResult fj, load_eval(ej));
  json row = report_row(label, plan, fj, NAN);
  if (auto pl = Plan::load(plan); pl.is_ok()) (*measured)[plan_key(*pl)] = row;
  return row;
}

// The verdict: gamma's file unless a mix that fits the budget (for --max-kld: one that meets
// the KLD in fewer bytes) is better on validation.
// With a speed budget a mix must also meet it as llama-bench measured it, with a memory budget
// fit it as llama.cpp allocated it (`measured`, the summary's mix rows in the same order).
bool meets_speed(const Env& e, const json& row) {
  if (memory_budget(e) && !(row.contains("memory") && row["memory"]["total"].get<uint64_t>() <= e.o.memory_bytes)) return false;
  if (!speed_budget(e)) return true;
  if (!row.contains("tg128")) return false;
  return row["tg128"].get<double>() >= measured_decode_budget(e) && row["pp512"].get<double>() >= measured_prefill_budget(e);
}

// The user's order is: it fits, it runs fast enough, then it is as good as possible. So gamma's
// file that measured outside the speed or memory budget (after its retries) gives way to the
// best mix that measured within it, even one that is worse on validation; the summary still
// shows what gamma's file would give at its speed.
json verdict_of(const Env& e, const std::vector<MixRow>& mixes, const json& measured, const Variant& best,
                const std::string& out, const json& gamma_row) {
  const RunOptions& o = e.o;
  const bool gamma_within = meets_speed(e, gamma_row);
  // A mix qualifies by the budget asked (bytes, or the KLD); it is better than gamma's file in
  // fewer bytes (for --max-kld) or a lower validation KLD.
  auto qualifies = [&](const MixRow& m) { return o.max_kld > 0 ? m.valid_kld <= o.max_kld : m.fits; };
  auto better = [&](const MixRow& m) { return o.max_kld > 0 ? m.bytes < best.bytes : m.valid_kld < best.kld; };
  const MixRow* winner = nullptr;
  for (size_t i = 0; i < mixes.size(); ++i) {
    const MixRow& m = mixes[i];
    const bool beats = meets_speed(e, measured[i]) && qualifies(m) && (better(m) || !gamma_within);
    if (beats && (!winner || (o.max_kld > 0 ? m.bytes < winner->bytes : m.valid_kld < winner->valid_kld))) winner = &m;
  }
  json verdict = {{"winner", winner ? "llama.cpp" : "gamma"}, {"file", winner ? winner->path : out}};
  if (speed_budget(e) || memory_budget(e)) verdict["gamma_meets_budgets_measured"] = gamma_within;
  // Named only when the mix won by the budgets alone: gamma's file is the better one on validation.
  if (winner && !better(*winner)) verdict["gamma_file"] = out;
  if (winner) {
    std::string cmd;
    for (const auto& a : quantize_cmd(e, winner->name, "OUT.gguf")) cmd += (cmd.empty() ? "" : " ") + a;
    verdict["mix"] = winner->name;
    verdict["valid_kld"] = winner->valid_kld;
    verdict["llama_quantize"] = cmd;
  }
  return verdict;
}

// A row's figures on the other report texts (eval_also's results, in Env::also's order); absent
// when there are none.
void add_also(const Env& e, json& row, const std::vector<EvalResult>& evs) {
  for (size_t i = 0; i < evs.size() && i < e.also.size(); ++i)
    row["also"].push_back({{"text", e.also[i].path}, {"kld_mean", *evs[i].kld->mean}, {"kld_stderr", *evs[i].kld->mean_stderr},
                           {"top1", *evs[i].kld->top1}, {"ppl", *evs[i].perplexity->ppl}});
}

// gamma's file minus a row's, chunk by chunk on each report text (negative: gamma's lower): the
// paired error says what the two means' errors cannot when the files are close.
void add_paired(const Env& e, json& row, const EvalResult& mine, const std::vector<EvalResult>& mine_also,
                const EvalResult& theirs, const std::vector<EvalResult>& their_also) {
  auto pair = [&](const EvalResult& g, const EvalResult& x, const std::string& text) {
    if (auto d = eval::paired_difference(g, x); d.is_ok())
      row["paired_gamma_minus"].push_back({{"text", text}, {"mean", d->mean}, {"stderr", d->stderr_}, {"chunks", d->n}});
  };
  pair(mine, theirs, e.report.path);
  for (size_t i = 0; i < their_also.size() && i < mine_also.size() && i < e.also.size(); ++i)
    pair(mine_also[i], their_also[i], e.also[i].path);
}

}  // namespace

Result<json> summarize(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                       const std::vector<Variant>& vs, const Variant& best, const std::string& out, uint64_t budget,
                       const std::string& size_text, const Range& range, const json& probes, const std::vector<MixRow>& mixes,
                       const std::vector<Variant>& families) {
  const RunOptions& o = e.o;
  json summary = json_header("gamma.run", 2);
  summary["model"] = e.model;
  summary["teacher"] = e.teacher;
  summary["imatrix"] = e.imatrix;
  summary["calibration"] = e.calib;
  summary["target"] = {{"size", size_text}, {"bpw", o.bpw}, {"max_kld", o.max_kld}};
  summary["budget_bytes"] = budget;
  summary["feasible_bytes"] = {range.min, range.max};
  summary["validation"] = {{"text", e.valid_paths()}, {"ctx", o.eval_ctx}, {"chunks", e.valid.front().chunks}};
  summary["report"] = {{"text", e.report.path}, {"ctx", o.eval_ctx}, {"chunks", e.report.chunks}};
  for (const auto& t : e.also) summary["report"]["also"].push_back(t.path);
  summary["scorers"] = json::array();
  for (const auto& s : scorers) summary["scorers"].push_back({{"name", s.name}, {"solve_args", s.args}});
  summary["tried"] = json::array();
  for (const auto& v : vs) summary["tried"].push_back(variant_json(v));
  summary["chosen"] = variant_json(best);
  summary["max_kld_probes"] = probes;
  GAMMA_ASSIGN_OR_RETURN(EvalResult mine, eval_file(e, out, out.substr(0, out.size() - 5), e.report));
  summary["rows"] = json::array({report_row("gamma (" + best.name + ")", out, mine, best.kld)});
  GAMMA_ASSIGN_OR_RETURN(std::vector<EvalResult> mine_also, eval_also(e, out, out.substr(0, out.size() - 5)));
  add_also(e, summary["rows"][0], mine_also);
  // --each-scorer: the other scorers' own best files beside gamma's, on the same chunks.
  summary["scorer_bests"] = json::array();
  for (const auto& v : families) {
    const std::string stem = variant_stem(v), gguf = stem + ".gguf";
    std::vector<EvalText> reported = e.also;
    reported.push_back(e.report);
    // The same plan as gamma's file (on SmolLM2's de-gridded teacher every allocator with a Q5_1
    // embedding chose it): that file's measurements are this one's.
    if (auto pv = Plan::load(v.plan), pb = Plan::load(best.plan); pv.is_ok() && pb.is_ok() && plan_key(*pv) == plan_key(*pb))
      GAMMA_RETURN_IF_ERROR(adopt_measurements(e, out.substr(0, out.size() - 5), stem, reported));
    if (!validated(e, stem, reported)) GAMMA_RETURN_IF_ERROR(emit_variant(e, v, gguf));
    GAMMA_ASSIGN_OR_RETURN(EvalResult ev, eval_file(e, gguf, stem, e.report));
    json row = report_row("best " + scorer_family(v) + " (" + v.name + ")", gguf, ev, v.kld);
    GAMMA_ASSIGN_OR_RETURN(std::vector<EvalResult> also, eval_also(e, gguf, stem));
    add_also(e, row, also);
    std::error_code ec;
    fs::remove(gguf, ec);
    row["scorer"] = scorer_family(v);
    row["variant"] = variant_json(v);
    add_paired(e, row, mine, mine_also, ev, also);
    summary["scorer_bests"].push_back(row);
    summary["rows"].push_back(row);
  }
  summary["mixes"] = json::array();
  summary["front"] = json::array({summary["rows"][0]});
  std::map<std::string, json> measured;  // plan (modules + fixed types) -> its report row
  if (auto pl = Plan::load(best.plan); pl.is_ok()) measured[plan_key(*pl)] = summary["rows"][0];
  for (const auto& m : mixes) {
    json row = report_row("llama.cpp " + m.name, m.path, m.report, m.valid_kld);
    add_also(e, row, m.also);
    row["predicted_bytes"] = m.predicted;
    row["fits_budget"] = m.fits;
    add_paired(e, row, mine, mine_also, m.report, m.also);
    summary["mixes"].push_back(row);
    summary["rows"].push_back(row);
    if (!o.front || m.bytes < range.min || m.bytes == best.bytes) continue;
    GAMMA_ASSIGN_OR_RETURN(json frow, front_point(e, man, scorers, best, stat, m, &measured));
    if (frow.is_null()) continue;
    summary["front"].push_back(frow);
    summary["rows"].push_back(frow);
  }
  GAMMA_RETURN_IF_ERROR(bench_rows(e, man, summary, budget));
  summary["verdict"] = verdict_of(e, mixes, summary["mixes"], best, out, summary["rows"][0]);
  summary["stages"] = e.stages;
  summary["seconds"] = e.elapsed();
  summary["work_dir_bytes"] = dir_bytes(e.W);
  summary["peak_disk_bytes"] = e.peak_disk;
  return summary;
}

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
  if (!summary.contains("speed")) return img.write_png(path);
  // Under a speed budget, a second panel: KLD against decode speed as llama-bench measured it
  // here, gamma's file and each mix one point, the budget a line.
  report::LineChart sp;
  sp.title = fmt::format("KLD vs decode speed on this machine (llama-bench tg128, {} threads)", summary["threads"].get<int>());
  sp.x_label = "decode tokens/s (tg128, measured)";
  sp.y_label = "KLD vs teacher";
  sp.log_y = true;
  report::Series g2{"gamma's file", {}, {}, {}, {}}, m2{"llama.cpp mixes", {}, {}, {}, {}};
  for (const auto& r : summary["rows"]) {
    if (!r.contains("tg128")) continue;
    const std::string label = r["label"].get<std::string>();
    const bool mix = label.rfind("llama.cpp ", 0) == 0;
    report::Series& s = mix ? m2 : g2;
    s.x.push_back(r["tg128"].get<double>());
    s.y.push_back(r["kld_mean"].get<double>());
    s.point_labels.push_back(mix ? label.substr(10) : "gamma");
  }
  for (auto* s : {&g2, &m2})
    if (!s->x.empty()) s->markers_only = true, sp.series.push_back(*s);
  // The budget on this axis is a measurement: the budget's file as llama-bench measured it in the
  // same rounds, else the table's tok/s scaled by the source's measured/predicted (the table's
  // own unit is kernels timed alone: ~2x the whole graph's speed on SmolLM2).
  const json& spd = summary["speed"];
  if (spd.contains("min_decode_file") && spd["min_decode_file"]["measured_tps"].get<double>() > 0)
    sp.x_lines.push_back({spd["min_decode_file"]["measured_tps"].get<double>(),
                          "--min-decode " + fs::path(spd["min_decode_file"]["file"].get<std::string>()).stem().string()});
  else if (spd["min_decode_tps"].get<double>() > 0 && spd.contains("reference"))
    sp.x_lines.push_back({spd["min_decode_tps"].get<double>() * spd["reference"]["tg128"].get<double>() /
                              spd["reference"]["predicted_tg128"].get<double>(),
                          "--min-decode (scaled by the source)"});
  if (sp.series.empty()) return img.write_png(path);
  GAMMA_ASSIGN_OR_RETURN(report::Image img2, report::draw_line_chart(sp));
  return report::stack_vertically({&img, &img2}).write_png(path);
}

void print_summary(const Env& e, const json& summary, const std::string& json_path, const std::string& png_path) {
  const RunOptions& o = e.o;
  const uint64_t budget = summary["budget_bytes"].get<uint64_t>();
  const json& verdict = summary["verdict"];
  const bool mix_wins = verdict["winner"] == "llama.cpp";
  const double best_kld = summary["chosen"]["valid_kld"].get<double>();
  std::string valid_names;
  for (const auto& t : e.valid) valid_names += (valid_names.empty() ? "" : ",") + fs::path(t.path).filename().string();
  // The teacher is the model itself when it is full precision already (run.cpp, make_teacher).
  const std::string teacher = e.teacher == e.model ? "itself" : fmt::format("its {} dequantization",
                                                                            o.teacher_type == "f16" ? "F16" : "F32");
  std::printf("\n%s vs %s (teacher); budget %s; chosen on %s (%d chunks), reported on %s (%d chunks of %d):\n",
              fs::path(e.model).filename().c_str(), teacher.c_str(), format_size(budget).c_str(), valid_names.c_str(),
              e.valid.front().chunks, fs::path(e.report.path).filename().c_str(), o.eval_chunks, o.eval_ctx);
  const bool speed = summary.contains("speed");
  std::printf("  %-34s %13s %9s %12s %20s %8s %9s%s\n", "model", "file bytes", "bpw", "valid KLD", "KLD vs teacher", "top-1",
              "PPL", speed ? "   tg128 (pred)    pp512 (pred)" : "");
  for (const auto& r : summary["rows"]) {
    const double bpw = 8.0 * r["file_bytes"].get<double>() / e.ms.params;
    const double vk = r["valid_kld"].is_number() ? r["valid_kld"].get<double>() : NAN;
    std::string tps;
    if (speed && r.contains("tg128"))
      tps = r.contains("predicted_tg128")
                ? fmt::format("  {:6.2f} ({:6.2f}) {:7.1f} ({:7.1f})", r["tg128"].get<double>(), r["predicted_tg128"].get<double>(),
                              r["pp512"].get<double>(), r["predicted_pp512"].get<double>())
                : fmt::format("  {:6.2f} ({:>6}) {:7.1f} ({:>7})", r["tg128"].get<double>(), "-", r["pp512"].get<double>(), "-");
    std::printf("  %-34s %13llu %9.4f %12s %11.6f ± %.6f %7.2f%% %9.4f%s\n", r["label"].get<std::string>().c_str(),
                (unsigned long long)r["file_bytes"].get<uint64_t>(), bpw,
                std::isnan(vk) ? "" : fmt::format("{:.6f}", vk).c_str(), r["kld_mean"].get<double>(),
                r["kld_stderr"].get<double>(), 100 * r["top1"].get<double>(), r["ppl"].get<double>(), tps.c_str());
  }
  // The other report texts: gamma's file and each mix, same chunks for all.
  for (size_t i = 0; i < e.also.size(); ++i) {
    std::printf("\nalso on %s (%d chunks of %d):\n", fs::path(e.also[i].path).filename().c_str(), e.also[i].chunks,
                o.eval_ctx);
    for (const auto& r : summary["rows"])
      if (r.contains("also") && r["also"].size() > i)
        std::printf("  %-34s %13llu %11.6f ± %.6f %7.2f%% %9.4f\n", r["label"].get<std::string>().c_str(),
                    (unsigned long long)r["file_bytes"].get<uint64_t>(), r["also"][i]["kld_mean"].get<double>(),
                    r["also"][i]["kld_stderr"].get<double>(), 100 * r["also"][i]["top1"].get<double>(),
                    r["also"][i]["ppl"].get<double>());
  }
  // --each-scorer: gamma's file against each other scorer's best, paired on the same chunks.
  for (const auto& b : summary.value("scorer_bests", json::array())) {
    std::string line;
    for (const auto& p : b.value("paired_gamma_minus", json::array()))
      line += fmt::format("{}{} {:+.6f} ± {:.6f}", line.empty() ? "" : "; ", fs::path(p["text"].get<std::string>()).filename().string(),
                          p["mean"].get<double>(), p["stderr"].get<double>());
    if (!line.empty())
      std::printf("\ngamma's file minus %s, paired on the same chunks: %s\n", b["label"].get<std::string>().c_str(), line.c_str());
  }
  if (speed) {
    const json& g = summary["rows"][0];
    std::printf("\nspeed budget: decode >= %.2f, prompts >= %.1f tokens/s (0: none) by the speed table, the (pred) column; "
                "llama-bench here, %d threads, each file's median ratio to the source over %d rounds.\n",
                e.budget.decode_tps, e.budget.prefill_tps, summary["threads"].get<int>(), o.bench_rounds);
    // The table times kernels alone; the whole graph runs slower or faster by a factor of the
    // machine (~2x on SmolLM2 with its layers in a shared L3): comparisons hold, not the unit.
    if (summary["speed"].contains("reference")) {
      const json& ref = summary["speed"]["reference"];
      std::printf("the table predicts the source at tg128 %.2f, pp512 %.1f, where llama-bench measured %.2f and %.1f: "
                  "a budget given as a file compares both files by the one table.\n",
                  ref["predicted_tg128"].get<double>(), ref["predicted_pp512"].get<double>(), ref["tg128"].get<double>(),
                  ref["pp512"].get<double>());
    }
    for (auto [file, measured, what] : {std::tuple{&e.budget.decode_file, e.budget.decode_file_measured, "tg128"},
                                        std::tuple{&e.budget.prefill_file, e.budget.prefill_file_measured, "pp512"}})
      if (!file->empty() && measured > 0)
        std::printf("the budget's file %s measured %s %.2f in the same rounds: gamma's file is held to that.\n",
                    fs::path(*file).filename().c_str(), what, measured);
    if (g.contains("tg128") && (g["tg128"].get<double>() < measured_decode_budget(e) || g["pp512"].get<double>() < measured_prefill_budget(e)))
      std::printf("gamma's file measured below the budget (tg128 %.2f, pp512 %.1f), though the speed table predicted "
                  "%.2f and %.1f: its prediction was %+.0f %% / %+.0f %% off here; ask for a little more.\n",
                  g["tg128"].get<double>(), g["pp512"].get<double>(), g["predicted_tg128"].get<double>(),
                  g["predicted_pp512"].get<double>(), 100 * (g["predicted_tg128"].get<double>() / g["tg128"].get<double>() - 1),
                  100 * (g["predicted_pp512"].get<double>() / g["pp512"].get<double>() - 1));
  }
  if (summary.contains("memory")) {
    const json& mm = summary["memory"];
    std::printf("\nmemory budget: %s with %d tokens of context (KV cache %s); each file as llama.cpp allocates it "
                "(predicted by the source's context):\n",
                format_size(mm["memory_bytes"].get<uint64_t>()).c_str(), mm["ctx"].get<int>(), mm["kv_type"].get<std::string>().c_str());
    for (const auto& r : summary["rows"])
      if (r.contains("memory"))
        std::printf("  %-34s %10.1f MiB (predicted %.1f)%s\n", r["label"].get<std::string>().c_str(),
                    r["memory"]["total"].get<double>() / 1048576.0, r["memory"]["predicted_total"].get<double>() / 1048576.0,
                    r["memory"]["total"].get<uint64_t>() <= mm["memory_bytes"].get<uint64_t>() ? "" : "  over the budget");
  }
  if (mix_wins && verdict.contains("gamma_file"))
    std::printf("\nverdict: llama.cpp's %s, which measured within the budgets where gamma's file did not; gamma's file is "
                "better on validation (KLD %.6f vs the mix's %.6f) and is there at its own speed: %s\nUse it: %s\n",
                verdict["mix"].get<std::string>().c_str(), best_kld, verdict["valid_kld"].get<double>(),
                verdict["gamma_file"].get<std::string>().c_str(), verdict["llama_quantize"].get<std::string>().c_str());
  else if (mix_wins)
    std::printf("\nverdict: llama.cpp's %s %s gamma's file on validation (KLD %.6f vs %.6f).\nUse it: %s\n",
                verdict["mix"].get<std::string>().c_str(),
                o.max_kld > 0 ? "meets the KLD in fewer bytes than" : "fits the budget and beats",
                verdict["valid_kld"].get<double>(), best_kld, verdict["llama_quantize"].get<std::string>().c_str());
  else
    std::printf("\nverdict: gamma's file %s (no llama.cpp mix %s%s beats it on validation)\n",
                verdict["file"].get<std::string>().c_str(), o.max_kld > 0 ? "meets the KLD in fewer bytes and" : "that fits the budget",
                speed || summary.contains("memory") ? " and measured within the speed and memory budgets" : "");
  std::printf("summary: %s, picture: %s (total %s, disk at most %.1f MiB)\n", json_path.c_str(), png_path.c_str(),
              hms(e.elapsed()).c_str(), double(e.peak_disk) / (1 << 20));
}

void print_sweep(const Env& e, const json& sweep, const std::string& table) {
  std::printf("\n%s: gamma's file at each size, chosen on validation, reported on %s (%d chunks of %d):\n",
              fs::path(e.model).filename().c_str(), fs::path(e.report.path).filename().c_str(), e.report.chunks,
              e.o.eval_ctx);
  std::printf("  %-14s %13s %-28s %12s %20s  %s\n", "size", "file bytes", "chosen", "valid KLD", "KLD vs teacher",
              "verdict");
  for (const auto& s : sweep["sizes"]) {
    const json& g = s["rows"][0];
    const json& v = s["verdict"];
    std::string also;
    if (g.contains("also"))
      for (const auto& a : g["also"])
        also += fmt::format("  {}: {:.6f} ± {:.6f}", fs::path(a["text"].get<std::string>()).filename().string(),
                            a["kld_mean"].get<double>(), a["kld_stderr"].get<double>());
    // Under speed budgets: the target's budget, gamma's file as llama-bench measured it (and the table predicted).
    std::string speed;
    if (s.contains("speed") && g.contains("tg128"))
      speed = fmt::format("  decode >= {:.2f}: tg128 {:.2f} ({:.2f}), pp512 {:.1f} ({:.1f})",
                          s["speed"]["min_decode_tps"].get<double>(), g["tg128"].get<double>(),
                          g["predicted_tg128"].get<double>(), g["pp512"].get<double>(), g["predicted_pp512"].get<double>());
    std::printf("  %-14s %13llu %-28s %12.6f %11.6f ± %.6f  %s%s%s\n", s["target"]["size"].get<std::string>().c_str(),
                (unsigned long long)g["file_bytes"].get<uint64_t>(), s["chosen"]["name"].get<std::string>().c_str(),
                s["chosen"]["valid_kld"].get<double>(), g["kld_mean"].get<double>(), g["kld_stderr"].get<double>(),
                v["winner"] != "llama.cpp" ? "gamma"
                : v.contains("gamma_file") ? ("llama.cpp " + v["mix"].get<std::string>() + ": gamma's missed the budget").c_str()
                                           : ("llama.cpp " + v["mix"].get<std::string>() + " beats it").c_str(),
                speed.c_str(), also.c_str());
  }
  std::printf("\nthe goal table (%s):\n\n%s", (e.W + "/sweep.md").c_str(), table.c_str());
  std::printf("summary: %s (total %s, disk at most %.1f MiB)\n", (e.W + "/sweep.json").c_str(),
              hms(e.elapsed()).c_str(), double(e.peak_disk) / (1 << 20));
}

Status draw_sweep_png(const std::string& path, const json& sweep) {
  // The speed/quality front: gamma's file at each target against its measured decode speed (one
  // line per size), every mix any target measured a point; only a sweep under speed budgets.
  report::LineChart c;
  c.title = "KLD vs decode speed: gamma's file at each speed budget, llama.cpp's mixes";
  c.x_label = "decode tokens/s (llama-bench tg128, measured)";
  c.y_label = "KLD vs teacher (report text)";
  c.log_y = true;
  std::map<std::string, report::Series> lines;
  report::Series mixes{"llama.cpp mixes", {}, {}, {}, {}};
  std::set<std::string> seen;
  for (const auto& s : sweep["sizes"]) {
    if (!s.contains("speed")) continue;
    for (size_t i = 0; i < s["rows"].size(); ++i) {
      const json& r = s["rows"][i];
      if (!r.contains("tg128")) continue;
      const std::string label = r["label"].get<std::string>();
      if (label.rfind("llama.cpp ", 0) == 0) {
        if (!seen.insert(label).second) continue;
        mixes.x.push_back(r["tg128"].get<double>());
        mixes.y.push_back(r["kld_mean"].get<double>());
        mixes.point_labels.push_back(label.substr(10));
        continue;
      }
      if (i != 0) continue;  // gamma's file is the first row; the others are other scorers' files
      report::Series& l = lines[s["target"]["size"].get<std::string>()];
      l.name = "gamma at " + s["target"]["size"].get<std::string>();
      l.x.push_back(r["tg128"].get<double>());
      l.y.push_back(r["kld_mean"].get<double>());
    }
  }
  for (auto& [size, l] : lines) {
    // In order of speed, so the line is the front.
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < l.x.size(); ++i) pts.emplace_back(l.x[i], l.y[i]);
    std::sort(pts.begin(), pts.end());
    l.x.clear(), l.y.clear();
    for (auto [x, y] : pts) l.x.push_back(x), l.y.push_back(y);
    c.series.push_back(l);
  }
  if (!mixes.x.empty()) mixes.markers_only = true, c.series.push_back(mixes);
  if (c.series.empty()) return Status::ok();
  GAMMA_ASSIGN_OR_RETURN(report::Image img, report::draw_line_chart(c));
  return img.write_png(path);
}

}  // namespace gm::run
