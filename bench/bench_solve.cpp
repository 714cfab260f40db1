// Stage II speed: time per budget and per 100-budget sweep of gamma's exact knapsack on a
// Qwen2.5-1.5B-shaped instance (196 modules x 5 k-quants) and a Llama-3-70B-shaped one
// (80 layers x 7 modules x 8 types), for Stage-I-like and -rel_err-like scores, with CBC on
// the same instances in the same run (time ratio, agreement of the optima). Prints JSON.
//
//   bench_solve [--cbc-budgets N] [--reps R]
//     --cbc-budgets: budgets per instance CBC solves (evenly spread over the 100; default 8;
//                    100 = all, slow: CBC takes seconds per 70B budget)
//     --reps:        timing repetitions per gamma measurement (median reported; default 5)
//     --cbc-70b-timed: CBC also on the 70B instance with a time budget (minutes each)
// "timed": the same shapes with a decode-time budget beside the bytes (solve/timed.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "solve/knapsack.h"
#include "solve/timed.h"
#include "solve/instances.h"
#include "util/json.h"

using namespace gm;
using namespace gm::solve;
using namespace gm::solve_testing;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

json bench_instance(const char* name, const Shape& shape, ScoreModel sm, int cbc_budgets, int reps) {
  auto cls = model_instance(shape, sm, 2024);
  const int64_t params = total_params(shape);
  auto t0 = Clock::now();
  Knapsack ks = Knapsack::create(cls).value();
  const double create_s = since(t0);

  // 100 budgets from the smallest feasible (or 2.5 bpw) to 4.5 bpw.
  const double lo = std::max(2.5, 8.0 * double(ks.min_weight()) / double(params)), hi = 4.5;
  std::vector<double> bpw;
  std::vector<uint64_t> caps;
  for (int k = 0; k < 100; ++k) {
    bpw.push_back(lo + (hi - lo) * k / 99.0);
    caps.push_back(std::max(ks.min_weight(), uint64_t(bpw.back() * double(params) / 8)));
  }

  // One budget at a time, cold (no warm start): median over repetitions per budget.
  std::vector<double> per_budget;
  std::vector<KnapsackSolution> sols;
  int optimal = 0;
  uint64_t max_states = 0;
  for (uint64_t cap : caps) {
    std::vector<double> t;
    KnapsackSolution s;
    for (int r = 0; r < reps; ++r) {
      auto c0 = Clock::now();
      s = ks.solve(cap).value();
      t.push_back(since(c0));
    }
    per_budget.push_back(median(t) * 1e3);
    optimal += s.optimal;
    max_states = std::max(max_states, s.states);
    sols.push_back(std::move(s));
  }
  // The 100-budget sweep (answers seed the next budget), and the same including the
  // preprocessing a fresh `gamma solve --sweep` pays.
  std::vector<double> sweep_t, sweep_full_t;
  int sweep_mismatch = 0;
  for (int r = 0; r < reps; ++r) {
    auto c0 = Clock::now();
    auto all = ks.sweep(caps);
    sweep_t.push_back(since(c0));
    for (size_t k = 0; k < all.size(); ++k)
      sweep_mismatch += !all[k].is_ok() || !all[k]->optimal || std::fabs(all[k]->score - sols[k].score) > ks.tolerance_abs();
    auto c1 = Clock::now();
    auto fresh = Knapsack::create(cls).value();
    auto again = fresh.sweep(caps);
    sweep_full_t.push_back(since(c1));
  }

  // CBC on evenly spread budgets of the same instance.
  json cbc_points = json::array();
  std::vector<double> cbc_ms, gamma_ms_same;
  int agree = 0, gamma_better = 0, cbc_better = 0, cbc_unproven = 0;
  for (int j = 0; j < cbc_budgets; ++j) {
    size_t k = cbc_budgets == 1 ? 0 : size_t(std::lround(99.0 * j / (cbc_budgets - 1)));
    CbcAnswer c = cbc_solve(cls, caps[k], 300);
    double tol = 1e-9 * std::max(1.0, std::fabs(c.score));
    if (!c.optimal) {
      ++cbc_unproven;
    } else if (std::fabs(c.score - sols[k].score) <= tol) {
      ++agree;
    } else if (sols[k].score > c.score) {
      ++gamma_better;
    } else {
      ++cbc_better;
    }
    cbc_ms.push_back(c.seconds * 1e3);
    gamma_ms_same.push_back(per_budget[k]);
    cbc_points.push_back({{"bpw", bpw[k]}, {"cbc_ms", c.seconds * 1e3}, {"gamma_ms", per_budget[k]},
                          {"cbc_score", c.score}, {"gamma_score", sols[k].score}, {"cbc_proven", c.optimal}});
  }
  double cbc_mean = 0, gamma_mean_same = 0;
  for (size_t j = 0; j < cbc_ms.size(); ++j) cbc_mean += cbc_ms[j] / cbc_ms.size(), gamma_mean_same += gamma_ms_same[j] / cbc_ms.size();
  double gamma_mean = 0;
  for (double t : per_budget) gamma_mean += t / per_budget.size();

  return {
      {"instance", name},
      {"modules", cls.size()},
      {"types", cls[0].weight.size()},
      {"scores", sm == ScoreModel::kStageI ? "stage1_probabilities" : "neg_rel_err"},
      {"budgets", {{"count", caps.size()}, {"bpw_from", lo}, {"bpw_to", hi}}},
      {"gamma",
       {{"create_ms", create_s * 1e3},
        {"per_budget_ms", {{"median", median(per_budget)}, {"mean", gamma_mean}, {"p90", quantile(per_budget, 0.9)},
                           {"max", *std::max_element(per_budget.begin(), per_budget.end())}}},
        {"sweep_100_ms", median(sweep_t) * 1e3},
        {"sweep_100_with_create_ms", median(sweep_full_t) * 1e3},
        {"proven_optimal", optimal},
        {"sweep_mismatches", sweep_mismatch},
        {"max_dp_states", max_states}}},
      {"cbc",
       {{"budgets_solved", cbc_ms.size()},
        {"per_budget_ms", {{"mean", cbc_mean}, {"median", median(cbc_ms)},
                           {"max", cbc_ms.empty() ? 0 : *std::max_element(cbc_ms.begin(), cbc_ms.end())}}},
        {"sweep_100_ms_estimate", cbc_mean * 100},
        {"points", cbc_points}}},
      // CBC's mean time per budget over gamma's on the same budgets (hot, median of --reps),
      // and over gamma's average budget inside the 100-budget sweep (each solved once).
      {"cbc_over_gamma_time_ratio", gamma_mean_same > 0 ? cbc_mean / gamma_mean_same : 0},
      {"cbc_over_gamma_sweep_average_ratio", cbc_mean / (median(sweep_t) * 1e3 / double(caps.size()))},
      {"agreement", {{"agree", agree}, {"gamma_better", gamma_better}, {"cbc_better", cbc_better}, {"cbc_unproven", cbc_unproven}}},
  };
}

}  // namespace

