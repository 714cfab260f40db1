// The LibTorch half of a Stage I step, for one layer: mix each module's dequantized
// candidates with its weights p (W_mix = sum_b p_b W_b), run the layer on the teacher's
// input (teacher forcing), take the MSE against the teacher's output, and return the
// gradient of scale * MSE with respect to every p_b: <dL/dW_mix, W_b>. Only W_mix needs a
// gradient (the input is the teacher's), so autograd does no work for anything else.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct HParams;

// How the layer loss weighs tokens (--layer-loss): none (plain MSE), rel (each token's error
// over the teacher's mean square there), clip (plain, but a token above 10x the median token's
// mean square brought to that scale).
enum class TokenWeights { kNone, kRel, kClip };

struct ModuleMix {
  std::vector<const float*> cands;  // dequantized candidates [out x in]; empty: the teacher's
  std::vector<double> p;            // mixing weights, one per candidate
  std::vector<double>* grad = nullptr;  // receives d(scale * mse)/dp (accumulated)
};

// A layer's modules by kind, decoder/layer.h's LinearKind: q, k, v, o, gate, up, down, then a
// MoE layer's shared expert (gate, up, down); a kind the model lacks stays empty.
constexpr int kLayerKinds = 10;
using LayerMix = std::array<ModuleMix, kLayerKinds>;
using LayerDeltas = std::array<std::vector<double>, kLayerKinds>;

class LayerStep {
 public:
  // Loads every layer's non-linear parameters (norms, biases) from the teacher.
  static Result<std::unique_ptr<LayerStep>> create(const std::string& teacher_path, int seq_len, int n_threads);
  ~LayerStep();
  const HParams& hparams() const;
  // The token weights of run, visit_step and visit_deltas (default none: plain MSE, GAMMA).
  void set_token_weights(TokenWeights w);
  // x, y: n_seq x seq_len x n_embd floats (the teacher's input and output of layer `il`).
  // Returns the MSE (mean over all elements). backward = false: the MSE only (no gradients).
  Result<double> run(int il, LayerMix& mods, const float* x, const float* y, int n_seq, double scale,
                     bool backward = true);

  // Sub-layer teacher forcing with cached candidate outputs (--forcing sublayer). A visit of
  // layer il holds n_seq sequences of the teacher's input x and output y, the teacher's
  // mid-layer residual h2 (its attention block, teacher weights), and every candidate's
  // output Y_b for the modules whose input is then fixed: q, k, v (on attn_norm(x)) and
  // gate, up (on ffn_norm(h2)). A step on sequences [r0, r0 + n) mixes those outputs
  // (sum_b p_b Y_b with p an autograd leaf: dL/dp_b = <dL/dY, Y_b>, no weight-sized gradient
  // and no matmul) and runs only attn_output and ffn_down as weights (one candidate when p is
  // one-hot). Loss: MSE(h2) + MSE(output of the FFN run on the teacher's h2), so the FFN's
  // gradient never crosses into the attention. Cost: one matmul per candidate and cached
  // module at begin_visit, repaid over the visit's steps.
  Status begin_visit(int il, const LayerMix& mods, const float* x, const float* y, int n_seq);
  Result<double> visit_step(int il, LayerMix& mods, int r0, int n, double scale, bool backward = true);
  // The measured loss change of a visit's step (--measure-every): for every module with
  // candidates, how this step's loss on rows [r0, r0 + n) changes when that module alone runs
  // candidate b instead of its current weights (mods' p), every other module as it is:
  // delta[k][b], exact (each alternative is run, no Taylor expansion), no gradients. Under
  // hard samples the others are the sampled assignment, so its average over steps is the
  // loss a candidate causes in the assignments Stage I converges to. Cost: one matmul (q/k/v:
  // one attention) per candidate and module, about K times a step's forward.
  Status visit_deltas(int il, const LayerMix& mods, int r0, int n,
                      LayerDeltas& delta);
  void end_visits();
  // Whether kind k's candidates are read only by begin_visit (their outputs are cached): q, k,
  // v, and a dense layer's gate and up (a MoE layer's experts see only their routed tokens,
  // so their candidates stay and run per step like attn_output's and ffn_down's, and so do its
  // shared expert's).
  bool cached_kind(int k) const;
  // The others as a bit mask over the kinds: whose weights a visit step mixes itself.
  uint16_t weight_kinds() const;

  // Chained use (the CE ablation: layers feed each other, gradients flow through all of them,
  // recomputed layer by layer so only the layer inputs are kept). forward: layer il on x, no
  // gradients, output into y. backward: recompute layer il on x with gradients, back-propagate
  // grad_y; adds <dL/dW_mix, W_b> to each module's grad and writes dL/dx into grad_x (null:
  // not needed, e.g. layer 0).
  Status forward(int il, LayerMix& mods, const float* x, float* y, int n_seq);
  Status backward(int il, LayerMix& mods, const float* x, const float* grad_y, float* grad_x, int n_seq);
  // KL(teacher || student) of the next-token distributions from the last hidden states (the
  // teacher's h_teacher, the student's h), mean over tokens; writes d(scale * KL)/dh into grad_h.
  Result<double> head_kl(const float* h, const float* h_teacher, float* grad_h, int n_seq, double scale);

 private:
  struct Impl;
  explicit LayerStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gm
