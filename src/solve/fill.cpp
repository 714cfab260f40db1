#include "solve/fill.h"

namespace gm::solve {

Result<Allocation> solve_filled(const Manifest& m, const scores::Scores& base, const std::vector<Constraint>& cs,
                                const KnapsackOptions& kopt, const std::map<std::string, std::string>& fixed,
                                const Budget& budget, double fill, double* kappa_out) {
  int64_t total = 0;
  for (const auto& e : m.modules) total += e.n_params;
  auto at = [&](double kappa) -> Result<Allocation> {
    scores::Scores s = base;
    for (const auto& e : m.modules) {
      auto it = s.score.find(e.name);
      if (it == s.score.end()) continue;
      for (const auto& c : e.candidates)
        if (auto jt = it->second.find(c.id); jt != it->second.end())
          jt->second += kappa * c.bpw * double(e.n_params) / double(total);
    }
    GAMMA_ASSIGN_OR_RETURN(auto alloc, Allocator::create(m, std::move(s), cs, kopt, fixed));
    return alloc.solve(budget);
  };
  auto spent = [&](const Allocation& a) {
    return budget.kind == Budget::Kind::kBpw ? a.size.linear_bpw / budget.bpw
                                             : double(a.size.file_bytes) / double(budget.file_bytes);
  };
  *kappa_out = 0;
  GAMMA_ASSIGN_OR_RETURN(Allocation best, at(0));
  if (spent(best) >= fill) return best;
  double lo = 0, hi = 1;
  GAMMA_ASSIGN_OR_RETURN(Allocation top, at(hi));
  while (spent(top) < fill && hi < 1e9) {
    GAMMA_ASSIGN_OR_RETURN(top, at(hi *= 4));
  }
  if (spent(top) < fill) {  // even pure bits cannot reach F: the fullest plan there is
    *kappa_out = hi;
    return top;
  }
  for (int it = 0; it < 50 && hi - lo > 1e-9 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    GAMMA_ASSIGN_OR_RETURN(Allocation a, at(mid));
    if (spent(a) >= fill) hi = mid, top = std::move(a);
    else lo = mid;
  }
  *kappa_out = hi;
  return top;
}

}  // namespace gm::solve
