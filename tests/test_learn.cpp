// Stage I on stories260K: the CLI end to end (scores file, budget reached), the gradient of
// the layer MSE with respect to the mixing weights against finite differences, the sigmoid
// form for two candidates, kill -9 + rerun ending bit-identical to an uninterrupted run, and
// bad inputs failing with one line and no output.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <deque>
#include <random>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "gguf_model/model.h"
#include "llama/log.h"
#include "learn/candidates.h"
#include "learn/checkpoint.h"
#include "learn/layer_step.h"
#include "decoder/activations.h"
#include "decoder/hparams.h"
#include "decoder/layer.h"
#include "pool/candidate.h"
#include "pool/manifest.h"
#include "tests/layer_checks.h"
#include "tests/testing.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;
using namespace gm;
using gm::testing::TempDir;

namespace {

const bool quiet_logs = (gm::llama::capture_logs(), true);

// A pool of stories260K (ffn_down rows of 172 admit only F16).
std::string make_pool(const TempDir& dir, const std::string& types = "Q4_0,Q5_0,Q8_0,F16") {
  const std::string pool = dir / "pool";
  auto r = gm::testing::gamma("pool " + gm::testing::stories260k() + " --types " + types + " -o " + pool + " -t 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return pool;
}

// llama-imatrix of stories260K on `chunks` chunks of 128 tokens, written to `path`.
void stories_imatrix(const std::string& path, int chunks) {
  auto im = gm::testing::run(gm::testing::llama_tool("llama-imatrix") + " -m " + gm::testing::stories260k() + " -f " +
                             gm::testing::shared_data("text/tinystories-valid-prefix.txt") + " -c 128 --chunks " +
                             std::to_string(chunks) + " -t 2 -o " + path);
  ASSERT_EQ(im.exit_code, 0) << im.output;
}

// Common flags: a tiny calibration set cached inside the test's directory.
std::string learn_args(const TempDir& dir, const std::string& pool, const std::string& out, int batch = 2) {
  return "learn " + pool + " --teacher " + gm::testing::stories260k() + " -o " + out +
         " --seq-len 64 --calib-tokens 512 -t 2 -q --seqs " + std::to_string(batch) + " --cache-dir " + dir / "act";
}

json load(const std::string& path) {
  auto j = read_json(path, "gamma.scores", 1);
  EXPECT_TRUE(j.is_ok()) << j.status().message();
  return j.is_ok() ? *j : json::object();
}

// Each case (arguments, a word its error must hold) fails with one line and writes no output.
struct Case {
  std::string args, expect;
};
void expect_clean_failures(const std::vector<Case>& cases, const std::string& out) {
  for (const auto& c : cases) {
    auto r = gm::testing::gamma(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".ckpt"));
  }
}

}  // namespace

TEST(Learn, ReachesTheBudgetAndWritesScores) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string out = dir / "scores.json";
  auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 9.0 --steps 80");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out + ".ckpt"));
  json s = load(out);
  auto man = Manifest::load(pool);
  ASSERT_TRUE(man.is_ok());
  EXPECT_EQ(s["model_fingerprint"], man->model_fingerprint);
  EXPECT_EQ(s["pool_manifest_sha256"], *sha256_file(pool + "/manifest.json"));
  EXPECT_EQ(s["method"], "gamma");
  ASSERT_EQ(s["modules"].size(), man->modules.size());
  // Recompute the expected bpw from the written p and the manifest: it is on the target.
  double bits = 0, n = 0;
  for (const auto& e : man->modules) {
    const json& m = s["modules"][e.name];
    double sum = 0;
    for (const auto& c : e.candidates) {
      const double p = m["p"][c.id].get<double>();
      EXPECT_EQ(m["score"][c.id].get<double>(), p);
      sum += p;
      bits += p * c.bpw * double(e.n_params);
    }
    n += double(e.n_params);
    EXPECT_NEAR(sum, 1.0, 1e-12) << e.name;
  }
  EXPECT_NEAR(bits / n, s["final"]["bpw_expected"].get<double>(), 1e-9);
  EXPECT_NEAR(bits / n, 9.0, 0.01);
  ASSERT_EQ(s["curve"].size(), 80u);
  EXPECT_GT(s["final"]["lambda2"].get<double>(), 0.0);
  // Learning did something: the MSE of the last steps is below step 0's (the unit).
  double late = 0;
  for (size_t i = 60; i < 80; ++i) late += s["curve"][i]["mse"].get<double>() / 20;
  EXPECT_LT(late, s["final"]["mse_ref"].get<double>());
  // ... and modules are told apart: not every module ends with the same p.
  double lo = 1, hi = 0;
  for (const auto& e : man->modules)
    if (e.candidates.size() == 4) {
      const double p = s["modules"][e.name]["p"]["Q4_0"].get<double>();
      lo = std::min(lo, p);
      hi = std::max(hi, p);
    }
  EXPECT_GT(hi - lo, 0.02);
}

// --steps 0 writes Stage I's starting point (the control of the Qwen sweep): every module the
// same tilted distribution p_b ~ exp(-beta (bpw_b - bpw_0)) whose expected bpw is the target.
TEST(Learn, ZeroStepsWritesTheStartingScores) {
  TempDir dir;
  const std::string pool = make_pool(dir, "Q4_0,Q8_0");
  const std::string out = dir / "null.json";
  auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 9.0 --steps 0 --tau 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json s = load(out);
  auto man = Manifest::load(pool);
  ASSERT_TRUE(man.is_ok());
  EXPECT_EQ(s["final"]["steps"].get<int>(), 0);
  EXPECT_NEAR(s["final"]["bpw_expected"].get<double>(), 9.0, 1e-3);
  double p4 = -1;
  for (const auto& e : man->modules) {
    const auto& p = s["modules"][e.name]["p"];
    if (e.candidates.size() < 2) continue;  // ffn_down: F16 only
    const double q = p["Q4_0"].get<double>();
    EXPECT_NEAR(q + p["Q8_0"].get<double>(), 1.0, 1e-9) << e.name;
    if (p4 < 0) p4 = q;
    EXPECT_NEAR(q, p4, 1e-9) << e.name;  // the same distribution everywhere: no evidence yet
  }
  EXPECT_GT(p4, 0.0);
}

// --init-plan (issue 19's warm start): the plan's candidate is each module's mode with p =
// --init-weight at step 0, in the softmax and the sigmoid (K = 2) forms alike; the run records
// the plan's sha256, and a plan this pool cannot take is refused with one line.
TEST(Learn, WarmStartMakesThePlansCandidateTheMode) {
  TempDir dir;
  const std::string pool = make_pool(dir, "Q4_0,Q5_0,Q8_0");
  const std::string pool2 = dir / "pool2";
  {
    auto r = gm::testing::gamma("pool " + gm::testing::stories260k() + " --types Q4_0,Q8_0 -o " + pool2 + " -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const auto& [pl, bpw] : {std::pair{pool, std::string("9.0")}, std::pair{pool2, std::string("9.0")}}) {
    const std::string plan = pl + "-plan.json", out = pl + "-warm.json";
    auto r = gm::testing::gamma("solve --pool " + pl + " --score-from-manifest --bpw " + bpw + " -o " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = gm::testing::gamma(learn_args(dir, pl, out) + " --bpw " + bpw + " --steps 0 --tau 0.5 --init-plan " + plan +
                           " --init-weight 0.7");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    json s = load(out), pj;
    std::ifstream(plan) >> pj;
    int told = 0;
    std::set<std::string> modes;
    for (const auto& [name, m] : s["modules"].items()) {
      if (m["p"].size() < 2) continue;
      const std::string want = pj["modules"][name].get<std::string>();
      EXPECT_NEAR(m["p"][want].get<double>(), 0.7, 1e-9) << name;
      if (m["p"].size() == 2) EXPECT_EQ(m["logits"]["Q4_0"].get<double>(), 0.0) << name;  // sigmoid form kept
      modes.insert(want);
      ++told;
    }
    EXPECT_GT(told, 0);
    EXPECT_GE(modes.size(), 2u) << "the plan should mix types at this budget";
    EXPECT_EQ(s["hyperparameters"]["init_plan"]["sha256"], *sha256_file(plan));
    EXPECT_EQ(s["hyperparameters"]["init_plan"]["weight"].get<double>(), 0.7);
  }
  // A plan of the three-type pool names Q5_0, which the two-type pool lacks.
  const std::string out = dir / "bad.json";
  const std::vector<Case> cases = {
      {learn_args(dir, pool2, out) + " --bpw 9 --init-plan " + pool + "-plan.json", "--init-plan"},
      {learn_args(dir, pool2, out) + " --bpw 9 --init-plan " + dir / "none.json", "none.json"},
      {learn_args(dir, pool2, out) + " --bpw 9 --init-plan " + pool2 + "-plan.json --init-weight 1", "--init-weight"},
  };
  expect_clean_failures(cases, out);
}

TEST(Learn, LayerSamplingAndSigmoidForm) {
  TempDir dir;
  const std::string pool = make_pool(dir, "Q8_0,F16");  // two candidates per module (one for ffn_down)
  const std::string out = dir / "scores.json";
  auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 12.0 --steps 40 --layers-per-step 2 --tau 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json s = load(out);
  for (const auto& [name, m] : s["modules"].items()) {
    if (m["logits"].size() != 2) continue;
    EXPECT_EQ(m["logits"]["Q8_0"].get<double>(), 0.0) << name;  // the fixed logit of the sigmoid form
    const double theta = m["logits"]["F16"].get<double>();
    EXPECT_NEAR(m["p"]["F16"].get<double>(), 1.0 / (1.0 + std::exp(-theta / 0.5)), 1e-12);
  }
  EXPECT_NEAR(s["final"]["bpw_expected"].get<double>(), 12.0, 0.05);
}

// The DNAS-style ablation: no dual variables, loss = mse (1 + beta gap^2)^gamma at every step;
// a soft penalty lets the MSE pull the expected bits above the target, a steep one holds them.
TEST(Learn, StraightThroughRunsLayersOnTheSampledCandidate) {
  // --estimator st: the layers run on one candidate per module (the sample's argmax), so the
  // step-0 MSE is that of a discrete assignment, above the soft mixture's (a mixture of
  // candidates averages their errors); the budget is still met and the choice recorded.
  TempDir dir;
  const std::string pool = make_pool(dir);
  json s[2];
  int i = 0;
  for (const std::string e : {"soft", "st"}) {
    const std::string out = dir / (e + ".json");
    auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 9.0 --steps 80 --estimator " + e);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    s[i++] = load(out);
  }
  EXPECT_FALSE(s[0]["hyperparameters"].contains("estimator"));
  EXPECT_EQ(s[1]["hyperparameters"]["estimator"], "st");
  EXPECT_NEAR(s[1]["final"]["bpw_expected"].get<double>(), 9.0, 0.01);
  EXPECT_GT(s[1]["final"]["mse_ref"].get<double>(), 1.5 * s[0]["final"]["mse_ref"].get<double>());
  auto bad = gm::testing::gamma(learn_args(dir, pool, dir / "x.json") + " --estimator hard");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--estimator must be soft or st"), std::string::npos) << bad.output;
}

TEST(Learn, DnasPenaltyIsMultiplicativeAndSoft) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  double gap_at[2];
  const double betas[2] = {1, 10000};
  for (int i = 0; i < 2; ++i) {
    const std::string out = dir / ("dnas" + std::to_string(i) + ".json");
    auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 9.0 --steps 60 --lr 0.05 --penalty dnas --dnas-gamma 2 --dnas-beta " +
                                std::to_string(betas[i]));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    json s = load(out);
    EXPECT_EQ(s["hyperparameters"]["penalty"], "dnas");
    EXPECT_EQ(s["final"]["lambda1"].get<double>(), 0.0);
    const double ref = s["final"]["mse_ref"].get<double>();
    for (const auto& c : s["curve"]) {
      const double g = c["bpw"].get<double>() - 9.0;
      EXPECT_NEAR(c["loss"].get<double>(), c["mse"].get<double>() / ref * std::pow(1 + betas[i] * g * g, 2.0), 1e-9);
    }
    gap_at[i] = s["final"]["bpw_expected"].get<double>() - 9.0;
  }
  EXPECT_GT(gap_at[0], 0.1);              // soft: the MSE wins bits over the target
  EXPECT_LT(std::abs(gap_at[1]), 0.05);   // steep: held near it
  EXPECT_LT(std::abs(gap_at[1]), gap_at[0]);
  auto bad = gm::testing::gamma(learn_args(dir, pool, dir / "x.json") + " --penalty soft");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--penalty must be al or dnas"), std::string::npos) << bad.output;
}