// The knapsack with a decode-time budget beside the bytes (solve/timed.h) on the same shapes:
// times like decode kernels' (bytes x a per-type slowness), the cap between the fastest plan of
// the size and the plain optimum's time. Solve time, byte-knapsack solves, certified gap, and
// CBC's optimum for the loss (Qwen only unless `cbc_70b`: CBC takes minutes per 70B instance).
json bench_timed(const char* name, const Shape& shape, bool cbc) {
  json points = json::array();
  for (double bpw : {2.75, 3.5, 4.5})
    for (double share : {0.3, 0.7}) {
      auto cls = model_instance(shape, ScoreModel::kNegRelErr, 11);
      std::mt19937_64 rng(3);
      TimeResource t = times_for(cls, rng);
      const uint64_t cap = uint64_t(bpw * double(total_params(shape)) / 8);
      auto plain = Knapsack::create(cls)->solve(cap);
      if (!plain.is_ok()) continue;
      double t_plain = 0;
      for (size_t i = 0; i < cls.size(); ++i) t_plain += t.time[i][plain->choice[i]];
      auto f = fastest(cls, t, cap);
      if (!f.is_ok()) continue;
      t.cap = *f + share * (t_plain - *f);
      const auto t0 = Clock::now();
      auto s = solve_timed(cls, {t}, cap);
      const double ms = since(t0) * 1e3;
      if (!s.is_ok()) continue;
      json p = {{"bpw", bpw}, {"time_share", share}, {"ms", ms}, {"byte_knapsack_solves", s->solves},
                {"score", s->sol.score}, {"bound", s->sol.upper_bound},
                {"certified_gap_rel", (s->sol.upper_bound - s->sol.score) / std::fabs(s->sol.score)}};
      if (cbc) {
        CbcAnswer ref = cbc_solve(cls, cap, 300, {t.time}, {t.cap});
        p["cbc_ms"] = ref.seconds * 1e3;
        p["cbc_proven"] = ref.optimal;
        if (ref.optimal) p["loss_vs_cbc_rel"] = (ref.score - s->sol.score) / std::fabs(ref.score);
      }
      points.push_back(p);
    }
  double worst_ms = 0, worst_gap = 0;
  for (const auto& p : points)
    worst_ms = std::max(worst_ms, p["ms"].get<double>()), worst_gap = std::max(worst_gap, p["certified_gap_rel"].get<double>());
  return {{"instance", name}, {"classes", model_instance(shape, ScoreModel::kNegRelErr, 11).size()},
          {"points", points}, {"max_ms", worst_ms}, {"max_certified_gap_rel", worst_gap}};
}

