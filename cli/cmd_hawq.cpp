// gamma hawq: HAWQ-V2 scores (src/hawq), run by gamma-learn like gamma learn (cmd_learn.cpp).
#include "cli/command.h"

namespace gm::cli {
namespace {

void add_hawq(CLI::App& app) {
  add_gamma_learn_passthrough(app, "hawq", "HAWQ-V2 baseline scores: Hessian trace (Hutchinson) x squared perturbation",
                              {"gamma hawq", "hawq"});
}

}  // namespace
GAMMA_COMMAND(61, add_hawq);
}  // namespace gm::cli
