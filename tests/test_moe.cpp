// Architectures beyond llama: linear modules found by llama.cpp's own quantization rule (fused
// attn_qkv, MoE experts as 3-D tensors, shared experts; routers and norms left alone), and a
// MoE model end to end: a small random-weight qwen3moe GGUF written here (stories260K's
// tokenizer), its per-expert imatrix from llama-imatrix, pooled, gamma's LibTorch MoE layer
// equal to libllama's, HAWQ-V2 and Stage I on it, solved with its experts and its attention at
// different types, emitted, the experts' bytes equal to llama-quantize's for the same recipe and imatrix,
// and run by llama-perplexity; and a random qwen2moe, whose shared expert is three more modules.
#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <functional>
#include <random>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "decoder/activations.h"
#include "decoder/hparams.h"
#include "decoder/verify.h"
#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "learn/candidates.h"
#include "learn/layer_step.h"
#include "pool/manifest.h"
#include "layer_checks.h"
#include "testing.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {

constexpr int kEmbd = 64, kHead = 4, kHeadKv = 2, kHeadDim = 16, kLayers = 2, kExperts = 4, kUsed = 2, kFfExp = 64;
constexpr int kFfShexp = 96;  // qwen2moe's shared expert: another width than the experts', to catch a mix-up

// qwen3moe (or qwen2moe: q/k/v biases, no QK-norm, a shared expert with its sigmoid gate) with
// random F32 weights (norms 1), stories260K's tokenizer and vocabulary.
void write_moe(const std::string& path, const std::string& arch = "qwen3moe") {
  const bool q2 = arch == "qwen2moe";
  auto src = Model::open(stories260k());
  ASSERT_TRUE(src.is_ok());
  const int64_t vocab = (*src)->tensor("token_embd.weight").shape[1];
  GgufWriter w;
  gguf_set_kv(w.gguf(), (*src)->gguf());  // tokenizer.* (and stories' own llama.* keys, unused)
  gguf_set_val_str(w.gguf(), "general.architecture", arch.c_str());
  gguf_set_val_str(w.gguf(), "general.name", "gamma-test-moe");
  gguf_set_val_u32(w.gguf(), "general.file_type", 0);
  auto u32 = [&](const char* k, uint32_t v) { gguf_set_val_u32(w.gguf(), (arch + "." + k).c_str(), v); };
  u32("block_count", kLayers);
  u32("context_length", 256);
  u32("embedding_length", kEmbd);
  u32("feed_forward_length", kFfExp);
  u32("attention.head_count", kHead);
  u32("attention.head_count_kv", kHeadKv);
  u32("attention.key_length", kHeadDim);
  u32("attention.value_length", kHeadDim);
  u32("expert_count", kExperts);
  u32("expert_used_count", kUsed);
  u32("expert_feed_forward_length", kFfExp);
  if (q2) u32("expert_shared_feed_forward_length", kFfShexp);
  gguf_set_val_f32(w.gguf(), (arch + ".attention.layer_norm_rms_epsilon").c_str(), 1e-6f);
  gguf_set_val_f32(w.gguf(), (arch + ".rope.freq_base").c_str(), 10000.0f);
  const ggml_type F32 = GGML_TYPE_F32;
  w.add({"token_embd.weight", F32, {kEmbd, vocab}});
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.add({b + "attn_norm.weight", F32, {kEmbd}});
    w.add({b + "attn_q.weight", F32, {kEmbd, kHead * kHeadDim}});
    w.add({b + "attn_k.weight", F32, {kEmbd, kHeadKv * kHeadDim}});
    w.add({b + "attn_v.weight", F32, {kEmbd, kHeadKv * kHeadDim}});
    w.add({b + "attn_output.weight", F32, {kHead * kHeadDim, kEmbd}});
    if (q2) {
      w.add({b + "attn_q.bias", F32, {kHead * kHeadDim}});
      w.add({b + "attn_k.bias", F32, {kHeadKv * kHeadDim}});
      w.add({b + "attn_v.bias", F32, {kHeadKv * kHeadDim}});
    } else {
      w.add({b + "attn_q_norm.weight", F32, {kHeadDim}});
      w.add({b + "attn_k_norm.weight", F32, {kHeadDim}});
    }
    w.add({b + "ffn_norm.weight", F32, {kEmbd}});
    w.add({b + "ffn_gate_inp.weight", F32, {kEmbd, kExperts}});
    w.add({b + "ffn_gate_exps.weight", F32, {kEmbd, kFfExp, kExperts}});
    w.add({b + "ffn_up_exps.weight", F32, {kEmbd, kFfExp, kExperts}});
    w.add({b + "ffn_down_exps.weight", F32, {kFfExp, kEmbd, kExperts}});
    if (q2) {
      w.add({b + "ffn_gate_inp_shexp.weight", F32, {kEmbd}});
      w.add({b + "ffn_gate_shexp.weight", F32, {kEmbd, kFfShexp}});
      w.add({b + "ffn_up_shexp.weight", F32, {kEmbd, kFfShexp}});
      w.add({b + "ffn_down_shexp.weight", F32, {kFfShexp, kEmbd}});
    }
  }
  w.add({"output_norm.weight", F32, {kEmbd}});
  w.add({"output.weight", F32, {kEmbd, vocab}});
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.08f);
  auto st = w.write(path, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
    const auto& t = w.tensors()[i];
    std::vector<float> x(size_t(t.nbytes() / 4));
    const bool norm = t.name.find("norm") != std::string::npos;
    for (auto& v : x) v = norm ? 1.0f : nd(rng);
    buf.assign(reinterpret_cast<const uint8_t*>(x.data()), reinterpret_cast<const uint8_t*>(x.data()) + t.nbytes());
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
}