int main(int argc, char** argv) {
  int cbc_budgets = 8, reps = 5;
  bool cbc_70b = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cbc-budgets") && i + 1 < argc) cbc_budgets = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cbc-70b-timed")) cbc_70b = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_solve [--cbc-budgets N] [--reps R] [--cbc-70b-timed]\n");
      return 2;
    }
  }
  if (cbc_budgets < 0 || cbc_budgets > 100 || reps < 1) {
    std::fprintf(stderr, "bench_solve: --cbc-budgets must be 0..100 and --reps >= 1\n");
    return 2;
  }
  json out = json::object();
  out["benchmark"] = "stage2_solve";
  json results = json::array();
  results.push_back(bench_instance("qwen2.5-1.5b", qwen15b(), ScoreModel::kStageI, cbc_budgets, reps));
  results.push_back(bench_instance("qwen2.5-1.5b", qwen15b(), ScoreModel::kNegRelErr, cbc_budgets, reps));
  results.push_back(bench_instance("llama-70b", llama70b(), ScoreModel::kStageI, cbc_budgets, reps));
  results.push_back(bench_instance("llama-70b", llama70b(), ScoreModel::kNegRelErr, cbc_budgets, reps));
  // Goals (issue 5): < 10 ms per budget at Qwen-1.5B size, a 100-budget sweep < 1 s, exact.
  double qwen_max = 0, sweep_max = 0;
  bool exact = true;
  for (const auto& r : results) {
    if (r["instance"] == "qwen2.5-1.5b") qwen_max = std::max(qwen_max, r["gamma"]["per_budget_ms"]["max"].get<double>());
    sweep_max = std::max(sweep_max, r["gamma"]["sweep_100_ms"].get<double>());
    exact = exact && r["gamma"]["proven_optimal"].get<int>() == 100 && r["gamma"]["sweep_mismatches"].get<int>() == 0 &&
            r["agreement"]["cbc_better"].get<int>() == 0;
  }
  out["results"] = results;
  out["timed"] = json::array({bench_timed("qwen2.5-1.5b", qwen15b(), true), bench_timed("llama-70b", llama70b(), cbc_70b)});
  out["goals"] = {{"qwen_per_budget_max_ms", qwen_max},
                  {"qwen_per_budget_under_10ms", qwen_max < 10},
                  {"sweep_100_max_ms", sweep_max},
                  {"sweep_100_under_1s", sweep_max < 1000},
                  {"all_proven_optimal_and_never_worse_than_cbc", exact}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
