// `gamma solve` end to end on a Qwen2.5-1.5B-shaped pool manifest (196 modules x 5
// k-quants, real tensor shapes and ggml sizes, tied embeddings): plans that fit the budget
// to the byte and match CBC's optimum, --size counting the whole file, constraints, sweeps
// with their Pareto front, and bad input failing with one line and nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "solve/budget.h"
#include "solve/instances.h"
#include "tests/testing.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;
using namespace gm;
using gm::testing::TempDir;

namespace {

const char* const kTypes[] = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

// tied: Qwen2.5-1.5B's tied embeddings; untied adds output.weight, so token_embd takes the
// mix's base type and the fixed tensors' size depends on the bpw.
Manifest qwen_manifest(const std::string& dir, bool tied = true) {
  Manifest m;
  m.dir = dir;
  m.model_path = "Qwen2.5-1.5B-Instruct-F16.gguf";
  m.model_fingerprint = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed";
  m.arch = "qwen2";
  m.n_layer = 28;
  m.types.assign(std::begin(kTypes), std::end(kTypes));
  m.alignment = 32;
  m.header_bytes = 6123457;
  const int64_t h = 1536, f = 8960, kv = 256;
  const std::pair<const char*, std::vector<int64_t>> kinds[] = {
      {"attn_q", {h, h}}, {"attn_k", {h, kv}}, {"attn_v", {h, kv}}, {"attn_output", {h, h}},
      {"ffn_gate", {h, f}}, {"ffn_up", {h, f}}, {"ffn_down", {f, h}}};
  std::mt19937_64 rng(1);
  std::normal_distribution<double> nd(0, 1);
  m.fixed.push_back({"token_embd.weight", {h, 151936}, "F16"});
  for (int l = 0; l < m.n_layer; ++l) {
    for (const auto& [kind, shape] : kinds) {
      ModuleEntry e;
      e.name = fmt::format("blk.{}.{}.weight", l, kind);
      e.layer = l;
      e.kind = kind;
      e.shape = shape;
      e.n_params = shape[0] * shape[1];
      e.source_type = "F16";
      double sens = std::exp(nd(rng));
      for (const char* t : kTypes) {
        Candidate c;
        c.id = c.type = t;
        c.bytes = type_bytes(parse_type(t).value(), shape[0], shape[1]);
        c.file_bytes = (c.bytes + 31) / 32 * 32;
        c.bpw = 8.0 * double(c.bytes) / double(e.n_params);
        c.rel_err = sens * std::pow(4.0, -c.bpw) * std::exp(0.05 * nd(rng));
        c.file = std::string("cand-") + t + ".gguf";
        e.candidates.push_back(c);
      }
      m.modules.push_back(std::move(e));
    }
    for (const char* norm : {"attn_norm", "ffn_norm"}) m.fixed.push_back({fmt::format("blk.{}.{}.weight", l, norm), {h}, "F32"});
    m.fixed.push_back({fmt::format("blk.{}.attn_q.bias", l), {h}, "F32"});
    m.fixed.push_back({fmt::format("blk.{}.attn_k.bias", l), {kv}, "F32"});
    m.fixed.push_back({fmt::format("blk.{}.attn_v.bias", l), {kv}, "F32"});
  }
  m.fixed.push_back({"output_norm.weight", {h}, "F32"});
  if (!tied) m.fixed.push_back({"output.weight", {h, 151936}, "F16"});
  return m;
}

// Stage-I-like scores: per module a softmax over the types around a preferred bit width.
json stage1_scores(const Manifest& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  json j = json_header("gamma.scores", 1);
  j["model_fingerprint"] = m.model_fingerprint;
  j["method"] = "gamma";
  json mods = json::object();
  for (const auto& e : m.modules) {
    double pref = 3.5 + 0.8 * nd(rng), z = 0;
    std::vector<double> l;
    for (const auto& c : e.candidates) z += l.emplace_back(std::exp(-3 * std::fabs(c.bpw - pref) + 0.5 * nd(rng)));
    json s = json::object();
    for (size_t k = 0; k < l.size(); ++k) s[e.candidates[k].id] = l[k] / z;
    mods[e.name] = {{"score", s}};
  }
  j["modules"] = mods;
  return j;
}

class SolveCli : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = tmp_ / "pool";
    fs::create_directories(pool_);
    m_ = qwen_manifest(pool_);
    ASSERT_TRUE(m_.save().is_ok());
    scores_json_ = stage1_scores(m_, 2);
    scores_ = tmp_ / "scores.json";
    ASSERT_TRUE(write_json(scores_, scores_json_).is_ok());
  }

  double score_of(const Plan& p, const json& scores) const {
    double s = 0;
    for (const auto& e : m_.modules) s += scores.at("modules").at(e.name).at("score").at(p.modules.at(e.name)).get<double>();
    return s;
  }
  // The same problem for CBC: weights are bytes (bpw budgets) or file_bytes (size budgets).
  std::vector<solve::KnapsackClass> classes(const json& scores, bool file_bytes) const {
    std::vector<solve::KnapsackClass> cls;
    for (const auto& e : m_.modules) {
      solve::KnapsackClass c;
      for (const auto& cand : e.candidates) {
        c.weight.push_back(file_bytes ? cand.file_bytes : cand.bytes);
        c.score.push_back(scores.at("modules").at(e.name).at("score").at(cand.id).get<double>());
      }
      cls.push_back(c);
    }
    return cls;
  }
  // The module -> candidate map of `gamma solve --pool POOL --bpw 3.5 ARGS -o OUT`.
  std::map<std::string, std::string> plan_of(const std::string& args, const std::string& out) {
    auto r = gm::testing::gamma(fmt::format("solve --pool {} --bpw 3.5 {} -o {}", pool_, args, tmp_ / out));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto p = Plan::load(tmp_ / out);
    EXPECT_TRUE(p.is_ok());
    return p.is_ok() ? p->modules : std::map<std::string, std::string>{};
  }
  // Runs `gamma solve --pool POOL ARGS` expecting failure: one "gamma: error:" line naming
  // `what`, and `out` not created.
  void expect_fails(const std::string& args, const std::string& what, const std::string& out) {
    auto r = gm::testing::gamma("solve --pool " + pool_ + " " + args);
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("gamma: error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(out)) << args;
  }

  TempDir tmp_;
  std::string pool_, scores_;
  Manifest m_;
  json scores_json_;
};