// What the gradient checks share: the stories260K pool's candidates, a cache of 2 sequences of
// 32 calibration tokens and the LibTorch layer; layer_mix fills one layer's seven modules with
// their dequantized candidates and random normalised mixing weights.
class LayerGrad : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = make_pool(dir_);
    auto man = Manifest::load(pool_);
    ASSERT_TRUE(man.is_ok());
    man_ = std::move(*man);
    auto store = CandidateStore::open(man_);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    store_ = std::move(*store);
    CalibOptions co;
    co.seq_len = 32;
    co.calib_tokens = 64;
    co.cache_root = dir_ / "act";
    co.quiet = true;
    auto cache = ActivationCache::open_or_build(gm::testing::stories260k(), co);
    ASSERT_TRUE(cache.is_ok()) << cache.status().message();
    cache_ = std::move(*cache);
    auto step = LayerStep::create(gm::testing::stories260k(), 32, 2);
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    step_ = std::move(*step);
  }
  void layer_mix(int l, std::mt19937& rng, LayerMix& mix, LayerDeltas& grads) {
    std::uniform_real_distribution<double> u(0.1, 1.0);
    for (int k = 0; k < 7; ++k) {
      const ModuleEntry* e = man_.find("blk." + std::to_string(l) + "." + kinds[k] + ".weight");
      ASSERT_NE(e, nullptr);
      double sum = 0;
      for (const auto& c : e->candidates) {
        bufs_.emplace_back(size_t(e->n_params));  // a deque: earlier buffers stay put
        ASSERT_TRUE(store_->dequantize(*e, c, bufs_.back().data(), 2).is_ok());
        mix[size_t(k)].cands.push_back(bufs_.back().data());
        mix[size_t(k)].p.push_back(u(rng));
        sum += mix[size_t(k)].p.back();
      }
      for (double& p : mix[size_t(k)].p) p /= sum;
      mix[size_t(k)].grad = &grads[size_t(k)];
    }
  }
  // The teacher's input and output of layer il for sequences 0 and 1.
  void layer_io(int il, std::vector<float>& x, std::vector<float>& y) {
    x.assign(size_t(2) * 32 * 64, 0.0f);
    y.assign(x.size(), 0.0f);
    ASSERT_TRUE(cache_->read(il, {0, 1}, x.data()).is_ok());
    ASSERT_TRUE(cache_->read(il + 1, {0, 1}, y.data()).is_ok());
  }
  // (f(p + eps e) - f(p - eps e)) / 2 eps for candidate b of kind k, gradients to scratch.
  template <typename F>
  static double central_difference(const LayerMix& base, int k, size_t b, double eps, F f) {
    LayerDeltas scratch;
    auto plus = base, minus = base;
    for (int j = 0; j < 7; ++j) plus[size_t(j)].grad = minus[size_t(j)].grad = &scratch[size_t(j)];
    plus[size_t(k)].p[b] += eps;
    minus[size_t(k)].p[b] -= eps;
    return (f(plus) - f(minus)) / (2 * eps);
  }
  static constexpr const char* kinds[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  TempDir dir_;
  std::string pool_;
  Manifest man_;
  std::unique_ptr<CandidateStore> store_;
  std::unique_ptr<ActivationCache> cache_;
  std::unique_ptr<LayerStep> step_;
  std::deque<std::vector<float>> bufs_;
};

TEST_F(LayerGrad, MseGradientMatchesFiniteDifferences) {
  const int il = 1;
  std::vector<float> x, y;
  layer_io(il, x, y);
  LayerMix base;
  LayerDeltas grads;
  std::mt19937 rng(3);
  layer_mix(il, rng, base, grads);
  auto mods = base;
  auto mse0 = step_->run(il, mods, x.data(), y.data(), 2, 1.0);
  ASSERT_TRUE(mse0.is_ok()) << mse0.status().message();
  // The gradient is not trivially zero, and matches central differences on a few weights
  // (eps trades float32 rounding of the MSE against the curvature of the layer in p).
  const double eps = 2e-3;
  int checked = 0;
  for (int k : {0, 3, 4, 6}) {
    for (size_t b = 0; b < base[size_t(k)].p.size(); b += 2) {
      const double fd = central_difference(base, k, b, eps, [&](LayerMix& m) {
        auto r = step_->run(il, m, x.data(), y.data(), 2, 1.0);
        EXPECT_TRUE(r.is_ok());
        return r.is_ok() ? *r : 0.0;
      });
      const double g = grads[size_t(k)][b];
      EXPECT_NEAR(g, fd, 3e-3 * std::fabs(fd) + 1e-9) << kinds[k] << " candidate " << b;
      EXPECT_GT(std::fabs(g), 0.0);
      ++checked;
    }
  }
  EXPECT_GE(checked, 6);
}

// Sub-layer forcing with cached candidate outputs (--forcing sublayer). With the attention's
// modules at the teacher's weights (no candidates), the student's mid-layer residual is the
// teacher's, so the sublayer loss is the layer MSE that run() computes from mixed weights,
// and the gradients of gate/up (from cached outputs: <dL/dY, Y_b>) and of down (<dL/dW, W_b>)
// must be run()'s. A visit's row slice is a visit of those rows alone.
TEST_F(LayerGrad, VisitWithTeacherAttentionEqualsTheLayerMse) {
  const int il = 1;
  std::vector<float> x, y;
  layer_io(il, x, y);
  LayerMix base;
  LayerDeltas g_run, g_visit;
  std::mt19937 rng(7);
  layer_mix(il, rng, base, g_run);
  for (int k = 0; k < 4; ++k) base[size_t(k)] = ModuleMix{};
  auto a = base, b = base;
  for (int k = 4; k < 7; ++k) b[size_t(k)].grad = &g_visit[size_t(k)];
  auto m_run = step_->run(il, a, x.data(), y.data(), 2, 1.0);
  ASSERT_TRUE(m_run.is_ok()) << m_run.status().message();
  ASSERT_TRUE(step_->begin_visit(il, b, x.data(), y.data(), 2).is_ok());
  auto m_visit = step_->visit_step(il, b, 0, 2, 1.0);
  ASSERT_TRUE(m_visit.is_ok()) << m_visit.status().message();
  EXPECT_NEAR(*m_visit, *m_run, 1e-4 * *m_run);
  EXPECT_GT(*m_run, 0.0);
  for (int k = 4; k < 7; ++k)
    for (size_t j = 0; j < g_run[size_t(k)].size(); ++j)
      EXPECT_NEAR(g_visit[size_t(k)][j], g_run[size_t(k)][j], 1e-3 * std::fabs(g_run[size_t(k)][j]) + 1e-9)
          << kinds[k] << " candidate " << j;
  // Rows [1, 2) of a two-sequence visit are a visit of sequence 1 alone.
  auto r1 = step_->visit_step(il, b, 1, 1, 1.0, /*backward=*/false);
  step_->end_visits();
  EXPECT_FALSE(step_->visit_step(il, b, 1, 1, 1.0, false).is_ok());  // no visit any more
  const size_t half = x.size() / 2;
  ASSERT_TRUE(step_->begin_visit(il, b, x.data() + half, y.data() + half, 1).is_ok());
  auto r2 = step_->visit_step(il, b, 0, 1, 1.0, /*backward=*/false);
  ASSERT_TRUE(r1.is_ok() && r2.is_ok());
  EXPECT_NEAR(*r1, *r2, 1e-5 * *r2);
  EXPECT_FALSE(step_->visit_step(il, b, 0, 2, 1.0, false).is_ok());  // rows outside the visit
  step_->end_visits();
}

