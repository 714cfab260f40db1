// gamma layers: each layer's end-to-end sensitivity, measured. From the source's own types
// (every linear module at its reference candidate, the source's type, and every other tensor
// at the source's type: the teacher up to rounding), one file per layer with that layer's
// modules at a low candidate (Q2_K by default), each scored by KLD against the teacher on
// calibration text through libllama. The result (scores/layer_scale.h) rescales any scorer's
// scores layer by layer: `gamma solve --layer-scale LAYERS.json`.
//
// With --head, also one file per listed type of the output head or the embedding (the rest at
// the source's types): what the head costs, in the layers' units.
//
// Cost: n_layer + 1 emits and evaluations (Qwen2.5-Coder-1.5B, 4 x 512 tokens, 2 cores: 16 min
// on the Xeon of results/job_cost_qwen_880_calib4k); where llama.cpp runs a model cut before a
// layer (llama, qwen2, qwen3), layer l's file holds only the layers from l on and runs from the
// base file's hidden states there (eval/layer_states.h), about half the work. Resumable:
// OUT.partial.json holds the layers measured so far, written atomically after each; a rerun with
// the same inputs continues.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pool/manifest.h"

#include "scores/layer_scale.h"
#include "util/status.h"

namespace gm::layers {

struct LayersOptions {
  std::string pool;
  std::string teacher;   // F32 teacher GGUF
  std::string text;      // calibration text (never the report or validation text)
  std::string kld_base;  // the teacher's log-probs on `text` (written on first use)
  std::string out;
  std::string tmp_dir;    // where each layer's file is written (default: OUT's directory)
  std::string low = "auto";  // the type each layer is taken to; auto: Q2_K, else each module's cheapest
  // TENSOR=TYPE[,TYPE...]: also one file per TYPE with that non-linear tensor (output.weight,
  // token_embd.weight) at TYPE and everything else at the source's types, for gamma solve
  // --choose-head (the head's measured cost against the body's scores in the same units).
  std::vector<std::string> heads;
  int n_ctx = 512, chunks = 4;
  int threads = 0;
  bool quiet = false;
};

struct LayersResult {
  scores::LayerSensitivity sensitivity;
  int measured = 0;      // files evaluated by this call
  int resumed_from = -1;  // layers already measured by an earlier call, -1 when none
  double seconds = 0;
};

Result<LayersResult> measure_layers(const LayersOptions& o);

// Each module's reference candidate (the source's type) and the low one `low` takes it to
// ("auto": Q2_K, else the module's cheapest); error when a layer would have no module below its
// reference.
Status pick_candidates(const Manifest& m, const std::string& low, std::map<std::string, std::string>* ref,
                       std::map<std::string, std::string>* low_of);

}  // namespace gm::layers
