// Knapsack instances for Stage II's tests and benchmark: model-shaped ones (module sizes of
// real architectures, k-quant block sizes, scores like Stage I's or like -rel_err) and
// random/adversarial ones, plus CBC as the reference MILP solver. Header-only, outside the
// stage library: only programs that link CBC (tests/, bench/) include it.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <coin/Cbc_C_Interface.h>

#include "solve/knapsack.h"
#include "solve/timed.h"

namespace gm::solve_testing {

using solve::KnapsackClass;

struct QuantType {
  const char* name;
  int block;        // weights per block
  int block_bytes;  // bytes per block, scales included
};
// ggml block sizes (ggml-common.h).
inline const QuantType kIQ2_XS{"IQ2_XS", 256, 74}, kQ2_K{"Q2_K", 256, 84},
    kIQ3_XXS{"IQ3_XXS", 256, 98}, kQ3_K{"Q3_K", 256, 110}, kIQ4_XS{"IQ4_XS", 256, 136},
    kQ4_K{"Q4_K", 256, 144}, kQ5_K{"Q5_K", 256, 176}, kQ6_K{"Q6_K", 256, 210},
    kQ8_0{"Q8_0", 32, 34};

struct Shape {
  int n_layer;
  std::vector<int64_t> params;  // per layer: the seven linear modules' sizes
  std::vector<QuantType> types;
};
// Qwen2.5-1.5B: hidden 1536, ffn 8960, 2 KV heads of 128; 28 layers x 7 = 196 modules.
inline Shape qwen15b() {
  int64_t h = 1536, f = 8960, kv = 256;
  return {28, {h * h, h * kv, h * kv, h * h, h * f, h * f, f * h}, {kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K}};
}
// Llama-3-70B: hidden 8192, ffn 28672, 8 KV heads of 128; 80 layers x 7 = 560 modules.
inline Shape llama70b() {
  int64_t h = 8192, f = 28672, kv = 1024;
  return {80, {h * h, h * kv, h * kv, h * h, h * f, h * f, f * h},
          {kIQ2_XS, kQ2_K, kIQ3_XXS, kQ3_K, kIQ4_XS, kQ4_K, kQ5_K, kQ6_K}};
}

enum class ScoreModel { kStageI, kNegRelErr };

// Model-shaped instance. kStageI: per-module softmax of noisy logits that favour a
// module-dependent bit width (probabilities, as Stage I writes). kNegRelErr: -s * 4^-bpw
// with a per-module sensitivity s and per-candidate noise (what -rel_err looks like).
inline std::vector<KnapsackClass> model_instance(const Shape& sh, ScoreModel sm, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<KnapsackClass> out;
  for (int l = 0; l < sh.n_layer; ++l) {
    for (size_t m = 0; m < sh.params.size(); ++m) {
      KnapsackClass c;
      double sens = std::exp(nd(rng)), pref = 3.5 + 0.8 * nd(rng);
      std::vector<double> logits;
      for (const auto& t : sh.types) {
        uint64_t bytes = uint64_t(sh.params[m] / t.block) * uint64_t(t.block_bytes);
        double bpw = 8.0 * t.block_bytes / t.block;
        c.weight.push_back(bytes);
        if (sm == ScoreModel::kNegRelErr) {
          c.score.push_back(-sens * std::pow(4.0, -bpw) * std::exp(0.05 * nd(rng)));
        } else {
          logits.push_back(-std::fabs(bpw - pref) * 3.0 + 0.5 * nd(rng));
        }
      }
      if (sm == ScoreModel::kStageI) {
        double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
        for (double& x : logits) z += (x = std::exp(x - mx));
        for (double x : logits) c.score.push_back(x / z);
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

// Times like decode kernels': proportional to bytes, with a per-item factor (some types are
// slow for their size, as IQ types are on CPUs).
inline solve::TimeResource times_for(const std::vector<KnapsackClass>& cls, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> slow(0.5, 3.0);
  solve::TimeResource r;
  std::vector<double> factor(16);
  for (auto& f : factor) f = slow(rng);
  for (const auto& c : cls) {
    std::vector<double> row;
    for (size_t j = 0; j < c.weight.size(); ++j) row.push_back(double(c.weight[j]) * 1e-6 * factor[j % factor.size()]);
    r.time.push_back(row);
  }
  return r;
}

inline int64_t total_params(const Shape& sh) {
  int64_t n = 0;
  for (auto p : sh.params) n += p;
  return n * sh.n_layer;
}

// CBC on the same problem (binary x_ij, one per class, one weight row, plus one row per time
// budget: times[r][i][j] summed <= caps[r]). `capacity` is passed as a double: exact for the
// byte counts used here (< 2^53).
struct CbcAnswer {
  bool optimal = false;
  double score = NAN;
  uint64_t weight = 0;
  std::vector<int> choice;
  double seconds = 0;
};
inline CbcAnswer cbc_solve(const std::vector<KnapsackClass>& cls, uint64_t capacity,
                           double max_seconds = 600,
                           const std::vector<std::vector<std::vector<double>>>& times = {},
                           const std::vector<double>& caps = {}) {
  int n = int(cls.size());
  std::vector<int> start{0}, ind, owner, item;
  std::vector<double> val, obj, lo, up;
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j < cls[i].weight.size(); ++j) {
      ind.push_back(i), val.push_back(1);
      ind.push_back(n), val.push_back(double(cls[i].weight[j]));
      for (size_t r = 0; r < times.size(); ++r) ind.push_back(n + 1 + int(r)), val.push_back(times[r][i][j]);
      start.push_back(int(ind.size()));
      obj.push_back(cls[i].score[j]), lo.push_back(0), up.push_back(1);
      owner.push_back(i), item.push_back(int(j));
    }
  }
  int ncol = int(obj.size());
  std::vector<double> rlo(n + 1, 1), rup(n + 1, 1);
  rlo[n] = -1e30, rup[n] = double(capacity);
  for (double c : caps) rlo.push_back(-1e30), rup.push_back(c);
  Cbc_Model* m = Cbc_newModel();
  Cbc_loadProblem(m, ncol, n + 1 + int(caps.size()), start.data(), ind.data(), val.data(), lo.data(), up.data(),
                  obj.data(), rlo.data(), rup.data());
  for (int j = 0; j < ncol; ++j) Cbc_setInteger(m, j);
  Cbc_setObjSense(m, -1);
  Cbc_setLogLevel(m, 0);
  Cbc_setAllowableGap(m, 1e-12);
  Cbc_setAllowableFractionGap(m, 0);
  Cbc_setMaximumSeconds(m, max_seconds);
  Cbc_setParameter(m, "threads", "1");
  Cbc_setParameter(m, "increment", "1e-12");  // default cutoff increment (1e-5) cuts near-ties
  auto t0 = std::chrono::steady_clock::now();
  Cbc_solve(m);
  CbcAnswer a;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  a.optimal = Cbc_isProvenOptimal(m);
  const double* x = Cbc_getColSolution(m);
  if (x && a.optimal) {
    a.choice.assign(n, -1);
    a.score = 0;
    for (int j = 0; j < ncol; ++j)
      if (x[j] > 0.5) a.choice[owner[j]] = item[j];
    for (int i = 0; i < n; ++i) {
      if (a.choice[i] < 0) { a.optimal = false; break; }
      a.score += cls[i].score[a.choice[i]];
      a.weight += cls[i].weight[a.choice[i]];
    }
  }
  Cbc_deleteModel(m);
  return a;
}

}  // namespace gm::solve_testing
