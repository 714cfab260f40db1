// Which candidates the real pool needs (issue 44): a pool of every type at every module costs
// ~63 min on Qwen-1.5B (2 cores), most of it in IQ2 types that plans near a 3.5-bpw target
// give to a handful of modules. Solved on an estimate (exact sizes, errors and HAWQ-V2 scores
// from sampled rows; pool.h), the plans at the sizes a run will make say where each module
// sits; the real pool quantizes, per module, the candidates within `steps` of those places
// (by bytes, in the module's candidate list) and nothing else. The learned scorers then choose
// inside that window: results/prune_qwen/ measures what they lose against the full pool.
// Which plans: the caller's (gamma run: HAWQ-V2's at each size, and under a speed budget also
// the plans held to it, which take fast types far from where the size alone puts a module).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "pool/manifest.h"
#include "util/status.h"

namespace gm::solve {

// How far the window reaches: `steps` either side of the plans' candidates, except that the
// `near_only` types (the costly ones to quantize) are kept only within `near_steps` below them.
// gamma run makes the IQ2 types near_only (results/job_cost_qwen_cut/*/window-rules.md): at
// 880MiB on Qwen-1.5B they were 595 of the window's 1,229 priced quantizing seconds, and the
// 36 variants' plans took 45 of their 173 candidates; kept only one step below HAWQ-V2's plans,
// no allocator's plan changed at 880MiB, and 5-10 modules (<= 0.23 % of the objective) at
// Q2_K's size.
struct WindowRule {
  int steps = 0;
  std::set<std::string> near_only;
  int near_steps = 0;
};

// Per module of `estimate`, the candidate types within the rule's reach of the candidates `plans`
// (plans of the estimate) choose.
Result<std::map<std::string, std::vector<std::string>>> candidate_window(const Manifest& estimate,
                                                                         const std::vector<Plan>& plans, const WindowRule& rule);

}  // namespace gm::solve
