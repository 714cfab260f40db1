// gamma solve --choose-head LAYERS.json: the output head and the embedding as choices of the same
// budget. Their types were picked by hand (solve --fixed), per allocator and size, on validation
// text; on Qwen2.5-Coder-1.5B the head alone moved the file's KLD by 15-35 % at equal size
// (results/iq_qwen/goal_table.md), more than the allocators differ. gamma layers --head measures
// each listed type of each head tensor alone (KLD vs the teacher, the rest at the source's types).
// The scores are put in KLD units layer by layer by the same file's layers (scale_by_layer), every
// combination of the measured types is solved exactly on them, and the one with the least
// predicted KLD (the body's scaled loss plus the head's measured cost, both above the source's)
// gives the head; the plan itself is then solved on the scores as given, with that head.
// Why layer by layer: with one factor for all layers HAWQ-V2's and Stage I's scores priced the body
// ~4x too cheap against the head at IQ3_XS's size (predicted 0.012 for a body measured at 0.052
// KLD) and chose the Q5_K head that validation and calibration both measured worse
// (results/iq_qwen/head_choice.md).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "solve/allocate.h"
#include "scores/layer_scale.h"

namespace gm::solve {

// `fixed` pins tensors (they are not chosen); `b` must be a file-size budget (a bpw budget does
// not pay for the head). `info` receives what was compared (gamma.plan info.choose_head).
Result<Allocation> solve_choosing_head(const Manifest& m, const scores::Scores& s, const std::vector<Constraint>& cs,
                                       const KnapsackOptions& kopt, const std::map<std::string, std::string>& fixed,
                                       const Budget& b, const scores::LayerSensitivity& ls, json* info);

}  // namespace gm::solve