TEST_F(SolveCli, BpwBudgetPlanIsOptimalAndFits) {
  for (double bpw : {2.8, 3.25, 4.0}) {
    const std::string out = tmp_ / fmt::format("plan-{}.json", bpw);
    auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --bpw {} -o {}", pool_, scores_, bpw, out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto p = Plan::load(out);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    ASSERT_TRUE(p->validate(m_).is_ok());
    EXPECT_EQ(p->method, "gamma");
    PlanSize s = plan_size(m_, *p);
    const uint64_t cap = uint64_t(std::floor(bpw * double(m_.total_params()) / 8));
    EXPECT_LE(s.linear_bytes, cap);
    EXPECT_LE(s.linear_bpw, bpw);
    EXPECT_TRUE(p->info["optimal"].get<bool>());
    EXPECT_EQ(p->info["predicted"]["file_bytes"].get<uint64_t>(), s.file_bytes);
    auto ref = solve_testing::cbc_solve(classes(scores_json_, false), cap);
    ASSERT_TRUE(ref.optimal);
    EXPECT_NEAR(score_of(*p, scores_json_), ref.score, 1e-9 * ref.score) << bpw;
    EXPECT_NEAR(p->info["objective"].get<double>(), ref.score, 1e-9 * ref.score);
    // The pool positional, as in plan/emit/learn/hawq: the same plan.
    const std::string pos = tmp_ / fmt::format("plan-pos-{}.json", bpw);
    ASSERT_EQ(gm::testing::gamma(fmt::format("solve {} --scores {} --bpw {} -o {}", pool_, scores_, bpw, pos)).exit_code, 0);
    auto q = Plan::load(pos);
    ASSERT_TRUE(q.is_ok());
    EXPECT_EQ(q->modules, p->modules);
  }
}

TEST_F(SolveCli, FillSpendsTheBudgetThatPeakedScoresLeave) {
  // Scores peaked on each module's cheapest candidate (what Stage I learns at a low target):
  // the optimum ignores any larger budget; --fill 0.99 spends at least 99% of it, stays
  // within it, and keeps the plan optimal for the re-weighted scores it records.
  json peaked = scores_json_;
  for (const auto& e : m_.modules)
    for (size_t j = 0; j < e.candidates.size(); ++j)
      peaked["modules"][e.name]["score"][e.candidates[j].id] = j == 0 ? 0.9 : 0.1 / double(j + 1);
  const std::string sc = tmp_ / "peaked.json";
  ASSERT_TRUE(write_json(sc, peaked).is_ok());
  const std::string plain = tmp_ / "plain.json", filled = tmp_ / "filled.json";
  ASSERT_EQ(gm::testing::gamma(fmt::format("solve --pool {} --scores {} --bpw 4.0 -o {}", pool_, sc, plain)).exit_code, 0);
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --bpw 4.0 --fill 0.99 -o {}", pool_, sc, filled));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = Plan::load(plain), b = Plan::load(filled);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_LT(plan_size(m_, *a).linear_bpw, 3.0);
  const double spent = plan_size(m_, *b).linear_bpw;
  EXPECT_GE(spent, 0.99 * 4.0);
  EXPECT_LE(spent, 4.0);
  EXPECT_GT(b->info["fill"]["kappa"].get<double>(), 0);
  expect_fails(fmt::format("--scores {} --bpw 4.0 --fill 1.5 -o {}", sc, tmp_ / "x.json"), "--fill", tmp_ / "x.json");
}

