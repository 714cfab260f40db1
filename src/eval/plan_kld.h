// The KLD vs the teacher of the file a plan makes: emitted to `gguf`, evaluated through libllama
// on the first `chunks` chunks of `text` against the teacher's log-probs (`kld_base`, written on
// first use), then removed. gamma search's fitness and gamma layers' measurement.
#pragma once
#include <string>

#include "eval/layer_states.h"
#include "plan/plan.h"
#include "util/status.h"

namespace gm::eval {

struct PlanKldRequest {
  std::string pool, gguf, teacher, kld_base, text;
  int n_ctx = 512, chunks = 1, threads = 0;
  int n_batch = 2048;  // EvalRequest's; n_ctx with states
  // gamma layers (eval/layer_states.h): the evaluation fills `capture`, or with `input` the file
  // holds the layers from `first_layer` on and runs from input's states there.
  LayerStates* capture = nullptr;
  const LayerStates* input = nullptr;
  int first_layer = 0;
};

Result<double> plan_kld(const PlanKldRequest& r, const Plan& plan);

}  // namespace gm::eval