// Every module mixed: the sublayer loss's gradient (cached kinds and weight kinds alike)
// matches central differences of the same loss.
TEST_F(LayerGrad, VisitGradientMatchesFiniteDifferences) {
  const int il = 1;
  std::vector<float> x, y;
  layer_io(il, x, y);
  LayerMix base;
  LayerDeltas grads;
  std::mt19937 rng(11);
  layer_mix(il, rng, base, grads);
  ASSERT_TRUE(step_->begin_visit(il, base, x.data(), y.data(), 2).is_ok());
  for (TokenWeights tw : {TokenWeights::kNone, TokenWeights::kRel, TokenWeights::kClip}) {  // --layer-loss
    step_->set_token_weights(tw);
    for (auto& g : grads) std::fill(g.begin(), g.end(), 0.0);
    auto mods = base;
    auto mse0 = step_->visit_step(il, mods, 0, 2, 1.0);
    ASSERT_TRUE(mse0.is_ok()) << mse0.status().message();
    const double eps = 2e-3;
    int checked = 0;
    for (int k : {0, 2, 3, 4, 5, 6}) {
      const size_t b = 0;
      const double fd = central_difference(base, k, b, eps, [&](LayerMix& m) {
        auto r = step_->visit_step(il, m, 0, 2, 1.0, false);
        EXPECT_TRUE(r.is_ok());
        return r.is_ok() ? *r : 0.0;
      });
      const double g = grads[size_t(k)][b];
      EXPECT_NEAR(g, fd, 5e-3 * std::fabs(fd) + 1e-9) << kinds[k] << " token weights " << int(tw);
      EXPECT_GT(std::fabs(g), 0.0);
      ++checked;
    }
    EXPECT_EQ(checked, 6);
  }
  step_->end_visits();
}

// --layer-loss rel and clip: the loss computed here by hand from the layer's output (forward)
// and a target with one outlier token (the teacher's, one token scaled 100x, as Qwen's first):
// rel divides each token's squared error by the target's mean square there; clip keeps plain
// MSE but brings a token above 10x the median token's mean square to that scale. run() and a
// visit (attention at the teacher's weights, so only the FFN term is non-zero) both give them.
TEST_F(LayerGrad, TokenWeightedLossesMatchTheirDefinitions) {
  const int il = 1;
  const size_t E = 64, N = 2 * 32;
  std::vector<float> x, y, out(N * E);
  layer_io(il, x, y);
  for (size_t e = 0; e < E; ++e) y[5 * E + e] *= 100;  // token 5: 1e4 times its mean square
  LayerMix base;
  LayerDeltas grads;
  std::mt19937 rng(17);
  layer_mix(il, rng, base, grads);
  for (int k = 0; k < 4; ++k) base[size_t(k)] = ModuleMix{};
  auto a = base;
  ASSERT_TRUE(step_->forward(il, a, x.data(), out.data(), 2).is_ok());
  std::vector<double> ms(N), se(N);
  for (size_t t = 0; t < N; ++t)
    for (size_t e = 0; e < E; ++e) {
      const double yv = y[t * E + e], d = double(out[t * E + e]) - yv;
      ms[t] += yv * yv / double(E);
      se[t] += d * d;
    }
  auto sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double cap = 10 * sorted[(N - 1) / 2];  // torch's median: the lower middle
  double plain = 0, rel = 0, clip = 0;
  int clipped = 0;
  for (size_t t = 0; t < N; ++t) {
    plain += se[t];
    rel += se[t] / (ms[t] + 1e-12);
    clip += se[t] * std::min(1.0, cap / (ms[t] + 1e-12));
    clipped += ms[t] > cap;
  }
  EXPECT_EQ(clipped, 1);
  const double n = double(N * E);
  for (auto [tw, want] : {std::pair{TokenWeights::kNone, plain / n}, std::pair{TokenWeights::kRel, rel / n},
                          std::pair{TokenWeights::kClip, clip / n}}) {
    step_->set_token_weights(tw);
    auto r = step_->run(il, a, x.data(), y.data(), 2, 1.0, /*backward=*/false);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_NEAR(*r, want, 1e-4 * want) << int(tw);
    ASSERT_TRUE(step_->begin_visit(il, a, x.data(), y.data(), 2).is_ok());
    auto v = step_->visit_step(il, a, 0, 2, 1.0, /*backward=*/false);
    ASSERT_TRUE(v.is_ok()) << v.status().message();
    EXPECT_NEAR(*v, want, 1e-4 * want) << int(tw);
    step_->end_visits();
  }
  step_->set_token_weights(TokenWeights::kNone);
  EXPECT_GT(plain, 2 * clip);  // the outlier token owned the plain loss
  EXPECT_GT(std::fabs(rel - clip), 0.05 * clip);
}

// The measured loss change (--measure-every) is exact: for every module and candidate, what
// visit_deltas reports equals the sublayer loss with that module alone switched to the
// candidate minus the loss of the assignment as it is (both run by visit_step), for a hard
// (one-hot) assignment and for a mixture.
TEST_F(LayerGrad, MeasuredLossChangeIsTheLossOfTheSwitchedAssignment) {
  const int il = 1;
  std::vector<float> x, y;
  layer_io(il, x, y);
  LayerMix mixed;
  LayerDeltas grads;
  std::mt19937 rng(13);
  layer_mix(il, rng, mixed, grads);
  const LayerMix onehot = gm::testing::one_hot_of(mixed, 7);
  ASSERT_TRUE(step_->begin_visit(il, mixed, x.data(), y.data(), 2).is_ok());
  int nonzero = 0;
  for (TokenWeights tw : {TokenWeights::kNone, TokenWeights::kRel, TokenWeights::kClip}) {  // --layer-loss
    step_->set_token_weights(tw);
    for (const LayerMix* base : {&onehot, static_cast<const LayerMix*>(&mixed)})
      nonzero += gm::testing::expect_deltas_are_switched_losses(*step_, il, *base, base == &onehot, 7, kinds);
  }
  EXPECT_GT(nonzero, 60);
  step_->set_token_weights(TokenWeights::kNone);
  LayerDeltas d;
  EXPECT_FALSE(step_->visit_deltas(il, mixed, 1, 2, d).is_ok());  // rows outside the visit
  step_->end_visits();
  EXPECT_FALSE(step_->visit_deltas(il, mixed, 0, 1, d).is_ok());  // no visit
}

// The CE ablation's chain: forward through every layer, the KL of the final distribution
// against the teacher's, backward layer by layer (recomputed). Its gradient with respect to
// mixing weights in the first and the last layer matches central differences of the KL.
TEST_F(LayerGrad, ChainedKlGradientMatchesFiniteDifferences) {
  const int L = man_.n_layer;
  const size_t n = size_t(2) * 32 * 64;
  std::vector<std::vector<float>> xs(size_t(L) + 1, std::vector<float>(n));
  std::vector<float> y(n), g(n), g2(n);
  ASSERT_TRUE(cache_->read(0, {0, 1}, xs[0].data()).is_ok());
  ASSERT_TRUE(cache_->read(L, {0, 1}, y.data()).is_ok());
  std::vector<LayerMix> base(static_cast<size_t>(L));
  std::vector<LayerDeltas> grads(static_cast<size_t>(L));
  std::mt19937 rng(5);
  for (int l = 0; l < L; ++l) layer_mix(l, rng, base[size_t(l)], grads[size_t(l)]);
  auto kl_of = [&](std::vector<LayerMix>& mix) -> double {
    for (int l = 0; l < L; ++l)
      EXPECT_TRUE(step_->forward(l, mix[size_t(l)], xs[size_t(l)].data(), xs[size_t(l) + 1].data(), 2).is_ok());
    auto kl = step_->head_kl(xs[size_t(L)].data(), y.data(), g.data(), 2, 1.0);
    EXPECT_TRUE(kl.is_ok());
    return kl.is_ok() ? *kl : 0;
  };
  auto mix = base;
  const double kl0 = kl_of(mix);
  EXPECT_GT(kl0, 0.0);
  for (int l = L - 1; l >= 0; --l) {
    ASSERT_TRUE(step_->backward(l, mix[size_t(l)], xs[size_t(l)].data(), g.data(), l > 0 ? g2.data() : nullptr, 2).is_ok());
    std::swap(g, g2);
  }
  const double eps = 2e-3;
  int checked = 0;
  for (int l : {0, L - 1})
    for (int k : {0, 4, 6}) {
      const size_t b = 0;
      std::vector<LayerDeltas> scratch(static_cast<size_t>(L));
      auto plus = base, minus = base;
      for (int j = 0; j < L; ++j)
        for (int kk = 0; kk < 7; ++kk) plus[size_t(j)][size_t(kk)].grad = minus[size_t(j)][size_t(kk)].grad = &scratch[size_t(j)][size_t(kk)];
      plus[size_t(l)][size_t(k)].p[b] += eps;
      minus[size_t(l)][size_t(k)].p[b] -= eps;
      const double fd = (kl_of(plus) - kl_of(minus)) / (2 * eps), gr = grads[size_t(l)][size_t(k)][b];
      EXPECT_NEAR(gr, fd, 2e-2 * std::fabs(fd) + 1e-7) << "layer " << l << " " << kinds[k];
      EXPECT_GT(std::fabs(gr), 0.0);
      ++checked;
    }
  EXPECT_EQ(checked, 6);
}

// The CE objective end to end through the CLI: all layers chained, the budget still reached.
TEST(Learn, CeObjectiveReachesTheBudget) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string out = dir / "ce.json";
  auto r = gm::testing::gamma(learn_args(dir, pool, out) + " --bpw 9.0 --steps 30 --lr 0.02 --objective ce");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json s = load(out);
  EXPECT_EQ(s["hyperparameters"]["objective"], "ce");
  EXPECT_NEAR(s["final"]["bpw_expected"].get<double>(), 9.0, 0.05);
  double late = 0;
  for (size_t i = 20; i < 30; ++i) late += s["curve"][i]["mse"].get<double>() / 10;
  EXPECT_LT(late, s["final"]["mse_ref"].get<double>());
  auto bad = gm::testing::gamma(learn_args(dir, pool, dir / "x.json") + " --objective ce --layers-per-step 2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--layers-per-step must be 0"), std::string::npos) << bad.output;
}