TEST_F(SolveCli, TransformSolvesOnLogAndSizeWeightedLogP) {
  // Probability scores: --transform log / size-log give exactly the plans of files holding
  // log p and (n_params / mean n_params) log p; scores that are not probabilities are refused.
  json probs = scores_json_, logp = scores_json_, sizelogp = scores_json_;
  double mean_n = 0;
  for (const auto& e : m_.modules) mean_n += double(e.n_params) / double(m_.modules.size());
  uint64_t seed = 7;
  for (const auto& e : m_.modules)
    for (const auto& c : e.candidates) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      const double p = 0.05 + double(seed >> 40) / double(1ull << 24);  // in (0.05, 1.05)
      probs["modules"][e.name]["score"][c.id] = p;
      logp["modules"][e.name]["score"][c.id] = std::log(p);
      sizelogp["modules"][e.name]["score"][c.id] = double(e.n_params) / mean_n * std::log(p);
    }
  std::map<std::string, std::string> files;
  for (auto& [name, j] : std::map<std::string, json*>{{"p", &probs}, {"logp", &logp}, {"sizelogp", &sizelogp}}) {
    files[name] = tmp_ / (name + ".json");
    ASSERT_TRUE(write_json(files[name], *j).is_ok());
  }
  const auto via_log = plan_of("--scores " + files["p"] + " --transform log", "a.json");
  EXPECT_EQ(via_log, plan_of("--scores " + files["logp"], "b.json"));
  const auto via_size = plan_of("--scores " + files["p"] + " --transform size-log", "c.json");
  EXPECT_EQ(via_size, plan_of("--scores " + files["sizelogp"], "d.json"));
  EXPECT_NE(via_log, via_size);  // the weighting matters on this instance
  expect_fails(fmt::format("--score-from-manifest --bpw 3.5 --transform log -o {}", tmp_ / "x.json"), "needs probabilities > 0",
               tmp_ / "x.json");
  expect_fails(fmt::format("--scores {} --bpw 3.5 --transform sqrt -o {}", files["p"], tmp_ / "x.json"), "--transform must be",
               tmp_ / "x.json");
}

TEST_F(SolveCli, DeltaFitSolvesOnEachModulesMeasuredSlope) {
  // Measured loss changes that lie on a line a + c * rel_err per module (Stage I's, on Qwen,
  // do to R^2 0.995): --transform delta-fit gives exactly the plan of -c * rel_err, the
  // intercept gone; a module whose slope is not positive keeps its raw -delta; scores without
  // measurements are refused in one line.
  json measured = scores_json_, reference = scores_json_;
  uint64_t seed = 11;
  auto next = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return double(seed >> 40) / double(1ull << 24);  // in [0, 1)
  };
  bool first = true;
  for (const auto& e : m_.modules) {
    const double a = next() - 0.5, c = first ? -0.5 : 0.1 + 10 * next();  // the first module: a negative slope
    for (const auto& cand : e.candidates) {
      const double d = a + c * cand.rel_err;
      measured["modules"][e.name]["delta"][cand.id] = d;
      reference["modules"][e.name]["score"][cand.id] = first ? -d : -c * cand.rel_err;
    }
    first = false;
  }
  const std::string fm = tmp_ / "measured.json", fr = tmp_ / "reference.json";
  ASSERT_TRUE(write_json(fm, measured).is_ok() && write_json(fr, reference).is_ok());
  const auto fitted = plan_of("--scores " + fm + " --transform delta-fit", "fit.json");
  EXPECT_EQ(fitted, plan_of("--scores " + fr, "ref.json"));
  EXPECT_NE(fitted, plan_of("--score-from-manifest", "static.json"));  // the measured slopes matter here
  auto p = Plan::load(tmp_ / "fit.json");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->info["delta_fit_raw_modules"].get<int>(), 1);
  expect_fails(fmt::format("--scores {} --bpw 3.5 --transform delta-fit -o {}", fr, tmp_ / "x.json"),
               "--transform delta-fit needs measured loss changes", tmp_ / "x.json");
}

