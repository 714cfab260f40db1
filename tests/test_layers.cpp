// gamma layers on stories260K, in seconds: each layer's recorded KLD is what gamma eval measures
// for the file with that layer at the low type and everything else at the source's (one chunk per
// decode, as gamma layers evaluates; its files start at their layer, run from the base file's
// hidden states there), a stopped measurement resumes from its partial file, and bad input is one
// line that leaves nothing.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "emit/emit.h"
#include "gguf_model/model.h"
#include "layers/layers.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "scores/layer_scale.h"
#include "testing.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;
using gm::testing::gamma;
using gm::testing::TempDir;

namespace {

struct Fixture {
  TempDir d;
  std::string pool = d / "pool", text = gm::testing::shared_data("text/wiki.valid.tokens");
  Fixture() {
    auto r = gamma("pool " + gm::testing::stories260k() + " --types Q4_0,Q5_0,Q8_0 -q -o " + pool);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  std::string layers(const std::string& out, const std::string& extra = "", int ctx = 128, int chunks = 2) {
    return fmt::format("layers {} --teacher {} --calib {} -c {} --chunks {} -t 2 -q {} -o {}", pool,
                       gm::testing::stories260k(), text, ctx, chunks, extra, out);
  }
  // gamma eval's KLD of `plan`'s whole file on the same chunks, one chunk per decode.
  double kld_of(const gm::Plan& plan, const std::string& stem) {
    EXPECT_TRUE(plan.save(stem + ".json").is_ok());
    return gm::testing::stories_plan_kld(pool, stem + ".json", text, 128, 2, "--batch 128");
  }
};

}  // namespace

TEST(Layers, EachLayersKldIsWhatEvalMeasuresForThatFile) {
  Fixture f;
  const std::string out = f.d / "layers.json";
  auto r = gamma(f.layers(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto ls = gm::scores::LayerSensitivity::load(out);
  auto m = gm::Manifest::load(f.pool);
  ASSERT_TRUE(ls.is_ok() && m.is_ok()) << ls.status().message();
  EXPECT_EQ(ls->kld.size(), size_t(m->n_layer));
  EXPECT_EQ(ls->info["config"]["from_layer"], true);  // llama: the files after layer 0 are cut
  // The stories pool has no Q2_K: auto takes the cheapest type every module with a choice has.
  // A module with one candidate (F16 only) stays at it; the reference is the source's type, or
  // (an F32 source) the closest candidate.
  for (const auto& e : m->modules) {
    EXPECT_EQ(ls->low.at(e.name), e.candidates.size() > 1 ? "Q4_0" : e.candidates[0].id) << e.name;
    EXPECT_EQ(ls->ref.at(e.name), e.candidates.size() > 1 ? "Q8_0" : e.candidates[0].id) << e.name;
  }
  gm::Plan p;
  p.model_fingerprint = m->model_fingerprint;
  p.modules = ls->ref;
  for (const auto& t : m->fixed) p.fixed[t.name] = t.source_type;
  EXPECT_NEAR(ls->base_kld, f.kld_of(p, f.d / "base"), 1e-12);
  // Layer 0's file is whole; layer 2's and the last's start at their layer, from the base file's
  // states, and give what their whole files give.
  const gm::Plan base = p;
  for (int l : {0, 2, m->n_layer - 1}) {
    p = base;
    for (const auto& e : m->modules)
      if (e.layer == l) p.modules[e.name] = ls->low.at(e.name);
    EXPECT_NEAR(ls->kld.at(l), f.kld_of(p, f.d / fmt::format("layer{}", l)), 1e-12) << l;
  }
  for (const auto& [l, k] : ls->kld) EXPECT_GT(k, ls->base_kld) << l;  // Q4_0 costs more than Q8_0 in every layer
  for (const char* left : {".lock", ".partial.json", ".layer.gguf"}) EXPECT_FALSE(fs::exists(out + left)) << left;
}

TEST(Layers, AStoppedMeasurementResumesFromItsPartialFile) {
  Fixture f;
  const std::string a = f.d / "a.json", b = f.d / "b.json";
  ASSERT_EQ(gamma(f.layers(a)).exit_code, 0);
  auto la = gm::scores::LayerSensitivity::load(a);
  ASSERT_TRUE(la.is_ok());
  // What a measurement stopped after the base file and layer 0 leaves (layer 0's value marked).
  gm::json part = gm::json_header("gamma.layers.partial", 1);
  part["config"] = la->info["config"];
  part["kld"] = {{"base", la->base_kld}, {"0", 123.0}};
  part["seconds"] = 1.0;
  ASSERT_TRUE(gm::write_json(b + ".partial.json", part).is_ok());
  auto r = gamma(f.layers(b));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("{} files evaluated (resumed after 2)", la->kld.size() - 1)), std::string::npos)
      << r.output;
  auto lb = gm::scores::LayerSensitivity::load(b);
  ASSERT_TRUE(lb.is_ok());
  EXPECT_EQ(lb->kld.at(0), 123.0);  // taken from the partial file, not measured again
  for (const auto& [l, k] : la->kld)
    if (l > 0) EXPECT_NEAR(lb->kld.at(l), k, 1e-12) << l;
  EXPECT_FALSE(fs::exists(b + ".partial.json"));

  // A partial file of another measurement (here: of 3 chunks) is refused, not mixed in.
  part["config"]["chunks"] = 3;
  const std::string c = f.d / "c.json";
  ASSERT_TRUE(gm::write_json(c + ".partial.json", part).is_ok());
  r = gamma(f.layers(c));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is from another measurement (chunks differs)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(c));

