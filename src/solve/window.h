// Which candidates the real pool needs (issue 44): a pool of every type at every module costs
// ~63 min on Qwen-1.5B (2 cores), most of it in IQ2 types that plans near a 3.5-bpw target
// give to a handful of modules. Solved on an estimate (exact sizes, errors and HAWQ-V2 scores
// from sampled rows; pool.h), the plans at the sizes a run will make say where each module
// sits; the real pool quantizes, per module, the candidates within `steps` of those places
// (by bytes, in the module's candidate list) and nothing else. The learned scorers then choose
// inside that window: results/prune_qwen/ measures what they lose against the full pool.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "scores/scores.h"
#include "util/status.h"

namespace gm::solve {

// Per module of `estimate`, the candidate types within `steps` of the candidates the plans
// for `sizes` (whole-file bytes, each feasible on the estimate) choose with `scores`.
Result<std::map<std::string, std::vector<std::string>>> candidate_window(const Manifest& estimate,
                                                                         const scores::Scores& scores,
                                                                         const std::vector<uint64_t>& sizes, int steps);

}  // namespace gm::solve
