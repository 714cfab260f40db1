// HAWQ-V2 scores (Dong et al. 2020), the paper's Hessian baseline, on the same pool and layer
// loss as Stage I: for each linear module, the Hutchinson estimate of the trace of the
// Hessian of the teacher-forced layer-output MSE with respect to its weight W (at the FP
// weights), Tr(H) ~ mean_s v_s^T H v_s with Rademacher v_s and H v by double backprop; then
// the sensitivity of candidate b is Omega_b = Tr(H) / n * ||W_b - W||^2, and SCORES.json gets
// score = -Omega (Stage II maximises it under the budget). On an estimate manifest
// (Manifest::estimate_rows) ||W_b - W||^2 is the estimate's sq_err: no candidate is read. Resumable per layer (OUT.ckpt);
// each layer's probes come from its own seed (seed, layer), so a resumed run ends with the
// scores of an uninterrupted one at the same thread count. Returns the scores (rank 0) or an
// empty object (other ranks).
#pragma once
#include <functional>
#include <string>

#include "decoder/activations.h"
#include "util/json.h"
#include "util/status.h"

namespace gm {

struct HawqOptions {
  std::string pool_dir, teacher_path, out_path;
  int samples = 8;   // Hutchinson probes per layer (the most, with converge)
  // A layer's probes end once every module's trace is known to this relative standard error
  // (the probes' standard error of the mean over |mean|), from its kMinProbes-th probe on;
  // 0: all `samples`. Each module's probes and error are recorded in the scores.
  double converge = 0;
  static constexpr int kMinProbes = 3;
  int seqs = 4;      // calibration sequences the layer loss is taken over (--seqs)
  uint64_t seed = 0;
  int n_threads = 0;
  CalibOptions calib;
  bool quiet = false;
  // Layer-sharded (learn/dist.h): rank `rank` of `world_size` scores a contiguous range of
  // layers, resumable per rank (OUT.rankR.ckpt); rank 0 gathers and writes SCORES.json, the
  // same bytes as one process (each layer's probes come from its own seed).
  int world_size = 1, rank = 0;
  std::string rendezvous;
  double dist_timeout = 300;
  // A HAWQ-V2 SCORES.json of the same teacher and settings (samples, seqs, seed, calibration):
  // its per-module Hessian traces are reused, so only this pool's perturbations are measured
  // (seconds, no Hutchinson pass). gamma run measures the traces on an estimate (a pool
  // without candidate files, pool.h), chooses the real pool's candidates with them, and scores
  // the real pool from the same traces.
  std::string traces_from;
  // Called after each layer's checkpoint (fault injection: the CLI's GAMMA_TEST_KILL_AT_LAYER).
  std::function<void(int layer)> on_layer_done;
};

Result<json> hawq_scores(const HawqOptions& opt);

}  // namespace gm
