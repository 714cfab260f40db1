// One `gamma solve` request, whatever its mode: the scores (a scorer's file or the static proxy,
// transformed, blended, rescaled by layer), the constraints, and one budget or a bpw sweep;
// then the plain exact solve, --fill, or --choose-head. The CLI parses flags into a Request and
// writes what solve_request returns; the modes and their rules live here.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "solve/allocate.h"
#include "solve/budget.h"
#include "solve/constraints.h"
#include "solve/knapsack.h"
#include "util/status.h"

namespace gm::solve {

struct Request {
  std::string scores;       // SCORES.json; empty: the static proxy (-rel_err from the manifest)
  std::string transform = "score";
  std::string blend;        // a second scorer's SCORES.json (geometric mean of the two costs)
  std::string layer_scale;  // LAYERS.json: each layer's scores rescaled to its measured KLD
  std::string choose_head;  // LAYERS.json with --head: the head's and embedding's types chosen too
  std::vector<Constraint> constraints;
  std::map<std::string, std::string> fixed;  // non-linear tensor -> type, paid from the budget
  std::optional<Budget> budget;  // exactly one of budget and sweep
  std::vector<double> sweep;     // bpw budgets
  double fill = 0;               // (0, 1]: spend at least this fraction of the budget
  std::string speed;             // gamma.speed table: predicted speeds recorded, time budgets priced
  // The plan must reach these (needs speed, --size): tokens/s, or a GGUF of the model meaning
  // "as fast as this file" by the same table (speed::speed_target); "" = no budget.
  std::string min_decode, min_prefill;
  uint64_t memory_bytes = 0;                         // device budget (0: none), with memory_source
  const speed::MemoryUse* memory_source = nullptr;  // llama.cpp's allocation for the source at the context
  KnapsackOptions knapsack;

  // The combinations that do not make sense, in one line each, before anything is read.
  Status check() const;
};

struct Outcome {
  std::vector<Allocation> plans;  // one (budget) or one per sweep budget, each plan's info filled
  // A sweep's: each plan's file name (plan-2.50bpw.json, enough decimals to tell the budgets
  // apart) and the Pareto front over them (gamma.pareto).
  std::vector<std::string> names;
  json pareto;
};

Result<Outcome> solve_request(const Manifest& m, const Request& r);

}  // namespace gm::solve
