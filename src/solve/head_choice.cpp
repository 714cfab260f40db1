#include "solve/head_choice.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace gm::solve {

Result<Allocation> solve_choosing_head(const Manifest& m, const scores::Scores& s, const std::vector<Constraint>& cs,
                                       const KnapsackOptions& kopt, const std::map<std::string, std::string>& fixed,
                                       const Budget& b, const scores::LayerSensitivity& ls, json* info) {
  if (b.kind != Budget::Kind::kFileBytes)
    return Status::errorf("--choose-head needs a file-size budget (--size): a --bpw budget does not pay for the head");
  if (ls.model_fingerprint != m.model_fingerprint)
    return Status::errorf("{} measured another model (fingerprint {}…, pool has {}…)", ls.source,
                          ls.model_fingerprint.substr(0, 12), m.model_fingerprint.substr(0, 12));
  std::vector<std::string> tensors;
  for (const auto& [t, row] : ls.head_kld)
    if (!fixed.count(t)) tensors.push_back(t);
  if (tensors.empty())
    return Status::errorf("{} measured no head tensor that --fixed leaves free (gamma layers --head TENSOR=TYPE,...)", ls.source);
  scores::Scores scaled = s;
  std::vector<int> split;
  // After this a score difference is in KLD units: each layer's scores add up to its measured change.
  GAMMA_RETURN_IF_ERROR(scores::scale_by_layer(scaled, ls, m, &split));

  // Every combination of the measured types, solved exactly; the least predicted KLD wins.
  std::vector<size_t> at(tensors.size(), 0);
  std::optional<std::map<std::string, std::string>> best;
  double best_total = 0;
  json options = json::array();
  for (;;) {
    std::map<std::string, std::string> f = fixed;
    double head = 0;
    json types = json::object();
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& row = ls.head_kld.at(tensors[k]);
      auto it = std::next(row.begin(), long(at[k]));
      f[tensors[k]] = it->first;
      types[tensors[k]] = it->first;
      head += std::max(0.0, it->second - ls.base_kld);  // below the base file: noise, counts as 0
    }
    GAMMA_ASSIGN_OR_RETURN(Allocator alloc, Allocator::create(m, scaled, cs, kopt, f));
    auto a = alloc.solve(b);
    json o = {{"types", types}, {"head_kld", head}};
    if (a.is_ok()) {
      // The body's predicted KLD above the source's types: every module's score there minus its
      // chosen one's, in KLD units.
      double body = 0;
      for (const auto& [name, cand] : a->plan.modules) {
        auto r = ls.ref.find(name);
        if (r == ls.ref.end()) return Status::errorf("{} did not measure module {}", ls.source, name);
        const auto& row = scaled.score.at(name);
        body += row.at(r->second) - row.at(cand);
      }
      o["body_kld"] = body, o["total_kld"] = body + head, o["file_bytes"] = a->size.file_bytes;
      if (!best || body + head < best_total) best = f, best_total = body + head;
    } else {
      o["infeasible"] = a.status().message();
    }
    options.push_back(o);
    size_t k = 0;
    while (k < tensors.size() && ++at[k] == ls.head_kld.at(tensors[k]).size()) at[k++] = 0;
    if (k == tensors.size()) break;
  }
  if (!best)
    return Status::errorf("{}: no combination of the measured head types fits (the first: {})", b.describe(),
                          options[0].value("infeasible", std::string()));
  // The plan: the scores as given, with the chosen head.
  GAMMA_ASSIGN_OR_RETURN(Allocator alloc, Allocator::create(m, s, cs, kopt, *best));
  GAMMA_ASSIGN_OR_RETURN(Allocation a, alloc.solve(b));
  *info = {{"file", ls.source}, {"predicted_kld", best_total}, {"options", options},
           {"rel_err_split_layers", split}};
  return a;
}

}  // namespace gm::solve
