// A second architecture end to end: Gemma-3-270M (gemma3, `gamma fetch gemma3-270m`, fetched by
// scripts/test.sh) through every stage that goes by gguf.h and libllama — inspect, teacher,
// pool, plan, emit, eval — judged by llama.cpp loading and scoring the emitted file; and the
// stages of gamma's LibTorch decoder: its layers equal libllama's (sliding window included),
// HAWQ-V2 scores the pool, and `gamma run` keeps every scorer. Skips when the model is not cached.
#include <algorithm>
#include <filesystem>

#include "decoder/verify.h"
#include "testing.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {

std::string gemma3() {
  const char* c = std::getenv("GAMMA_CACHE");
  const char* x = std::getenv("XDG_CACHE_HOME");
  const char* h = std::getenv("HOME");
  std::string base = c ? c : (x ? std::string(x) + "/gamma" : std::string(h ? h : "/root") + "/.cache/gamma");
  std::string p = base + "/models/gemma-3-270m-q4_k_m.gguf";
  return fs::exists(p) ? p : "";
}

}  // namespace

TEST(Gemma3, EveryStageRunsAndTheDecoderEqualsLibllama) {
  const std::string model = gemma3();
  if (model.empty()) GTEST_SKIP() << "gemma3-270m not cached (gamma fetch gemma3-270m)";
  TempDir d;
  auto r = gamma("inspect " + model + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["arch"], "gemma3");
  EXPECT_EQ(j["linear"].size(), 18u * 7u);  // 18 layers x q, k, v, o, gate, up, down

  const std::string teacher = d / "t.gguf", pool = d / "pool";
  ASSERT_EQ(gamma("dequantize " + model + " -o " + teacher).exit_code, 0);
  r = gamma("pool " + model + " --types Q8_0,Q4_0 -q -o " + pool);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(gamma("plan " + pool + " --uniform Q8_0 -o " + d / "q8.json").exit_code, 0);
  r = gamma("emit " + pool + " " + d / "q8.json" + " -o " + d / "q8.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // llama.cpp loads and runs the emitted file; at Q8_0 it is close to the teacher.
  const std::string text = shared_data("text/wiki.valid.tokens");
  r = gamma("eval " + d / "q8.gguf" + " --teacher " + teacher + " --text " + text + " -c 128 --chunks 2 -t 2 -q -o " +
            d / "q8.eval.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json ev = read_json(d / "q8.eval.json", "gamma.eval", 1).value();
  EXPECT_GT(ev["kld"]["mean"].get<double>(), 0);
  EXPECT_LT(ev["kld"]["mean"].get<double>(), 0.05);
  EXPECT_GT(ev["kld"]["top1"].get<double>(), 0.9);

  // gamma's LibTorch decoder computes Gemma's layers as libllama does: 640 tokens, so the
  // local layers' 512-token window hides keys (results/learn_verify_gemma3_270m.json: 1,024).
  std::vector<int32_t> toks(640);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t(2 + (i * 7919) % 30000);
  auto v = verify_against_llama(teacher, toks, 2);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_LT(*std::max_element(v->layer_rel_err.begin(), v->layer_rel_err.end()), 1e-4);
  EXPECT_LT(*std::max_element(v->layer_max_err.begin(), v->layer_max_err.end()), 1e-4);
  EXPECT_LT(v->logit_rel_err, 1e-4);
  // HAWQ-V2 scores every module of the pool through it.
  r = gamma("hawq " + pool + " --teacher " + teacher + " --samples 1 --seqs 1 --calib-tokens 128 --seq-len 128 -t 2 -q" +
            " --cache-dir " + d / "acts" + " -o " + d / "h.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json h = read_json(d / "h.json", "gamma.scores", 1).value();
  EXPECT_EQ(h["modules"].size(), 18u * 7u);
  // gamma run keeps every scorer for it.
  r = gamma("run " + model + " --dry-run --size 200MB -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hawq traces (on the estimate)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("learn ("), std::string::npos) << r.output;
}
