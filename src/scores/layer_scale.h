// Each layer's measured end-to-end sensitivity (LAYERS.json, schema "gamma.layers" v1, written
// by `gamma layers`) and the rescaling of a scorer's scores by it (`gamma solve --layer-scale`).
//
// Why: on Qwen2.5-Coder-1.5B the scorers rank modules well within a layer but misjudge the
// scale between layers. HAWQ-V2 predicts a 100x rise of the loss change from the middle layers
// to the last, Stage I's layer MSE ~8x, while the measured KLD of each layer's modules taken to
// Q2_K rises ~3x (results/iq_qwen/layer_profile.md). Rescaled to the measurement, GAMMA's
// measured deltas became the best allocator from IQ2_M to 3.0 bpw (results/iq_qwen/table.md).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "scores/scores.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::scores {

struct LayerSensitivity {
  static constexpr const char* kSchema = "gamma.layers";
  static constexpr int kVersion = 1;

  std::string source;  // the file it was read from
  std::string model_fingerprint;
  // Every module's reference candidate (the source's own type: the teacher up to rounding) and
  // its low one (what the layer was taken to), as measured.
  std::map<std::string, std::string> ref, low;
  double base_kld = 0;         // every module at its reference candidate
  std::map<int, double> kld;   // layer -> KLD with that layer's modules at their low candidate
  // gamma layers --head: non-linear tensors (output.weight, token_embd.weight) measured alone,
  // every other tensor at the source's type: tensor -> the source's type, and tensor -> type ->
  // KLD (the source's own type is the base file). Empty when not measured.
  std::map<std::string, std::string> head_ref;
  std::map<std::string, std::map<std::string, double>> head_kld;
  json info = json::object();  // how it was measured (text, ctx, chunks, teacher, seconds)

  static Result<LayerSensitivity> load(const std::string& path);
  static Result<LayerSensitivity> from_json(const json& j, const std::string& source);
  json to_json() const;
};

// Keeps each module's scores relative to one another within its layer and rescales every
// layer l by c_l = (kld_l - base_kld) / sum over l's modules of (score(ref) - score(low)), so that
// taking the layer from its reference to its low candidates costs what was measured. A layer
// whose scores see no loss there (that sum <= 0; plain-MSE Stage I at the layers that make the
// first token's outlier) takes the pool's -rel_err x n_params as its split instead; those
// layers are returned in `split_by_rel_err`. A measured change below 0 (noise) counts as 0.
Status scale_by_layer(Scores& s, const LayerSensitivity& ls, const Manifest& m, std::vector<int>* split_by_rel_err);

}  // namespace gm::scores