TEST(Learn, KillAndRerunEndsIdentical) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string a = dir / "a.json", b = dir / "b.json";
  const std::string flags = " --bpw 9.0 --steps 12 --checkpoint-every 4 --layers-per-step 3 --seed 5";
  auto ra = gm::testing::gamma(learn_args(dir, pool, a) + flags);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  // SIGKILL in the middle of step 9 (after the first layer): the checkpoint says 8 steps.
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=9 " + gm::testing::gamma_cli() + " " + learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rk.exit_code, 128 + 9) << rk.output;
  ASSERT_FALSE(fs::exists(b));
  ASSERT_TRUE(fs::exists(b + ".ckpt"));
  auto ck = read_json(b + ".ckpt", "gamma.learn.checkpoint", 1);
  ASSERT_TRUE(ck.is_ok());
  EXPECT_EQ((*ck)["step"].get<int>(), 8);
  auto rb = gm::testing::gamma(learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(rb.output.find("resumed at step 8"), std::string::npos) << rb.output;
  json ja = load(a), jb = load(b);
  EXPECT_EQ(ja["modules"], jb["modules"]);  // bit-identical p and logits
  EXPECT_EQ(ja["final"], jb["final"]);
  ASSERT_EQ(ja["curve"].size(), jb["curve"].size());
  for (size_t i = 0; i < ja["curve"].size(); ++i) {
    ja["curve"][i].erase("seconds");
    jb["curve"][i].erase("seconds");
  }
  EXPECT_EQ(ja["curve"], jb["curve"]);
  EXPECT_FALSE(fs::exists(b + ".ckpt"));

  // A checkpoint of other settings is not used.
  auto rk2 = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=5 " + gm::testing::gamma_cli() + " " + learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rk2.exit_code, 128 + 9);
  auto rc = gm::testing::gamma(learn_args(dir, pool, b) + " --bpw 9.0 --steps 6 --checkpoint-every 4 --layers-per-step 3 --seed 6");
  ASSERT_EQ(rc.exit_code, 0) << rc.output;
  EXPECT_NE(rc.output.find("other settings"), std::string::npos) << rc.output;
}

// Visits (--visit-steps, --forcing sublayer): the budget is reached, the settings are
// recorded, and a kill in the middle of a visit resumes bit-identically (a visit's state is
// a function of the seed and the visit, rebuilt on resume).
TEST(Learn, SublayerVisitsReachTheBudgetAndResumeIdentically) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string a = dir / "a.json", b = dir / "b.json";
  const std::string flags =
      " --bpw 9.0 --steps 13 --checkpoint-every 2 --layers-per-step 1 --visit-steps 4 --forcing sublayer --estimator st --seed 3";
  auto ra = gm::testing::gamma(learn_args(dir, pool, a) + flags);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  json ja = load(a);
  EXPECT_EQ(ja["hyperparameters"]["forcing"], "sublayer");
  EXPECT_EQ(ja["hyperparameters"]["visit_steps"], 4);
  EXPECT_EQ(ja["hyperparameters"]["visit_seqs"], 2);  // --seqs
  EXPECT_GT(ja["stats"]["time_split"]["visit_setup"].get<double>(), 0.0);
  // SIGKILL at step 7 (the second step of the visit of steps 5..8): resumes at 6.
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=7 " + gm::testing::gamma_cli() + " " + learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rk.exit_code, 128 + 9) << rk.output;
  auto rb = gm::testing::gamma(learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(rb.output.find("resumed at step 6"), std::string::npos) << rb.output;
  json jb = load(b);
  EXPECT_EQ(ja["modules"], jb["modules"]);
  EXPECT_EQ(ja["final"], jb["final"]);

  const std::string c = dir / "c.json";
  auto rc = gm::testing::gamma(learn_args(dir, pool, c) + " --bpw 9.0 --steps 60 --layers-per-step 2 --visit-steps 6 --forcing sublayer");
  ASSERT_EQ(rc.exit_code, 0) << rc.output;
  EXPECT_NEAR(load(c)["final"]["bpw_expected"].get<double>(), 9.0, 0.05);

  for (const std::string& bad : {std::string(" --visit-steps 0"), std::string(" --visit-seqs 3"), std::string(" --forcing half"),
                                 std::string(" --objective ce --forcing sublayer")}) {
    auto r = gm::testing::gamma(learn_args(dir, pool, dir / "x.json") + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(dir / "x.json"));
  }
}

// Layer-sharded Stage I (--world-size, Gloo through LibTorch's c10d): two local ranks give
// the scores of one process bit for bit (with layer sampling over a FileStore, with sublayer
// visits over a TCPStore); a
// rank killed mid-run ends the other with one line at once, and both resume from rank 0's
// checkpoint to the same scores; bad settings are one-line errors.
// --measure-every: the scores carry each candidate's mean measured loss change (every module
// measured, counts as the schedule says), a kill and rerun ends with the same ones, 2 ranks
// write what one process writes, and `gamma solve --transform delta` solves on them: the
// plan's summed loss change is the least the budget allows (no single swap of one module's
// candidate for a cheaper-or-equal one lowers it).
TEST(Learn, MeasuredLossChangesAreScoresThatSolve) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string flags = " --bpw 9.0 --steps 13 --layers-per-step 2 --visit-steps 4 --forcing sublayer --estimator st"
                            " --measure-every 2 --checkpoint-every 4 --seed 4";
  const std::string a = dir / "a.json", k = dir / "k.json";
  auto ra = gm::testing::gamma(learn_args(dir, pool, a) + flags);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  json ja = load(a);
  EXPECT_EQ(ja["hyperparameters"]["measure_every"], 2);
  int64_t measured = 0;
  for (const auto& [name, m] : ja["modules"].items()) {
    ASSERT_TRUE(m.contains("delta")) << name;
    EXPECT_EQ(m["delta"].size(), m["score"].size()) << name;
    measured += m["delta_n"].get<int64_t>();
    double spread = 0;
    for (const auto& [c, v] : m["delta"].items()) spread = std::max(spread, std::fabs(v.get<double>()));
    if (m["delta"].size() > 1) EXPECT_GT(spread, 0.0) << name;  // ffn_down (172 wide): F16 only
  }
  // Steps 0 (all 5 layers), 2, 4, ..., 12 (2 layers each): (5 + 6 x 2) layers x 7 modules.
  EXPECT_EQ(measured, (5 + 6 * 2) * 7);
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=10 " + gm::testing::gamma_cli() + " " + learn_args(dir, pool, k) + flags);
  EXPECT_NE(rk.exit_code, 0);
  auto rr = gm::testing::gamma(learn_args(dir, pool, k) + flags);
  ASSERT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_NE(rr.output.find("resumed at step 8"), std::string::npos) << rr.output;
  EXPECT_EQ(ja["modules"], load(k)["modules"]);
  // --layer-loss rel: the same run on the per-token relative loss, recorded, and other deltas.
  const std::string rl = dir / "rel.json";
  auto rrel = gm::testing::gamma(learn_args(dir, pool, rl) + flags + " --layer-loss rel");
  ASSERT_EQ(rrel.exit_code, 0) << rrel.output;
  rrel = gm::testing::gamma(learn_args(dir, pool, dir / "clip.json") + flags + " --layer-loss clip");
  ASSERT_EQ(rrel.exit_code, 0) << rrel.output;
  json jr = load(rl);
  EXPECT_EQ(jr["hyperparameters"]["layer_loss"], "rel");
  EXPECT_FALSE(ja["hyperparameters"].contains("layer_loss"));
  EXPECT_NE(jr["modules"], ja["modules"]);

  const std::string plan = dir / "plan.json";
  auto rs = gm::testing::gamma("solve --scores " + a + " --pool " + pool + " --transform delta --bpw 8.0 -o " + plan);
  ASSERT_EQ(rs.exit_code, 0) << rs.output;
  auto pj = read_json(plan, "gamma.plan", 1);
  ASSERT_TRUE(pj.is_ok()) << pj.status().message();
  auto man = Manifest::load(pool).value();
  for (const auto& e : man.modules) {
    const std::string id = (*pj)["modules"][e.name];
    const double d = ja["modules"][e.name]["delta"][id].get<double>();
    for (const auto& c : e.candidates)
      if (c.bytes <= e.find(id)->bytes) EXPECT_GE(ja["modules"][e.name]["delta"][c.id].get<double>(), d - 1e-12) << e.name << " " << c.id;
  }
  // Scores without measurements are refused for --transform delta, in one line.
  const std::string b = dir / "b.json";
  ASSERT_EQ(gm::testing::gamma(learn_args(dir, pool, b) + " --bpw 9.0 --steps 2").exit_code, 0);
  auto rn = gm::testing::gamma("solve --scores " + b + " --pool " + pool + " --transform delta --bpw 8.0 -o " + dir / "p2.json");
  EXPECT_EQ(rn.exit_code, 1);
  EXPECT_NE(rn.output.find("--transform delta needs measured loss changes"), std::string::npos) << rn.output;
  EXPECT_EQ(std::count(rn.output.begin(), rn.output.end(), '\n'), 1) << rn.output;
  EXPECT_FALSE(fs::exists(dir / "p2.json"));
  auto rb = gm::testing::gamma(learn_args(dir, pool, b) + " --bpw 9.0 --steps 2 --measure-every 2");
  EXPECT_EQ(rb.exit_code, 1);
  EXPECT_NE(rb.output.find("needs --forcing sublayer"), std::string::npos) << rb.output;
}

