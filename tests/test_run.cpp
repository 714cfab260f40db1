// gamma run: the whole chain on stories260K (seconds), its resume, its comparison with the
// llama.cpp mix nearest in size, and its refusals.
#include <filesystem>

#include "run/run.h"
#include "testing.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

TEST(RunMixChoice, StartsNearestThenTriesTheNeighbourOnTheTargetSide) {
  const auto& m = standard_mixes();
  auto idx = [&](const std::string& n) {
    for (int i = 0; i < int(m.size()); ++i)
      if (n == m[i].name) return i;
    return -1;
  };
  EXPECT_EQ(m[nearest_mix(4.9)].name, std::string("Q4_K_M"));
  EXPECT_EQ(m[nearest_mix(3.2)].name, std::string("Q2_K"));
  EXPECT_EQ(m[nearest_mix(3.44)].name, std::string("IQ3_S"));    // IQ mixes are candidates too,
  EXPECT_EQ(m[nearest_mix(2.31)].name, std::string("IQ2_XS"));
  EXPECT_EQ(m[nearest_mix(2.31, false)].name, std::string("IQ2_M"));  // but not those needing an imatrix without one
  std::vector<double> made(m.size(), -1.0);
  EXPECT_EQ(next_mix_to_try(4.9, made), nearest_mix(4.9));
  made[idx("Q4_K_M")] = 4.80;  // real file smaller than the target: the nearest larger one next
  EXPECT_EQ(next_mix_to_try(4.9, made), idx("Q4_1"));
  made[idx("Q4_1")] = 4.70;  // still smaller (real sizes need not follow the nominal order)
  EXPECT_EQ(next_mix_to_try(4.9, made), idx("Q5_0"));
  made[idx("Q5_0")] = 5.30;  // both sides covered: done
  EXPECT_EQ(next_mix_to_try(4.9, made), -1);
  std::vector<double> low(m.size(), -1.0);
  for (size_t i = 0; i < m.size(); ++i) low[i] = 3.5 + double(i);  // every mix above the target
  EXPECT_EQ(next_mix_to_try(3.0, low), -1);
}

TEST(RunPipeline, Stories260kEndToEndAndResumes) {
  TempDir d;
  const std::string args = stories260k() + " --bpw 8 -w " + d / "w" +
                           " --imatrix-chunks 2 -c 128 --chunks 4 --steps 6 --layers-per-step 0 --calib-tokens 512 -t 2";
  auto r = gamma("run " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* step : {"== dequantize", "== llama-imatrix", "== pool", "== learn", "== solve + emit",
                           "== llama-quantize", "== eval"})
    EXPECT_NE(r.output.find(step), std::string::npos) << step << "\n" << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 1);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  const auto& rows = (*j)["rows"];
  ASSERT_GE(rows.size(), 2u);
  ASSERT_LE(rows.size(), 3u);
  EXPECT_EQ(rows[0]["file_bytes"].get<uint64_t>(), fs::file_size(rows[0]["path"].get<std::string>()));
  EXPECT_EQ(rows[1]["label"].get<std::string>().rfind("llama.cpp Q", 0), 0u);
  for (const auto& row : rows) {
    EXPECT_GT(row["kld_mean"].get<double>(), 0.0);
    EXPECT_GT(row["top1"].get<double>(), 0.3);
  }
  // Both models were scored against one teacher base file, and llama-perplexity reads it.
  const std::string base = d / "w/teacher-logits-c128-n4.kld";
  ASSERT_TRUE(fs::exists(base));
  auto lp = run_llama_tool(llama_tool("llama-perplexity") + " -m " + rows[0]["path"].get<std::string>() +
                               " --kl-divergence-base " + base + " --kl-divergence -c 128 --chunks 4 -t 2",
                           "Mean    KLD");
  ASSERT_EQ(lp.exit_code, 0) << lp.output;
  EXPECT_NE(lp.output.find(fmt::format("Mean    KLD: {:10.6f}", rows[0]["kld_mean"].get<double>())), std::string::npos)
      << lp.output;

  // A second run does no work again: no teacher, imatrix, learning, quantizing or evaluation.
  auto again = gamma("run " + args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const char* step : {"== dequantize", "== llama-imatrix", "== learn", "== solve", "== llama-quantize", "== eval"})
    EXPECT_EQ(again.output.find(step), std::string::npos) << step << "\n" << again.output;
  EXPECT_NE(again.output.find("llama.cpp Q"), std::string::npos);
}

TEST(RunPipeline, BadInputFailsWithOneLine) {
  TempDir d;
  auto r = gamma("run no-such-model -w " + d / "w");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: unknown model"), std::string::npos) << r.output;
  r = gamma("run " + stories260k() + " --compare Q9_X --bpw 8 -w " + d / "w2" +
            " --imatrix none --steps 2 --calib-tokens 256 -c 128 --chunks 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --compare Q9_X: not a llama.cpp standard mix"), std::string::npos) << r.output;
  r = gamma("run " + stories260k() + " --bpw -1 -w " + d / "w3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bpw must be"), std::string::npos) << r.output;
}
