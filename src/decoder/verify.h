// Checks the LibTorch layer against libllama itself: libllama runs the model on a token
// sequence (F32 KV cache, flash attention off) and its layer boundaries are captured; each
// LibTorch layer gets libllama's input to that layer (teacher-forced) and its output is
// compared with libllama's; the head is compared on libllama's last hidden state.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm {

struct VerifyReport {
  int n_tokens = 0;
  double embd_rel_err = 0;                // token embeddings vs inp_embd
  std::vector<double> layer_rel_err;      // ||torch - llama||_2 / ||llama||_2, teacher-forced
  std::vector<double> layer_max_err;      // max |torch - llama| / max |llama|
  std::vector<double> chained_rel_err;    // LibTorch alone from the embeddings (drift)
  double logit_rel_err = 0, logit_max_err = 0;
  double llama_seconds = 0, torch_seconds = 0;
  json to_json() const;
};

struct HParams;
// n_threads <= 0: all cores (both libllama and LibTorch use the same count). `tweak` (tests)
// alters the LibTorch side's hyperparameters, to show that a wrong layer fails the match.
Result<VerifyReport> verify_against_llama(const std::string& gguf_path, const std::vector<int32_t>& tokens,
                                          int n_threads, const std::function<void(HParams&)>& tweak = nullptr);

}  // namespace gm
