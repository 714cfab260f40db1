// A check shared by test_learn.cpp (a dense layer) and test_moe.cpp (MoE layers): Stage I's
// measured loss change (LayerStep::visit_deltas) is exact, the loss of the switched assignment.
#pragma once
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "learn/layer_step.h"

namespace gm::testing {

// `mixed` made one-hot: module k at its candidate k mod K.
inline LayerMix one_hot_of(const LayerMix& mixed, int n_kinds) {
  LayerMix onehot = mixed;
  for (int k = 0; k < n_kinds; ++k) {
    auto& p = onehot[size_t(k)].p;
    std::fill(p.begin(), p.end(), 0.0);
    p[size_t(k) % p.size()] = 1.0;
  }
  return onehot;
}

// On rows [1, 2) of layer il's visit: for every module k < n_kinds and candidate b, the delta
// visit_deltas reports equals visit_step's loss with module k alone switched to b minus the
// loss of `base` as it is; at a one-hot base's own candidate it is exactly 0. Returns how many
// deltas are non-zero (above 1e-4 of the loss).
inline int expect_deltas_are_switched_losses(LayerStep& step, int il, const LayerMix& base, bool one_hot, int n_kinds,
                                             const char* const* names) {
  LayerDeltas delta;
  EXPECT_TRUE(step.visit_deltas(il, base, 1, 1, delta).is_ok());
  auto loss = [&](LayerMix m) {
    auto r = step.visit_step(il, m, 1, 1, 1.0, /*backward=*/false);
    EXPECT_TRUE(r.is_ok());
    return r.is_ok() ? *r : 0.0;
  };
  const double l0 = loss(base);
  int nonzero = 0;
  for (int k = 0; k < n_kinds; ++k) {
    EXPECT_EQ(delta[size_t(k)].size(), base[size_t(k)].p.size()) << names[k];
    for (size_t b = 0; b < std::min(delta[size_t(k)].size(), base[size_t(k)].p.size()); ++b) {
      auto m = base;
      std::fill(m[size_t(k)].p.begin(), m[size_t(k)].p.end(), 0.0);
      m[size_t(k)].p[b] = 1.0;
      const double want = loss(m) - l0;
      EXPECT_NEAR(delta[size_t(k)][b], want, 2e-3 * std::fabs(want) + 1e-5 * l0) << names[k] << " candidate " << b;
      if (one_hot && base[size_t(k)].p[b] == 1.0) EXPECT_EQ(delta[size_t(k)][b], 0.0) << names[k];
      nonzero += std::fabs(delta[size_t(k)][b]) > 1e-4 * l0;
    }
  }
  return nonzero;
}

}  // namespace gm::testing