// gamma's LibTorch layer on `moe` equals libllama's (layer and logits within 1e-4 over 64
// tokens), and each of `wrong` (a deliberately wrong hyperparameter) breaks that match.
void expect_layer_matches_libllama(const std::string& moe, const std::string& label,
                                   const std::vector<std::function<void(HParams&)>>& wrong) {
  std::vector<int32_t> toks(64);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t(1 + (i * 37) % 500);
  auto v = verify_against_llama(moe, toks, 2);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  std::printf("[%s] %s\n", label.c_str(), v->to_json().dump().c_str());
  for (size_t il = 0; il < v->layer_rel_err.size(); ++il) {
    EXPECT_LT(v->layer_rel_err[il], 1e-4) << "layer " << il;
    EXPECT_LT(v->layer_max_err[il], 1e-4) << "layer " << il;
  }
  EXPECT_LT(v->logit_rel_err, 1e-4);
  for (const auto& tweak : wrong) {
    auto w = verify_against_llama(moe, toks, 2, tweak);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    EXPECT_GT(*std::max_element(w->layer_rel_err.begin(), w->layer_rel_err.end()), 1e-3);
  }
}

// HAWQ-V2 on the pool in d/pool through gamma's layer: every `kinds` tensor of every layer has a
// positive Hessian trace. Writes d/hawq.json.
void expect_hawq_traces(const TempDir& d, const std::string& moe, const std::vector<const char*>& kinds) {
  auto r = gamma("hawq " + d / "pool" + " --teacher " + moe + " --samples 2 --seqs 2 --calib-tokens 128 --seq-len 64 -t 2 -q" +
                 " --cache-dir " + d / "acts" + " -o " + d / "hawq.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json hawq = read_json(d / "hawq.json", "gamma.scores", 1).value();
  for (int l = 0; l < kLayers; ++l)
    for (const char* k : kinds)
      EXPECT_GT(hawq["modules"]["blk." + std::to_string(l) + "." + k + ".weight"]["hessian_trace"].get<double>(), 0) << k;
}

std::set<std::string> kinds(const Model& m) {
  std::set<std::string> k;
  for (const auto& lm : m.linear()) k.insert(lm.kind);
  return k;
}

}  // namespace

