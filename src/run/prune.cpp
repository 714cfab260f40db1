// The pool's candidates chosen before quantizing (issue 44; solve/window.h says why): an
// estimate of the pool from sampled rows (gamma pool --estimate-rows), HAWQ-V2's Hessian traces
// measured on it (the traces do not depend on the candidates, so the real pool's HAWQ-V2 scores
// reuse them: gamma hawq --traces-from), HAWQ-V2's plans on the estimate at every size the run
// will make (the targets and the mixes it compares with, the front), under a speed or memory
// budget also its plans held to that budget, and per module the candidates within
// --pool-window steps of those plans: W/pool-only.json, what gamma pool --only quantizes.
#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan/plan.h"
#include "pool/candidate.h"
#include "pool/pool.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "solve/window.h"

namespace gm::run {

bool prunes(const Env& e) {
  const auto& s = e.scorers;
  return e.o.pool_window >= 0 && e.o.types.empty() && e.o.max_kld <= 0 && std::find(s.begin(), s.end(), "hawq") != s.end();
}

namespace {
// How much a retry raises a speed budget (raise_by_shortfall: the measured / predicted shortfall
// and 1 %): measured 7.5 % on SmolLM2 (results/speed_model/smollm2_min_decode_q4_0/) and a 9 %
// shortfall on Qwen at Q2_K's size (results/speed_model/README.md); the window is made for up to
// this much per retry.
constexpr double kRetryRaise = 0.10;

// Under a speed or memory budget, HAWQ-V2's plans held to it at each target's sizes (its own and
// the mixes', the front's points), with every head rule that meets it there (variants_at's), at
// the budget and as each retry may raise it. A plan held to a mix's decode speed moves modules
// to the fast types (Q4_0, Q2_K, Q4_K), which by bytes can sit far from where the size alone
// puts a module: the window of the free plans would leave them out.
Status add_budget_plans(Env& e, const Manifest& man, const scores::Scores& hawq, const solve::Allocator& stat,
                        const std::vector<std::vector<uint64_t>>& at_size, std::vector<Plan>* plans) {
  if (!speed_budget(e) && !memory_budget(e)) return Status::ok();
  const size_t n = target_count(e.o);
  for (size_t t = 0; t < n; ++t) {
    e.speed_at(t);
    const auto& at = at_size[at_size.size() == 1 ? 0 : t];
    for (size_t k = 0; k < at.size(); ++k) {
      auto rules = head_rules(e, man, stat, at[k]);
      if (!rules.is_ok()) {
        if (k == 0) return rules.status();  // the target itself (the run checked it is reachable)
        continue;                           // a mix's size this budget cannot make: no front point there
      }
      for (const auto& [head, steps] : *rules) {
        std::map<std::string, std::string> fixed;
        if (!head.empty()) fixed[output_head(man)] = head;
        GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, hawq, {}, {}, fixed));
        for (int retry = 0; retry <= e.o.speed_retries; ++retry) {
          solve::SpeedBudget sb = solve_limits(e);
          sb.min_decode_tps *= 1 + kRetryRaise * retry;
          sb.min_prefill_tps *= 1 + kRetryRaise * retry;
          auto p = a.solve(solve::Budget::of_file_bytes(at[k]), sb);
          if (p.is_ok()) plans->push_back(p->plan);
          else if (retry == 0) return p.status();  // head_rules found a plan within this budget
        }
      }
    }
  }
  e.speed_at(0);
  return Status::ok();
}

// What a window was made for, beside the sizes: the speed and memory budgets of each target.
json budgets_json(Env& e) {
  json out = json::array();
  if (!speed_budget(e) && !memory_budget(e)) return out;
  for (size_t t = 0; t < target_count(e.o); ++t) {
    e.speed_at(t);
    out.push_back({{"decode_tps", e.budget.decode_tps}, {"prefill_tps", e.budget.prefill_tps},
                   {"memory_bytes", e.o.memory_bytes}, {"ctx", e.o.ctx}, {"retries", e.o.speed_retries}});
  }
  e.speed_at(0);
  return out;
}
}  // namespace

std::string hawq_traces_path(const Env& e) { return e.W + "/scores-hawq-estimate.json"; }

std::vector<std::string> hawq_cmd(const Env& e, const std::string& pool, const std::string& out) {
  std::vector<std::string> cmd = {e.G, "hawq", pool, "--teacher", e.teacher, "--calib", e.calib, "--samples",
                                  std::to_string(e.o.hawq_samples), "--seqs", "4", "--calib-tokens",
                                  std::to_string(e.o.hawq_calib_tokens), "--seq-len", std::to_string(kCalibSeqLen), "-t", e.T, "-o", out};
  if (e.o.hawq_converge > 0) cmd.insert(cmd.end(), {"--converge", fmt::format("{}", e.o.hawq_converge)});
  // The real pool's scores from the estimate's traces: the same traces, measured once.
  if (pool != e.W + "/estimate" && file_exists(hawq_traces_path(e)))
    cmd.insert(cmd.end(), {"--traces-from", hawq_traces_path(e)});
  for (const auto& x : e.q()) cmd.push_back(x);
  return cmd;
}

