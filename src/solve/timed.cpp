#include "solve/timed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace gm::solve {
namespace {

struct Lagrangian {
  const std::vector<KnapsackClass>& classes;
  const std::vector<TimeResource>& res;
  uint64_t capacity;
  KnapsackOptions opt;
  int solves = 0;

  std::vector<double> times(const std::vector<int>& choice) const {
    std::vector<double> t(res.size(), 0.0);
    for (size_t r = 0; r < res.size(); ++r)
      for (size_t i = 0; i < classes.size(); ++i) t[r] += res[r].time[i][choice[i]];
    return t;
  }
  double score(const std::vector<int>& choice) const {
    double s = 0;
    for (size_t i = 0; i < classes.size(); ++i) s += classes[i].score[choice[i]];
    return s;
  }
  bool within(const std::vector<double>& t) const {
    for (size_t r = 0; r < res.size(); ++r)
      if (t[r] > res[r].cap) return false;
    return true;
  }

  // The byte knapsack on p - lambda . t: its plan and the bound it certifies.
  struct Eval {
    std::vector<int> choice;
    std::vector<double> time;
    double bound = 0;  // UB(lambda) of the timed problem
  };
  Result<Eval> eval(const std::vector<double>& lambda) {
    std::vector<KnapsackClass> adj = classes;
    for (size_t i = 0; i < adj.size(); ++i)
      for (size_t j = 0; j < adj[i].score.size(); ++j)
        for (size_t r = 0; r < res.size(); ++r) adj[i].score[j] -= lambda[r] * res[r].time[i][j];
    GAMMA_ASSIGN_OR_RETURN(Knapsack k, Knapsack::create(std::move(adj), opt));
    GAMMA_ASSIGN_OR_RETURN(KnapsackSolution s, k.solve(capacity));
    ++solves;
    Eval e;
    e.choice = s.choice;
    e.time = times(s.choice);
    e.bound = s.upper_bound;
    for (size_t r = 0; r < res.size(); ++r) e.bound += lambda[r] * res[r].cap;
    return e;
  }
};

// Summed weight and times of a plan.
void totals(const std::vector<KnapsackClass>& cls, const std::vector<TimeResource>& res, const std::vector<int>& c,
            uint64_t* w, std::vector<double>* t) {
  *w = 0;
  t->assign(res.size(), 0.0);
  for (size_t i = 0; i < cls.size(); ++i) {
    *w += cls[i].weight[c[i]];
    for (size_t r = 0; r < res.size(); ++r) (*t)[r] += res[r].time[i][c[i]];
  }
}

// How far a plan is over its budgets, in units of each budget (0: within all).
double excess(const std::vector<TimeResource>& res, const std::vector<double>& t) {
  double e = 0;
  for (size_t r = 0; r < res.size(); ++r)
    if (t[r] > res[r].cap) e += (t[r] - res[r].cap) / std::max(res[r].cap, 1e-300);
  return e;
}

// Moves class i of the plan to item j, keeping its summed weight and times current.
void move(const std::vector<KnapsackClass>& cls, const std::vector<TimeResource>& res, size_t i, size_t j,
          std::vector<int>* c, uint64_t* w, std::vector<double>* t) {
  const int a = (*c)[i];
  *w = *w - cls[i].weight[a] + cls[i].weight[j];
  for (size_t r = 0; r < res.size(); ++r) (*t)[r] += res[r].time[i][j] - res[r].time[i][a];
  (*c)[i] = static_cast<int>(j);
}

// Brings a plan within every time cap (bytes kept) by single-module moves, each the least score
// lost per unit of excess removed; false when no move reduces the excess.
bool repair(const std::vector<KnapsackClass>& cls, const std::vector<TimeResource>& res, uint64_t capacity,
            std::vector<int>* c) {
  uint64_t w;
  std::vector<double> t;
  totals(cls, res, *c, &w, &t);
  for (double e = excess(res, t); e > 0; e = excess(res, t)) {
    double best = std::numeric_limits<double>::infinity();
    size_t bi = 0, bj = 0;
    for (size_t i = 0; i < cls.size(); ++i) {
      const int a = (*c)[i];
      for (size_t j = 0; j < cls[i].score.size(); ++j) {
        if (w - cls[i].weight[a] + cls[i].weight[j] > capacity) continue;
        std::vector<double> t2 = t;
        for (size_t r = 0; r < res.size(); ++r) t2[r] += res[r].time[i][j] - res[r].time[i][a];
        const double drop = e - excess(res, t2);
        if (drop <= 0) continue;
        const double ratio = (cls[i].score[a] - cls[i].score[j]) / drop;
        if (ratio < best) best = ratio, bi = i, bj = j;
      }
    }
    if (!std::isfinite(best)) return false;
    move(cls, res, bi, bj, c, &w, &t);
  }
  return true;
}

// Single-module moves that gain score and keep every budget, best first, until none does.
void improve(const std::vector<KnapsackClass>& cls, const std::vector<TimeResource>& res, uint64_t capacity,
             std::vector<int>* c) {
  uint64_t w;
  std::vector<double> t;
  totals(cls, res, *c, &w, &t);
  for (;;) {
    double gain = 0;
    size_t bi = 0, bj = 0;
    for (size_t i = 0; i < cls.size(); ++i) {
      const int a = (*c)[i];
      for (size_t j = 0; j < cls[i].score.size(); ++j) {
        const double g = cls[i].score[j] - cls[i].score[a];
        if (g <= gain || w - cls[i].weight[a] + cls[i].weight[j] > capacity) continue;
        bool ok = true;
        for (size_t r = 0; r < res.size() && ok; ++r) ok = t[r] - res[r].time[i][a] + res[r].time[i][j] <= res[r].cap;
        if (ok) gain = g, bi = i, bj = j;
      }
    }
    if (!(gain > 0)) return;
    move(cls, res, bi, bj, c, &w, &t);
  }
}

}  // namespace