TEST(Learn, TwoRanksEqualOneProcessAndSurviveAKilledRank) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  int job = 0;
  auto both = [&](const std::string& out, const std::string& flags, const std::string& env1 = "", bool tcp = false) {
    const std::string rdv = " --world-size 2 --rendezvous " +
                            (tcp ? "tcp://127.0.0.1:" + std::to_string(20000 + ::getpid() % 20000)
                                 : "file://" + (dir / ("rdv-" + std::to_string(++job))));
    const std::string cmd = learn_args(dir, pool, out) + flags + rdv;
    return gm::testing::run("(" + env1 + " " + gm::testing::gamma_cli() + " " + cmd + " --rank 1 > " + dir / "r1.log" +
                            " 2>&1; echo rank1=$? >> " + dir / "r1.log" + ") & " + gm::testing::gamma_cli() + " " + cmd +
                            " --rank 0 2>&1; rc=$?; wait; cat " + dir / "r1.log" + "; exit $rc");
  };
  for (const std::string flags : {std::string(" --bpw 9.0 --steps 12 --layers-per-step 3 --seed 5"),
                                  std::string(" --bpw 9.0 --steps 9 --layers-per-step 2 --visit-steps 4 --forcing sublayer --estimator st --measure-every 3")}) {
    const std::string a = dir / "one.json", b = dir / "two.json";
    auto ra = gm::testing::gamma(learn_args(dir, pool, a) + flags);
    ASSERT_EQ(ra.exit_code, 0) << ra.output;
    auto rb = both(b, flags, "", /*tcp=*/flags.find("sublayer") != std::string::npos);
    ASSERT_EQ(rb.exit_code, 0) << rb.output;
    EXPECT_NE(rb.output.find("rank 1 of 2 done"), std::string::npos) << rb.output;
    json ja = load(a), jb = load(b);
    EXPECT_EQ(ja["modules"], jb["modules"]) << flags;
    EXPECT_EQ(ja["final"], jb["final"]) << flags;
    EXPECT_EQ(jb["stats"]["world_size"], 2);
    fs::remove(a);
    fs::remove(b);
  }
  // Rank 1 killed in step 9: rank 0 fails at that step's all-reduce (one line, no scores),
  // and the rerun of both resumes from rank 0's checkpoint of step 8 to the same scores.
  const std::string flags = " --bpw 9.0 --steps 12 --checkpoint-every 4 --layers-per-step 3 --seed 5";
  const std::string a = dir / "one.json", k = dir / "k.json";
  ASSERT_EQ(gm::testing::gamma(learn_args(dir, pool, a) + flags).exit_code, 0);
  auto rk = both(k, flags + " --dist-timeout 60", "GAMMA_TEST_KILL_AT_STEP=9");
  EXPECT_EQ(rk.exit_code, 1) << rk.output;
  EXPECT_NE(rk.output.find("rank1=137"), std::string::npos) << rk.output;
  EXPECT_NE(rk.output.find("gamma: error: rank 0: all-reduce failed"), std::string::npos) << rk.output;
  EXPECT_FALSE(fs::exists(k));
  auto rr = both(k, flags);
  ASSERT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_NE(rr.output.find("resumed at step 8"), std::string::npos) << rr.output;
  EXPECT_EQ(load(a)["modules"], load(k)["modules"]);

  // A rank with other settings is refused; a missing peer times out; bad flags.
  auto rs = gm::testing::run("(" + gm::testing::gamma_cli() + " " + learn_args(dir, pool, dir / "s.json") +
                             " --bpw 8.0 --world-size 2 --rank 1 --rendezvous file://" + dir / "rdv-s" + " > /dev/null 2>&1 &) ; " +
                             gm::testing::gamma_cli() + " " + learn_args(dir, pool, dir / "s.json") +
                             " --bpw 9.0 --world-size 2 --rank 0 --rendezvous file://" + dir / "rdv-s" + "; rc=$?; wait; exit $rc");
  EXPECT_EQ(rs.exit_code, 1) << rs.output;
  auto rt = gm::testing::gamma(learn_args(dir, pool, dir / "t.json") + " --bpw 9.0 --world-size 2 --rank 0 --dist-timeout 2 --rendezvous file://" + dir / "rdv-t");
  EXPECT_EQ(rt.exit_code, 1);
  EXPECT_NE(rt.output.find("failed within 2 s"), std::string::npos) << rt.output;
  EXPECT_EQ(std::count(rt.output.begin(), rt.output.end(), '\n'), 1) << rt.output;
  for (const std::string& bad : {std::string(" --world-size 2 --rank 2 --rendezvous file://x"), std::string(" --world-size 2"),
                                 std::string(" --world-size 2 --rank 0 --rendezvous http://x"),
                                 std::string(" --world-size 2 --rank 0 --rendezvous tcp://localhost"),
                                 std::string(" --world-size 9 --rank 0 --rendezvous file://x"),
                                 std::string(" --world-size 2 --objective ce --rendezvous file://x")}) {
    auto r = gm::testing::gamma(learn_args(dir, pool, dir / "x.json") + " --bpw 9.0" + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << bad << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "x.json"));
}

// The same equality on a real model (issue 23: stories260K and SmolLM2 in CI): 2 ranks of
// learn (layer sampling, and sublayer visits with hard samples) and of hawq write the scores
// one process writes, on SmolLM2-135M's 30 layers (15 per rank).
TEST(Learn, TwoRanksEqualOneProcessOnSmolLM2) {
  const std::string model = gm::testing::smollm2();
  if (model.empty()) GTEST_SKIP() << "SmolLM2 not fetched (gamma fetch smollm2-135m)";
  TempDir dir;
  const std::string teacher = dir / "teacher.gguf", pool = dir / "pool";
  ASSERT_EQ(gm::testing::gamma("dequantize " + model + " -o " + teacher).exit_code, 0);
  auto rp = gm::testing::gamma("pool " + model + " --types Q4_0,Q8_0 -t 2 -q -o " + pool);
  ASSERT_EQ(rp.exit_code, 0) << rp.output;
  const std::string common = pool + " --teacher " + teacher + " --seq-len 64 --calib-tokens 256 --seqs 2 -t 1 -q --cache-dir " +
                             dir / "act";
  int job = 0;
  auto both = [&](const std::string& args) {
    const std::string cmd = " " + args + " --world-size 2 --rendezvous file://" + dir / ("rdv-" + std::to_string(++job));
    return gm::testing::run("(" + gm::testing::gamma_cli() + cmd + " --rank 1 > " + dir / "r1.log" + " 2>&1; echo rank1=$? >> " +
                            dir / "r1.log" + ") & " + gm::testing::gamma_cli() + cmd + " --rank 0 2>&1; rc=$?; wait; cat " +
                            dir / "r1.log" + "; exit $rc");
  };
  for (const std::string what :
       {std::string("learn " + common + " --bpw 6.0 --steps 3 --layers-per-step 4 --seed 5"),
        std::string("learn " + common + " --bpw 6.0 --steps 4 --layers-per-step 2 --visit-steps 2 --forcing sublayer --estimator st"),
        std::string("hawq " + common + " --samples 2 --seed 3")}) {
    const std::string a = dir / "one.json", b = dir / "two.json";
    auto ra = gm::testing::gamma(what + " -o " + a);
    ASSERT_EQ(ra.exit_code, 0) << what << ra.output;
    auto rb = both(what + " -o " + b);
    ASSERT_EQ(rb.exit_code, 0) << what << rb.output;
    json ja = load(a), jb = load(b);
    EXPECT_EQ(jb["stats"]["world_size"], 2) << what;
    EXPECT_EQ(ja["modules"].size(), 30u * 7u) << what;
    EXPECT_EQ(ja["modules"], jb["modules"]) << what;
    fs::remove(a);
    fs::remove(b);
  }
}

// The activation cache of a sharded job: ranks that share rank 0's cache directory build it
// once between them (one forward pass over the calibration text); ranks on separate disks
// each build only the boundaries of their layers. Either way the scores equal one process's.
TEST(Learn, RanksBuildTheActivationCacheOncePerDiskAndOnlyTheirPart) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string flags = " --bpw 9.0 --steps 6 --layers-per-step 2 --seed 2";
  const std::string a = dir / "one.json";
  ASSERT_EQ(gm::testing::gamma(learn_args(dir, pool, a) + flags).exit_code, 0);
  int job = 0;
  auto ranks = [&](const std::string& out, const std::string& disk0, const std::string& disk1, const std::string& env1 = "",
                   const std::string& more = "") {
    auto cmd = [&](int rank, const std::string& disk) {
      std::string args = learn_args(dir, pool, out) + flags + more;
      args.replace(args.find(" -q "), 4, " ");  // the builder's progress line shows who built
      args.replace(args.find(" --cache-dir "), std::string(" --cache-dir " + dir / "act").size(), " --cache-dir " + disk);
      return "GAMMA_PROGRESS=1 " + gm::testing::gamma_cli() + " " + args + " --world-size 2 --rank " + std::to_string(rank) +
             " --rendezvous file://" + dir / ("rdv-" + std::to_string(job));
    };
    ++job;
    return gm::testing::run("(" + env1 + " " + cmd(1, disk1) + " > " + dir / "r1.log" + " 2>&1; echo rank1=$? >> " +
                            dir / "r1.log" + ") & " + cmd(0, disk0) + " 2>&1; rc=$?; wait; cat " + dir / "r1.log" + "; exit $rc");
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
  };
  auto boundaries = [](const std::string& root) {
    std::vector<int> bs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory())
        for (int b = 0; b <= 5; ++b)
          if (fs::exists(e.path() / ("h" + std::to_string(b) + ".bin"))) bs.push_back(b);
    return bs;
  };
  const std::string built = "teacher activations [" + std::string(24, '#') + "]";  // a finished build
  const std::string shared = dir / "shared", d0 = dir / "disk0", d1 = dir / "disk1";
  auto rs = ranks(dir / "s.json", shared, shared);
  ASSERT_EQ(rs.exit_code, 0) << rs.output;
  EXPECT_EQ(count(rs.output, built), 1u) << rs.output;
  EXPECT_EQ(boundaries(shared), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  auto rd = ranks(dir / "d.json", d0, d1);
  ASSERT_EQ(rd.exit_code, 0) << rd.output;
  EXPECT_EQ(count(rd.output, built), 2u) << rd.output;
  EXPECT_EQ(boundaries(d0), (std::vector<int>{0, 1, 2}));  // rank 0: layers 0-1
  EXPECT_EQ(boundaries(d1), (std::vector<int>{2, 3, 4, 5}));  // rank 1: layers 2-4
  EXPECT_EQ(load(a)["modules"], load(dir / "s.json")["modules"]);
  EXPECT_EQ(load(a)["modules"], load(dir / "d.json")["modules"]);

  // Rank 1 dies building its part: rank 0 stops after --dist-timeout without progress, with
  // one line naming rank 1; the rerun resumes rank 1's partial build and learns the same scores.
  const std::string k0 = dir / "k0", k1 = dir / "k1", k = dir / "k.json";
  auto rk = ranks(k, k0, k1, "GAMMA_TEST_KILL_AT_SEQUENCE=3", " --dist-timeout 3");
  EXPECT_EQ(rk.exit_code, 1) << rk.output;
  EXPECT_NE(rk.output.find("rank1=137"), std::string::npos) << rk.output;
  EXPECT_NE(rk.output.find("gamma: error: rank 0: no progress from rank 1 in"), std::string::npos) << rk.output;
  EXPECT_FALSE(fs::exists(k));
  bool partial = false;
  for (const auto& e : fs::directory_iterator(k1)) partial = partial || e.path().extension() == ".partial";
  EXPECT_TRUE(partial) << "rank 1's interrupted build is kept for the rerun";
  auto rr = ranks(k, k0, k1);
  ASSERT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_EQ(boundaries(k1), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(load(a)["modules"], load(k)["modules"]);
}

// The checkpoint as a typed format: what a killed run wrote reads back whole and writes the
// same JSON; a damaged field is kCorrupt, and the CLI refuses to resume from it in one line.
TEST(Learn, CheckpointRoundTripsAndADamagedOneIsRefused) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string b = dir / "b.json";
  const std::string flags = " --bpw 9.0 --steps 12 --checkpoint-every 4 --layers-per-step 3 --seed 5";
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=9 " + gm::testing::gamma_cli() + " " + learn_args(dir, pool, b) + flags);
  ASSERT_EQ(rk.exit_code, 128 + 9) << rk.output;
  auto j = read_json(b + ".ckpt", gm::Checkpoint::kSchema, gm::Checkpoint::kVersion);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  auto ck = gm::Checkpoint::from_json(*j, "ckpt");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->step, 8);
  EXPECT_FALSE(ck->modules.empty());
  EXPECT_EQ(ck->to_json(), *j);

  json bad = *j;
  bad["modules"][0]["m"] = json::array({1.0});
  auto r = gm::Checkpoint::from_json(bad, "ckpt");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), gm::Status::Code::kCorrupt);
  bad = *j;
  bad["lambda1"] = "x";
  ASSERT_FALSE(gm::Checkpoint::from_json(bad, "ckpt").is_ok());
  ASSERT_TRUE(write_json(b + ".ckpt", bad).is_ok());
  auto rb = gm::testing::gamma(learn_args(dir, pool, b) + flags);
  EXPECT_EQ(rb.exit_code, 1);
  EXPECT_NE(rb.output.find("is damaged"), std::string::npos) << rb.output;
  EXPECT_FALSE(fs::exists(b));
}

