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

struct ModuleMix {
  std::vector<const float*> cands;  // dequantized candidates [out x in]; empty: the teacher's
  std::vector<double> p;            // mixing weights, one per candidate
  std::vector<double>* grad = nullptr;  // receives d(scale * mse)/dp (accumulated)
};

class LayerStep {
 public:
  // Loads every layer's non-linear parameters (norms, biases) from the teacher.
  static Result<std::unique_ptr<LayerStep>> create(const std::string& teacher_path, int seq_len, int n_threads);
  ~LayerStep();
  const HParams& hparams() const;
  // x, y: n_seq x seq_len x n_embd floats (the teacher's input and output of layer `il`).
  // Returns the MSE (mean over all elements). backward = false: the MSE only (no gradients).
  Result<double> run(int il, std::array<ModuleMix, 7>& mods, const float* x, const float* y, int n_seq, double scale,
                     bool backward = true);

  // Chained use (the CE ablation: layers feed each other, gradients flow through all of them,
  // recomputed layer by layer so only the layer inputs are kept). forward: layer il on x, no
  // gradients, output into y. backward: recompute layer il on x with gradients, back-propagate
  // grad_y; adds <dL/dW_mix, W_b> to each module's grad and writes dL/dx into grad_x (null:
  // not needed, e.g. layer 0).
  Status forward(int il, std::array<ModuleMix, 7>& mods, const float* x, float* y, int n_seq);
  Status backward(int il, std::array<ModuleMix, 7>& mods, const float* x, const float* grad_y, float* grad_x, int n_seq);
  // KL(teacher || student) of the next-token distributions from the last hidden states (the
  // teacher's h_teacher, the student's h), mean over tokens; writes d(scale * KL)/dh into grad_h.
  Result<double> head_kl(const float* h, const float* h_teacher, float* grad_h, int n_seq, double scale);

 private:
  struct Impl;
  explicit LayerStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gm
