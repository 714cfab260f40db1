// gamma run's target: the files the pool can make, the head rules, and the budget as a file size.
#include <map>

#include "gguf_model/inspect.h"
#include "gguf_model/model.h"
#include "plan/plan.h"
#include "run/pipeline.h"
#include "solve/budget.h"

namespace gm::run {
namespace {

// The smallest file the pool makes with the head at `type`.
Result<uint64_t> min_file_with_head(const Manifest& man, const std::string& head, const std::string& type) {
  GAMMA_ASSIGN_OR_RETURN(scores::Scores st, scores::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, st, {}, {}, {{head, type}}));
  return a.min_file_bytes();
}

}  // namespace

Result<ModelSize> model_size(const std::string& path, int threads) {
  GAMMA_ASSIGN_OR_RETURN(auto m, Model::open(path));
  const json d = describe_model(*m, path);  // gamma inspect's totals
  ModelSize s;
  s.params = d["totals"]["params"].get<double>();
  s.linear_params = d["totals"]["linear_params"].get<double>();
  s.n_layer = m->n_layer();
  const int64_t te = m->find("token_embd.weight");  // [n_embd, n_vocab]
  s.vocab = te >= 0 ? double(m->tensors()[size_t(te)].shape.back()) : 0;
  s.n_embd = te >= 0 ? double(m->tensors()[size_t(te)].shape.front()) : 0;
  s.threads = threads;
  return s;
}

Result<Range> feasible_range(const Manifest& man) {
  GAMMA_ASSIGN_OR_RETURN(scores::Scores st, scores::Scores::from_manifest(man));
  GAMMA_ASSIGN_OR_RETURN(auto a, solve::Allocator::create(man, st, {}));
  Range r;
  r.min = a.min_file_bytes();
  const std::string head = output_head(man);
  const std::string smallest = default_fixed_types(man, 0).at(head);
  for (int k = 1; k <= kHeadSteps; ++k)
    if (auto c = cheaper_head_type(man, head, smallest, k); !c.empty()) {
      GAMMA_ASSIGN_OR_RETURN(uint64_t b, min_file_with_head(man, head, c));
      r.min = std::min(r.min, b);
    }
  scores::Scores heavy = st;
  for (const auto& e : man.modules)
    for (const auto& c : e.candidates) heavy.score[e.name][c.id] = double(c.bytes);
  GAMMA_ASSIGN_OR_RETURN(auto h, solve::Allocator::create(man, heavy, {}));
  GAMMA_ASSIGN_OR_RETURN(auto top, h.solve(solve::Budget::of_file_bytes(uint64_t(1) << 50)));
  r.max = top.size.file_bytes;
  return r;
}

// Near the smallest file only the cheapest heads can make a file that small.
Result<std::optional<std::string>> head_at(const Manifest& man, const solve::Allocator& stat, uint64_t size,
                                           int steps) {
  const std::string head = output_head(man);
  auto at = stat.solve(solve::Budget::of_file_bytes(size));
  if (steps == 0) return at.is_ok() ? std::optional<std::string>("") : std::nullopt;
  const std::string def = at.is_ok() ? at->plan.fixed.at(head) : default_fixed_types(man, 0).at(head);
  const std::string c = cheaper_head_type(man, head, def, steps);
  if (c.empty()) return std::optional<std::string>();
  GAMMA_ASSIGN_OR_RETURN(uint64_t min, min_file_with_head(man, head, c));
  return min <= size ? std::optional<std::string>(c) : std::nullopt;
}

Result<uint64_t> budget_bytes(const RunOptions& o, const solve::Allocator& stat, uint64_t size_target) {
  if (o.max_kld > 0 || size_target > 0) return size_target;
  GAMMA_ASSIGN_OR_RETURN(auto a, stat.solve(solve::Budget::of_bpw(o.bpw)));
  return a.size.file_bytes;
}

Result<double> learn_bpw(const RunOptions& o, const solve::Allocator& stat, uint64_t budget, const Range& range) {
  if (o.bpw > 0) return o.bpw;
  GAMMA_ASSIGN_OR_RETURN(auto a, stat.solve(solve::Budget::of_file_bytes(budget ? budget : range.min / 2 + range.max / 2)));
  return a.size.linear_bpw;
}

}  // namespace gm::run
