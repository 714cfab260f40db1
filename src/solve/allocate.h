// Stage II on a pool: scores + constraints + a budget -> the plan with the highest total
// score that fits (exact multiple-choice knapsack, solve/knapsack.h), and budget sweeps
// with their Pareto front.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "pool/manifest.h"
#include "solve/constraints.h"
#include "solve/knapsack.h"
#include "scores/scores.h"
#include "solve/budget.h"
#include "speed/memory.h"
#include "speed/speed.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::solve {

// Time budgets beside the bytes: the plan must decode (tg128) and/or process prompts (pp512) at
// least this fast on the machine the speed table was measured on (0: no budget).
// With `memory_bytes`, a device budget too: llama.cpp's whole allocation for the file (weights
// with their repacked copies, KV cache and compute buffers at the context `source` was measured
// with, speed/memory.h) at most that many bytes.
struct SpeedBudget {
  const speed::CostTable* table = nullptr;  // none: no time budget, no predicted speeds
  double min_decode_tps = 0, min_prefill_tps = 0;
  uint64_t memory_bytes = 0;                  // 0: no device budget
  const speed::MemoryUse* source = nullptr;  // the source's allocation at the context (with memory_bytes)
  bool binds() const { return (table && (min_decode_tps > 0 || min_prefill_tps > 0)) || memory_bytes > 0; }
};

struct Allocation {
  Budget budget;
  Plan plan;
  KnapsackSolution solution;
  PlanSize size;
  uint64_t capacity = 0;     // bytes the linear modules may take (bytes or file_bytes)
  double fixed_bpw = 0;      // the bpw whose default types the fixed tensors got
};

class Allocator {
 public:
  // `m` must outlive the allocator. Checks the scores against the pool and applies the
  // constraints (see scores.h, constraints.h).
  // `fixed_types` overrides the default type of named non-linear tensors (token_embd.weight,
  // output.weight): the budget then pays for them at that type.
  static Result<Allocator> create(const Manifest& m, scores::Scores scores, const std::vector<Constraint>& constraints,
                                  KnapsackOptions opt = {}, std::map<std::string, std::string> fixed_types = {});

  // The best plan within the budget. An infeasible budget fails naming the smallest
  // feasible one; an answer not proven optimal is returned with its gap (see
  // Allocation::solution.optimal), never passed off as optimal.
  Result<Allocation> solve(const Budget& b) const;
  // The best plan within the bytes (a file-size budget) and the time budgets (solve/timed.h:
  // Lagrangian bound, gap recorded in the plan). A speed no plan of that size reaches fails
  // naming the fastest one. With a table and no minimum, the plain solve plus its predicted speeds.
  Result<Allocation> solve(const Budget& b, const SpeedBudget& s) const;
  // One plan per bpw budget, solved in increasing order so each answer seeds the next; all
  // or nothing (the first infeasible budget fails the sweep).
  Result<std::vector<Allocation>> sweep(const std::vector<double>& bpws) const;

  // The smallest feasible budgets (every module at its lightest allowed candidate).
  double min_bpw() const;
  uint64_t min_file_bytes() const;

  // gamma.pareto v1: one point per budget with its plan file; on_front marks the points no
  // other point beats in both size and score.
  json pareto(const std::vector<Allocation>& points, const std::vector<std::string>& plan_files) const;

 private:
  Allocator() = default;
  const Knapsack& knapsack(Budget::Kind kind) const;
  std::map<std::string, std::string> fixed_types(double linear_bpw) const;  // defaults + overrides
  Result<Allocation> finish(const Budget& b, uint64_t capacity, double fixed_bpw,
                            const std::map<std::string, std::string>& fixed, KnapsackSolution sol) const;
  Status fixed_for_size(uint64_t file_bytes, double* bpw, std::map<std::string, std::string>* fixed,
                        uint64_t* capacity) const;

  const Manifest* m_ = nullptr;
  KnapsackOptions opt_;
  scores::Scores scores_;
  std::vector<std::string> constraint_specs_;
  size_t unscored_ = 0;
  std::vector<std::vector<int>> cand_;  // per module: candidate index of each knapsack item
  std::optional<Knapsack> by_bytes_, by_file_bytes_;
  int64_t linear_params_ = 0;
  std::map<std::string, std::string> fixed_override_;
};

}  // namespace gm::solve