TEST_F(SolveCli, BlendSolvesOnTheGeometricMeanOfTwoScorersCosts) {
  // --blend: each candidate costs sqrt(cost_a * cost_b), each scorer's cost taken above its
  // module's best candidate; the reference is computed here. Scorer B leaves Q6_K out (then no
  // choice) and adds a constant per module (which a cost above the best removes). A module B
  // does not score is refused in one line, nothing written.
  json a = scores_json_, b = scores_json_, reference = scores_json_;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0.2, 5.0);
  for (const auto& e : m_.modules) {
    const double sa = u(rng), sb = u(rng), shift = u(rng);
    b["modules"][e.name]["score"] = json::object();
    reference["modules"][e.name]["score"] = json::object();
    double best_a = -1e300, best_b = -1e300;
    for (const auto& c : e.candidates) {
      a["modules"][e.name]["score"][c.id] = -sa * c.rel_err;
      if (c.id == "Q6_K") continue;
      b["modules"][e.name]["score"][c.id] = shift - sb * std::sqrt(c.rel_err) * (1 + 0.1 * u(rng));
      best_a = std::max(best_a, -sa * c.rel_err);
      best_b = std::max(best_b, b["modules"][e.name]["score"][c.id].get<double>());
    }
    for (const auto& c : e.candidates) {
      if (c.id == "Q6_K") continue;
      const double ca = best_a + sa * c.rel_err, cb = best_b - b["modules"][e.name]["score"][c.id].get<double>();
      reference["modules"][e.name]["score"][c.id] = -std::sqrt(ca * cb);
    }
  }
  const std::string fa = tmp_ / "a.json", fb = tmp_ / "b.json", fr = tmp_ / "reference.json";
  ASSERT_TRUE(write_json(fa, a).is_ok() && write_json(fb, b).is_ok() && write_json(fr, reference).is_ok());
  const auto blended = plan_of("--scores " + fa + " --blend " + fb, "blend.json");
  EXPECT_EQ(blended, plan_of("--scores " + fr, "ref.json"));
  EXPECT_NE(blended, plan_of("--scores " + fa, "a-only.json"));  // the second scorer matters here
  for (const auto& [name, id] : blended) EXPECT_NE(id, "Q6_K") << name;
  auto p = Plan::load(tmp_ / "blend.json");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->info["blend"].get<std::string>(), fb);
  b["modules"].erase(m_.modules[5].name);
  ASSERT_TRUE(write_json(fb, b).is_ok());
  expect_fails(fmt::format("--scores {} --blend {} --bpw 3.5 -o {}", fa, fb, tmp_ / "x.json"),
               "--blend: " + fb + " gives no score for module " + m_.modules[5].name, tmp_ / "x.json");
  expect_fails(fmt::format("--score-from-manifest --blend {} --bpw 3.5 -o {}", fa, tmp_ / "x.json"), "--blend needs --scores",
               tmp_ / "x.json");
}

TEST_F(SolveCli, LayerScaleRescalesEachLayerToItsMeasuredKld) {
  // gamma layers' measurement (Q6_K reference, Q2_K low) rescales each layer's scores by
  // c_l = (kld_l - base) / sum over l's modules of (score(Q6_K) - score(Q2_K)); within a layer the
  // scores keep their ratios. Layer 3's scores see no loss there (the sum is <= 0): the pool's
  // -rel_err x n_params splits its measured change instead. The reference is computed here.
  json layers = json_header("gamma.layers", 1), reference = scores_json_;
  layers["model_fingerprint"] = m_.model_fingerprint;
  layers["base_kld"] = 0.01;
  json rows = json::array();
  for (int l = 0; l < m_.n_layer; ++l) rows.push_back({{"layer", l}, {"kld", 0.01 + 0.002 * (1 + (l * 7) % 11)}});
  layers["layers"] = rows;
  // Loss-like scores (higher is better, so higher bit widths score higher), each module its own
  // sensitivity.
  json scores = scores_json_;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.2, 5.0);
  for (const auto& e : m_.modules) {
    const double sens = u(rng);
    for (const auto& cand : e.candidates) scores["modules"][e.name]["score"][cand.id] = -sens * cand.rel_err;
    layers["modules"][e.name] = {{"ref", "Q6_K"}, {"low", "Q2_K"}};
    if (e.layer == 3) scores["modules"][e.name]["score"]["Q2_K"] = 1.0;  // above every p
  }
  for (int l = 0; l < m_.n_layer; ++l) {
    double total = 0;
    auto score = [&](const ModuleEntry& e, const std::string& id) {
      return l == 3 ? -e.find(id)->rel_err * double(e.n_params) : scores["modules"][e.name]["score"][id].get<double>();
    };
    for (const auto& e : m_.modules)
      if (e.layer == l) total += score(e, "Q6_K") - score(e, "Q2_K");
    const double c = (rows[l]["kld"].get<double>() - 0.01) / total;
    for (const auto& e : m_.modules)
      if (e.layer == l)
        for (const auto& cand : e.candidates) reference["modules"][e.name]["score"][cand.id] = c * score(e, cand.id);
  }
  const std::string fl = tmp_ / "layers.json", fs_ = tmp_ / "scores-l3.json", fr = tmp_ / "reference.json";
  ASSERT_TRUE(write_json(fl, layers).is_ok() && write_json(fs_, scores).is_ok() && write_json(fr, reference).is_ok());
  const auto scaled = plan_of("--scores " + fs_ + " --layer-scale " + fl, "scaled.json");
  EXPECT_EQ(scaled, plan_of("--scores " + fr, "ref.json"));
  EXPECT_NE(scaled, plan_of("--scores " + fs_, "plain.json"));  // the scale matters here
  auto p = Plan::load(tmp_ / "scaled.json");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->info["layer_scale"]["rel_err_split_layers"], json::array({3}));

  // A measurement of another model, one that lacks a layer, and scores without the low
  // candidate are refused in one line.
  json other = layers;
  other["model_fingerprint"] = std::string(64, 'a');
  json partial = layers;
  partial["layers"].erase(5);
  json no_low = scores;
  no_low["modules"]["blk.0.attn_q.weight"]["score"].erase("Q2_K");
  const std::string fo = tmp_ / "other.json", fp = tmp_ / "partial.json", fn = tmp_ / "no-low.json";
  ASSERT_TRUE(write_json(fo, other).is_ok() && write_json(fp, partial).is_ok() && write_json(fn, no_low).is_ok());
  const std::string x = tmp_ / "x.json";
  expect_fails(fmt::format("--scores {} --layer-scale {} --bpw 3.5 -o {}", scores_, fo, x), "measured another model", x);
  expect_fails(fmt::format("--scores {} --layer-scale {} --bpw 3.5 -o {}", scores_, fp, x), "has no measurement for layer 5", x);
  expect_fails(fmt::format("--scores {} --layer-scale {} --bpw 3.5 -o {}", fn, fl, x),
               "gives module blk.0.attn_q.weight no score for Q2_K", x);
}

