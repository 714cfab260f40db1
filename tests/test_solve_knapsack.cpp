// Stage II's exact multiple-choice knapsack against brute force (small instances, exact in
// doubles) and against CBC (random, adversarial, model-shaped and thousands-of-modules
// instances): same optimum, feasible answers, honest bounds, and a reported gap when the
// proof is cut short.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "solve/knapsack.h"
#include "solve/instances.h"

using namespace gm::solve;
using namespace gm::solve_testing;

namespace {

// Best score over all assignments within the capacity (-inf if none).
double brute_force(const std::vector<KnapsackClass>& cls, uint64_t cap) {
  std::vector<size_t> ch(cls.size(), 0);
  double best = -INFINITY;
  for (;;) {
    uint64_t w = 0;
    double s = 0;
    for (size_t i = 0; i < cls.size(); ++i) w += cls[i].weight[ch[i]], s += cls[i].score[ch[i]];
    if (w <= cap) best = std::max(best, s);
    size_t i = 0;
    while (i < cls.size() && ++ch[i] == cls[i].weight.size()) ch[i++] = 0;
    if (i == cls.size()) return best;
  }
}

// The answer is a real assignment: one valid item per class, within capacity, and its
// reported weight and score are what the items add up to.
void expect_consistent(const std::vector<KnapsackClass>& cls, uint64_t cap, const KnapsackSolution& s) {
  ASSERT_EQ(s.choice.size(), cls.size());
  uint64_t w = 0;
  double sc = 0;
  for (size_t i = 0; i < cls.size(); ++i) {
    ASSERT_GE(s.choice[i], 0);
    ASSERT_LT(size_t(s.choice[i]), cls[i].weight.size());
    w += cls[i].weight[s.choice[i]];
    sc += cls[i].score[s.choice[i]];
  }
  EXPECT_EQ(w, s.weight);
  EXPECT_LE(w, cap);
  EXPECT_EQ(sc, s.score);
  EXPECT_GE(s.upper_bound, s.score);
}

// Instance families, adversarial ones included.
enum Family { kRandom, kTies, kEqualSizes, kSameSizesAcross, kCollinear, kIdentical, kNegative, kMonotone, kFamilies };
const char* family_name(int f) {
  static const char* n[] = {"random", "ties", "equal-sizes", "same-sizes-across", "collinear", "identical", "negative", "monotone"};
  return n[f];
}

std::vector<KnapsackClass> make_instance(std::mt19937_64& rng, int family, int n, int k) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<KnapsackClass> cls(n);
  std::vector<uint64_t> shared_w;
  for (int j = 0; j < k; ++j) shared_w.push_back(1 + rng() % 500);
  for (auto& c : cls) {
    for (int j = 0; j < k; ++j) {
      uint64_t w = 1 + rng() % 1000;
      double s = u(rng);
      switch (family) {
        case kTies: s = double(rng() % 3); w = 1 + rng() % 20; break;         // many equal scores
        case kEqualSizes: w = 64; break;                                      // one size per class
        case kSameSizesAcross: w = shared_w[j]; break;                        // like real layers
        case kCollinear: w = 1 + rng() % 40; s = 0.25 * double(w); break;     // every item on one line
        case kIdentical: w = 10 * (j + 1); s = std::sqrt(double(j + 1)); break;  // all classes equal
        case kNegative: s = -u(rng) * 1e3; w = rng() % 1000; break;           // negative, zero weights
        default: break;
      }
      c.weight.push_back(w);
      c.score.push_back(s);
    }
    if (family == kMonotone) {  // heavier is better, like -rel_err
      std::sort(c.weight.begin(), c.weight.end());
      std::sort(c.score.begin(), c.score.end());
    }
  }
  return cls;
}

