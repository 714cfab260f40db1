// Re-expressing one scorer's scores before solving (--transform) and blending two (--blend).
#include <algorithm>
#include <cmath>
#include <limits>

#include "scores/scores.h"

namespace gm::scores {

Status Scores::transform(const std::string& how, const Manifest& m) {
  if (how == "score") return Status::ok();
  if (how == "delta" || how == "delta-fit") {
    // delta: -delta, the measured loss change. delta-fit: the measured loss change of a
    // module's candidates is, to a median R^2 of 0.995 on Qwen (results/iq_qwen/delta_fit.json),
    // a straight line in the pool's imatrix-weighted relative error, delta_b = a + c * rel_err_b;
    // the fitted slope c is the module's measured sensitivity, and -c * rel_err_b keeps it
    // while dropping the measurement noise (the intercept, the same for every candidate of a
    // module, cannot change a plan). A module whose slope is not positive keeps -delta.
    const bool fit = how == "delta-fit";
    fit_fallbacks = 0;
    for (auto& [name, row] : score) {
      auto it = delta.find(name);
      const ModuleEntry* e = m.find(name);
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (auto& [cand, v] : row) {
        if (it == delta.end() || !it->second.count(cand))
          return Status::errorf("--transform {} needs measured loss changes (gamma learn --measure-every); {} has none for {} of module {}",
                                how, source, cand, name);
        v = -it->second.at(cand);
        if (!fit) continue;
        const Candidate* c = e ? e->find(cand) : nullptr;
        if (!c) return Status::errorf("{} scores candidate {} of module {}, which the pool does not have", source, cand, name);
        const double x = c->rel_err, y = -v;
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
      }
      if (!fit) continue;
      const double var = sxx - sx * sx / n, slope = var > 0 ? (sxy - sx * sy / n) / var : 0;
      if (slope > 0)
        for (auto& [cand, v] : row) v = -slope * e->find(cand)->rel_err;
      else
        ++fit_fallbacks;
    }
    method += "/" + how;
    return Status::ok();
  }
  if (how != "log" && how != "size-log")
    return Status::errorf("--transform must be score, log, size-log, delta or delta-fit (got {})", how);
  double mean_n = 0;
  for (const auto& e : m.modules) mean_n += double(e.n_params) / double(m.modules.size());
  for (auto& [name, row] : score) {
    const ModuleEntry* e = m.find(name);
    const double w = how == "log" || !e ? 1.0 : double(e->n_params) / mean_n;
    for (auto& [cand, v] : row) {
      if (!(v > 0))
        return Status::errorf("--transform {} needs probabilities > 0; {} scores {} of module {} as {}", how, source, cand,
                              name, v);
      v = w * std::log(v);
    }
  }
  method += "/" + how;
  return Status::ok();
}

Status Scores::blend(const Scores& other) {
  if (!model_fingerprint.empty() && !other.model_fingerprint.empty() && model_fingerprint != other.model_fingerprint)
    return Status::errorf("--blend: {} and {} score different models", source, other.source);
  auto costs = [](const std::map<std::string, double>& row) {
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& [cand, v] : row) best = std::max(best, v);
    std::map<std::string, double> c;
    for (const auto& [cand, v] : row) c[cand] = best - v;
    return c;
  };
  for (auto& [name, row] : score) {
    auto it = other.score.find(name);
    if (it == other.score.end()) return Status::errorf("--blend: {} gives no score for module {}", other.source, name);
    std::map<std::string, double> mine, theirs;  // the candidates both score
    for (const auto& [cand, v] : row)
      if (auto t = it->second.find(cand); t != it->second.end()) mine[cand] = v, theirs[cand] = t->second;
    if (mine.empty())
      return Status::errorf("--blend: {} and {} share no candidate of module {}", source, other.source, name);
    const auto ca = costs(mine), cb = costs(theirs);
    row.clear();
    for (const auto& [cand, a] : ca) row[cand] = -std::sqrt(a * cb.at(cand));
    p.erase(name);
  }
  method += "+blend(" + other.method + ")";
  return Status::ok();
}

}  // namespace gm::scores
