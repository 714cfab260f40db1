#include "solve/window.h"

#include <algorithm>

namespace gm::solve {

Result<std::map<std::string, std::vector<std::string>>> candidate_window(const Manifest& estimate,
                                                                         const std::vector<Plan>& plans, const WindowRule& rule) {
  if (plans.empty()) return Status::error("candidate_window: no plans");
  if (rule.steps < 0 || rule.near_steps < 0) return Status::error("candidate_window: steps must be >= 0");
  const int steps = rule.steps;
  // Per module, the lowest and highest index (candidates are sorted by bytes) any plan takes.
  std::map<std::string, std::pair<int, int>> span;
  for (const Plan& p : plans) {
    GAMMA_RETURN_IF_ERROR(p.validate(estimate).with_context("candidate_window"));
    for (const auto& e : estimate.modules) {
      const std::string& id = p.modules.at(e.name);
      const int i = int(std::find_if(e.candidates.begin(), e.candidates.end(),
                                     [&](const Candidate& c) { return c.id == id; }) -
                        e.candidates.begin());
      auto [it, fresh] = span.try_emplace(e.name, i, i);
      if (!fresh) it->second = {std::min(it->second.first, i), std::max(it->second.second, i)};
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& e : estimate.modules) {
    const auto [lo, hi] = span.at(e.name);
    auto& types = out[e.name];
    for (int i = std::max(0, lo - steps); i <= std::min(int(e.candidates.size()) - 1, hi + steps); ++i) {
      const std::string& t = e.candidates[size_t(i)].type;
      if (i < lo - rule.near_steps && rule.near_only.count(t)) continue;
      types.push_back(t);
    }
  }
  return out;
}

}  // namespace gm::solve
