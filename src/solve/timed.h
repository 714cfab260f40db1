// The multiple-choice knapsack with time budgets beside the byte budget: pick one item per class,
// maximise the summed score, keep the summed weight within a capacity and each summed time
// (decode, prompt processing) within its cap.
//
// Method: Lagrangian relaxation of the time constraints. For multipliers lambda >= 0 the exact
// byte knapsack (knapsack.h) on scores p - lambda . t gives an upper bound of the two-resource
// optimum, UB(lambda) = its proven bound + lambda . caps, and a plan; each plan within every cap
// is feasible. The multipliers are found by bisection (one time budget) or by alternating
// bisections (two); the best feasible plan is then improved by single-module swaps that keep
// every budget. The answer records its certified gap: min UB - score, never hidden; it is zero
// (optimal) when the time budget does not bind, or binds exactly at the plan found.
#pragma once
#include <cstdint>
#include <vector>

#include "solve/knapsack.h"
#include "util/status.h"

namespace gm::solve {

struct TimeResource {
  std::vector<std::vector<double>> time;  // per class, per item (same shape as the classes)
  double cap = 0;                         // the summed time may not exceed it
};

struct TimedSolution {
  KnapsackSolution sol;        // choice, weight, score; upper_bound is the Lagrangian bound
  std::vector<double> time;    // per resource: the plan's summed time
  std::vector<double> lambda;  // the multipliers of the best bound
  int solves = 0;              // byte-knapsack solves it took
};

// The least summed time of resource r that fits `capacity` (exact: a knapsack on -time).
Result<double> fastest(const std::vector<KnapsackClass>& classes, const TimeResource& r, uint64_t capacity,
                       const KnapsackOptions& opt = {});

// Fails when no assignment fits the bytes (as Knapsack::solve) or meets some time cap; the
// latter names the resource's fastest sum within the bytes.
Result<TimedSolution> solve_timed(const std::vector<KnapsackClass>& classes, const std::vector<TimeResource>& res,
                                  uint64_t capacity, const KnapsackOptions& opt = {});

}  // namespace gm::solve
