// --fill F: Stage I's p does not reward bits, so a budget above the learned target is left
// unspent (the argmax plan already fits). Adding kappa * (the candidate's share of the
// average bpw) to every score and taking the smallest kappa whose optimal plan spends at
// least F of the budget puts the extra bits where the scores lose least per bit.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "solve/allocate.h"

namespace gm::solve {

// The plan for `budget` whose scores are `base` + kappa * bits, kappa the smallest (to 1e-9
// relative) that spends `fill` of the budget; when even pure bits cannot, the fullest plan
// there is. kappa_out receives kappa.
Result<Allocation> solve_filled(const Manifest& m, const scores::Scores& base, const std::vector<Constraint>& cs,
                                const KnapsackOptions& kopt, const std::map<std::string, std::string>& fixed,
                                const Budget& budget, double fill, double* kappa_out);

}  // namespace gm::solve
