// The FP decoder layer of llama / qwen2 / qwen3 / gemma3 / qwen3moe / qwen2moe in LibTorch, computing what libllama's
// graph computes (src/models/{llama,qwen2,qwen3,gemma3}.cpp): RMSNorm, q/k/v (+bias), QK-norm
// (qwen3, gemma3), RoPE with ggml's own cos/sin table, GQA causal attention (sliding-window on
// gemma3's local layers), o, [RMSNorm,] residual, RMSNorm, SwiGLU or GeGLU, [RMSNorm,] residual. Linear weights are passed in, so Stage I can pass mixed weights that require
// grad. This header pulls in ATen: include it only from the few .cpp files that need it.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "decoder/hparams.h"
#include "util/status.h"

namespace gm {

class Model;

// Index into the linear kinds: the seven of kLinearKinds, then a MoE layer's shared expert
// (kSharedExpertKinds, gguf_model/model.h; linear_kind_index maps a module's kind to these).
enum LinearKind { kAttnQ = 0, kAttnK, kAttnV, kAttnOut, kFfnGate, kFfnUp, kFfnDown, kShexpGate, kShexpUp, kShexpDown, kNumLinear };
// The tensor kind of k in this model's layers (ffn_gate or ffn_gate_exps).
std::string linear_kind_name(const HParams& hp, int k);
// Whether this model's layers have kind k (the shared expert's only with hp.shexp()).
bool has_kind(const HParams& hp, int k);

// Everything of one layer except the linear weights.
struct LayerParams {
  at::Tensor attn_norm, ffn_norm;      // [n_embd]
  at::Tensor q_norm, k_norm;           // [head_dim], qwen3 and gemma3
  at::Tensor attn_post_norm, ffn_post_norm;  // [n_embd], gemma3 only
  bool swa = false;                    // gemma3's local layers: sliding window, their own RoPE
  at::Tensor router;                   // [n_expert, n_embd], MoE only (ffn_gate_inp)
  at::Tensor shexp_gate;               // [n_embd], qwen2moe's shared-expert gate (ffn_gate_inp_shexp)
  std::array<at::Tensor, kNumLinear> bias;  // [out] or undefined (qwen2 has q/k/v biases)
};

// RoPE cos/sin ([T, head_dim/2], built exactly as ggml's rope cache) and the causal mask;
// the same for the sliding-window layers when the model has them.
struct Positional {
  int64_t n_pos = 0;
  at::Tensor cos, sin, mask;
  at::Tensor cos_swa, sin_swa, mask_swa;
};
Positional make_positional(const HParams& hp, int64_t n_pos, const std::vector<float>& freq_factors);

// The FFN block on its normed input f [B, T, n_embd]: down(act(gate f, up f)), or a MoE layer's
// routed experts (w: [n_expert, out, in]; each token through its top n_expert_used experts,
// weighted as llama.cpp's build_moe_ffn), plus its shared expert when it has one.
at::Tensor ffn(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w, const at::Tensor& f);

// x: [B, T, n_embd] F32. w[k]: [out, in] (torch order; ggml's ne reversed), a MoE layer's
// experts [n_expert, out, in]; undefined for the kinds the model lacks. Returns the layer
// output [B, T, n_embd].
at::Tensor layer_forward(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w,
                         const Positional& pos, const at::Tensor& x);

// The attention block between the q/k/v projections and attn_output: q [B, T, n_embd_q],
// k and v [B, T, n_embd_kv] (with their biases) -> attn_output's input [B, T, n_embd_q].
at::Tensor attention(const HParams& hp, const LayerParams& lp, const Positional& pos, at::Tensor q, at::Tensor k,
                     const at::Tensor& v);
// The gated FFN's activation: silu(gate) * up, or gemma3's gelu(gate) * up as ggml computes it
// (its GELU goes through an F16 table; the gradient is the smooth GELU's).
at::Tensor ffn_act(const HParams& hp, const at::Tensor& gate, const at::Tensor& up);
// The residual adds after attn_output (x + o) and after ffn_down (h2 + f), with gemma3's
// post-norms on o and f.
at::Tensor attn_residual(const HParams& hp, const LayerParams& lp, const at::Tensor& x, const at::Tensor& o);
at::Tensor ffn_residual(const HParams& hp, const LayerParams& lp, const at::Tensor& h2, const at::Tensor& f);
// The head on the last hidden state: output_norm, the output matrix (+bias), gemma3's softcap.
at::Tensor head_logits(const HParams& hp, const at::Tensor& h, const at::Tensor& out_norm, const at::Tensor& head,
                       const at::Tensor& bias);
// x W^T + b (b may be undefined).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, float eps);

// Threads for LibTorch work: BLAS (OpenBLAS, where the matmuls go) gets n; ATen's own
// OpenMP pool gets $GAMMA_TORCH_INTRA_THREADS, default 1. Both pools at n oversubscribe the
// cores (idle OpenMP workers spin while OpenBLAS runs): measured 2.5x slower on 2 cores.
void set_compute_threads(int n);

// A GGUF tensor as an F32 torch tensor in torch dimension order (dequantized via ggml).
Result<at::Tensor> read_tensor(const Model& m, const std::string& name);

// The FP model read from a GGUF on demand: per-layer parameters and weights, the head.
class TorchDecoder {
 public:
  static Result<std::unique_ptr<TorchDecoder>> open(const std::string& path);
  const Model& model() const { return *model_; }
  const HParams& hparams() const { return hp_; }
  void set_hparams(const HParams& hp) { hp_ = hp; }  // tests: a deliberately wrong layer
  const std::vector<float>& rope_freqs() const { return rope_freqs_; }
  Result<LayerParams> layer_params(int il) const;
  Result<std::array<at::Tensor, kNumLinear>> layer_weights(int il) const;
  // Token embeddings [n, n_embd] and the head: logits [n, n_vocab] from the last hidden state.
  Result<at::Tensor> embed(const std::vector<int32_t>& tokens) const;
  Result<at::Tensor> logits(const at::Tensor& h) const;
  ~TorchDecoder();

 private:
  TorchDecoder() = default;
  std::unique_ptr<Model> model_;
  HParams hp_;
  std::vector<float> rope_freqs_;
};

}  // namespace gm
