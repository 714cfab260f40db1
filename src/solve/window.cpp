#include "solve/window.h"

#include <algorithm>

#include "solve/allocate.h"

namespace gm::solve {

Result<std::map<std::string, std::vector<std::string>>> candidate_window(const Manifest& estimate,
                                                                         const scores::Scores& scores,
                                                                         const std::vector<uint64_t>& sizes, int steps) {
  if (sizes.empty()) return Status::error("candidate_window: no sizes");
  if (steps < 0) return Status::error("candidate_window: steps must be >= 0");
  GAMMA_ASSIGN_OR_RETURN(auto alloc, Allocator::create(estimate, scores, {}));
  // Per module, the lowest and highest index (candidates are sorted by bytes) any plan takes.
  std::map<std::string, std::pair<int, int>> span;
  for (uint64_t size : sizes) {
    GAMMA_ASSIGN_OR_RETURN(Allocation a, alloc.solve(Budget::of_file_bytes(size)));
    for (const auto& e : estimate.modules) {
      const std::string& id = a.plan.modules.at(e.name);
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
    for (int i = std::max(0, lo - steps); i <= std::min(int(e.candidates.size()) - 1, hi + steps); ++i)
      types.push_back(e.candidates[size_t(i)].type);
  }
  return out;
}

}  // namespace gm::solve