Result<std::string> pool_only(Env& e, const Manifest& preview, const std::vector<uint64_t>& sizes) {
  const std::string only = e.W + "/pool-only.json", est = e.W + "/estimate";
  const RunOptions& o = e.o;
  // What the window was made for: a later run in this work directory with other targets would
  // find sizes the pruned pool cannot make well (or at all).
  json targets = {{"sizes", sizes}, {"bpw", o.bpw}, {"pool_window", o.pool_window}, {"compare", o.compare},
                  {"max_mixes", o.max_mixes}};
  if (json b = budgets_json(e); !b.empty()) targets["budgets"] = b;
  // Named only when it narrows the window, so a work directory made before it still resumes
  // with --pool-window-iq2 -1.
  if (o.pool_window_iq2 >= 0 && o.pool_window_iq2 < o.pool_window) targets["pool_window_iq2"] = o.pool_window_iq2;
  if (file_exists(only)) {
    GAMMA_ASSIGN_OR_RETURN(json j, read_json(only, "gamma.pool.only", 1));
    if (j.value("targets", json()) != targets)
      return Status::errorf("{} holds a pool chosen for other targets ({}); use another work directory, or "
                            "--pool-window -1 there", e.W, j.value("targets", json()).dump());
    return only;
  }
  if (!file_exists(est + "/manifest.json")) {
    std::vector<std::string> cmd = {e.G, "pool", e.model, "--types", auto_types(o), "--estimate-rows",
                                    std::to_string(o.estimate_rows), "-o", est, "-t", e.T, "-q"};
    if (!e.imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", e.imatrix});
    GAMMA_RETURN_IF_ERROR(e.stage(fmt::format("estimate ({} rows per module) -> {}", o.estimate_rows, est),
                                  estimate_pool_seconds(e, preview, o.estimate_rows), [&] { return run_step("estimate", cmd); }));
  }
  const std::string traces = hawq_traces_path(e);
  if (!file_exists(traces))
    GAMMA_RETURN_IF_ERROR(e.stage("hawq traces (on the estimate) -> " + traces,
                                  hawq_seconds(e.ms, o.hawq_samples, o.hawq_calib_tokens),
                                  [&] { return run_step("hawq", hawq_cmd(e, est, traces)); }));
  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(est));
  // An estimate made for other types (a run resumed with a speed budget: auto-speed's) cannot
  // choose among the types asked now, nor can HAWQ-V2's scores on it.
  if (man.types != preview.types)
    return Status::errorf("{} holds an estimate of other types ({}) than this run's ({}); use another work directory", est,
                          fmt::join(man.types, ","), fmt::join(preview.types, ","));
  GAMMA_ASSIGN_OR_RETURN(scores::Scores hawq, scores::Scores::load(traces));
  // The sizes: each target (--bpw through the static plan on the estimate), and the mixes it
  // will be compared with (each is a size of the front).
  GAMMA_ASSIGN_OR_RETURN(scores::Scores st, scores::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto stat, solve::Allocator::create(man, st, {}));
  GAMMA_ASSIGN_OR_RETURN(Range range, feasible_range(man));
  // HAWQ-V2's plans here keep the default head; below the smallest file it allows (only a
  // cheaper head makes those: Qwen2.5-0.5B's tied embedding, 57 MiB lighter) every module is at
  // its lightest candidate already, which is that smallest file's plan.
  const uint64_t lo = std::max(range.min, stat.min_file_bytes());
  std::vector<std::vector<uint64_t>> at_size;  // per size asked: its budget, then its mixes' sizes
  for (uint64_t s : sizes.empty() ? std::vector<uint64_t>{0} : sizes) {
    GAMMA_ASSIGN_OR_RETURN(uint64_t b, budget_bytes(o, stat, s));
    std::vector<uint64_t> at = {std::clamp(b, lo, range.max)};
    GAMMA_ASSIGN_OR_RETURN(std::vector<uint64_t> mixes, compared_mix_sizes(e, b));
    for (uint64_t m : mixes)
      if (m >= range.min && m <= range.max) at.push_back(std::max(m, lo));
    at_size.push_back(std::move(at));
  }
  std::vector<Plan> plans;
  GAMMA_ASSIGN_OR_RETURN(auto hw, solve::Allocator::create(man, hawq, {}));
  for (const auto& at : at_size)
    for (uint64_t s : at) {
      GAMMA_ASSIGN_OR_RETURN(solve::Allocation a, hw.solve(solve::Budget::of_file_bytes(s)));
      plans.push_back(std::move(a.plan));
    }
  const size_t free_plans = plans.size();
  GAMMA_RETURN_IF_ERROR(add_budget_plans(e, man, hawq, stat, at_size, &plans));
  solve::WindowRule rule{o.pool_window, {}, 0};
  if (targets.contains("pool_window_iq2"))
    rule.near_only = {"IQ2_XXS", "IQ2_XS", "IQ2_S"}, rule.near_steps = o.pool_window_iq2;
  GAMMA_ASSIGN_OR_RETURN(auto window, solve::candidate_window(man, plans, rule));
  // The source's own type too: its bytes are copied, not quantized (seconds), and gamma layers
  // measures each layer from it.
  size_t kept = 0, all = 0;
  for (const auto& m : man.modules) {
    auto& types = window.at(m.name);
    if (m.find(m.source_type) && std::find(types.begin(), types.end(), m.source_type) == types.end())
      types.push_back(m.source_type);
    kept += types.size();
    all += m.candidates.size();
  }
  json j = only_to_json(window);
  j["targets"] = targets;
  GAMMA_RETURN_IF_ERROR(write_json(only, j));
  std::printf("== pool window: %zu of %zu candidates (within %d steps of HAWQ-V2's plans on the estimate at %zu sizes%s%s)\n",
              kept, all, o.pool_window, free_plans,
              rule.near_only.empty() ? "" : fmt::format(", IQ2 types within {} below", rule.near_steps).c_str(),
              plans.size() > free_plans ? fmt::format(", and {} held to the speed or memory budgets", plans.size() - free_plans).c_str() : "");
  return only;
}

