// Exact multiple-choice knapsack (Stage II's core): pick one item per class, maximise the
// summed score, keep the summed weight within a capacity. Knows nothing of GGUFs or plans;
// solve/allocate.h turns a pool + scores into classes and the answer into a plan.
//
// Method (see knapsack.cpp): dominance filtering and per-class upper convex hulls give the
// LP relaxation by a greedy over hull slopes (upper bound, break slope lambda, a rounded
// incumbent); reduced costs w.r.t. lambda discard items that cannot beat the incumbent; a
// dynamic programme over Pareto-optimal partial solutions of the remaining classes, pruned
// by an LP bound of the classes not yet processed, finishes the proof. Scores are doubles:
// "optimal" means no assignment beats the answer by more than the tolerance, and the
// remaining gap is always reported, never hidden.
#pragma once
#include <cstdint>
#include <vector>

#include "util/status.h"

namespace gm::solve {

// One class (a module): item j costs weight[j] and earns score[j].
struct KnapsackClass {
  std::vector<uint64_t> weight;
  std::vector<double> score;
};

struct KnapsackOptions {
  // Relative to the sum over classes of max |score|: an answer within this of the optimum
  // is called optimal (summing doubles cannot promise much more than their rounding).
  double tolerance = 1e-12;
  // Give up the proof (and report the gap) beyond this many states in one DP round, or
  // this many seconds per solve. Model-shaped instances need a few thousand states.
  uint64_t max_states = 20'000'000;
  double max_seconds = 60;
};

struct KnapsackSolution {
  std::vector<int> choice;  // item index per class (indices of the input)
  uint64_t weight = 0;
  double score = 0;         // sum of the chosen scores, in class order
  double upper_bound = 0;   // proven: no feasible assignment scores above this
  double lp_bound = 0;      // the LP relaxation's value
  bool optimal = false;     // upper_bound - score <= tolerance
  double gap() const { return upper_bound - score; }
  // How much work the proof took.
  int free_classes = 0;     // classes left open after reduced-cost fixing
  uint64_t states = 0;      // DP states created
  double seconds = 0;
};

class Knapsack {
 public:
  // Fails on an empty class, mismatched vectors, non-finite scores or a total weight that
  // overflows 64 bits.
  static Result<Knapsack> create(std::vector<KnapsackClass> classes, KnapsackOptions opt = {});

  size_t size() const { return classes_.size(); }
  const std::vector<KnapsackClass>& classes() const { return classes_; }
  // The smallest capacity with a feasible assignment (every class at its lightest item).
  uint64_t min_weight() const { return min_weight_; }
  // From this capacity on, every class takes its best item: larger budgets change nothing.
  uint64_t saturation_weight() const { return saturation_weight_; }
  double tolerance_abs() const { return tol_abs_; }

  // Fails when capacity < min_weight(). `warm` (a feasible choice, e.g. the answer for a
  // smaller capacity) seeds the incumbent.
  Result<KnapsackSolution> solve(uint64_t capacity, const std::vector<int>* warm = nullptr) const;
  // One solution per capacity (any order), solved in increasing order so that each answer
  // seeds the next; the preprocessing is shared.
  std::vector<Result<KnapsackSolution>> sweep(const std::vector<uint64_t>& capacities) const;

 private:
  Knapsack() = default;

  struct Increment {  // moving one class one step up its hull
    uint32_t cls;
    uint32_t to;  // index into the class's efficient items
    uint64_t dw;
    double dp;
    double slope;
  };

  std::vector<KnapsackClass> classes_;
  KnapsackOptions opt_;
  double tol_abs_ = 0;
  // Efficient items (no other item of the class is at most as heavy and at least as good),
  // weight ascending, flattened: class i owns [eff_begin_[i], eff_begin_[i+1]).
  std::vector<uint32_t> eff_begin_;
  std::vector<uint64_t> eff_w_;
  std::vector<double> eff_p_;
  std::vector<int> eff_item_;  // the input index
  // Hull increments of all classes sorted by slope (descending) with prefix sums: the LP.
  std::vector<Increment> inc_;
  std::vector<uint64_t> inc_cw_;  // inc_cw_[t] = sum of dw over the first t increments
  std::vector<double> inc_cp_;
  uint64_t min_weight_ = 0, saturation_weight_ = 0;
  double min_score_ = 0;

  friend class KnapsackRun;
};

}  // namespace gm::solve
