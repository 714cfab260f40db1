// Stage II's input scores (SCORES.json, schema "gamma.scores" v1, see docs/formats.md):
// score[module][candidate], higher is better. Stage II is scorer-agnostic: Stage I writes
// its probabilities there, other scorers their own; -rel_err straight from the pool
// manifest is built in.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::scores {

struct Scores {
  static constexpr const char* kSchema = "gamma.scores";
  static constexpr int kVersion = 1;

  std::string source;             // the file, or "pool manifest (-rel_err)"
  std::string method;             // "gamma", "static", "hawq", "neg_rel_err", ...
  std::string model_fingerprint;  // empty when the file does not say
  std::string pool_manifest_sha256;
  std::map<std::string, std::map<std::string, double>> score;  // module -> candidate id -> score
  // Stage I's extras: the probabilities p (module -> candidate -> p; empty for scorers
  // without them, e.g. static or HAWQ) and the target they were learned at.
  std::map<std::string, std::map<std::string, double>> p;
  // Stage I's measured loss change of each candidate (gamma learn --measure-every; empty
  // otherwise): the layer-MSE change the candidate causes in the sampled assignments.
  std::map<std::string, std::map<std::string, double>> delta;
  std::optional<double> target_bpw;
  // --transform delta-fit: modules whose fitted slope was not positive (they keep -delta).
  size_t fit_fallbacks = 0;

  // Reads and checks the file itself: every score (and p) a finite number (NaN, null, strings
  // and infinities are refused with the module and candidate named).
  static Result<Scores> load(const std::string& path);
  static Result<Scores> from_json(const json& j, const std::string& source);
  // The fields above as gamma.scores v1 (producers add their own: hyperparameters, curves).
  json to_json() const;
  // score = -rel_err of every candidate in the manifest.
  static Result<Scores> from_manifest(const Manifest& m);

  // Re-expresses probability scores (Stage I's p) before solving. "log": log p, the plan's
  // log-likelihood under the learned distributions. "size-log": n_params / mean n_params x
  // log p: Stage I prices a module's bits by its parameter count (b-hat is parameter-weighted),
  // so its evidence is per weight; weighting by size puts modules on the per-byte scale the
  // budget (and --fill's price) uses. Needs every score > 0. "delta": -delta, the measured
  // loss change (additive over modules, so the plan minimises the summed loss change at any
  // budget); needs a delta for every scored candidate. "delta-fit": -c * rel_err, c the slope
  // of the module's measured deltas against the pool's rel_err (least squares with an
  // intercept): the measured sensitivity without the measurement noise. "score": unchanged.
  Status transform(const std::string& how, const Manifest& m);

  // --blend OTHER: each candidate's cost becomes the geometric mean of the two scorers' costs,
  // each a cost above its module's best candidate (-score + max score of the module, so >= 0).
  // Two noisy estimates of the same loss change (Stage I's measured one, HAWQ-V2's predicted
  // one) agree better than either alone where the choices are close; the geometric mean
  // needs neither's units. A candidate OTHER does not score is no longer a choice; a module
  // OTHER does not score, or one left without a candidate, is refused.
  Status blend(const Scores& other);

  // Checks the scores against the pool: same model, no module or candidate the pool lacks,
  // every pool module scored. A pool candidate without a score is simply not a choice;
  // `unscored` counts those.
  Status check(const Manifest& m, size_t* unscored) const;
};

}  // namespace gm::scores
