// gamma run at one size: every scorer with every head rule solved, emitted and measured on the
// validation texts, and the one rule that chooses among them (best_of); --max-kld's bisection
// over sizes, each probe the same choice.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "plan/plan.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "solve/budget.h"

namespace fs = std::filesystem;

namespace gm::run {

using solve::format_size;

namespace {

// The race's score of a variant measured on every chunk: its first --race chunks' mean KLD on
// each validation text, summed (what the race's own evaluation of those chunks gives).
Result<double> race_score(const Env& e, const std::string& stem) {
  double sum = 0;
  for (const auto& t : e.race) {
    EvalText full = t;
    full.chunks = e.valid.front().chunks;
    GAMMA_ASSIGN_OR_RETURN(eval::EvalResult r, load_eval(e.eval_path(stem, full)));
    if (!r.kld->chunk_means || int(r.kld->chunk_means->size()) < t.chunks)
      return Status::errorf(Status::Code::kCorrupt, "{}: lacks its chunks' means", e.eval_path(stem, full));
    double s = 0;
    for (int c = 0; c < t.chunks; ++c) s += (*r.kld->chunk_means)[size_t(c)];
    sum += s / t.chunks;
  }
  return sum;
}

// What a measurement gives a variant: its file's bytes, its plan's predicted speed, and its KLD,
// on every validation chunk (a finalist) or on the race's chunks only.
void record(Variant& v, const ValidScore& r, bool every_chunk) {
  v.bytes = r.file_bytes;
  v.finalist = every_chunk;
  (every_chunk ? v.kld : v.race_kld) = r.kld;
  if (every_chunk) v.kld_err = r.err;
  if (auto pl = Plan::load(v.plan); pl.is_ok() && pl->info.contains("speed")) v.speed = pl->info["speed"];
}

// The stem of the variant whose plan `v` repeats (its measurements serve v), or "".
std::string same_stem(const Variant& v) {
  return v.same_as.empty() ? "" : fs::path(v.plan).parent_path().string() + "/" + v.same_as;
}

// Emits `v` (unless measured already, or its plan's twin was), measures it on every validation
// chunk, removes the file.
Status validate_in_full(Env& e, Variant& v) {
  const std::string gguf = variant_stem(v) + ".gguf", stem = variant_stem(v);
  if (!v.same_as.empty()) GAMMA_RETURN_IF_ERROR(adopt_measurements(e, same_stem(v), stem, e.valid));
  if (!validated(e, stem)) GAMMA_RETURN_IF_ERROR(emit_variant(e, v, gguf));
  GAMMA_ASSIGN_OR_RETURN(ValidScore r, validate(e, gguf, stem));
  std::error_code ec;
  fs::remove(gguf, ec);
  record(v, r, true);
  return Status::ok();
}

}  // namespace

std::string variant_stem(const Variant& v) { return fs::path(v.plan).parent_path().string() + "/" + v.name; }

std::string plan_key(const Plan& p) { return json{p.modules, p.fixed}.dump(); }

Result<std::vector<Variant>> variant_list(Env& e, const Manifest& man, const solve::Allocator& stat,
                                          const std::vector<Scorer>& scorers, uint64_t size) {
  const std::string dir = e.W + "/at-" + std::to_string(size) + budgets_tag(e);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", dir, ec.message());
  const std::string head = output_head(man);
  GAMMA_ASSIGN_OR_RETURN(std::vector<HeadRule> heads, head_rules(e, man, stat, size));
  std::vector<Variant> out;
  for (const auto& s : scorers)
    for (const auto& [h, steps] : heads) {
      Variant v;
      v.scorer = s.name;
      v.scorer_args = s.args;
      v.head_type = h;
      v.head_steps = steps;
      v.name = s.name + (h.empty() ? "" : "-" + head.substr(0, head.find('.')) + "-" + h);
      v.plan = dir + "/plan-" + v.name + ".json";
      out.push_back(v);
    }
  return out;
}

Status solve_variant(const Env& e, const Manifest& man, const Variant& v, uint64_t size) {
  std::vector<std::string> cmd = {e.G, "solve", e.pool};
  for (const auto& a : solve::Budget::of_file_bytes(size).args()) cmd.push_back(a);
  cmd.insert(cmd.end(), {"-o", v.plan});
  cmd.insert(cmd.end(), v.scorer_args.begin(), v.scorer_args.end());
  if (!v.head_type.empty()) cmd.insert(cmd.end(), {"--fixed", output_head(man) + "=" + v.head_type});
  for (const auto& a : speed_args(e)) cmd.push_back(a);
  return run_step("solve", cmd);
}

Result<std::vector<Variant>> variants_at(Env& e, const Manifest& man, const solve::Allocator& stat,
                                         const std::vector<Scorer>& scorers, uint64_t size) {
  GAMMA_ASSIGN_OR_RETURN(std::vector<Variant> out, variant_list(e, man, stat, scorers, size));
  std::error_code ec;
  // A race only pays when it leaves some variants out.
  const bool race = !e.race.empty() && int(out.size()) > e.o.race_keep;
  // First round: every variant solved, emitted and measured (on the race's chunks when racing).
  // A variant whose plan an earlier one has (on SmolLM2 6 of the 18, results/run_smollm2/window)
  // is not emitted: the earlier one's measurements are its own.
  std::map<std::string, std::string> first_of;  // plan_key -> the first variant with that plan
  auto twin = [&](Variant& v) {  // v.same_as: the first variant with v's plan, when not v
    auto p = Plan::load(v.plan);
    if (!p.is_ok()) return;
    v.same_as = first_of.emplace(plan_key(*p), v.name).first->second;
    if (v.same_as == v.name) v.same_as.clear();
  };
  for (Variant& v : out) {
    const std::string gguf = variant_stem(v) + ".gguf", stem = variant_stem(v);
    // Measured on every chunk already (a run before racing, or a finalist resumed): that
    // measurement stands, and its first chunks are the race's score.
    if (race && validated(e, stem)) {
      twin(v);
      GAMMA_ASSIGN_OR_RETURN(ValidScore r, validate(e, gguf, stem));
      GAMMA_ASSIGN_OR_RETURN(v.race_kld, race_score(e, stem));
      record(v, r, true);
      continue;
    }
    const std::vector<EvalText>& texts = race ? e.race : e.valid;
    if (!validated(e, stem, texts)) {
      GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("solve + emit {} at {}", v.name, format_size(size)), emit_seconds(e.ms),
                                    [&]() -> Status {
                                      GAMMA_RETURN_IF_ERROR(solve_variant(e, man, v, size));
                                      twin(v);
                                      if (!v.same_as.empty()) {
                                        GAMMA_RETURN_IF_ERROR(adopt_measurements(e, same_stem(v), stem, texts));
                                        if (validated(e, stem, texts)) {
                                          std::printf("   %s: the plan of %s, measured once\n", v.name.c_str(), v.same_as.c_str());
                                          return Status::ok();
                                        }
                                      }
                                      return run_step("emit", {e.G, "emit", e.pool, v.plan, "-o", gguf});
                                    }));
    } else {
      twin(v);
    }
    GAMMA_ASSIGN_OR_RETURN(ValidScore r, validate(e, gguf, stem, texts));
    fs::remove(gguf, ec);
    record(v, r, !race);
  }
  if (!race) return out;
  // Second round: the race's best --race-keep on every validation chunk, emitted again from
  // their plans (emit is seconds; keeping every variant's file would cost their whole bytes).
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out[a].race_kld < out[b].race_kld; });
  std::printf("   race (%d of %d validation chunks): %zu variants, the best %d (and any within %g %% of the last) measured on all: %s\n",
              e.race.front().chunks, e.valid.front().chunks, out.size(), e.o.race_keep, 100 * e.o.race_margin,
              out[order.front()].name.c_str());
  // The best --race-keep distinct plans, and every other one whose race score is within
  // --race-margin of the last of those (one chunk ranks close variants by chance:
  // results/race/): a twin of a finalist has its race score and stays out.
  int kept = 0;
  double cut = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    Variant& v = out[order[k]];
    if (kept >= e.o.race_keep && v.race_kld > cut) break;
    if (!v.same_as.empty() && std::any_of(out.begin(), out.end(), [&](const Variant& u) { return u.name == v.same_as && u.finalist; }))
      continue;
    if (!v.finalist) GAMMA_RETURN_IF_ERROR(validate_in_full(e, v));
    if (++kept == e.o.race_keep) cut = v.race_kld * (1 + e.o.race_margin);
  }
  return out;
}

