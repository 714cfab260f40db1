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
#include <utility>
#include <vector>

#include "decoder/activations.h"
#include "learn/layer_step.h"
#include "util/json.h"
#include "util/status.h"

namespace gm {

// The variants of Stage I, each parsed once from its flag (parse_choice) and named in the
// scores' hyperparameters by choice_name.
enum class Objective { kMse, kCe };
enum class Penalty { kAl, kDnas };
enum class Optimizer { kAdam, kSgd };
enum class Estimator { kSoft, kSt };
enum class Init { kTilt, kUniform };
enum class Forcing { kLayer, kSublayer };

// One table per enum: its flag and the name of each value (the first is the default).
template <typename E>
struct Choices {
  const char* flag;
  std::vector<std::pair<const char*, E>> names;
};
const Choices<Objective>& choices(Objective);
const Choices<Penalty>& choices(Penalty);
const Choices<Optimizer>& choices(Optimizer);
const Choices<Estimator>& choices(Estimator);
const Choices<Init>& choices(Init);
const Choices<Forcing>& choices(Forcing);
const Choices<TokenWeights>& choices(TokenWeights);  // --layer-loss

template <typename E>
const char* choice_name(E v) {
  for (const auto& [n, e] : choices(E{}).names)
    if (e == v) return n;
  return "?";
}
// "--penalty must be al or dnas (got soft)" for a name the table lacks.
template <typename E>
Result<E> parse_choice(const std::string& s) {
  const auto& c = choices(E{});
  std::string all;
  for (size_t i = 0; i < c.names.size(); ++i) {
    if (s == c.names[i].first) return c.names[i].second;
    all += (i == 0 ? "" : i + 1 == c.names.size() ? " or " : ", ") + std::string(c.names[i].first);
  }
  return Status::errorf("{} must be {} (got {})", c.flag, all, s);
}

struct LearnOptions {
  std::string pool_dir, teacher_path, out_path;
  // Called after each layer this process runs in a step (step, how many it ran before): progress
  // hooks and fault injection (the CLI's GAMMA_TEST_KILL_AT_STEP kills mid-step for the
  // resume test); the library itself never reads the environment for it.
  std::function<void(int step, int layer_in_step)> on_layer_done;
  double target_bpw = 3.0;
  int steps = 200;
  int seqs = 2;             // calibration sequences per step (--seqs)
  int layers_per_step = 0;  // 0: every layer every step
  Optimizer optimizer = Optimizer::kAdam;
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
  Objective objective = Objective::kMse;
  Penalty penalty = Penalty::kAl;  // al: augmented Lagrangian (GAMMA) | dnas: multiplicative ablation
  double dnas_beta = 10, dnas_gamma = 1;
  // soft: the layer runs on W_mix = sum p_b W_b (Gumbel-softmax, the paper) | st: straight-
  // through (Jang et al.): the layer runs on the one candidate argmax_b p_b of the sample, and
  // its gradient dL/dW . W_b is taken as dL/dp_b. The loss is then that of a discrete
  // assignment, which no mixture of candidates can undercut.
  Estimator estimator = Estimator::kSoft;
  // layer: every layer runs on the teacher's input, the loss is its output's MSE (GAMMA) |
  // sublayer: the FFN runs on the teacher's mid-layer residual too, so q/k/v/gate/up read
  // fixed inputs and their candidates' outputs are computed once per visit and mixed
  // (LayerStep::begin_visit); loss MSE(h2) + MSE(FFN output).
  Forcing forcing = Forcing::kLayer;
  // mse: the layer's squared error, every token alike (GAMMA) | rel: each token's squared error
  // over the teacher's mean square at that token | clip: mse, but a token whose mean square is
  // above 10x the median token's weighs as one at that bound (LayerStep::set_token_weights), so
  // a token whose hidden state is thousands of times larger (Qwen's first) does not own the loss.
  TokenWeights layer_loss = TokenWeights::kNone;
  // > 1: the layers drawn for a step stay for this many steps (a visit), their candidates
  // dequantized once; memory holds layers_per_step layers' candidates (and, with sublayer
  // forcing, their cached outputs for visit_seqs sequences).
  int visit_steps = 1;
  // Sequences a sublayer visit holds, a multiple of seqs (0: seqs). Each is reused
  // visit_steps * seqs / visit_seqs times: the cached outputs cost one matmul per candidate,
  // repaid only when that is well above the number of candidates (bench/, measured on Qwen).
  int visit_seqs = 0;
  // > 0 (--forcing sublayer): every step whose index is a multiple of this also measures, for
  // every module of its layers, the loss change each candidate causes in the step's sampled
  // assignment (LayerStep::visit_deltas); their running means go to SCORES.json as "delta",
  // which `gamma solve --transform delta` solves on (score = -delta, in the objective's units:
  // layer MSE, additive over modules and layers, so one run serves every budget).
  int measure_every = 0;
  // > 0 (with measure_every and visits): a visit ends early once, after a measurement, every
  // module of its layers has its mean loss changes, centred on their mean over its candidates
  // (the knapsack sees only their differences), known to within this fraction of their largest
  // |value| (the standard error of the mean over its measurements, from the third on): the
  // answer is measured well enough. Each early end is recorded in the scores
  // ("convergence": its step, measurements and that relative error).
  double converge = 0;
  double tau_end = 0;       // > 0: tau anneals exponentially to tau_end over the run
  Init init = Init::kTilt;  // tilt: start on the budget, no module preferred; uniform: pi = 0
  // Warm start (issue 19's ablation): a plan (`gamma solve` of the static proxy or HAWQ-V2 at
  // the target) whose candidate starts as each module's mode, with p = init_weight at step 0;
  // the other candidates keep --init's proportions. Learning then has to move away from the
  // proxy's choice for the scores to differ from it.
  std::string init_plan;
  double init_weight = 0.5;
  uint64_t seed = 0;
  // Layer-sharded Stage I (learn/dist.h): this process is rank `rank` of `world_size` and
  // owns a contiguous range of layers (equal shares: the layers of a model cost the same);
  // one all-reduce per step; rank 0 writes the scores and the checkpoint. The scores equal a
  // single process's bit for bit (each sum has one non-zero term per layer, in layer order).
  int world_size = 1, rank = 0;
  std::string rendezvous;     // tcp://HOST:PORT (rank 0 serves it) | file://PATH
  double dist_timeout = 300;  // seconds a collective waits for the other ranks
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
