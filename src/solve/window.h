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
#include <string>
#include <vector>

#include "plan/plan.h"
#include "pool/manifest.h"
#include "util/status.h"

namespace gm::solve {

// Per module of `estimate`, the candidate types within `steps` of the candidates `plans` (plans
// of the estimate) choose.
Result<std::map<std::string, std::vector<std::string>>> candidate_window(const Manifest& estimate,
                                                                         const std::vector<Plan>& plans, int steps);

}  // namespace gm::solve
