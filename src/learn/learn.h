// Stage I (GAMMA paper, Method): per linear module, logits pi over the pool's candidates;
// p = softmax((pi + g) / tau) with Gumbel noise g (one free logit, the sigmoid form, when a
// module has two); W_mix = sum_b p_b W_b; loss = mean over layers of the teacher-forced
// layer-output MSE + lambda1 (b - target) + lambda2 (b - target)^2, b the expected bits per
// weight (parameter-weighted, the manifest's real bpw) under the noise-free softmax(pi/tau),
// which is also what SCORES.json reports as p. pi descends (Adam or SGD), lambda1 and lambda2
// ascend. The MSE term is measured in units of the step-0 MSE (see learn.cpp).
//
// Ablation (paper, Appendix "Simpler-Penalty"): penalty = "dnas" replaces the augmented
// Lagrangian by a fixed multiplicative soft penalty, loss = mse * (1 + beta (b - target)^2)^gamma
// (no dual variables). The paper writes beta (log((b - target)^2))^gamma, which is undefined at
// and around the target (log of a square -> -inf, a fractional power of a negative); this is
// the same idea, a DNAS-style factor on the task loss that grows with the budget deviation.
//
// Memory: the MSE is a sum of per-layer terms and the budget term does not depend on the
// layers, so a step streams layers (one layer's candidates dequantized at a time) and adds
// up exact gradients. With layers_per_step = k < L, k layers drawn uniformly per step with
// the MSE scaled by 1/k give an unbiased estimate of the same gradient.
//
// Resumable: every checkpoint_every steps the whole optimizer state is written atomically to
// OUT.ckpt; a rerun with the same settings continues from it and, with the same thread
// count, ends with bit-identical scores (all randomness is a function of seed and step).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "model/activations.h"
#include "util/json.h"
#include "util/status.h"

namespace gm {

struct LearnOptions {
  std::string pool_dir, teacher_path, out_path;
  // Called after each layer of a step (step, index of the layer within the step): progress
  // hooks and fault injection (the CLI's GAMMA_TEST_KILL_AT_STEP kills mid-step for the
  // resume test); the library itself never reads the environment for it.
  std::function<void(int step, int layer_in_step)> on_layer_done;
  double target_bpw = 3.0;
  int steps = 200;
  int batch = 2;            // sequences per step
  int layers_per_step = 0;  // 0: every layer every step
  std::string optimizer = "adam";  // adam | sgd
  double lr = 5e-3;
  double lr_lambda = 1.0;   // gradient ascent step of lambda1, lambda2
  // Starting lambda2. With 0 the dual ascent oscillates for hundreds of steps (Adam moves pi
  // at ~lr per step whatever the force); 10 damps it: b within 0.005 of the target after 200
  // steps on stories260K, at the same final MSE (measured, lr_lambda 0.1..1).
  double lambda2_init = 10;
  double tau = 1.0;
  // mse: teacher-forced layer MSE (GAMMA) | ce: ablation (paper, Appendix "CE-Loss"): the
  // cross-entropy of the final next-token distribution against the teacher's (KL, the same
  // gradient), layers chained, every layer every step.
  std::string objective = "mse";
  std::string penalty = "al";  // al: augmented Lagrangian (GAMMA) | dnas: multiplicative ablation
  double dnas_beta = 10, dnas_gamma = 1;
  // soft: the layer runs on W_mix = sum p_b W_b (Gumbel-softmax, the paper) | st: straight-
  // through (Jang et al.): the layer runs on the one candidate argmax_b p_b of the sample, and
  // its gradient dL/dW . W_b is taken as dL/dp_b. The loss is then that of a discrete
  // assignment, which no mixture of candidates can undercut.
  std::string estimator = "soft";
  double tau_end = 0;       // > 0: tau anneals exponentially to tau_end over the run
  std::string init = "tilt";  // tilt: start on the budget, no module preferred; uniform: pi = 0
  uint64_t seed = 0;
  int n_threads = 0;        // 0: all cores
  int checkpoint_every = 10;
  bool restart = false;     // ignore a checkpoint of an earlier run
  CalibOptions calib;
  bool quiet = false;
};

struct LearnResult {
  json scores;              // what was written to out_path
  int resumed_from = -1;    // step the run resumed at, -1 for a fresh start
  std::string note;         // e.g. why a checkpoint was not used
};

Result<LearnResult> learn(const LearnOptions& opt);

// Peak resident set size of this process so far (VmHWM), in bytes; 0 if unknown.
uint64_t peak_rss_bytes();

}  // namespace gm