TEST_F(SolveCli, SizeBudgetCountsTheWholeFile) {
  for (const char* size : {"1.1GB", "1000MiB", "1234567890", "untied:1.3GB", "untied:1200MiB", "untied:1.05GB"}) {
    if (std::string(size).rfind("untied:", 0) == 0) {
      size += 7;
      m_ = qwen_manifest(pool_, /*tied=*/false);
      ASSERT_TRUE(m_.save().is_ok());
    }
    const uint64_t budget = solve::parse_size(size).value();
    const std::string out = tmp_ / "plan.json";
    auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --size {} -o {}", pool_, scores_, size, out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto p = Plan::load(out);
    ASSERT_TRUE(p.is_ok());
    ASSERT_TRUE(p->validate(m_).is_ok());
    PlanSize s = plan_size(m_, *p);
    EXPECT_LE(s.file_bytes, budget) << size;
    EXPECT_EQ(p->fixed.size(), m_.fixed.size());  // fixed types written out, so the size is exact
    EXPECT_EQ(p->fixed, default_fixed_types(m_, p->info["fixed_types_for_bpw"].get<double>()));
    // The fixed tensors got the default types of a bpw the budget affords after paying them.
    const double fbpw = p->info["fixed_types_for_bpw"].get<double>();
    EXPECT_LE(fbpw, 8.0 * double(budget - fixed_file_bytes(m_, p->fixed)) / double(m_.total_params()) + 1e-9);
    // Optimal for the bytes left once header and fixed tensors are paid.
    const uint64_t cap = budget - fixed_file_bytes(m_, p->fixed);
    auto ref = solve_testing::cbc_solve(classes(scores_json_, true), cap);
    ASSERT_TRUE(ref.optimal);
    EXPECT_NEAR(score_of(*p, scores_json_), ref.score, 1e-9 * ref.score) << size;
  }
}