// The seeds' layouts (fuzz/gguf_seeds.cpp builds the same): llama.cpp's rule decides.
TEST(Architectures, ModulesAreWhatLlamaQuantizeQuantizes) {
  TempDir d;
  struct L { const char* arch; std::vector<OutTensor> ts; std::set<std::string> want; };
  const ggml_type F32 = GGML_TYPE_F32, Q8 = GGML_TYPE_Q8_0;
  const std::vector<L> layouts = {
      {"qwen3moe",
       {{"token_embd.weight", Q8, {256, 8}}, {"blk.0.attn_norm.weight", F32, {256}}, {"blk.0.attn_q.weight", Q8, {256, 4}},
        {"blk.0.ffn_gate_inp.weight", F32, {256, 4}}, {"blk.0.ffn_up_exps.weight", Q8, {256, 8, 4}},
        {"blk.0.ffn_down_exps.weight", Q8, {256, 256, 4}}, {"blk.0.ffn_up_shexp.weight", Q8, {256, 8}},
        {"output.weight", Q8, {256, 8}}},
       {"attn_q", "ffn_up_exps", "ffn_down_exps", "ffn_up_shexp"}},
      {"phi3",
       {{"token_embd.weight", Q8, {256, 8}}, {"blk.0.attn_qkv.weight", Q8, {256, 12}},
        {"blk.0.attn_output.weight", Q8, {256, 4}}, {"blk.0.ffn_norm.weight", F32, {256}}},
       {"attn_qkv", "attn_output"}},
      // MLA (DeepSeek-V2/V3): the low-rank projections are modules; their norms are not.
      {"deepseek2",
       {{"token_embd.weight", Q8, {256, 8}}, {"blk.0.attn_q_a.weight", Q8, {256, 8}},
        {"blk.0.attn_q_a_norm.weight", F32, {256}}, {"blk.0.attn_q_b.weight", Q8, {256, 8}},
        {"blk.0.attn_kv_a_mqa.weight", Q8, {256, 8}}, {"blk.0.attn_kv_a_norm.weight", F32, {256}},
        {"blk.0.attn_kv_b.weight", Q8, {256, 8}}, {"blk.0.attn_output.weight", Q8, {256, 4}},
        {"blk.0.exp_probs_b.bias", F32, {4}}},
       {"attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b", "attn_output"}},
  };
  for (const auto& l : layouts) {
    SCOPED_TRACE(l.arch);
    GgufWriter w;
    gguf_set_val_str(w.gguf(), "general.architecture", l.arch);
    gguf_set_val_u32(w.gguf(), (std::string(l.arch) + ".block_count").c_str(), 1);
    for (const auto& t : l.ts) w.add(t);
    const std::string path = d / (std::string(l.arch) + ".gguf");
    ASSERT_TRUE(w.write(path, [&](size_t i, std::vector<uint8_t>& b) {
                   b.assign(w.tensors()[i].nbytes(), 0);
                   return Status::ok();
                 }).is_ok());
    auto m = Model::open(path);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(kinds(**m), l.want);
  }
}

