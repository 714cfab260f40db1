// The static proxy: score = -rel_err, each candidate's imatrix-weighted relative weight error
// from the pool manifest (no model run; the baseline every measured scorer must beat).
#include "scores/scores.h"

namespace gm::scores {

Result<Scores> Scores::from_manifest(const Manifest& m) {
  Scores s;
  s.source = "pool manifest (-rel_err)";
  s.method = "neg_rel_err";
  s.model_fingerprint = m.model_fingerprint;
  for (const auto& e : m.modules) {
    for (const auto& c : e.candidates) {
      if (!std::isfinite(c.rel_err))
        return Status::errorf("pool manifest: rel_err of {} for module {} is not finite", c.id, e.name);
      s.score[e.name][c.id] = -c.rel_err;
    }
  }
  return s;
}

}  // namespace gm::scores
