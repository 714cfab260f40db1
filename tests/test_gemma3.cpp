// A second architecture end to end: Gemma-3-270M (gemma3, `gamma fetch gemma3-270m`, fetched by
// scripts/test.sh) through every stage that goes by gguf.h and libllama — inspect, teacher,
// pool, plan, emit, eval — judged by llama.cpp loading and scoring the emitted file; and the
// stages that need gamma's LibTorch decoder refuse it in one line, while `gamma run` says which
// scorers it skips and measures with gamma layers instead. Skips when the model is not cached.
#include <filesystem>

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

TEST(Gemma3, EveryLibllamaStageRunsAndTheDecoderStagesSayTheyCannot) {
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

  // HAWQ-V2 needs the LibTorch decoder: one line, naming what it has.
  r = gamma("hawq " + pool + " --teacher " + teacher + " -o " + d / "h.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma's LibTorch decoder (HAWQ-V2, Stage I) has no gemma3 layer"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(d / "h.json"));
  // gamma run keeps the scorers the architecture allows and says which it skipped.
  r = gamma("run " + model + " --dry-run --size 200MB -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("== scorers: hawq, gamma skipped (gamma's LibTorch decoder"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("static-cal (the static proxy rescaled by gamma layers) tried instead"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("hawq (HAWQ-V2 traces)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layers (19 files, KLD each)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("6 variants: solve + emit"), std::string::npos) << r.output;  // static, static-cal x 3 heads
}