TEST(Moe, PoolPlanEmitExpertsAndAttentionAtTheirOwnTypesRunsInLlamaCpp) {
  TempDir d;
  const std::string moe = d / "moe.gguf";
  write_moe(moe);
  auto m = Model::open(moe);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->arch(), "qwen3moe");
  EXPECT_EQ(kinds(**m), (std::set<std::string>{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_exps",
                                               "ffn_up_exps", "ffn_down_exps"}));
  EXPECT_EQ((*m)->tensor("blk.1.ffn_down_exps.weight").shape, (std::vector<int64_t>{kFfExp, kEmbd, kExperts}));

  // llama-imatrix's importance of a MoE tensor is per expert: the pool and llama-quantize
  // both weight each expert by its own.
  auto r = run_llama_tool(llama_tool("llama-imatrix") + " -m " + moe + " -f " + shared_data("text/wiki.valid.tokens") +
                              " -c 64 --chunks 4 -t 2 -o " + d / "imatrix.gguf",
                          "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gamma("pool " + moe + " --types Q4_0,Q8_0 --imatrix " + d / "imatrix.gguf" + " -o " + d / "pool" + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The sampled-row estimate with every row is the pool's own table, experts included.
  r = gamma("inspect " + d / "pool" + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json pool_table = json::parse(r.output);
  r = gamma("inspect " + moe + " --errors --types Q4_0,Q8_0 --imatrix " + d / "imatrix.gguf" + " --rows 100000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json est_table = json::parse(r.output);
  ASSERT_EQ(est_table["types"].size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_DOUBLE_EQ(est_table["types"][i]["rel_err_mean"].get<double>(), pool_table["types"][i]["rel_err_mean"].get<double>());
  // gamma's LibTorch MoE layer computes what libllama's does: router softmax, top-2 of 4,
  // renormalized weights, each expert's SwiGLU on its tokens. A wrong routing fails that
  // match: top-1, or the weights not renormalized.
  expect_layer_matches_libllama(moe, "qwen3moe", {[](HParams& h) { h.n_expert_used = 1; },
                                                  [](HParams& h) { h.expert_norm = false; }});
  // HAWQ-V2 scores the experts through it; `gamma solve` on those scores gives the experts and
  // the attention their own types, and emit writes them.
  expect_hawq_traces(d, moe, {"attn_q", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"});
  r = gamma("solve " + d / "pool" + " --scores " + d / "hawq.json" + " --bpw 6 -o " + d / "solved.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto solved = read_json(d / "solved.json", "gamma.plan", 1);
  ASSERT_TRUE(solved.is_ok()) << solved.status().message();
  std::set<std::string> expert_types, attn_types;
  for (const auto& [name, id] : (*solved)["modules"].items())
    (name.find("_exps") != std::string::npos ? expert_types : attn_types).insert(id.get<std::string>());
  EXPECT_NE(expert_types, attn_types) << (*solved).dump();
  std::printf("[solved at 6 bpw] experts %s, attention %s\n", fmt::format("{}", fmt::join(expert_types, ",")).c_str(),
              fmt::format("{}", fmt::join(attn_types, ",")).c_str());
  r = gamma("emit " + d / "pool" + " " + d / "solved.json" + " -o " + d / "solved.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto sf = Model::open(d / "solved.gguf");
  ASSERT_TRUE(sf.is_ok()) << sf.status().message();
  for (const auto& lm : (*sf)->linear())
    EXPECT_EQ(type_name((*sf)->tensors()[lm.tensor].type), (*solved)["modules"][lm.name].get<std::string>()) << lm.name;
  // Stage I through the same layer, both forcings: with the FFN forced on the teacher's
  // attention output (the experts' candidates run per step, routed as the teacher routes), every
  // 2nd step measuring each candidate's loss change; an expert at Q4_0 costs more than at Q8_0.
  for (const std::string forcing : {"sublayer", "layer"}) {
    const std::string out = d / ("learn-" + forcing + ".json");
    r = gamma("learn " + d / "pool" + " --teacher " + moe + " --bpw 6 --steps 8 --seqs 2 --calib-tokens 256 --seq-len 64" +
              " --forcing " + forcing + (forcing == "sublayer" ? " --visit-steps 4 --measure-every 2" : "") +
              " -t 2 -q --cache-dir " + d / "acts" + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json learned = read_json(out, "gamma.scores", 1).value();
    EXPECT_EQ(learned["modules"].size(), size_t(7 * kLayers)) << forcing;
    if (forcing != "sublayer") continue;
    int costlier = 0, experts = 0;
    for (const auto& [name, m] : learned["modules"].items()) {
      if (name.find("_exps") == std::string::npos) continue;
      ++experts;
      costlier += m["delta"]["Q4_0"].get<double>() > m["delta"]["Q8_0"].get<double>();
    }
    EXPECT_EQ(experts, 3 * kLayers);
    EXPECT_EQ(costlier, experts) << learned["modules"].dump();
  }
  // gamma run keeps every scorer for it.
  r = gamma("run " + moe + " --dry-run --bpw 6 -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hawq traces"), std::string::npos) << r.output;
  r = gamma("plan " + d / "pool" + " --uniform Q8_0 -o " + d / "q8.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto plan = read_json(d / "q8.json", "gamma.plan", 1);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  int experts = 0;
  for (auto& [name, id] : (*plan)["modules"].items())
    if (name.find("_exps") != std::string::npos) id = "Q4_0", ++experts;
  EXPECT_EQ(experts, 3 * kLayers);
  ASSERT_TRUE(write_json(d / "mix.json", *plan).is_ok());
  r = gamma("emit " + d / "pool" + " " + d / "mix.json" + " -o " + d / "mix.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto mix = Model::open(d / "mix.gguf");
  ASSERT_TRUE(mix.is_ok()) << mix.status().message();
  for (const auto& lm : (*mix)->linear())
    EXPECT_EQ(type_name((*mix)->tensors()[lm.tensor].type), lm.kind.find("_exps") != std::string::npos ? "Q4_0" : "Q8_0")
        << lm.name;
  EXPECT_EQ((*mix)->tensor("blk.0.ffn_gate_inp.weight").type, GGML_TYPE_F32) << "the router is left alone";

  // llama-quantize from the same source with gamma's recipe writes the same expert bytes.
  r = run_llama_tool(llama_tool("llama-quantize") + " --imatrix " + d / "imatrix.gguf" + " --tensor-type-file " +
                         d / "mix.tensor-types.txt" + " " + moe + " " +
                         d / "lq.gguf" + " Q8_0 1", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lq = Model::open(d / "lq.gguf");
  ASSERT_TRUE(lq.is_ok());
  for (const char* n : {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight", "blk.1.attn_q.weight"}) {
    const auto& a = (*mix)->tensor(n);
    const auto& b = (*lq)->tensor(n);
    ASSERT_EQ(a.type, b.type) << n;
    std::vector<uint8_t> x(a.nbytes), y(b.nbytes);
    ASSERT_TRUE((*mix)->read_raw(a, x.data()).is_ok() && (*lq)->read_raw(b, y.data()).is_ok());
    EXPECT_TRUE(x == y) << n;
  }
  // llama.cpp runs it: routing, top-k, the experts at Q4_0.
  r = run_llama_tool(llama_tool("llama-perplexity") + " -m " + d / "mix.gguf" + " -f " +
                         shared_data("text/wiki.valid.tokens") + " -c 64 --chunks 2 -t 2 -b 64",
                     "Final estimate");
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0);
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(r.output, sm, std::regex("Final estimate: PPL = ([0-9.]+)"))) << r.output;
  EXPECT_GT(std::stod(sm[1]), 1.0);
}

// Stage I's measured loss change on a MoE layer is exact as on a dense one (test_learn.cpp's
// LayerGrad test): for every module, the expert tensors included (their candidates run per
// step, each routed as the teacher routes) and qwen2moe's shared expert, what visit_deltas
// reports equals the sublayer loss with that module alone switched to the candidate minus the
// loss as it is, both by visit_step, for a one-hot assignment and for a mixture.
TEST(Moe, MeasuredLossChangeIsTheLossOfTheSwitchedAssignment) {
  for (const std::string arch : {"qwen3moe", "qwen2moe"}) {
    SCOPED_TRACE(arch);
    TempDir d;
    const std::string moe = d / "moe.gguf";
    write_moe(moe, arch);
    auto r = gamma("pool " + moe + " --types Q4_0,Q8_0 -o " + d / "pool" + " -q");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto man = Manifest::load(d / "pool");
    ASSERT_TRUE(man.is_ok()) << man.status().message();
    auto store = CandidateStore::open(*man);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    constexpr int kSeq = 32;
    CalibOptions co;
    co.seq_len = kSeq;
    co.calib_tokens = 2 * kSeq;
    co.cache_root = d / "act";
    co.quiet = true;
    auto cache = ActivationCache::open_or_build(moe, co);
    ASSERT_TRUE(cache.is_ok()) << cache.status().message();
    auto step = LayerStep::create(moe, kSeq, 2);
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    const int il = 1;
    std::vector<float> x(size_t(2) * kSeq * kEmbd), y(x.size());
    ASSERT_TRUE((*cache)->read(il, {0, 1}, x.data()).is_ok());
    ASSERT_TRUE((*cache)->read(il + 1, {0, 1}, y.data()).is_ok());
    const char* names[kLayerKinds] = {"attn_q",        "attn_k",         "attn_v",         "attn_output",   "ffn_gate_exps",
                                      "ffn_up_exps",   "ffn_down_exps",  "ffn_gate_shexp", "ffn_up_shexp",  "ffn_down_shexp"};
    const int n_kinds = arch == "qwen2moe" ? 10 : 7;
    std::deque<std::vector<float>> bufs;
    LayerMix mixed;
    LayerDeltas grads;
    std::mt19937 rng(13);
    std::uniform_real_distribution<double> u(0.1, 1.0);
    for (int k = 0; k < n_kinds; ++k) {
      const ModuleEntry* e = man->find("blk." + std::to_string(il) + "." + names[k] + ".weight");
      ASSERT_NE(e, nullptr) << names[k];
      double sum = 0;
      for (const auto& c : e->candidates) {
        bufs.emplace_back(size_t(e->n_params));
        ASSERT_TRUE((*store)->dequantize(*e, c, bufs.back().data(), 2).is_ok());
        mixed[size_t(k)].cands.push_back(bufs.back().data());
        mixed[size_t(k)].p.push_back(u(rng));
        sum += mixed[size_t(k)].p.back();
      }
      for (double& p : mixed[size_t(k)].p) p /= sum;
      mixed[size_t(k)].grad = &grads[size_t(k)];
    }
    EXPECT_FALSE((*step)->cached_kind(4)) << "a MoE layer's experts run per step";
    const LayerMix onehot = one_hot_of(mixed, n_kinds);
    ASSERT_TRUE((*step)->begin_visit(il, mixed, x.data(), y.data(), 2).is_ok());
    int nonzero = 0;
    for (const LayerMix* base : {&onehot, static_cast<const LayerMix*>(&mixed)})
      nonzero += expect_deltas_are_switched_losses(**step, il, *base, base == &onehot, n_kinds, names);
    EXPECT_GE(nonzero, 2 * n_kinds);  // each module: the one-hot's other type, the mixture's both
    (*step)->end_visits();
  }
}

// qwen2moe: the routed experts' weights not renormalized, and a shared expert every token
// takes, gated per token by a sigmoid. gamma's layer equals libllama's (without the shared
// expert, or with renormalized weights, it does not); the shared expert's three tensors are
// modules that HAWQ-V2 and Stage I score and `gamma solve` types on their own; llama.cpp runs
// the file.
TEST(Moe, SharedExpertQwen2MoeMatchesLibllamaScoresAndRuns) {
  TempDir d;
  const std::string moe = d / "moe.gguf";
  write_moe(moe, "qwen2moe");
  auto m = Model::open(moe);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(kinds(**m), (std::set<std::string>{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_exps", "ffn_up_exps",
                                               "ffn_down_exps", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"}));
  expect_layer_matches_libllama(moe, "qwen2moe", {[](HParams& h) { h.n_ff_shexp = 0; },
                                                  [](HParams& h) { h.expert_norm = true; }});
  auto r = gamma("pool " + moe + " --types Q4_0,Q8_0 -o " + d / "pool" + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_hawq_traces(d, moe, {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_down_exps"});
  r = gamma("learn " + d / "pool" + " --teacher " + moe + " --bpw 6 --steps 8 --seqs 2 --calib-tokens 256 --seq-len 64" +
            " --forcing sublayer --visit-steps 4 --measure-every 2 -t 2 -q --cache-dir " + d / "acts" + " -o " + d / "learn.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json learned = read_json(d / "learn.json", "gamma.scores", 1).value();
  EXPECT_EQ(learned["modules"].size(), size_t(10 * kLayers));
  for (const auto& [name, mod] : learned["modules"].items())
    if (name.find("_shexp") != std::string::npos)
      EXPECT_GT(mod["delta"]["Q4_0"].get<double>(), mod["delta"]["Q8_0"].get<double>()) << name;
  r = gamma("solve " + d / "pool" + " --scores " + d / "hawq.json" + " --bpw 6 -o " + d / "solved.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gamma("emit " + d / "pool" + " " + d / "solved.json" + " -o " + d / "solved.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_llama_tool(llama_tool("llama-perplexity") + " -m " + d / "solved.gguf" + " -f " +
                         shared_data("text/wiki.valid.tokens") + " -c 64 --chunks 2 -t 2 -b 64",
                     "Final estimate");
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0);
  EXPECT_NE(r.output.find("Final estimate: PPL = "), std::string::npos);
  r = gamma("run " + moe + " --dry-run --bpw 6 -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
}

// Every architecture llama.cpp lists opens, or is refused in one line (the one it lists without
// a model), and `gamma inspect --architectures` says which allocators each has.
TEST(Architectures, EveryOneLlamaCppListsOpensOrIsRefusedInOneLine) {
  TempDir d;
  const auto archs = llama_architectures();
  ASSERT_GT(archs.size(), 100u);
  int opened = 0;
  for (const auto& a : archs) {
    GgufWriter w;
    gguf_set_val_str(w.gguf(), "general.architecture", a.name.c_str());
    gguf_set_val_u32(w.gguf(), (a.name + ".block_count").c_str(), 1);
    w.add({"blk.0.attn_q.weight", GGML_TYPE_Q8_0, {256, 4}});
    w.add({"blk.0.ffn_up_exps.weight", GGML_TYPE_Q8_0, {256, 8, 2}});
    const std::string path = d / (a.name + ".gguf");
    ASSERT_TRUE(w.write(path, [&](size_t i, std::vector<uint8_t>& b) {
                   b.assign(w.tensors()[i].nbytes(), 0);
                   return Status::ok();
                 }).is_ok());
    auto m = Model::open(path);
    EXPECT_EQ(m.is_ok(), a.has_model) << a.name << ": " << (m.is_ok() ? "" : m.status().message());
    if (!m.is_ok()) {
      EXPECT_EQ(m.status().message().find('\n'), std::string::npos) << m.status().message();
      continue;
    }
    ++opened;
    EXPECT_EQ((*m)->linear().size(), 2u) << a.name;
  }
  EXPECT_GT(opened, 100);
  auto r = gamma("inspect --architectures");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("qwen3moe             static,static-cal,hawq,gamma\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qwen2                static,static-cal,hawq,gamma\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gemma3               static,static-cal,hawq,gamma\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qwen2moe             static,static-cal,hawq,gamma\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("deepseek2            static,static-cal\n"), std::string::npos) << r.output;
}