// A capacity between the tightest (min weight) and the loosest (saturation), with the two
// extremes and one past saturation hit often.
uint64_t pick_capacity(std::mt19937_64& rng, const Knapsack& ks) {
  uint64_t lo = ks.min_weight(), hi = ks.saturation_weight();
  switch (rng() % 6) {
    case 0: return lo;
    case 1: return hi;
    case 2: return hi + 1 + rng() % 1000;
    default: return hi > lo ? lo + rng() % (hi - lo + 1) : lo;
  }
}

TEST(Knapsack, MatchesBruteForceOnSmallInstances) {
  std::mt19937_64 rng(20240601);
  int checked = 0;
  for (int inst = 0; inst < 400; ++inst) {
    int family = inst % kFamilies;
    int n = 1 + int(rng() % 6), k = 1 + int(rng() % 5);
    auto cls = make_instance(rng, family, n, k);
    auto ks = Knapsack::create(cls);
    ASSERT_TRUE(ks.is_ok()) << ks.status().message();
    uint64_t cap = pick_capacity(rng, *ks);
    auto s = ks->solve(cap);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    SCOPED_TRACE(::testing::Message() << "instance " << inst << " (" << family_name(family) << ", n=" << n << ", k=" << k
                                      << ", cap=" << cap << ")");
    expect_consistent(cls, cap, *s);
    double best = brute_force(cls, cap);
    EXPECT_TRUE(s->optimal);
    EXPECT_NEAR(s->score, best, 1e-9 * std::max(1.0, std::fabs(best)));
    EXPECT_GE(s->upper_bound, best - 1e-9 * std::max(1.0, std::fabs(best)));
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

// >= 200 instances against CBC: every family, 1 to 60 modules, 1 to 8 candidates, tightest
// and loosest budgets included.
TEST(Knapsack, MatchesCbcOnRandomAndAdversarialInstances) {
  std::mt19937_64 rng(7);
  int agree = 0, total = 0;
  for (int inst = 0; inst < 240; ++inst) {
    int family = inst % kFamilies;
    int n = inst % 24 == 0 ? 1 : 2 + int(rng() % 59), k = 1 + int(rng() % 8);
    auto cls = make_instance(rng, family, n, k);
    auto ks = Knapsack::create(cls);
    ASSERT_TRUE(ks.is_ok());
    uint64_t cap = pick_capacity(rng, *ks);
    auto s = ks->solve(cap);
    ASSERT_TRUE(s.is_ok());
    SCOPED_TRACE(::testing::Message() << "instance " << inst << " (" << family_name(family) << ", n=" << n << ", k=" << k
                                      << ", cap=" << cap << ")");
    expect_consistent(cls, cap, *s);
    CbcAnswer c = cbc_solve(cls, cap, 60);
    ASSERT_TRUE(c.optimal) << "CBC did not prove optimality";
    ASSERT_LE(c.weight, cap);
    double tol = 1e-9 * std::max(1.0, std::fabs(c.score));
    EXPECT_TRUE(s->optimal);
    EXPECT_NEAR(s->score, c.score, tol);
    EXPECT_GE(s->upper_bound, c.score - tol);  // the bound holds for CBC's answer too
    agree += std::fabs(s->score - c.score) <= tol;
    ++total;
  }
  EXPECT_EQ(agree, total);
  EXPECT_GE(total, 200);
}

// Qwen2.5-1.5B-shaped (196 modules x 5 k-quants) and 70B-shaped instances, both kinds of
// scores, budgets across the useful range.
TEST(Knapsack, MatchesCbcOnModelShapedInstances) {
  struct Case { Shape shape; ScoreModel sm; std::vector<double> bpws; };
  std::vector<Case> cases = {
      {qwen15b(), ScoreModel::kStageI, {2.7, 3.0, 3.3, 4.0}},
      {qwen15b(), ScoreModel::kNegRelErr, {2.7, 3.0, 3.5, 4.25, 5.5}},
      {llama70b(), ScoreModel::kNegRelErr, {3.0}},
  };
  for (const auto& c : cases) {
    auto cls = model_instance(c.shape, c.sm, 11);
    auto ks = Knapsack::create(cls);
    ASSERT_TRUE(ks.is_ok());
    int64_t np = total_params(c.shape);
    for (double bpw : c.bpws) {
      uint64_t cap = uint64_t(bpw * double(np) / 8);
      SCOPED_TRACE(::testing::Message() << cls.size() << " modules at " << bpw << " bpw");
      auto s = ks->solve(cap);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      expect_consistent(cls, cap, *s);
      EXPECT_TRUE(s->optimal);
      CbcAnswer ref = cbc_solve(cls, cap, 120);
      ASSERT_TRUE(ref.optimal);
      EXPECT_NEAR(s->score, ref.score, 1e-9 * std::max(1.0, std::fabs(ref.score)));
    }
  }
}

TEST(Knapsack, MatchesCbcWithThousandsOfModules) {
  std::mt19937_64 rng(3);
  auto cls = make_instance(rng, kMonotone, 2000, 5);
  auto ks = Knapsack::create(cls);
  ASSERT_TRUE(ks.is_ok());
  uint64_t cap = ks->min_weight() + (ks->saturation_weight() - ks->min_weight()) * 2 / 5;
  auto s = ks->solve(cap);
  ASSERT_TRUE(s.is_ok());
  expect_consistent(cls, cap, *s);
  EXPECT_TRUE(s->optimal);
  CbcAnswer ref = cbc_solve(cls, cap, 120);
  ASSERT_TRUE(ref.optimal);
  EXPECT_NEAR(s->score, ref.score, 1e-9 * std::fabs(ref.score));

  // Thousands of identical modules: every solution ties with many others.
  std::vector<KnapsackClass> same(3000, KnapsackClass{{10, 20, 30, 40}, {0.1, 0.25, 0.33, 0.4}});
  auto kt = Knapsack::create(same);
  ASSERT_TRUE(kt.is_ok());
  uint64_t cap2 = 3000 * 10 + 12345;
  auto st = kt->solve(cap2);
  ASSERT_TRUE(st.is_ok());
  expect_consistent(same, cap2, *st);
  CbcAnswer ref2 = cbc_solve(same, cap2, 120);
  ASSERT_TRUE(ref2.optimal);
  EXPECT_NEAR(st->score, ref2.score, 1e-9 * std::fabs(ref2.score));
}

TEST(Knapsack, SweepEqualsIndependentSolves) {
  auto cls = model_instance(qwen15b(), ScoreModel::kNegRelErr, 5);
  auto ks = Knapsack::create(cls);
  ASSERT_TRUE(ks.is_ok());
  int64_t np = total_params(qwen15b());
  std::vector<uint64_t> caps;
  for (int b = 40; b >= 0; --b) caps.push_back(uint64_t((2.7 + 0.07 * b) * double(np) / 8));  // any order
  auto all = ks->sweep(caps);
  ASSERT_EQ(all.size(), caps.size());
  double prev = INFINITY;
  for (size_t r = 0; r < caps.size(); ++r) {
    ASSERT_TRUE(all[r].is_ok());
    auto one = ks->solve(caps[r]);
    ASSERT_TRUE(one.is_ok());
    EXPECT_TRUE(all[r]->optimal);
    EXPECT_NEAR(all[r]->score, one->score, ks->tolerance_abs());
    EXPECT_LE(all[r]->weight, caps[r]);
    EXPECT_LE(all[r]->score, prev + ks->tolerance_abs());  // capacities descend here
    prev = all[r]->score;
  }
}

TEST(Knapsack, WarmStartDoesNotChangeTheOptimum) {
  std::mt19937_64 rng(9);
  auto cls = make_instance(rng, kMonotone, 80, 6);
  auto ks = Knapsack::create(cls);
  ASSERT_TRUE(ks.is_ok());
  uint64_t cap = (ks->min_weight() + ks->saturation_weight()) / 2;
  auto cold = ks->solve(cap);
  std::vector<int> lightest(cls.size());
  for (size_t i = 0; i < cls.size(); ++i)
    lightest[i] = int(std::min_element(cls[i].weight.begin(), cls[i].weight.end()) - cls[i].weight.begin());
  auto warm = ks->solve(cap, &lightest);
  std::vector<int> bad(cls.size(), 99);  // malformed warm starts are ignored
  auto ignored = ks->solve(cap, &bad);
  ASSERT_TRUE(cold.is_ok() && warm.is_ok() && ignored.is_ok());
  EXPECT_NEAR(cold->score, warm->score, ks->tolerance_abs());
  EXPECT_NEAR(cold->score, ignored->score, ks->tolerance_abs());
}

// Subset sum in disguise (every item on one line, awkward weights) with a tiny state
// budget: the proof is cut short, and the answer says so with a valid upper bound.
TEST(Knapsack, ReportsTheGapWhenTheProofIsCutShort) {
  std::mt19937_64 rng(5);
  std::vector<KnapsackClass> cls(14);
  for (auto& c : cls)
    for (int j = 0; j < 3; ++j) {
      uint64_t w = 1000 + rng() % 1000000;
      c.weight.push_back(w);
      c.score.push_back(double(w) + 0.5 * double(rng() % 3));
    }
  KnapsackOptions opt;
  opt.max_states = 50;
  auto ks = Knapsack::create(cls, opt);
  ASSERT_TRUE(ks.is_ok());
  uint64_t cap = (ks->min_weight() + ks->saturation_weight()) / 2 + 12345;
  auto s = ks->solve(cap);
  ASSERT_TRUE(s.is_ok());
  expect_consistent(cls, cap, *s);
  double best = brute_force(cls, cap);
  EXPECT_GE(s->upper_bound, best);
  EXPECT_FALSE(s->optimal);
  EXPECT_GT(s->gap(), ks->tolerance_abs());
  // With room to work the same instance is proven.
  auto full = Knapsack::create(cls);
  auto f = full->solve(cap);
  ASSERT_TRUE(f.is_ok());
  EXPECT_TRUE(f->optimal);
  EXPECT_NEAR(f->score, best, 1e-9 * best);
}

TEST(Knapsack, RejectsBadInstancesAndInfeasibleCapacities) {
  EXPECT_FALSE(Knapsack::create({}).is_ok());
  EXPECT_FALSE(Knapsack::create({KnapsackClass{}}).is_ok());
  EXPECT_FALSE(Knapsack::create({KnapsackClass{{1, 2}, {0.5}}}).is_ok());
  auto nan = Knapsack::create({KnapsackClass{{1, 2}, {0.5, NAN}}});
  ASSERT_FALSE(nan.is_ok());
  EXPECT_NE(nan.status().message().find("non-finite"), std::string::npos);
  EXPECT_FALSE(Knapsack::create({KnapsackClass{{1}, {INFINITY}}}).is_ok());
  EXPECT_FALSE(Knapsack::create({KnapsackClass{{UINT64_MAX}, {1}}, KnapsackClass{{1}, {1}}}).is_ok());
  KnapsackOptions bad_tol;
  bad_tol.tolerance = -1;
  EXPECT_FALSE(Knapsack::create({KnapsackClass{{1}, {1}}}, bad_tol).is_ok());

  auto ks = Knapsack::create({KnapsackClass{{30, 10}, {1, 0}}, KnapsackClass{{5, 7}, {0, 1}}});
  ASSERT_TRUE(ks.is_ok());
  EXPECT_EQ(ks->min_weight(), 15u);
  EXPECT_EQ(ks->saturation_weight(), 37u);
  auto r = ks->solve(14);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("15"), std::string::npos) << r.status().message();
  auto tight = ks->solve(15);
  ASSERT_TRUE(tight.is_ok());
  EXPECT_EQ(tight->choice, (std::vector<int>{1, 0}));
  auto loose = ks->solve(1000);
  ASSERT_TRUE(loose.is_ok());
  EXPECT_EQ(loose->choice, (std::vector<int>{0, 1}));
  EXPECT_EQ(loose->score, 2.0);
}

}  // namespace
