// The hyperparameters of a llama / qwen2 / qwen3 / gemma3 / qwen3moe / qwen2moe decoder as llama.cpp reads them from
// the GGUF (same keys, same defaults), so the LibTorch layer computes what libllama computes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

class Model;

enum class RopeType { kNorm, kNeox };  // llama: adjacent pairs; qwen2/qwen3/gemma3: halves (NEOX)
enum class FfnAct { kSilu, kGeluTanh };  // the gated FFN's activation: SwiGLU, or GeGLU (gemma3)

struct HParams {
  std::string arch;
  int n_layer = 0;
  int64_t n_embd = 0, n_ff = 0, n_vocab = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float kq_scale = 0;           // 1/sqrt(head_dim) unless the GGUF overrides it
  RopeType rope_type = RopeType::kNorm;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1/factor for linear scaling
  float rope_attn_factor = 1.0f;
  bool qk_norm = false;          // qwen3: RMSNorm on q and k per head before RoPE
  bool has_rope_freqs = false;   // llama3-style rope_freqs.weight (per-dimension divisors)
  bool tied_embeddings = false;  // no output.weight: token_embd is the head
  float final_softcap = 0;       // logits = c tanh(logits / c) when > 0 (gemma3's optional key)

  // gemma3 (src/models/gemma3.cpp): token embeddings scaled by sqrt(n_embd), RMSNorm on the
  // attention's and the FFN's outputs before each residual add, GeGLU, and sliding-window
  // attention on the layers swa_layers marks (their own RoPE base and scale, keys visible to a
  // query only while q - k < n_swa).
  float embd_scale = 1.0f;
  bool post_norms = false;
  FfnAct ffn_act = FfnAct::kSilu;
  int64_t n_swa = 0;
  std::vector<bool> swa_layers;  // per layer; empty: none
  float rope_freq_base_swa = 10000.0f, rope_freq_scale_swa = 1.0f;
  bool is_swa(int il) const { return n_swa > 0 && il >= 0 && size_t(il) < swa_layers.size() && swa_layers[size_t(il)]; }

  // qwen3moe (src/models/qwen3moe.cpp, llm_graph_context::build_moe_ffn): the FFN is n_expert
  // SwiGLU experts of width n_ff_exp (ffn_{gate,up,down}_exps, 3-D), a router (ffn_gate_inp)
  // whose softmax picks n_expert_used per token, their weights renormalized to sum 1
  // (expert_norm) and scaled by expert_scale (0: not).
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  bool expert_norm = false;
  float expert_scale = 0;
  bool moe() const { return n_expert > 0; }
  // qwen2moe (src/models/qwen2moe.cpp): the routed experts' weights not renormalized, and a
  // shared expert of width n_ff_shexp (ffn_{gate,up,down}_shexp, 2-D) beside them, its output
  // scaled per token by sigmoid(ffn_gate_inp_shexp . x). 0: none.
  int64_t n_ff_shexp = 0;
  bool shexp() const { return n_ff_shexp > 0; }

  int64_t n_embd_q() const { return n_head * head_dim; }
  int64_t n_embd_kv() const { return n_head_kv * head_dim; }
};

// The architectures gamma's LibTorch decoder layer computes as libllama does (HAWQ-V2 and
// Stage I need it; every other stage works for any architecture llama.cpp loads).
const std::vector<std::string>& decoder_architectures();
// ok, or one line naming the architecture and the ones the decoder has.
Status check_decoder_architecture(const std::string& arch);

// Fails (one line) on an architecture the decoder lacks, missing keys, unsupported RoPE scaling
// (yarn, longrope) or shapes that do not fit together.
Result<HParams> read_hparams(const Model& m);

}  // namespace gm