// --converge: a visit ends once every module's mean deltas have a standard error below the
// tolerance (relative to its largest |mean|), from its 3rd measurement on: fewer steps run, each early end recorded
// with the change that ended it; a zero tolerance runs the whole schedule; a kill and rerun ends
// with the same scores; without measurements it is refused in one line.
TEST(Learn, ConvergeEndsVisitsWhenTheDeltasStopMoving) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string flags = " --bpw 9.0 --steps 41 --layers-per-step 1 --visit-steps 8 --forcing sublayer --estimator st"
                            " --measure-every 2 --checkpoint-every 3 --seed 4";
  const std::string full = dir / "full.json", conv = dir / "conv.json", killed = dir / "killed.json";
  ASSERT_EQ(gm::testing::gamma(learn_args(dir, pool, full) + flags).exit_code, 0);
  auto r = gm::testing::gamma(learn_args(dir, pool, conv) + flags + " --converge 0.65");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json jf = load(full), jc = load(conv);
  EXPECT_EQ(jf["final"]["steps_run"], 41);
  EXPECT_FALSE(jf.contains("convergence"));
  EXPECT_DOUBLE_EQ(jc["hyperparameters"]["converge"].get<double>(), 0.65);
  ASSERT_GT(jc["convergence"].size(), 0u) << jc.dump();
  int skipped = 0;
  for (const auto& c : jc["convergence"]) {
    EXPECT_GE(c["measurements"].get<int>(), 3) << c.dump();
    EXPECT_LT(c["change"].get<double>(), 0.65) << c.dump();
    skipped += c["skipped_steps"].get<int>();
  }
  EXPECT_EQ(jc["final"]["steps_run"].get<int>() + skipped, 41);
  EXPECT_EQ(jc["final"]["steps"], 41);
  for (const auto& [name, m] : jc["modules"].items()) EXPECT_GE(m["delta_n"].get<int>(), 3) << name;
  // Resumed from a checkpoint taken after a visit ended early: the same scores.
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_STEP=20 " + gm::testing::gamma_cli() + " " +
                             learn_args(dir, pool, killed) + flags + " --converge 0.65");
  EXPECT_NE(rk.exit_code, 0);
  auto rr = gm::testing::gamma(learn_args(dir, pool, killed) + flags + " --converge 0.65");
  ASSERT_EQ(rr.exit_code, 0) << rr.output;
  EXPECT_EQ(load(killed)["modules"], jc["modules"]);
  EXPECT_EQ(load(killed)["convergence"], jc["convergence"]);
  auto rb = gm::testing::gamma(learn_args(dir, pool, dir / "b.json") + " --bpw 9.0 --steps 2 --converge 0.1");
  EXPECT_EQ(rb.exit_code, 1);
  EXPECT_NE(rb.output.find("--converge ends a visit when its measured deltas stop moving"), std::string::npos) << rb.output;
  EXPECT_FALSE(fs::exists(dir / "b.json"));
}

TEST(Learn, BadInputsFailWithOneLineAndWriteNothing) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string out = dir / "out.json";
  std::ofstream(dir / "junk.gguf") << "junk";
  const std::string good = learn_args(dir, pool, out);
  const std::vector<Case> cases = {
      {learn_args(dir, dir / "nopool", out) + " --bpw 9", "manifest.json"},
      {"learn " + pool + " --teacher " + dir / "junk.gguf" + " -o " + out + " --bpw 9", "junk.gguf"},
      {good + " --bpw 3.0", "outside what the pool can reach"},
      {learn_args(dir, pool, out, 100) + " --bpw 9", "calibration sequences"},
      {good + " --bpw 9 --steps -1", "--steps"},
      {good + " --bpw 9 --layers-per-step 9", "exceeds"},
      {good + " --bpw 9 --optimizer rmsprop", "adam or sgd"},
      {good + " --bpw 9 --layer-loss l1", "--layer-loss must be mse, rel or clip"},
      {good + " --bpw 9 --objective ce --layer-loss rel", "--objective ce has none"},
      {good + " --bpw 9 --calib " + gm::testing::shared_data("text/wiki.test.raw"), "evaluation text"},
      {learn_args(dir, pool, dir / "no/such/dir/out.json") + " --bpw 9", "does not exist"},
  };
  expect_clean_failures(cases, out);
}

TEST(Hawq, TracesArePositiveStableAndScoresFollowThePerturbation) {
  // Tr(H) of a layer MSE at the FP weights is a Gauss-Newton trace: positive. Two seeds of 48
  // probes agree; the score of a candidate falls with its squared error; Stage II reads it.
  TempDir dir;
  const std::string pool = make_pool(dir);
  auto hawq = [&](int seed) {
    const std::string out = dir / ("hawq" + std::to_string(seed) + ".json");
    auto r = gm::testing::gamma("hawq " + pool + " --teacher " + gm::testing::stories260k() + " -o " + out +
                                " --seq-len 64 --calib-tokens 512 --seqs 4 --samples 48 -t 2 -q --seed " +
                                std::to_string(seed) + " --cache-dir " + dir / "act");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return load(out);
  };
  const json a = hawq(1), b = hawq(2);
  ASSERT_EQ(a["method"], "hawq");
  auto man = Manifest::load(pool);
  ASSERT_TRUE(man.is_ok());
  ASSERT_EQ(a["modules"].size(), man->modules.size());
  for (const auto& e : man->modules) {
    const json& ma = a["modules"][e.name];
    const double ta = ma["hessian_trace"].get<double>(), tb = b["modules"][e.name]["hessian_trace"].get<double>();
    EXPECT_GT(ta, 0) << e.name;
    EXPECT_NEAR(ta / tb, 1.0, 0.25) << e.name;
    for (const auto& c1 : e.candidates)
      for (const auto& c2 : e.candidates)
        if (ma["perturbation"][c1.id].get<double>() < ma["perturbation"][c2.id].get<double>())
          EXPECT_GT(ma["score"][c1.id].get<double>(), ma["score"][c2.id].get<double>()) << e.name;
  }
  auto s = gm::testing::gamma("solve --scores " + dir / "hawq1.json" + " --pool " + pool + " --bpw 9 -o " + dir / "plan.json");
  EXPECT_EQ(s.exit_code, 0) << s.output;
}

