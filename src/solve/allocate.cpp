#include "solve/allocate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "solve/budget.h"
#include "solve/timed.h"

namespace gm::solve {

Result<Allocator> Allocator::create(const Manifest& m, scores::Scores scores, const std::vector<Constraint>& constraints,
                                    KnapsackOptions opt, std::map<std::string, std::string> fixed_types) {
  Allocator a;
  a.m_ = &m;
  a.opt_ = opt;
  for (const auto& [name, type] : fixed_types)
    GAMMA_RETURN_IF_ERROR(check_fixed_type(m, name, type).with_context("--fixed " + name + "=" + type));
  a.fixed_override_ = std::move(fixed_types);
  GAMMA_RETURN_IF_ERROR(scores.check(m, &a.unscored_));
  GAMMA_ASSIGN_OR_RETURN(auto allowed, allowed_candidates(m, constraints));
  std::vector<KnapsackClass> by_bytes, by_file;
  for (size_t i = 0; i < m.modules.size(); ++i) {
    const ModuleEntry& e = m.modules[i];
    const auto& row = scores.score.at(e.name);
    KnapsackClass kb, kf;
    std::vector<int> cand;
    for (int j : allowed[i]) {
      auto it = row.find(e.candidates[j].id);
      if (it == row.end()) continue;
      cand.push_back(j);
      kb.weight.push_back(e.candidates[j].bytes);
      kf.weight.push_back(e.candidates[j].file_bytes);
      kb.score.push_back(it->second);
      kf.score.push_back(it->second);
    }
    if (cand.empty())
      return Status::errorf("module {} has no candidate that is both scored and allowed", e.name);
    a.cand_.push_back(std::move(cand));
    by_bytes.push_back(std::move(kb));
    by_file.push_back(std::move(kf));
  }
  a.linear_params_ = m.total_params();
  if (a.linear_params_ <= 0) return Status::error("pool manifest: linear modules have no parameters");
  GAMMA_ASSIGN_OR_RETURN(Knapsack kb, Knapsack::create(std::move(by_bytes), opt));
  GAMMA_ASSIGN_OR_RETURN(Knapsack kf, Knapsack::create(std::move(by_file), opt));
  a.by_bytes_.emplace(std::move(kb));
  a.by_file_bytes_.emplace(std::move(kf));
  for (const auto& c : constraints) a.constraint_specs_.push_back((c.kind == Constraint::Kind::kPin ? "pin " : "allow ") + c.spec);
  a.scores_ = std::move(scores);
  a.scores_.score.clear();  // the knapsacks hold them now
  return a;
}

std::map<std::string, std::string> Allocator::fixed_types(double linear_bpw) const {
  auto f = default_fixed_types(*m_, linear_bpw);
  for (const auto& [name, type] : fixed_override_) f[name] = type;
  return f;
}

const Knapsack& Allocator::knapsack(Budget::Kind kind) const {
  return kind == Budget::Kind::kBpw ? *by_bytes_ : *by_file_bytes_;
}

double Allocator::min_bpw() const { return 8.0 * double(by_bytes_->min_weight()) / double(linear_params_); }

uint64_t Allocator::min_file_bytes() const {
  return fixed_file_bytes(*m_, fixed_types(0)) + by_file_bytes_->min_weight();
}

// The fixed tensors take the default types for the linear bpw the file size affords once
// they are paid for: the largest b with b <= 8 (S - fixed(b)) / params. fixed(b) only grows
// with b, so those b form an interval; bisection finds its end. When that leaves the
// linear modules too little, the smallest default types are the fallback.
Status Allocator::fixed_for_size(uint64_t file_bytes, double* bpw, std::map<std::string, std::string>* fixed,
                                 uint64_t* capacity) const {
  auto fixed_at = [&](double b) { return fixed_file_bytes(*m_, fixed_types(b)); };
  auto affords = [&](double b) {
    uint64_t f = fixed_at(b);
    return f <= file_bytes && b <= 8.0 * double(file_bytes - f) / double(linear_params_);
  };
  const uint64_t need = by_file_bytes_->min_weight();
  double lo = 0;
  if (affords(0)) {
    double hi = 8.0 * double(file_bytes) / double(linear_params_) + 1;
    for (int it = 0; it < 64 && hi - lo > 1e-9; ++it) {
      double mid = 0.5 * (lo + hi);
      (affords(mid) ? lo : hi) = mid;
    }
    lo = std::floor(lo * 1e6) / 1e6;  // a readable bpw in the plan; types are the same
    if (!affords(lo) || file_bytes - fixed_at(lo) < need) lo = 0;
  }
  uint64_t f = fixed_at(lo);
  if (f > file_bytes || file_bytes - f < need)
    return Status::errorf(
        "--size {} is below the smallest feasible file, {} (every module at its lightest allowed candidate)",
        format_size(file_bytes), format_size(min_file_bytes()));
  *bpw = lo;
  *fixed = fixed_types(lo);
  *capacity = file_bytes - f;
  return Status::ok();
}

Result<Allocation> Allocator::solve(const Budget& b) const {
  if (b.kind == Budget::Kind::kBpw) {
    GAMMA_RETURN_IF_ERROR(check_bpw(b.bpw));
    long double cap = std::floor(static_cast<long double>(b.bpw) * linear_params_ / 8);
    if (cap < by_bytes_->min_weight())
      return Status::errorf(
          "--bpw {:g} is below the smallest feasible {:.4f} bpw ({} of linear modules, every module at its "
          "lightest allowed candidate)",
          b.bpw, min_bpw(), format_size(by_bytes_->min_weight()));
    uint64_t capacity = cap >= 1.8e19L ? UINT64_MAX : uint64_t(cap);
    GAMMA_ASSIGN_OR_RETURN(KnapsackSolution sol, by_bytes_->solve(capacity));
    return finish(b, capacity, b.bpw, fixed_types(b.bpw), std::move(sol));
  }
  double fbpw = 0;
  std::map<std::string, std::string> fixed;
  uint64_t capacity = 0;
  GAMMA_RETURN_IF_ERROR(fixed_for_size(b.file_bytes, &fbpw, &fixed, &capacity));
  GAMMA_ASSIGN_OR_RETURN(KnapsackSolution sol, by_file_bytes_->solve(capacity));
  return finish(b, capacity, fbpw, fixed, std::move(sol));
}

Result<Allocation> Allocator::solve(const Budget& b, const SpeedBudget& sp) const {
  if (!sp.table && !sp.memory_bytes) return solve(b);
  if (b.kind != Budget::Kind::kFileBytes)
    return Status::error("a speed or memory budget takes a file-size budget (--size): the head and the rest of the file count too");
  if (sp.table) GAMMA_RETURN_IF_ERROR(sp.table->covers(*m_));
  double fbpw = 0;
  std::map<std::string, std::string> fixed;
  uint64_t capacity = 0;
  GAMMA_RETURN_IF_ERROR(fixed_for_size(b.file_bytes, &fbpw, &fixed, &capacity));
  GAMMA_ASSIGN_OR_RETURN(speed::Weight head, speed::head_of(*m_));
  head.type = fixed.at(head.name);
  const auto& classes = by_file_bytes_->classes();
  std::vector<TimeResource> res;
  std::vector<std::string> names;
  // One more budget over the modules: per candidate `cost(module, candidate)`, at most `cap`.
  auto add = [&](const std::string& name, double cap, const std::function<Result<double>(const ModuleEntry&, const Candidate&)>& cost,
                 const std::function<Status(double)>& unreachable) -> Status {
    TimeResource r;
    r.cap = cap;
    for (size_t i = 0; i < m_->modules.size(); ++i) {
      const ModuleEntry& e = m_->modules[i];
      std::vector<double> row;
      for (int j : cand_[i]) {
        GAMMA_ASSIGN_OR_RETURN(double c, cost(e, e.candidates[j]));
        row.push_back(c);
      }
      r.time.push_back(std::move(row));
    }
    GAMMA_ASSIGN_OR_RETURN(double f, fastest(classes, r, capacity, opt_));
    if (f > r.cap) return unreachable(f);
    res.push_back(std::move(r));
    names.push_back(name);
    return Status::ok();
  };
  if (sp.table) {
    const speed::CostTable& t = *sp.table;
    GAMMA_ASSIGN_OR_RETURN(speed::KernelTime head_t, t.at(head.name, head.type));
    auto time = [&](double min_tps, double per, double fixed_us, bool decode, const char* what) -> Status {
      if (!(min_tps > 0)) return Status::ok();
      // A speed this table gives some plan (--min-decode FILE, a run's own file) is that plan's
      // time summed in another order: a billionth of slack, far below the table's precision, keeps
      // it reachable whatever the rounding (the sanitizer build, with other floating-point code,
      // missed its own file's speed by one rounding: "the fastest 4882.09 tok/s" for 4882.09).
      return add(decode ? "decode" : "prefill", (per / min_tps - fixed_us) * (1 + 1e-9),
                 [&](const ModuleEntry& e, const Candidate& c) -> Result<double> {
                   GAMMA_ASSIGN_OR_RETURN(speed::KernelTime k, t.at(e.name, c.id));
                   return decode ? k.decode_us : k.prefill_us;
                 },
                 [&](double f) {
                   return Status::errorf("no plan of at most {} {} at {:.2f} tok/s here: the fastest {:.2f} tok/s (speed table's "
                                         "prediction)", format_size(b.file_bytes), what, min_tps, per / (f + fixed_us));
                 });
    };
    GAMMA_RETURN_IF_ERROR(time(sp.min_decode_tps, 1e6, t.rest.decode_us + head_t.decode_us, true, "decodes"));
    GAMMA_RETURN_IF_ERROR(time(sp.min_prefill_tps, 1e6 * speed::kPrefillBatch, t.rest.prefill_us + head_t.prefill_us, false,
                               "processes prompts"));
  }
  // The device budget: the file and its repacked weights within what the context leaves.
  uint64_t fixed_mem = 0;
  if (sp.memory_bytes) {
    GAMMA_ASSIGN_OR_RETURN(uint64_t room, speed::weights_room(*sp.source, sp.memory_bytes));
    fixed_mem = fixed_file_bytes(*m_, fixed) + speed::repacked_bytes({head});
    GAMMA_RETURN_IF_ERROR(add("memory", double(room) - double(fixed_mem),
        [&](const ModuleEntry& e, const Candidate& c) -> Result<double> {
          return double(c.file_bytes) + (speed::repacked(c.type, e.shape[0], e.shape[1]) ? double(c.bytes) : 0.0);
        },
        [&](double f) {
          return Status::errorf("no plan of at most {} runs in {} here: the least it takes is {} (weights {}, KV cache {}, "
                                "compute buffers {}, as llama.cpp allocates them)", format_size(b.file_bytes),
                                format_size(sp.memory_bytes),
                                format_size(uint64_t(f + double(fixed_mem) + double(sp.source->context + sp.source->compute) -
                                                     double(sp.source->metadata()))),
                                format_size(uint64_t(f + double(fixed_mem) - double(sp.source->metadata()))),
                                format_size(sp.source->context), format_size(sp.source->compute));
        }));
  }
  Allocation a;
  json lagrange = json::object();
  if (res.empty()) {
    GAMMA_ASSIGN_OR_RETURN(a, solve(b));
  } else {
    GAMMA_ASSIGN_OR_RETURN(TimedSolution ts, solve_timed(classes, res, capacity, opt_));
    GAMMA_ASSIGN_OR_RETURN(a, finish(b, capacity, fbpw, fixed, std::move(ts.sol)));
    a.plan.info["solver"] = "multiple-choice knapsack with time/memory budgets (Lagrangian bound + exact byte knapsack)";
    for (size_t r = 0; r < res.size(); ++r)
      lagrange[names[r]] = {{"cap", res[r].cap}, {"plan", ts.time[r]}, {"lambda", ts.lambda[r]}};
    lagrange["knapsack_solves"] = ts.solves;
  }
  if (sp.table) {
    GAMMA_ASSIGN_OR_RETURN(speed::Speed pred, sp.table->predict(*m_, a.plan));
    a.plan.info["speed"] = {{"min_decode_tps", sp.min_decode_tps},
                            {"min_prefill_tps", sp.min_prefill_tps},
                            {"predicted_tg128", pred.decode_tps},
                            {"predicted_pp512", pred.prefill_tps},
                            {"machine", sp.table->machine},
                            {"threads", sp.table->threads},
                            {"time_budgets", lagrange}};
  }
  if (sp.memory_bytes) {
    GAMMA_ASSIGN_OR_RETURN(auto ws, speed::weights_of(*m_, a.plan));
    a.plan.info["memory"] = {{"memory_bytes", sp.memory_bytes},
                             {"predicted_total", speed::predicted_total(*sp.source, a.size.file_bytes, speed::repacked_bytes(ws))},
                             {"source", sp.source->to_json()},
                             {"budgets", lagrange}};
  }
  return a;
}

Result<std::vector<Allocation>> Allocator::sweep(const std::vector<double>& bpws) const {
  std::vector<uint64_t> caps;
  for (double bpw : bpws) {
    GAMMA_RETURN_IF_ERROR(check_bpw(bpw).with_context("sweep budget"));
    long double cap = std::floor(static_cast<long double>(bpw) * linear_params_ / 8);
    if (cap < by_bytes_->min_weight())
      return Status::errorf("sweep budget {:g} bpw is below the smallest feasible {:.4f} bpw (every module at its "
                            "lightest allowed candidate)",
                            bpw, min_bpw());
    caps.push_back(cap >= 1.8e19L ? UINT64_MAX : uint64_t(cap));
  }
  auto sols = by_bytes_->sweep(caps);
  std::vector<Allocation> out;
  for (size_t k = 0; k < bpws.size(); ++k) {
    if (!sols[k].is_ok()) return sols[k].status();
    Budget b{Budget::Kind::kBpw, bpws[k], 0};
    GAMMA_ASSIGN_OR_RETURN(Allocation a, finish(b, caps[k], bpws[k], fixed_types(bpws[k]),
                                                std::move(sols[k]).value()));
    out.push_back(std::move(a));
  }
  return out;
}

Result<Allocation> Allocator::finish(const Budget& b, uint64_t capacity, double fixed_bpw,
                                     const std::map<std::string, std::string>& fixed, KnapsackSolution sol) const {
  const Knapsack& k = knapsack(b.kind);
  Allocation a;
  a.budget = b;
  a.capacity = capacity;
  a.fixed_bpw = fixed_bpw;
  Plan& p = a.plan;
  p.model_fingerprint = m_->model_fingerprint;
  p.method = scores_.method.empty() ? "scores" : scores_.method;
  for (size_t i = 0; i < m_->modules.size(); ++i) {
    const ModuleEntry& e = m_->modules[i];
    p.modules[e.name] = e.candidates[cand_[i][sol.choice[i]]].id;
  }
  p.fixed = fixed;
  a.size = plan_size(*m_, p);
  // The knapsack counted the same bytes plan_size does; a mismatch is a bug, not a plan.
  const bool fits = b.kind == Budget::Kind::kBpw ? a.size.linear_bytes <= capacity : a.size.file_bytes <= b.file_bytes;
  if (!fits || (b.kind == Budget::Kind::kBpw && a.size.linear_bytes != sol.weight))
    return Status::errorf("internal error: plan for {} does not match the solver's size", b.describe());
  json budget = b.kind == Budget::Kind::kBpw ? json{{"bpw", b.bpw}}
                                              : json{{"file_bytes", b.file_bytes}, {"size", format_size(b.file_bytes)}};
  budget["capacity_bytes"] = capacity;
  budget["counts"] = b.kind == Budget::Kind::kBpw ? "tensor bytes of the linear modules (scales included)"
                                                   : "file bytes: header + fixed tensors + linear modules (padded)";
  p.info = {
      {"solver", "exact multiple-choice knapsack (LP hull bounds + Pareto DP)"},
      {"budget", budget},
      {"scores", {{"source", scores_.source}, {"method", scores_.method}, {"unscored_candidates", unscored_}}},
      {"constraints", constraint_specs_},
      {"fixed_types_for_bpw", fixed_bpw},
      {"objective", sol.score},
      {"upper_bound", sol.upper_bound},
      {"gap", sol.gap()},
      {"optimal", sol.optimal},
      {"tolerance", k.tolerance_abs()},
      {"lp_bound", sol.lp_bound},
      {"free_modules", sol.free_classes},
      {"dp_states", sol.states},
      {"seconds", sol.seconds},
      {"predicted", {{"linear_bytes", a.size.linear_bytes}, {"linear_bpw", a.size.linear_bpw}, {"file_bytes", a.size.file_bytes}}},
  };
  a.solution = std::move(sol);
  return a;
}

json Allocator::pareto(const std::vector<Allocation>& points, const std::vector<std::string>& plan_files) const {
  // On the front: no other point is at most as large and scores at least as much (the
  // first of identical points stands for them).
  std::vector<size_t> idx(points.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto &x = points[a], &y = points[b];
    if (x.size.linear_bytes != y.size.linear_bytes) return x.size.linear_bytes < y.size.linear_bytes;
    return x.solution.score > y.solution.score;
  });
  std::vector<bool> front(points.size(), false);
  double best = -INFINITY;
  for (size_t i : idx)
    if (points[i].solution.score > best) front[i] = true, best = points[i].solution.score;
  json j = json_header("gamma.pareto", 1);
  j["model_fingerprint"] = m_->model_fingerprint;
  j["scores"] = {{"source", scores_.source}, {"method", scores_.method}};
  j["constraints"] = constraint_specs_;
  json pts = json::array();
  double total = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const Allocation& a = points[i];
    total += a.solution.seconds;
    pts.push_back({{"bpw_budget", a.budget.bpw},
                   {"linear_bytes", a.size.linear_bytes},
                   {"linear_bpw", a.size.linear_bpw},
                   {"file_bytes", a.size.file_bytes},
                   {"score", a.solution.score},
                   {"upper_bound", a.solution.upper_bound},
                   {"optimal", a.solution.optimal},
                   {"on_front", bool(front[i])},
                   {"plan", i < plan_files.size() ? plan_files[i] : ""},
                   {"seconds", a.solution.seconds}});
  }
  j["solve_seconds"] = total;
  j["points"] = pts;
  return j;
}

}  // namespace gm::solve