Result<double> fastest(const std::vector<KnapsackClass>& classes, const TimeResource& r, uint64_t capacity,
                       const KnapsackOptions& opt) {
  std::vector<KnapsackClass> neg = classes;
  for (size_t i = 0; i < neg.size(); ++i)
    for (size_t j = 0; j < neg[i].score.size(); ++j) neg[i].score[j] = -r.time[i][j];
  GAMMA_ASSIGN_OR_RETURN(Knapsack k, Knapsack::create(std::move(neg), opt));
  GAMMA_ASSIGN_OR_RETURN(KnapsackSolution s, k.solve(capacity));
  return -s.score;
}

Result<TimedSolution> solve_timed(const std::vector<KnapsackClass>& classes, const std::vector<TimeResource>& res,
                                  uint64_t capacity, const KnapsackOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& r : res) {
    if (r.time.size() != classes.size()) return Status::error("timed knapsack: a time table has another number of classes");
    for (size_t i = 0; i < classes.size(); ++i) {
      if (r.time[i].size() != classes[i].score.size())
        return Status::error("timed knapsack: a time table has another number of items");
      for (double t : r.time[i])
        if (!std::isfinite(t) || t < 0) return Status::error("timed knapsack: a time is not a finite number >= 0");
    }
  }
  // Every cap must be reachable on its own; say by how much it is not.
  for (size_t r = 0; r < res.size(); ++r) {
    GAMMA_ASSIGN_OR_RETURN(double f, fastest(classes, res[r], capacity, opt));
    if (f > res[r].cap)
      return Status::errorf("time budget {} unreachable within the bytes: at least {:.6g} (cap {:.6g})", r, f, res[r].cap);
  }

  Lagrangian L{classes, res, capacity, opt};
  std::vector<double> lambda(res.size(), 0.0);
  double best_bound = std::numeric_limits<double>::infinity();
  std::vector<double> best_lambda = lambda;
  std::vector<int> incumbent;
  double inc_score = -std::numeric_limits<double>::infinity();
  std::vector<std::vector<int>> over;  // plans over a time cap: repaired below
  auto consider = [&](const Lagrangian::Eval& e, const std::vector<double>& lam) {
    if (e.bound < best_bound) best_bound = e.bound, best_lambda = lam;
    if (L.within(e.time)) {
      const double s = L.score(e.choice);
      if (s > inc_score) inc_score = s, incumbent = e.choice;
    } else {
      over.push_back(e.choice);
    }
  };
  GAMMA_ASSIGN_OR_RETURN(auto e0, L.eval(lambda));
  consider(e0, lambda);

  if (!L.within(e0.time)) {
    // Scale: a multiplier that makes a module's whole score range cost as much as its time range.
    double srange = 0, trange = 0;
    for (size_t i = 0; i < classes.size(); ++i) {
      const auto& s = classes[i].score;
      srange += *std::max_element(s.begin(), s.end()) - *std::min_element(s.begin(), s.end());
    }
    for (const auto& r : res)
      for (const auto& row : r.time) trange += *std::max_element(row.begin(), row.end()) - *std::min_element(row.begin(), row.end());
    const double unit = trange > 0 ? std::max(srange, 1e-300) / trange : 1.0;
    // One multiplier at a time (the others held), a few rounds when there are two.
    const int rounds = res.size() == 1 ? 1 : 4;
    for (int round = 0; round < rounds; ++round) {
      for (size_t r = 0; r < res.size(); ++r) {
        std::vector<double> lam = lambda;
        double lo = 0, hi = unit * 1e-6;
        // The smallest multiplier whose plan meets this cap: double until it does...
        for (int it = 0; it < 200; ++it) {
          lam[r] = hi;
          GAMMA_ASSIGN_OR_RETURN(auto e, L.eval(lam));
          consider(e, lam);
          if (e.time[r] <= res[r].cap) break;
          lo = hi;
          hi *= 2;
        }
        // ...then bisect (in log space while the bracket spans orders of magnitude).
        for (int it = 0; it < 40 && hi - lo > 1e-9 * hi; ++it) {
          const double mid = lo > 0 && hi / lo > 4 ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
          lam[r] = mid;
          GAMMA_ASSIGN_OR_RETURN(auto e, L.eval(lam));
          consider(e, lam);
          (e.time[r] <= res[r].cap ? hi : lo) = mid;
        }
        lambda[r] = hi;
      }
    }
  }
  // The plans just over a cap (the last multipliers below the feasible ones) score more: repair
  // the best few and keep whichever ends best.
  std::sort(over.begin(), over.end(), [&](const auto& a, const auto& b) { return L.score(a) > L.score(b); });
  if (over.size() > 4) over.resize(4);
  for (auto& plan : over) {
    if (!repair(classes, res, capacity, &plan)) continue;
    improve(classes, res, capacity, &plan);
    const double s = L.score(plan);
    if (s > inc_score) inc_score = s, incumbent = plan;
  }
  if (incumbent.empty())
    return Status::error("timed knapsack: no plan met every time budget (the budgets conflict within the bytes)");
  improve(classes, res, capacity, &incumbent);
  uint64_t w = 0;
  for (size_t i = 0; i < classes.size(); ++i) w += classes[i].weight[incumbent[i]];
  const std::vector<double> t = L.times(incumbent);

  TimedSolution out;
  out.sol.choice = incumbent;
  out.sol.weight = w;
  out.sol.score = L.score(incumbent);
  out.sol.upper_bound = std::max(best_bound, out.sol.score);
  double scale = 0;
  for (const auto& c : classes)
    for (double s : c.score) scale = std::max(scale, std::fabs(s));
  out.sol.optimal = out.sol.upper_bound - out.sol.score <= opt.tolerance * std::max(1.0, scale * classes.size());
  out.sol.lp_bound = e0.bound;
  out.sol.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.time = t;
  out.lambda = best_lambda;
  out.solves = L.solves;
  return out;
}

}  // namespace gm::solve
