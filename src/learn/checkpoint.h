// Stage I's checkpoint (SCORES.json.ckpt, schema "gamma.learn.checkpoint" v1): the whole
// optimiser state after `step` steps, written every --checkpoint-every steps and read back by
// a rerun with the same `config` (pool, teacher, target, hyperparameters), which then ends
// with the scores an uninterrupted run writes.
#pragma once
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm {

struct Checkpoint {
  static constexpr const char* kSchema = "gamma.learn.checkpoint";
  static constexpr int kVersion = 1;

  json config;  // what the run was started with; compared as a whole
  int step = 0;  // steps done
  double lambda1 = 0, lambda2 = 0;
  double mse_ref = 0, mse_eval_init = 0;
  double seconds = 0;  // optimisation time so far
  json curve = json::array();
  json convergence = json::array();  // --converge: the visits ended early so far
  struct Module {
    std::string name;
    std::vector<double> pi, m, v;  // logits and Adam moments, one per candidate
    // --measure-every: the summed measured loss changes per candidate and their count
    // (absent in older checkpoints: none yet).
    std::vector<double> dsum;
    int64_t dn = 0;
    std::vector<double> dsum2;  // sums of squares of the centred deltas (--converge; absent: none kept)
  };
  std::vector<Module> modules;

  // Every field checked (finite numbers, equal lengths per module): kCorrupt names the first
  // bad one.
  static Result<Checkpoint> from_json(const json& j, const std::string& source);
  json to_json() const;
  // Compact JSON, atomically replaced, not fsynced: written often, and a lost one only costs
  // the steps since the one before.
  Status save(const std::string& path) const;
};

}  // namespace gm