  // So is one from before the files started at their layer (no batch in its config).
  part["config"]["chunks"] = 2;
  part["config"].erase("batch");
  ASSERT_TRUE(gm::write_json(c + ".partial.json", part).is_ok());
  r = gamma(f.layers(c));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is from another measurement (batch differs)"), std::string::npos) << r.output;
  part["config"]["batch"] = 128;

  // A torn or edited partial file is refused in one line, not read as numbers.
  part["config"]["chunks"] = 2;
  part["kld"]["0"] = "x";
  ASSERT_TRUE(gm::write_json(c + ".partial.json", part).is_ok());
  r = gamma(f.layers(c));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kld[0] is not a finite number"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(c));
}

// emit's first_layer: the file of the layers from there on, numbered from 0, every other tensor
// kept, the block count lowered; a cut at or past the last layer, or a negative one, is refused.
TEST(Layers, EmitCutBeforeALayerHoldsTheLayersFromThereOn) {
  Fixture f;
  auto m = gm::Manifest::load(f.pool);
  ASSERT_TRUE(m.is_ok());
  gm::Plan p;
  p.model_fingerprint = m->model_fingerprint;
  for (const auto& e : m->modules) p.modules[e.name] = e.candidates.front().id;
  for (const auto& t : m->fixed) p.fixed[t.name] = t.source_type;
  const std::string whole = f.d / "whole.gguf", cut = f.d / "cut.gguf";
  ASSERT_TRUE(gm::emit(f.pool, p, whole, 2).is_ok());
  auto r = gm::emit(f.pool, p, cut, 2, 2);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->tensor_types_path.empty());
  auto a = gm::Model::open(whole), b = gm::Model::open(cut);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << b.status().message();
  EXPECT_EQ((*b)->n_layer(), (*a)->n_layer() - 2);
  size_t kept = 0;
  for (const auto& t : (*a)->tensors()) {
    std::string name = t.name;
    if (name.rfind("blk.", 0) == 0) {
      const int l = std::stoi(name.substr(4));
      if (l < 2) continue;
      name = fmt::format("blk.{}{}", l - 2, name.substr(name.find('.', 4)));
    }
    ++kept;
    const int64_t i = (*b)->find(name);
    ASSERT_GE(i, 0) << name;
    const auto& u = (*b)->tensors()[size_t(i)];
    EXPECT_EQ(u.type, t.type) << name;
    std::vector<uint8_t> x(t.nbytes), y(u.nbytes);
    ASSERT_TRUE((*a)->read_raw(t, x.data()).is_ok() && (*b)->read_raw(u, y.data()).is_ok());
    EXPECT_EQ(x, y) << name;
  }
  EXPECT_EQ((*b)->tensors().size(), kept);
  for (int bad : {-1, m->n_layer, m->n_layer + 3}) {
    auto e = gm::emit(f.pool, p, f.d / "bad.gguf", 2, bad);
    EXPECT_FALSE(e.is_ok()) << bad;
    EXPECT_FALSE(fs::exists(f.d / "bad.gguf")) << bad;
  }
  EXPECT_TRUE(gm::starts_at_any_layer("qwen2") && gm::starts_at_any_layer("llama"));
  EXPECT_FALSE(gm::starts_at_any_layer("gemma3"));  // its sliding-window layers go by number
}