TEST_F(SolveCli, FixedTypeOfTheEmbeddingIsPaidByTheBudget) {
  // token_embd at Q4_K instead of the default: the file budget pays for the cheaper tensor,
  // so the linear modules get the bytes it frees, and the plan is optimal for the rest.
  const std::string size = "1.1GB", a = tmp_ / "a.json", b = tmp_ / "b.json";
  const uint64_t budget = solve::parse_size(size).value();
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --size {} -o {}", pool_, scores_, size, a));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --size {} --fixed token_embd.weight=Q4_K -o {}", pool_,
                                     scores_, size, b));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Plan pa = Plan::load(a).value(), pb = Plan::load(b).value();
  ASSERT_TRUE(pb.validate(m_).is_ok());
  EXPECT_EQ(pb.fixed.at("token_embd.weight"), "Q4_K");
  EXPECT_NE(pa.fixed.at("token_embd.weight"), "Q4_K");
  EXPECT_LE(plan_size(m_, pb).file_bytes, budget);
  EXPECT_LT(fixed_file_bytes(m_, pb.fixed), fixed_file_bytes(m_, pa.fixed));
  // With scores that always pay for bits (the static proxy), the freed bytes go to the modules.
  const std::string c = tmp_ / "c.json", d = tmp_ / "d.json";
  for (const auto& [out, flag] : {std::pair{c, ""}, std::pair{d, " --fixed token_embd.weight=Q4_K"}}) {
    r = gm::testing::gamma(fmt::format("solve --pool {} --score-from-manifest --size {}{} -o {}", pool_, size, flag, out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_GT(plan_size(m_, Plan::load(d).value()).linear_bytes, plan_size(m_, Plan::load(c).value()).linear_bytes);
  auto ref = solve_testing::cbc_solve(classes(scores_json_, true), budget - fixed_file_bytes(m_, pb.fixed));
  ASSERT_TRUE(ref.optimal);
  EXPECT_NEAR(score_of(pb, scores_json_), ref.score, 1e-9 * std::fabs(ref.score));
  const std::string out = tmp_ / "bad.json";
  expect_fails("--scores " + scores_ + " --size 1.1GB --fixed output.weight=Q4_K -o " + out, "not a non-linear tensor", out);
  expect_fails("--scores " + scores_ + " --size 1.1GB --fixed token_embd.weight=Q5_9 -o " + out, "Q5_9", out);
  expect_fails("--scores " + scores_ + " --size 1.1GB --fixed token_embd.weight -o " + out, "TENSOR=TYPE", out);
}

TEST_F(SolveCli, InfeasibleBudgetNamesTheSmallestFeasibleOne) {
  const std::string out = tmp_ / "plan.json";
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --size 500MiB -o {}", pool_, scores_, out));
  ASSERT_NE(r.exit_code, 0);
  EXPECT_FALSE(fs::exists(out));
  // "... smallest feasible file, 612.3 MiB (642000000 bytes) ..." -> that size works, one
  // byte less does not.
  size_t at = r.output.find("smallest feasible file, ");
  ASSERT_NE(at, std::string::npos) << r.output;
  size_t open = r.output.find('(', at);
  uint64_t min = std::stoull(r.output.substr(open + 1));
  auto ok = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --size {} -o {}", pool_, scores_, min, out));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(plan_size(m_, Plan::load(out).value()).file_bytes, min);
  fs::remove(out);
  expect_fails(fmt::format("--scores {} --size {} -o {}", scores_, min - 1, out), "smallest feasible file", out);

  // Tightest bpw: Q2_K everywhere is 2.625 bpw exactly.
  expect_fails(fmt::format("--scores {} --bpw 2.6 -o {}", scores_, out), "smallest feasible 2.6250 bpw", out);
  auto tight = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --bpw 2.625 -o {}", pool_, scores_, out));
  ASSERT_EQ(tight.exit_code, 0) << tight.output;
  for (const auto& [name, id] : Plan::load(out).value().modules) EXPECT_EQ(id, "Q2_K") << name;
}

TEST_F(SolveCli, ScoresFromTheManifestAreNegativeRelErr) {
  const std::string out = tmp_ / "plan.json";
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --score-from-manifest --bpw 3.5 -o {}", pool_, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Plan p = Plan::load(out).value();
  EXPECT_EQ(p.method, "neg_rel_err");
  json neg = json::object();
  for (const auto& e : m_.modules)
    for (const auto& c : e.candidates) neg["modules"][e.name]["score"][c.id] = -c.rel_err;
  auto ref = solve_testing::cbc_solve(classes(neg, false), uint64_t(3.5 * double(m_.total_params()) / 8));
  ASSERT_TRUE(ref.optimal);
  EXPECT_NEAR(score_of(p, neg), ref.score, 1e-9 * std::fabs(ref.score));
}

// A proof cut short by --time-limit is never passed off as optimal: the plan says so, with
// an upper bound that holds (the optimum, proven in-process, is below it), stderr warns, and
// --require-optimal refuses to write anything.
TEST_F(SolveCli, UnprovenPlansSayThatTheyAre) {
  const std::string out = tmp_ / "plan.json";
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --score-from-manifest --bpw 3.3 --time-limit 1e-9 -o {}", pool_, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("NOT proven optimal"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gamma: warning:"), std::string::npos) << r.output;
  Plan p = Plan::load(out).value();
  EXPECT_FALSE(p.info["optimal"].get<bool>());
  EXPECT_GT(p.info["gap"].get<double>(), 0);
  json neg = json::object();
  for (const auto& e : m_.modules)
    for (const auto& c : e.candidates) neg["modules"][e.name]["score"][c.id] = -c.rel_err;
  auto ks = solve::Knapsack::create(classes(neg, false));
  auto ref = ks->solve(uint64_t(std::floor(3.3 * double(m_.total_params()) / 8)));
  ASSERT_TRUE(ref.is_ok() && ref->optimal);
  EXPECT_GE(p.info["upper_bound"].get<double>(), ref->score - 1e-12);
  EXPECT_LE(score_of(p, neg), ref->score + 1e-12);
  EXPECT_LT(score_of(p, neg), ref->score) << "the cut-short answer happened to be optimal; pick another budget";
  fs::remove(out);
  expect_fails(fmt::format("--score-from-manifest --bpw 3.3 --time-limit 1e-9 --require-optimal -o {}", out),
               "not proven optimal", out);
}