// gamma run measures HAWQ-V2's traces once, on an estimate of the pool (no candidate files),
// and scores the real pool from them (--traces-from): the real pool's scores are then bit for
// bit those of HAWQ-V2 run on it, and the estimate's (every row sampled) equal them to float
// rounding. Traces of other settings are refused; emit refuses an estimate.
TEST(Hawq, ConvergeEndsAProbeRunOnceTheTracesAreKnown) {
  // A layer's probes are the same sequence with or without --converge (its own seed), so the
  // converged trace is the mean of the full run's first k probes, every module of a layer stops
  // at the same k, and a run stopped before --samples has every module within the tolerance.
  TempDir dir;
  const std::string pool = make_pool(dir);
  auto hawq = [&](const std::string& name, const std::string& extra) {
    const std::string out = dir / name;
    auto r = gm::testing::gamma("hawq " + pool + " --teacher " + gm::testing::stories260k() + " -o " + out +
                                " --seq-len 64 --calib-tokens 512 --seqs 4 --samples 12 -t 2 -q --seed 3 --cache-dir " +
                                dir / "act" + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return load(out);
  };
  const double tol = 0.15;
  const json full = hawq("full.json", ""), conv = hawq("conv.json", fmt::format("--converge {}", tol));
  EXPECT_EQ(conv["hyperparameters"]["converge"].get<double>(), tol);
  auto man = Manifest::load(pool);
  ASSERT_TRUE(man.is_ok());
  std::map<int, size_t> k_of_layer;
  int stopped = 0;
  for (const auto& e : man->modules) {
    const json& f = full["modules"][e.name];
    const json& c = conv["modules"][e.name];
    const auto fp = f["trace_probes"].get<std::vector<double>>(), cp = c["trace_probes"].get<std::vector<double>>();
    ASSERT_EQ(fp.size(), 12u) << e.name;
    double mean = 0;
    for (double x : fp) mean += x / 12;
    EXPECT_NEAR(f["hessian_trace"].get<double>(), mean, 1e-9 * std::fabs(mean)) << e.name;
    ASSERT_GE(cp.size(), 3u) << e.name;
    ASSERT_LE(cp.size(), 12u) << e.name;
    double prefix = 0;
    for (size_t i = 0; i < cp.size(); ++i) {
      EXPECT_DOUBLE_EQ(cp[i], fp[i]) << e.name << " probe " << i;
      prefix += fp[i] / double(cp.size());
    }
    EXPECT_NEAR(c["hessian_trace"].get<double>(), prefix, 1e-9 * std::fabs(prefix)) << e.name;
    auto [it, fresh] = k_of_layer.emplace(e.layer, cp.size());
    EXPECT_EQ(it->second, cp.size()) << e.name << ": every module of a layer stops together";
    if (cp.size() < 12) {
      EXPECT_LE(c["trace_rel_stderr"].get<double>(), tol) << e.name;
      stopped += fresh;
    }
  }
  // At this tolerance the tiny model's layers stop early (the test would not test otherwise).
  EXPECT_GT(stopped, 0);
  // Traces of another tolerance are not reused for the real pool's scores.
  auto r = gm::testing::gamma("hawq " + pool + " --teacher " + gm::testing::stories260k() + " -o " + dir / "re.json" +
                              " --seq-len 64 --calib-tokens 512 --seqs 4 --samples 12 -t 2 -q --seed 3 --cache-dir " +
                              dir / "act" + " --traces-from " + dir / "conv.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("converge"), std::string::npos) << r.output;
}

TEST(Hawq, EstimateTracesScoreTheRealPool) {
  TempDir dir;
  const std::string types = "Q4_0,Q5_0,Q8_0,F16";
  const std::string pool = make_pool(dir, types), est = dir / "est";
  auto e = gm::testing::gamma("pool " + gm::testing::stories260k() + " --types " + types + " --estimate-rows 100000 -o " +
                              est + " -t 2");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("estimated from 100000 rows each"), std::string::npos) << e.output;
  EXPECT_EQ(std::distance(fs::directory_iterator(est), fs::directory_iterator()), 1);  // manifest.json alone
  auto hawq = [&](const std::string& p, const std::string& out, const std::string& extra, int samples = 8) {
    return gm::testing::gamma("hawq " + p + " --teacher " + gm::testing::stories260k() + " -o " + dir / out +
                              " --seq-len 64 --calib-tokens 512 --seqs 4 -t 2 -q --seed 3 --cache-dir " + dir / "act" +
                              " --samples " + std::to_string(samples) + extra);
  };
  for (auto [p, out, extra] : {std::tuple<std::string, std::string, std::string>{pool, "full.json", ""},
                               {est, "est.json", ""},
                               {pool, "reused.json", " --traces-from " + dir / "est.json"}}) {
    auto r = hawq(p, out, extra);
    ASSERT_EQ(r.exit_code, 0) << out << "\n" << r.output;
  }
  const json full = load(dir / "full.json"), est_s = load(dir / "est.json"), reused = load(dir / "reused.json");
  size_t n = 0;
  for (const auto& [name, m] : full["modules"].items()) {
    EXPECT_EQ(m["hessian_trace"], est_s["modules"][name]["hessian_trace"]) << name;
    for (const auto& [id, v] : m["score"].items()) {
      EXPECT_EQ(v, reused["modules"][name]["score"][id]) << name << " " << id;
      EXPECT_NEAR(est_s["modules"][name]["score"][id].get<double>(), v.get<double>(), 1e-4 * std::abs(v.get<double>()) + 1e-30)
          << name << " " << id;
      ++n;
    }
  }
  EXPECT_GT(n, 20u);
  auto other = hawq(pool, "other.json", " --traces-from " + dir / "est.json", 4);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("measured with samples 8, not 4"), std::string::npos) << other.output;
  auto plan = gm::testing::gamma("solve " + est + " --scores " + dir / "est.json" + " --bpw 9 -o " + dir / "plan.json");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  auto emit = gm::testing::gamma("emit " + est + " " + dir / "plan.json" + " -o " + dir / "x.gguf");
  EXPECT_NE(emit.exit_code, 0);
  EXPECT_NE(emit.output.find("holds estimates from 100000 rows per module, not candidates"), std::string::npos) << emit.output;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

// The exact check: teacher-forced, a layer's output is affine in ffn_down's weights (the FFN
// input a does not depend on them), so the MSE is quadratic there with Hessian
// 2/(B T d) I_d (x) A^T A and Tr(H) = 2/(B T) sum_t ||a_t||^2. a is read off the layer itself:
// with W_down zero the output is the rest c; with W_down a row selector (row i picks input j)
// output_i - c_i = a_j. HAWQ's Hutchinson estimate must agree (its error shrinks as 1/sqrt(probes)).
// HAWQ resumes per layer: SIGKILL once layer 2 is checkpointed, rerun, and the scores equal
// an uninterrupted run's (each layer draws its probes from its own seed).
TEST(Hawq, KillAndRerunEndsIdentical) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string args = " --teacher " + gm::testing::stories260k() +
                           " --seq-len 64 --calib-tokens 512 --seqs 2 --samples 4 -t 2 --seed 3 --cache-dir " + dir / "act";
  const std::string a = dir / "a.json", b = dir / "b.json";
  auto ra = gm::testing::gamma("hawq " + pool + " -q -o " + a + args);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  EXPECT_FALSE(fs::exists(a + ".ckpt"));
  auto rk = gm::testing::run("GAMMA_TEST_KILL_AT_LAYER=2 " + gm::testing::gamma_cli() + " hawq " + pool + " -o " + b + args);
  ASSERT_EQ(rk.exit_code, 128 + 9) << rk.output;
  ASSERT_FALSE(fs::exists(b));
  ASSERT_TRUE(fs::exists(b + ".ckpt"));
  auto rb = gm::testing::gamma("hawq " + pool + " -o " + b + args);
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(rb.output.find("resuming at layer 3 of 5"), std::string::npos) << rb.output;
  json ja = load(a), jb = load(b);
  EXPECT_EQ(jb["stats"]["resumed_at_layer"], 3);
  ja.erase("stats");
  jb.erase("stats");
  EXPECT_EQ(ja, jb);
  EXPECT_FALSE(fs::exists(b + ".ckpt"));
}

// HAWQ-V2 sharded by layer: 2 ranks write the scores of one process; rank 1 killed after its
// first layer (layer 2) fails rank 0 at the gather, and the rerun resumes rank 1 at layer 3.
TEST(Hawq, TwoRanksEqualOneProcessAndResumePerRank) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string args = " --teacher " + gm::testing::stories260k() +
                           " --seq-len 64 --calib-tokens 512 --seqs 2 --samples 4 -t 1 --seed 3 --cache-dir " + dir / "act";
  const std::string a = dir / "a.json", b = dir / "b.json";
  ASSERT_EQ(gm::testing::gamma("hawq " + pool + " -q -o " + a + args).exit_code, 0);
  int job = 0;
  auto both = [&](const std::string& env1) {
    const std::string cmd = " hawq " + pool + " -q -o " + b + args + " --world-size 2 --rendezvous file://" +
                            (dir / ("rdv-" + std::to_string(++job)));
    return gm::testing::run("(" + env1 + " " + gm::testing::gamma_cli() + cmd + " --rank 1 > " + dir / "r1.log" +
                            " 2>&1; echo rank1=$? >> " + dir / "r1.log" + ") & " + gm::testing::gamma_cli() + cmd +
                            " --rank 0 2>&1; rc=$?; wait; cat " + dir / "r1.log" + "; exit $rc");
  };
  auto rk = both("GAMMA_TEST_KILL_AT_LAYER=2");
  EXPECT_EQ(rk.exit_code, 1) << rk.output;
  EXPECT_NE(rk.output.find("rank1=137"), std::string::npos) << rk.output;
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(fs::exists(b + ".rank1.ckpt"));
  auto rb = both("");
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  json ja = load(a), jb = load(b);
  EXPECT_EQ(jb["stats"]["world_size"], 2);
  EXPECT_EQ(ja["modules"], jb["modules"]);
  EXPECT_FALSE(fs::exists(b + ".rank1.ckpt"));
  EXPECT_FALSE(fs::exists(b + ".rank0.ckpt"));
}

// Processes sharing one cache directory: four hawq runs start at once on an empty cache; one
// builds the activation cache, the others wait for it (a file lock) and read it; every run
// writes the scores a run alone writes, and the cache holds one entry and no leftovers.
TEST(SharedCache, ConcurrentRunsBuildOneEntryAndAgree) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string args = " --teacher " + gm::testing::stories260k() +
                           " --seq-len 64 --calib-tokens 2048 --seqs 2 --samples 2 -t 1 -q --seed 1 --cache-dir " +
                           dir / "act";
  auto solo = gm::testing::gamma("hawq " + pool + " -o " + dir / "solo.json" + args.substr(0, args.find(" --cache-dir")) +
                                 " --cache-dir " + dir / "solo-act");
  ASSERT_EQ(solo.exit_code, 0) << solo.output;
  std::vector<std::thread> ts;
  std::vector<gm::testing::RunResult> rs(4);
  for (size_t i = 0; i < rs.size(); ++i)
    ts.emplace_back([&, i] { rs[i] = gm::testing::gamma("hawq " + pool + " -o " + dir / ("h" + std::to_string(i) + ".json") + args); });
  for (auto& t : ts) t.join();
  json ref = load(dir / "solo.json");
  ref.erase("stats");
  ref["hyperparameters"].erase("activations");
  for (size_t i = 0; i < rs.size(); ++i) {
    ASSERT_EQ(rs[i].exit_code, 0) << rs[i].output;
    json j = load(dir / ("h" + std::to_string(i) + ".json"));
    j.erase("stats");
    j["hyperparameters"].erase("activations");
    EXPECT_EQ(j, ref) << i;
  }
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir / "act")) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  ASSERT_EQ(entries.size(), 2u) << "a cache entry and its lock";
  EXPECT_EQ(entries[0] + ".lock", entries[1]);
}