Status keep_made_for_plans(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                           const std::vector<uint64_t>& target_sizes) {
  namespace fs = std::filesystem;
  const std::string dir = man.dir + "/stream", done = e.W + "/stream-kept.json";
  std::error_code ec;
  if (!man.streamed || e.o.max_kld > 0 || file_exists(done) || !fs::is_directory(dir, ec)) return Status::ok();
  // Every variant solved where the run will make it: at each target, and at the sizes of the
  // mixes it is compared with when the front draws them (gamma's chosen variant there).
  std::set<std::string> keep;
  size_t plans = 0;
  auto keep_all = [&](const Status& why) {
    std::printf("   POOL/stream kept whole (%s)\n", why.message().c_str());
    e.speed_at(0);
    return Status::ok();
  };
  for (size_t t = 0; t < target_sizes.size(); ++t) {
    e.speed_at(t);
    std::vector<uint64_t> at = {target_sizes[t]};
    if (e.o.front) {
      auto mixes = compared_mix_sizes(e, target_sizes[t]);
      if (!mixes.is_ok()) return keep_all(mixes.status());
      for (uint64_t m : *mixes)
        if (head_rules(e, man, stat, m).is_ok()) at.push_back(m);
    }
    for (uint64_t size : at) {
      auto vs = variant_list(e, man, stat, scorers, size);
      if (!vs.is_ok()) return keep_all(vs.status());
      for (const auto& v : *vs) {
        if (Status st = solve_variant(e, man, v, size); !st.is_ok()) return keep_all(st);
        auto p = Plan::load(v.plan);
        if (!p.is_ok()) return keep_all(p.status());
        ++plans;
        for (const auto& m : man.modules)
          if (const Candidate* c = m.find(p->modules.at(m.name)); c && c->type != m.source_type)
            keep.insert(made_bytes_path(man, "stream", m.name, parse_type(c->type).value()));
      }
    }
  }
  e.speed_at(0);
  uint64_t kept = 0, removed = 0;
  size_t n_kept = 0, n_removed = 0;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    const uint64_t bytes = f.file_size(ec);
    if (keep.count(f.path().string())) {
      kept += bytes, ++n_kept;
    } else if (fs::remove(f.path(), ec)) {
      removed += bytes, ++n_removed;
    }
  }
  json j = json_header("gamma.run.stream_kept", 1);
  j["plans"] = plans, j["kept"] = n_kept, j["kept_bytes"] = kept, j["removed"] = n_removed, j["removed_bytes"] = removed;
  GAMMA_RETURN_IF_ERROR(write_json(done, j));
  std::printf("== POOL/stream: the %zu candidates of %zu variants' plans kept (%.1f MiB), %zu no plan takes removed (%.1f MiB)\n",
              n_kept, plans, double(kept) / (1 << 20), n_removed, double(removed) / (1 << 20));
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace gm::run