TEST_F(SolveCli, ConstraintsAreObeyed) {
  const std::string out = tmp_ / "plan.json";
  auto r = gm::testing::gamma(fmt::format(
      "solve --pool {} --scores {} --bpw 4.2 --pin 'ffn_down=Q6_K' --pin '^blk\\.0\\.attn=Q5_K' --allow 'attn_=Q3_K,Q4_K,Q5_K' -o {}",
      pool_, scores_, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Plan p = Plan::load(out).value();
  for (const auto& [name, id] : p.modules) {
    if (name.rfind("blk.0.attn", 0) == 0) EXPECT_EQ(id, "Q5_K") << name;
    else if (name.find("ffn_down") != std::string::npos) EXPECT_EQ(id, "Q6_K") << name;
    else if (name.find("attn_") != std::string::npos) EXPECT_TRUE(id == "Q3_K" || id == "Q4_K" || id == "Q5_K") << name;
  }
  EXPECT_TRUE(p.info["optimal"].get<bool>());
  EXPECT_EQ(p.info["constraints"].size(), 3u);
  // Optimal within the constraints: CBC on the restricted classes.
  auto cls = classes(scores_json_, false);
  for (size_t i = 0; i < m_.modules.size(); ++i) {
    const auto& e = m_.modules[i];
    solve::KnapsackClass keep;
    for (size_t j = 0; j < e.candidates.size(); ++j) {
      const std::string& t = e.candidates[j].id;
      bool ok = e.layer == 0 && e.kind.rfind("attn_", 0) == 0 ? t == "Q5_K"
                : e.kind == "ffn_down"          ? t == "Q6_K"
                : e.kind.rfind("attn_", 0) == 0 ? (t == "Q3_K" || t == "Q4_K" || t == "Q5_K")
                                                : true;
      if (ok) keep.weight.push_back(cls[i].weight[j]), keep.score.push_back(cls[i].score[j]);
    }
    cls[i] = keep;
  }
  auto ref = solve_testing::cbc_solve(cls, uint64_t(4.2 * double(m_.total_params()) / 8));
  ASSERT_TRUE(ref.optimal);
  EXPECT_NEAR(score_of(p, scores_json_), ref.score, 1e-9 * ref.score);
}

TEST_F(SolveCli, SweepWritesEveryPlanAndTheParetoFront) {
  const std::string dir = tmp_ / "sweep";
  auto r = gm::testing::gamma(fmt::format("solve --pool {} --scores {} --sweep 2.7:4.5:0.05 -o {}", pool_, scores_, dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto front = read_json(dir + "/pareto.json", "gamma.pareto", 1);
  ASSERT_TRUE(front.is_ok()) << front.status().message();
  const json& pts = (*front)["points"];
  ASSERT_EQ(pts.size(), 37u);
  double prev = -INFINITY;
  for (size_t k = 0; k < pts.size(); ++k) {
    const json& pt = pts[k];
    EXPECT_NEAR(pt["bpw_budget"].get<double>(), 2.7 + 0.05 * double(k), 1e-9);
    EXPECT_TRUE(pt["optimal"].get<bool>());
    EXPECT_LE(pt["linear_bpw"].get<double>(), pt["bpw_budget"].get<double>());
    EXPECT_GE(pt["score"].get<double>(), prev);  // more budget never scores less
    EXPECT_EQ(pt["on_front"].get<bool>(), pt["score"].get<double>() > prev);
    prev = pt["score"].get<double>();
    auto p = Plan::load(dir + "/" + pt["plan"].get<std::string>());
    ASSERT_TRUE(p.is_ok()) << pt.dump();
    EXPECT_EQ(plan_size(m_, *p).linear_bytes, pt["linear_bytes"].get<uint64_t>());
    EXPECT_DOUBLE_EQ(score_of(*p, scores_json_), pt["score"].get<double>());
  }
  EXPECT_TRUE(fs::exists(dir + "/plan-3.00bpw.json"));
  // A sweep point equals the single solve at that budget.
  const std::string one = tmp_ / "one.json";
  ASSERT_EQ(gm::testing::gamma(fmt::format("solve --pool {} --scores {} --bpw 3.3 -o {}", pool_, scores_, one)).exit_code, 0);
  EXPECT_NEAR(score_of(Plan::load(one).value(), scores_json_), pts[12]["score"].get<double>(), 1e-12);
}

TEST_F(SolveCli, BadInputFailsWithOneLineAndWritesNothing) {
  const std::string out = tmp_ / "plan.json";
  auto write_scores = [&](const std::string& name, const std::function<void(json&)>& edit) {
    json j = scores_json_;
    edit(j);
    std::string path = tmp_ / name;
    EXPECT_TRUE(write_json(path, j).is_ok());
    return path;
  };
  auto with = [&](const std::string& scores, const std::string& budget = "--bpw 3.5") {
    return fmt::format("--scores {} {} -o {}", scores, budget, out);
  };
  std::string unknown = write_scores("unknown.json", [](json& j) { j["modules"]["blk.99.attn_q.weight"] = {{"score", {{"Q4_K", 0.5}}}}; });
  expect_fails(with(unknown), "blk.99.attn_q.weight, which the pool does not have", out);
  std::string cand = write_scores("cand.json", [](json& j) { j["modules"]["blk.1.attn_q.weight"]["score"]["Q8_0"] = 0.5; });
  expect_fails(with(cand), "candidate Q8_0 of module blk.1.attn_q.weight", out);
  std::string nan_str = write_scores("nan.json", [](json& j) { j["modules"]["blk.2.ffn_up.weight"]["score"]["Q4_K"] = "NaN"; });
  expect_fails(with(nan_str), "not a number", out);
  std::string null = write_scores("null.json", [](json& j) { j["modules"]["blk.2.ffn_up.weight"]["score"]["Q4_K"] = nullptr; });
  expect_fails(with(null), "not a number", out);
  std::string missing = write_scores("missing.json", [](json& j) { j["modules"].erase("blk.5.ffn_down.weight"); });
  expect_fails(with(missing), "no score for module blk.5.ffn_down.weight", out);
  std::string other = write_scores("other.json", [](json& j) { j["model_fingerprint"] = "0123456789abcdef"; });
  expect_fails(with(other), "another model", out);
  std::string schema = write_scores("schema.json", [](json& j) { j["schema"] = "gamma.plan"; });
  expect_fails(with(schema), "expected gamma.scores", out);
  {
    std::ofstream(tmp_ / "literal_nan.json") << R"({"schema": "gamma.scores", "version": 1, "modules": {"blk.0.attn_q.weight": {"score": {"Q4_K": NaN}}}})";
    std::ofstream(tmp_ / "truncated.json") << scores_json_.dump().substr(0, 1000);
  }
  expect_fails(with(tmp_ / "literal_nan.json"), "malformed JSON", out);
  expect_fails(with(tmp_ / "truncated.json"), "malformed JSON", out);
  expect_fails(with(tmp_ / "absent.json"), "absent.json", out);

  expect_fails(with(scores_, "--bpw -1"), "must be a number of bits per weight in (0, 32]", out);
  expect_fails(with(scores_, "--bpw nan"), "must be a number of bits per weight in (0, 32]", out);
  expect_fails(with(scores_, "--size -5MiB"), "negative", out);
  expect_fails(with(scores_, "--size 12XB"), "not a byte count", out);
  expect_fails(with(scores_, "--bpw 1.5"), "smallest feasible", out);
  expect_fails(with(scores_, "--bpw 3 --size 1GB"), "exactly one budget", out);
  expect_fails(fmt::format("--bpw 3 -o {}", out), "--scores FILE or --score-from-manifest", out);
  expect_fails(with(scores_, "--bpw 3 --pin ffn_down=Q8_0"), "has no candidate Q8_0", out);
  expect_fails(with(scores_, "--bpw 3 --pin blk\\.77\\.=Q4_K"), "matches no module", out);
  expect_fails(with(scores_, "--bpw 3 --allow '([=Q4_K'"), "bad pattern", out);
  expect_fails(with(scores_, "--bpw 3 --pin attn_q=Q4_K --allow attn_q=Q5_K"), "no allowed candidate", out);
  const std::string dir = tmp_ / "sweep";
  expect_fails(fmt::format("--scores {} --sweep 2.5:4.5:0.05 -o {}", scores_, dir), "sweep budget 2.5 bpw is below", dir);
  expect_fails(fmt::format("--scores {} --sweep 3:2:0.1 -o {}", scores_, dir), "START <= STOP", dir);
  expect_fails(fmt::format("--scores {} --sweep 3:4 -o {}", scores_, dir), "START:STOP:STEP", dir);
  expect_fails(fmt::format("--scores {} --bpw 3 -o {}", scores_, tmp_ / "no/such/dir/plan.json"), "does not exist",
               tmp_ / "no/such/dir/plan.json");
}

}  // namespace

namespace {

TEST(SolveBudget, ParsesSizes) {
  const std::pair<const char*, uint64_t> ok[] = {
      {"123456", 123456},        {"900MiB", 943718400},     {"1.2GB", 1200000000}, {"4 GiB", 4294967296},
      {"512kB", 512000},         {"1.5KiB", 1536},          {"0", 0},              {"2tb", 2000000000000},
      {"1e9B", 1000000000},      {"0.5MiB", 524288}};
  for (const auto& [text, bytes] : ok) {
    auto r = solve::parse_size(text);
    ASSERT_TRUE(r.is_ok()) << text << ": " << r.status().message();
    EXPECT_EQ(*r, bytes) << text;
  }
  for (const char* bad : {"", "-1", "-5MiB", "1.5", "12XB", "MiB", "nan", "inf", "1e30TiB", " 5", "5 MiB extra"})
    EXPECT_FALSE(solve::parse_size(bad).is_ok()) << bad;
}

TEST(SolveBudget, ParsesSweeps) {
  auto r = solve::parse_sweep("2.5:4.5:0.05");
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->size(), 41u);
  EXPECT_EQ(r->front(), 2.5);
  EXPECT_EQ((*r)[7], 2.85);  // rounded, not 2.8500000000000001
  EXPECT_EQ(r->back(), 4.5);
  auto one = solve::parse_sweep("3:3:0.1");
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(*one, std::vector<double>{3.0});
  for (const char* bad : {"3:2:0.1", "3:4", "a:b:c", "0:1:0.1", "1:2:0", "1:2:-0.1", "1:100000:0.0001", "1:2:0.1:4", ""})
    EXPECT_FALSE(solve::parse_sweep(bad).is_ok()) << bad;
}

}  // namespace