TEST(Layers, BadInputFailsWithOneLineAndWritesNothing) {
  Fixture f;
  const std::string out = f.d / "x.json";
  const std::pair<std::string, std::string> cases[] = {
      {f.layers(out, "--low Q2_K"), "--low Q2_K: no module of layer 0 has a candidate below its reference"},
      {f.layers(out, "--low Q8_0"), "--low Q8_0: no module of layer 0 has a candidate below its reference"},
      {f.layers(out, "", 128, 0), "--chunks must be at least 1"},
      {f.layers(out, "", 4), "--ctx must be at least 8"},
      {fmt::format("layers {} --teacher {} --calib {} -o {}", f.pool, f.d / "none.gguf", f.text, out), "does not exist"},
      {fmt::format("layers {} --teacher {} --calib {} -o {}", f.pool, gm::testing::stories260k(), f.d / "none.txt", out),
       "none.txt"},
      {fmt::format("layers {} --teacher {} --calib {} -o {}", f.d / "nopool", gm::testing::stories260k(), f.text, out),
       "nopool"},
  };
  for (const auto& [args, expect] : cases) {
    auto r = gamma(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("gamma: error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(out)) << args;
    EXPECT_FALSE(fs::exists(out + ".partial.json")) << args;
  }
}

// The candidates a layer is measured between, on a pool shaped like SmolLM2's Q4_1 source: the
// 1536-wide ffn_down takes every type, the 576-wide modules only 32-wide ones (no Q2_K), and a
// tensor whose rows fit no block has one candidate. auto takes Q2_K where a module has it and
// the module's cheapest candidate elsewhere (taking every module to the cheapest type they all
// share, Q4_1, would have measured nothing: the source's own type).
TEST(Layers, AutoTakesQ2KWhereAModuleHasItElseItsCheapest) {
  gm::Manifest m;
  auto module = [&](const std::string& name, int layer, std::vector<std::pair<std::string, double>> cands) {
    gm::ModuleEntry e;
    e.name = name, e.layer = layer, e.source_type = "Q4_1", e.n_params = 1000;
    uint64_t bytes = 100;
    for (const auto& [id, err] : cands) {
      gm::Candidate c;
      c.id = c.type = id, c.rel_err = err, c.bytes = c.file_bytes = bytes += 100;  // listed cheapest first
      e.candidates.push_back(c);
    }
    m.modules.push_back(e);
  };
  module("blk.0.ffn_down.weight", 0, {{"IQ2_XXS", 0.09}, {"Q2_K", 0.05}, {"IQ4_XS", 0.004}, {"Q4_1", 0}, {"Q8_0", 3e-5}});
  module("blk.0.attn_q.weight", 0, {{"IQ4_NL", 0.001}, {"Q4_1", 0}, {"Q8_0", 1e-5}});
  module("blk.0.odd.weight", 0, {{"F16", 0}});
  std::map<std::string, std::string> ref, low;
  ASSERT_TRUE(gm::layers::pick_candidates(m, "auto", &ref, &low).is_ok());
  EXPECT_EQ(low, (std::map<std::string, std::string>{
                     {"blk.0.ffn_down.weight", "Q2_K"}, {"blk.0.attn_q.weight", "IQ4_NL"}, {"blk.0.odd.weight", "F16"}}));
  EXPECT_EQ(ref.at("blk.0.ffn_down.weight"), "Q4_1");
  EXPECT_EQ(ref.at("blk.0.odd.weight"), "F16");  // not the source's type: the closest candidate
  ref.clear(), low.clear();
  ASSERT_TRUE(gm::layers::pick_candidates(m, "IQ4_NL", &ref, &low).is_ok());
  EXPECT_EQ(low.at("blk.0.ffn_down.weight"), "Q4_1");  // lacks IQ4_NL: stays at its reference
  EXPECT_EQ(low.at("blk.0.attn_q.weight"), "IQ4_NL");
  ref.clear(), low.clear();
  EXPECT_FALSE(gm::layers::pick_candidates(m, "Q8_0", &ref, &low).is_ok());  // above every reference
}

// --head measures each listed type of a non-linear tensor alone (the rest at the source's types),
// and gamma solve --choose-head solves every combination of the measured types exactly and keeps
// the least predicted KLD: the body's scores put in KLD units by the same file's layers, plus the
// head's measured cost.
TEST(Layers, HeadTypesAreMeasuredAloneAndSolveChoosesTheLeastPredictedKld) {
  Fixture f;
  const std::string out = f.d / "layers.json";
  // F32, the source's type, is the base file: listed, it is not measured again.
  auto r = gamma(f.layers(out, "--head output.weight=Q4_0,Q8_0,F32 --head token_embd.weight=Q4_0"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto ls = gm::scores::LayerSensitivity::load(out);
  auto m = gm::Manifest::load(f.pool);
  ASSERT_TRUE(ls.is_ok() && m.is_ok()) << ls.status().message();
  EXPECT_NE(r.output.find(fmt::format("; {} files evaluated", ls->kld.size() + 1 + 3)), std::string::npos) << r.output;
  ASSERT_EQ(ls->head_ref, (std::map<std::string, std::string>{{"output.weight", "F32"}, {"token_embd.weight", "F32"}}));
  EXPECT_EQ(ls->head_kld.at("output.weight").size(), 3u);  // Q4_0, Q8_0 and the source's F32 (the base file)
  EXPECT_EQ(ls->head_kld.at("output.weight").at("F32"), ls->base_kld);
  gm::Plan p;
  p.model_fingerprint = m->model_fingerprint;
  p.modules = ls->ref;
  for (const auto& t : m->fixed) p.fixed[t.name] = t.source_type;
  p.fixed["output.weight"] = "Q4_0";
  EXPECT_NEAR(ls->head_kld.at("output.weight").at("Q4_0"), f.kld_of(p, f.d / "out-q4"), 1e-12);  // a cut file
  p.fixed["output.weight"] = "F32";
  p.fixed["token_embd.weight"] = "Q4_0";
  EXPECT_NEAR(ls->head_kld.at("token_embd.weight").at("Q4_0"), f.kld_of(p, f.d / "embd-q4"), 1e-12);  // whole
  p.fixed["token_embd.weight"] = "F32";
  p.fixed["output.weight"] = "Q4_0";
  EXPECT_GT(ls->head_kld.at("output.weight").at("Q4_0"), ls->head_kld.at("output.weight").at("Q8_0"));

  // A budget where every combination fits (the all-F32 one's smallest file is ~486 KB).
  const std::string plan = f.d / "plan.json";
  const std::string solve = "solve " + f.pool + " --score-from-manifest --size 520000 ";
  r = gamma(solve + "--choose-head " + out + " -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto chosen = gm::Plan::load(plan);
  ASSERT_TRUE(chosen.is_ok());
  const gm::json& info = chosen->info.at("choose_head");
  ASSERT_EQ(info.at("options").size(), 6u);  // {F32, Q4_0, Q8_0} x {F32, Q4_0}
  // The scores in KLD units layer by layer: each layer's -rel_err times its measured change over
  // what -rel_err says taking it to the low candidates costs (every layer's change is above 0 here).
  auto rel = [&](const std::string& name, const std::string& id) { return m->find(name)->find(id)->rel_err; };
  std::map<int, double> said;
  for (const auto& [name, ref] : ls->ref) said[m->find(name)->layer] += rel(name, ls->low.at(name)) - rel(name, ref);
  auto scale = [&](const std::string& name) {
    const int l = m->find(name)->layer;
    return (ls->kld.at(l) - ls->base_kld) / said.at(l);
  };
  const gm::json* best = nullptr;
  for (const auto& o : info.at("options")) {
    ASSERT_TRUE(o.contains("total_kld")) << o.dump();
    if (!best || o.at("total_kld").get<double>() < best->at("total_kld").get<double>()) best = &o;
  }
  for (const char* t : {"output.weight", "token_embd.weight"})
    EXPECT_EQ(chosen->fixed.at(t), best->at("types").at(t).get<std::string>()) << t;
  // The chosen plan is the plain solve with those types fixed; its predicted KLD is the head's
  // measured cost plus the layer-scaled body's loss above the source's types, the body solved with
  // that head on the layer-scaled scores (gamma solve --layer-scale).
  const std::string fx = " --fixed output.weight=" + chosen->fixed.at("output.weight") +
                         " --fixed token_embd.weight=" + chosen->fixed.at("token_embd.weight");
  const std::string plain = f.d / "plain.json", scaled = f.d / "scaled.json";
  ASSERT_EQ(gamma(solve + fx + " -o " + plain).exit_code, 0);
  EXPECT_EQ(gm::Plan::load(plain)->modules, chosen->modules);
  ASSERT_EQ(gamma(solve + fx + " --layer-scale " + out + " -o " + scaled).exit_code, 0);
  double body = 0, head = 0;
  const auto scaled_plan = gm::Plan::load(scaled);
  ASSERT_TRUE(scaled_plan.is_ok());
  for (const auto& [name, id] : scaled_plan->modules)
    body += scale(name) * (rel(name, id) - rel(name, ls->ref.at(name)));
  for (const char* t : {"output.weight", "token_embd.weight"})
    head += std::max(0.0, ls->head_kld.at(t).at(chosen->fixed.at(t)) - ls->base_kld);
  EXPECT_NEAR(info.at("predicted_kld").get<double>(), body + head, 1e-9);

  // Refused in one line, nothing written: a bpw budget (it does not pay for the head), a layers
  // file without heads, a tensor the model lacks, a type the tensor cannot hold.
  ASSERT_EQ(gamma(f.layers(f.d / "nohead.json")).exit_code, 0);
  const std::string bad = f.d / "bad.json";
  const std::pair<std::string, std::string> cases[] = {
      {"solve " + f.pool + " --score-from-manifest --bpw 6 --choose-head " + out + " -o " + bad, "--choose-head takes a file-size budget"},
      {solve + "--choose-head " + (f.d / "nohead.json") + " -o " + bad, "measured no head tensor"},
      {f.layers(bad, "--head nope.weight=Q4_0"), "'nope.weight' is not a non-linear tensor of this model"},
      {f.layers(bad, "--head output.weight=Q4_0,,Q8_0"), "an empty type"},
      {f.layers(bad, "--head output.weight=IQ4_XS"), "cannot hold type IQ4_XS"},
  };
  for (const auto& [args, expect] : cases) {
    r = gamma(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(bad)) << args;
  }
}