TEST(Hawq, FfnDownTraceMatchesItsClosedForm) {
  TempDir dir;
  const std::string pool = make_pool(dir);
  const std::string out = dir / "hawq.json";
  const int B = 4, samples = 64;
  auto r = gm::testing::gamma("hawq " + pool + " --teacher " + gm::testing::stories260k() + " -o " + out +
                              " --seq-len 64 --calib-tokens 512 --seqs " + std::to_string(B) + " --samples " +
                              std::to_string(samples) + " -t 2 -q --cache-dir " + dir / "act");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json h = load(out);
  auto model = TorchDecoder::open(gm::testing::stories260k());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const HParams& hp = (*model)->hparams();
  CalibOptions co;
  auto files = default_calibration_files();
  ASSERT_TRUE(files.is_ok()) << files.status().message();
  co.text_files = *files;
  co.calib_tokens = 512;
  co.seq_len = 64;
  co.cache_root = dir / "act";
  co.quiet = true;
  auto cache = ActivationCache::open_or_build(gm::testing::stories260k(), co);
  ASSERT_TRUE(cache.is_ok()) << cache.status().message();
  const int T = (*cache)->seq_len();
  const Positional pos = make_positional(hp, T, (*model)->rope_freqs());
  std::vector<float> x(size_t(B) * T * hp.n_embd);
  at::NoGradGuard no_grad;
  for (int l = 0; l < hp.n_layer; ++l) {
    ASSERT_TRUE((*cache)->read(l, {0, 1, 2, 3}, x.data()).is_ok());
    auto xt = at::from_blob(x.data(), {B, T, hp.n_embd}, at::kFloat);
    auto lp = (*model)->layer_params(l);
    auto w = (*model)->layer_weights(l);
    ASSERT_TRUE(lp.is_ok() && w.is_ok());
    const int64_t d = hp.n_embd, ff = (*w)[kFfnDown].size(1);
    auto wz = *w;
    wz[kFfnDown] = at::zeros({d, ff});
    const at::Tensor c = layer_forward(hp, *lp, wz, pos, xt);
    double sum_a2 = 0;
    for (int64_t j0 = 0; j0 < ff; j0 += d) {  // d inputs of a per forward
      const int64_t n = std::min(d, ff - j0);
      at::Tensor sel = at::zeros({d, ff});
      for (int64_t i = 0; i < n; ++i) sel.index_put_({i, j0 + i}, 1.0f);
      wz[kFfnDown] = sel;
      const at::Tensor a = (layer_forward(hp, *lp, wz, pos, xt) - c).narrow(2, 0, n);
      sum_a2 += a.pow(2).sum().item<double>();
    }
    const double exact = 2.0 * sum_a2 / double(B * T);
    const std::string name = "blk." + std::to_string(l) + ".ffn_down.weight";
    const double est = h["modules"][name]["hessian_trace"].get<double>();
    EXPECT_NEAR(est / exact, 1.0, 0.03) << name << " Hutchinson " << est << " closed form " << exact;
  }
}

TEST(Learn, IqCandidatesAreReadThroughGgmlTypeTraits) {
  // IQ4_NL (the one IQ type 64-wide rows fit), made with a real imatrix: the store's
  // dequantization equals ggml's to_float of the pool's bytes, and Stage I and HAWQ score it.
  TempDir dir;
  stories_imatrix(dir / "im.gguf", 10);
  const std::string pool = dir / "pool";
  auto r = gm::testing::gamma("pool " + gm::testing::stories260k() + " --types Q4_0,IQ4_NL,Q8_0 --imatrix " +
                              dir / "im.gguf" + " -o " + pool + " -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto man = Manifest::load(pool).value();
  auto store = CandidateStore::open(man).value();
  auto file = TensorFile::open(pool + "/cand-IQ4_NL.gguf").value();
  const ModuleEntry* e = man.find("blk.0.attn_q.weight");
  ASSERT_NE(e, nullptr);
  const Candidate* c = e->find("IQ4_NL");
  ASSERT_NE(c, nullptr);
  std::vector<uint8_t> raw(c->bytes);
  ASSERT_TRUE(file->read_raw(*file->find(e->name), raw.data()).is_ok());
  std::vector<float> want(size_t(e->n_params)), got(size_t(e->n_params));
  ggml_get_type_traits(GGML_TYPE_IQ4_NL)->to_float(raw.data(), want.data(), e->n_params);
  ASSERT_TRUE(store->dequantize(*e, *c, got.data(), 2).is_ok());
  EXPECT_EQ(got, want);

  const std::string scores = dir / "scores.json";
  r = gm::testing::gamma(learn_args(dir, pool, scores) + " --bpw 9.0 --steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string hawq = dir / "hawq.json";
  r = gm::testing::gamma("hawq " + pool + " --teacher " + gm::testing::stories260k() + " -o " + hawq +
                         " --seq-len 64 --calib-tokens 512 --seqs 4 --samples 4 -t 2 -q --cache-dir " + dir / "act");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string f : {scores, hawq}) {
    const json s = load(f);
    for (const auto& m : man.modules)
      if (m.find("IQ4_NL")) EXPECT_TRUE(s["modules"][m.name]["score"].contains("IQ4_NL")) << f << " " << m.name;
  }
}

// A streamed pool (gamma pool --stream) holds no candidate file; the store makes each candidate
// from the source with the stored pool's imatrix (an IQ type among them), float for float what the
// stored pool's candidate dequantizes to, so Stage I's scores are the stored pool's to the bit.
// What Stage I makes stays in POOL/stream/, the stored pool's bytes, every candidate but the
// source's own type, and an emit after it quantizes nothing. A streamed pool whose imatrix
// changed since is refused in one line.
TEST(Learn, StreamedPoolGivesTheStoredPoolsCandidatesAndScores) {
  TempDir dir;
  stories_imatrix(dir / "im.gguf", 10);
  const std::string common = " --types Q4_0,IQ4_NL,Q8_0,F16 --imatrix " + dir / "im.gguf" + " -t 2 -q -o ";
  auto r = gm::testing::gamma("pool " + gm::testing::stories260k() + common + dir / "stored");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gm::testing::gamma("pool " + gm::testing::stories260k() + " --stream" + common + dir / "streamed");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& f : fs::directory_iterator(dir / "streamed")) EXPECT_EQ(f.path().filename(), "manifest.json");
  auto stored = Manifest::load(dir / "stored").value(), streamed = Manifest::load(dir / "streamed").value();
  EXPECT_TRUE(streamed.streamed);
  auto a = CandidateStore::open(stored).value(), b = CandidateStore::open(streamed).value();
  size_t n = 0;
  for (const auto& e : stored.modules) {
    const ModuleEntry* s = streamed.find(e.name);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->candidates.size(), e.candidates.size()) << e.name;
    for (size_t k = 0; k < e.candidates.size(); ++k) {
      EXPECT_EQ(s->candidates[k].bytes, e.candidates[k].bytes);
      std::vector<float> x(size_t(e.n_params)), y(size_t(e.n_params));
      ASSERT_TRUE(a->dequantize(e, e.candidates[k], x.data(), 2).is_ok());
      ASSERT_TRUE(b->dequantize(*s, s->candidates[k], y.data(), 2).is_ok());
      EXPECT_EQ(x, y) << e.name << " " << e.candidates[k].id;
      ++n;
    }
  }
  EXPECT_GT(n, 60u);
  json scores[2];
  for (int i = 0; i < 2; ++i) {
    const std::string out = dir / (i ? "streamed.json" : "stored.json");
    r = gm::testing::gamma(learn_args(dir, dir / (i ? "streamed" : "stored"), out) + " --bpw 7.5 --steps 6");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    scores[i] = load(out);
    if (i == 0) fs::remove_all(dir / "streamed/stream");  // the store above made them: Stage I is to make them again
  }
  EXPECT_EQ(scores[0]["modules"], scores[1]["modules"]);
  // POOL/stream/ holds exactly what Stage I made: each candidate that is not the source's type,
  // with the stored pool's bytes.
  std::set<std::string> made;
  for (const auto& f : fs::directory_iterator(dir / "streamed/stream")) made.insert(f.path().string());
  size_t expected = 0;
  for (const auto& e : stored.modules)
    for (const auto& c : e.candidates) {
      const std::string path = made_bytes_path(streamed, "stream", e.name, parse_type(c.type).value());
      if (c.type == e.source_type) {
        EXPECT_FALSE(fs::exists(path)) << path;
        continue;
      }
      ++expected;
      ASSERT_TRUE(made.count(path)) << path;
      auto tf = TensorFile::open(dir / "stored" + "/" + c.file).value();
      const TensorInfo* t = tf->find(e.name);
      ASSERT_NE(t, nullptr);
      std::vector<uint8_t> want(t->nbytes);
      ASSERT_TRUE(tf->read_raw(*t, want.data()).is_ok());
      EXPECT_TRUE(read_file(path).value() == std::string(want.begin(), want.end())) << path;
    }
  EXPECT_EQ(made.size(), expected);
  EXPECT_GT(expected, 30u);
  // An emit after Stage I reads them: no file is added, none rewritten, and the file is the stored pool's.
  std::map<std::string, fs::file_time_type> before;
  for (const auto& p : made) before[p] = fs::last_write_time(p);
  r = gm::testing::gamma("solve --pool " + dir / "stored" + " --score-from-manifest --bpw 10 -o " + dir / "plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string p : {"stored", "streamed"}) {
    r = gm::testing::gamma("emit " + dir / p + " " + dir / "plan.json" + " -o " + dir / (p + ".gguf"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_TRUE(read_file(dir / "stored.gguf").value() == read_file(dir / "streamed.gguf").value());
  size_t after = 0;
  for (const auto& f : fs::directory_iterator(dir / "streamed/stream")) {
    ++after;
    EXPECT_TRUE(before.count(f.path().string()) && before[f.path().string()] == fs::last_write_time(f.path())) << f.path();
  }
  EXPECT_EQ(after, made.size());

  // The imatrix rewritten: the streamed pool would make other bytes than it promised.
  stories_imatrix(dir / "im.gguf", 4);
  auto st = CandidateStore::open(streamed);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.status().message().find("changed since the streamed pool"), std::string::npos) << st.status().message();
}