const Variant& best_of(const std::vector<Variant>& vs) {
  const Variant* best = nullptr;
  for (const auto& v : vs)
    if (v.finalist && (!best || v.kld < best->kld)) best = &v;
  return best ? *best : vs.front();  // vs holds a finalist (variants_at keeps >= 1)
}

std::string scorer_family(const Variant& v) { return v.scorer.rfind("gamma", 0) == 0 ? "gamma" : v.scorer; }

Result<std::vector<Variant>> family_bests(Env& e, const std::vector<Variant>& vs, const Variant& best) {
  std::vector<std::string> families;
  for (const auto& v : vs)
    if (scorer_family(v) != scorer_family(best) && std::find(families.begin(), families.end(), scorer_family(v)) == families.end())
      families.push_back(scorer_family(v));
  std::vector<Variant> out;
  for (const auto& f : families) {
    std::vector<Variant> mine;
    for (const auto& v : vs)
      if (scorer_family(v) == f) mine.push_back(v);
    if (std::none_of(mine.begin(), mine.end(), [](const Variant& v) { return v.finalist; }))
      GAMMA_RETURN_IF_ERROR(validate_in_full(e, *std::min_element(mine.begin(), mine.end(), [](const Variant& a, const Variant& b) {
        return a.race_kld < b.race_kld;
      })));
    out.push_back(best_of(mine));
  }
  return out;
}

json variant_json(const Variant& v) {
  json j = {{"name", v.name}, {"scorer", v.scorer}, {"head_type", v.head_type}, {"head_steps", v.head_steps}, {"plan", v.plan},
            {"file_bytes", v.bytes}, {"valid_kld", nullptr}, {"valid_kld_stderr", nullptr}, {"speed", v.speed}};
  if (v.finalist) j["valid_kld"] = v.kld, j["valid_kld_stderr"] = v.kld_err;
  if (v.race_kld > 0 || !v.finalist) j["race_kld"] = v.race_kld;
  if (!v.same_as.empty()) j["same_plan_as"] = v.same_as;
  return j;
}

Status emit_variant(Env& e, const Variant& v, const std::string& gguf) {
  if (file_exists(gguf)) return Status::ok();
  return e.stage("emit " + v.name + " -> " + gguf, emit_seconds(e.ms),
                 [&] { return run_step("emit", {e.G, "emit", e.pool, v.plan, "-o", gguf}); });
}

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

}  // namespace gm::run
