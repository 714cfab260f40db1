// gamma eval end to end: perplexity against the published stories260K reference and against
// the built llama-perplexity, KL divergence / top-1 / delta-p against llama-perplexity
// --kl-divergence on the same tokens, the teacher cache (llama's own base-file format),
// multiple choice, and bad input. Everything runs the CLI as a user would, on one thread so
// timings stay stable on a busy 2-core machine.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing.h"

namespace gm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string text() { return shared_data("text/tinystories-valid-prefix.txt"); }

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

double grab(const std::string& out, const std::string& pattern, int group = 1) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(pattern))) {
    ADD_FAILURE() << "no match for /" << pattern << "/ in:\n" << out.substr(out.size() > 3000 ? out.size() - 3000 : 0);
    return NAN;
  }
  return std::stod(m[group].str());
}

// A failing command: non-zero exit, exactly one line of output naming the problem.
void expect_one_line_error(const RunResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("gamma: error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
}

// Quantizes stories260K with the built llama-quantize (rows are 64/172 wide: llama-quantize
// falls back for ffn_down, which is what a user would get too).
std::string make_student(const TempDir& dir, const std::string& type) {
  const std::string out = dir / ("stories260K-" + type + ".gguf");
  RunResult r = run(llama_tool("llama-quantize") + " " + stories260k() + " " + out + " " + type + " 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

TEST(EvalPerplexity, MatchesPublishedReferenceOnWholeText) {
  // README reference: llama-perplexity -c 128 on tinystories-valid-prefix.txt = 4.9693 +/- 0.0243, 3070 chunks.
  TempDir dir;
  // --ubatch 2048: one graph per 16 chunks, ~4x faster here; F32 figures move by ~1e-6 only.
  RunResult r = gamma("eval " + stories260k() + " --text " + text() + " --ctx 128 --ubatch 2048 -t 1 -q -o " +
                      (dir / "e.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = read_json_file(dir / "e.json");
  EXPECT_EQ(j["schema"], "gamma.eval");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["perplexity"]["chunks"], 3070);
  EXPECT_NEAR(j["perplexity"]["ppl"].get<double>(), 4.9693, 4.9693 * 0.001);
  EXPECT_NEAR(j["perplexity"]["ppl_stderr"].get<double>(), 0.0243, 0.0001);
  EXPECT_EQ(j["perplexity"]["tokens_scored"], 3070 * 63);
  EXPECT_EQ(j["settings"]["ubatch"], 2048);
}

TEST(EvalPerplexity, MatchesBuiltLlamaPerplexity) {
  // Both batch layouts: 16 chunks per decode (-b 2048), and a chunk split over decodes (-b < -c).
  for (const std::string flags : {"-c 128 --chunks 150", "-c 256 -b 128 --chunks 24"}) {
    SCOPED_TRACE(flags);
    RunResult ref = run_llama_tool(llama_tool("llama-perplexity") + " -m " + stories260k() + " -f " + text() + " " + flags + " -t 1",
                                    "Final estimate");
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    const double ppl_ref = grab(ref.output, R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))");
    const double err_ref = grab(ref.output, R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))", 2);
    std::string gflags = std::regex_replace(flags, std::regex("^-c"), "--ctx");
    RunResult g = gamma("eval " + stories260k() + " --text " + text() + " " + gflags + " -t 1 -q");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    const double ppl = grab(g.output, R"(PPL = ([0-9.]+) \+/- ([0-9.]+))");
    const double err = grab(g.output, R"(PPL = ([0-9.]+) \+/- ([0-9.]+))", 2);
    EXPECT_NEAR(ppl, ppl_ref, ppl_ref * 0.001);
    EXPECT_NEAR(ppl, ppl_ref, 1.5e-4) << "same arithmetic: agree to the printed digits";
    EXPECT_NEAR(err, err_ref, 1.5e-5);
  }
}

struct LlamaKld {
  double ppl_q, ppl_base, kld_mean, kld_err, kld_median, kld_p99, kld_max, top1, top1_err, dp_mean, dp_err, dp_rms;
};

LlamaKld parse_llama_kld(const std::string& out) {
  LlamaKld k;
  k.ppl_q = grab(out, R"(Mean PPL\(Q\)\s+:\s+([0-9.]+))");
  k.ppl_base = grab(out, R"(Mean PPL\(base\)\s+:\s+([0-9.]+))");
  k.kld_mean = grab(out, R"(Mean    KLD:\s+([0-9.]+) ±\s+([0-9.]+))");
  k.kld_err = grab(out, R"(Mean    KLD:\s+([0-9.]+) ±\s+([0-9.]+))", 2);
  k.kld_median = grab(out, R"(Median  KLD:\s+([0-9.]+))");
  k.kld_p99 = grab(out, R"(99\.0%   KLD:\s+([0-9.]+))");
  k.kld_max = grab(out, R"(Maximum KLD:\s+([0-9.]+))");
  k.top1 = grab(out, R"(Same top p:\s+([0-9.]+) ±\s+([0-9.]+) %)");
  k.top1_err = grab(out, R"(Same top p:\s+([0-9.]+) ±\s+([0-9.]+) %)", 2);
  k.dp_mean = grab(out, R"(Mean    Δp:\s+([-0-9.]+) ±\s+([0-9.]+) %)");
  k.dp_err = grab(out, R"(Mean    Δp:\s+([-0-9.]+) ±\s+([0-9.]+) %)", 2);
  k.dp_rms = grab(out, R"(RMS Δp    :\s+([0-9.]+))");
  return k;
}

void expect_kld_equal(const json& k, const LlamaKld& ref) {
  // llama prints 6 decimals (KLD, PPL) or 3 decimals of a percentage; allow one unit of rounding.
  EXPECT_NEAR(k["ppl"].get<double>(), ref.ppl_q, 1.5e-6);
  EXPECT_NEAR(k["ppl_base"].get<double>(), ref.ppl_base, 1.5e-6);
  EXPECT_NEAR(k["mean"].get<double>(), ref.kld_mean, 1.5e-6);
  EXPECT_NEAR(k["stderr"].get<double>(), ref.kld_err, 1.5e-6);
  EXPECT_NEAR(k["median"].get<double>(), ref.kld_median, 1.5e-6);
  EXPECT_NEAR(k["p99"].get<double>(), ref.kld_p99, 1.5e-6);
  EXPECT_NEAR(k["max"].get<double>(), ref.kld_max, 1.5e-6);
  EXPECT_NEAR(100 * k["top1"].get<double>(), ref.top1, 1.5e-3);
  EXPECT_NEAR(100 * k["top1_stderr"].get<double>(), ref.top1_err, 1.5e-3);
  EXPECT_NEAR(100 * k["delta_p"]["mean"].get<double>(), ref.dp_mean, 1.5e-3);
  EXPECT_NEAR(100 * k["delta_p"]["stderr"].get<double>(), ref.dp_err, 1.5e-3);
  EXPECT_NEAR(100 * k["delta_p"]["rms"].get<double>(), ref.dp_rms, 1.5e-3);
}

TEST(EvalKld, MatchesLlamaPerplexityAndSharesItsBaseFile) {
  TempDir dir;
  const std::string student = make_student(dir, "Q4_0");
  const std::string llama_base = dir / "llama-base.kld";
  const std::string common = " -c 128 --chunks 60 -t 1";
  RunResult base = run(llama_tool("llama-perplexity") + " -m " + stories260k() + " -f " + text() + common +
                       " --kl-divergence-base " + llama_base);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  RunResult kl = run_llama_tool(llama_tool("llama-perplexity") + " -m " + student + common + " --kl-divergence-base " +
                                    llama_base + " --kl-divergence", "Same top p");
  ASSERT_EQ(kl.exit_code, 0) << kl.output;
  const LlamaKld ref = parse_llama_kld(kl.output);
  EXPECT_GT(ref.kld_mean, 1e-3) << "Q4_0 must differ measurably from F32 for this test to mean anything";

  // 1) gamma with the teacher: computes the base side by side and caches it.
  const std::string env = "GAMMA_CACHE=" + (dir / "cache") + " ";
  const std::string args = "eval " + student + " --teacher " + stories260k() + " --text " + text() +
                           " --ctx 128 --chunks 60 -t 1 -q -o ";
  RunResult g1 = run(env + gamma_cli() + " " + args + (dir / "g1.json"));
  ASSERT_EQ(g1.exit_code, 0) << g1.output;
  json j1 = read_json_file(dir / "g1.json");
  expect_kld_equal(j1["kld"], ref);
  EXPECT_FALSE(j1["kld"]["base_reused"].get<bool>());
  const std::string cache_file = j1["kld"]["base_file"].get<std::string>();
  ASSERT_TRUE(fs::exists(cache_file));
  // The cache is llama-perplexity's format, byte for byte.
  RunResult cmp = run("cmp " + cache_file + " " + llama_base);
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;

  // 2) Again: the cached teacher log-probs are reused, same figures.
  RunResult g2 = run(env + gamma_cli() + " " + args + (dir / "g2.json"));
  ASSERT_EQ(g2.exit_code, 0) << g2.output;
  json j2 = read_json_file(dir / "g2.json");
  EXPECT_TRUE(j2["kld"]["base_reused"].get<bool>());
  expect_kld_equal(j2["kld"], ref);

  // 3) llama-perplexity's own base file read directly (no text, no teacher needed).
  // (llama.cpp's spellings: -m and --kl-divergence-base.)
  RunResult g3 = gamma("eval -m " + student + " --kl-divergence-base " + llama_base + " -t 1 -q -o " + (dir / "g3.json"));
  ASSERT_EQ(g3.exit_code, 0) << g3.output;
  expect_kld_equal(read_json_file(dir / "g3.json")["kld"], ref);
}

TEST(EvalKld, LargerCacheServesFewerChunksLikeSideBySide) {
  TempDir dir;
  const std::string student = make_student(dir, "Q8_0");
  const std::string env = "GAMMA_CACHE=" + (dir / "cache") + " ";
  const std::string base = "eval " + student + " --teacher " + stories260k() + " --text " + text() + " --ctx 128 -t 1 -q";
  ASSERT_EQ(run(env + gamma_cli() + " " + base + " --chunks 60").exit_code, 0);
  RunResult cached = run(env + gamma_cli() + " " + base + " --chunks 30 -o " + (dir / "c.json"));
  ASSERT_EQ(cached.exit_code, 0) << cached.output;
  RunResult side = run(env + gamma_cli() + " " + base + " --chunks 30 --no-cache -o " + (dir / "s.json"));
  ASSERT_EQ(side.exit_code, 0) << side.output;
  json c = read_json_file(dir / "c.json"), s = read_json_file(dir / "s.json");
  EXPECT_TRUE(c["kld"]["base_reused"].get<bool>());
  EXPECT_TRUE(s["kld"]["base_file"].is_null());
  EXPECT_EQ(c["kld"]["tokens"], 30 * 63);
  EXPECT_DOUBLE_EQ(c["kld"]["mean"].get<double>(), s["kld"]["mean"].get<double>());
  EXPECT_DOUBLE_EQ(c["kld"]["top1"].get<double>(), s["kld"]["top1"].get<double>());
  EXPECT_DOUBLE_EQ(c["perplexity"]["ppl"].get<double>(), s["perplexity"]["ppl"].get<double>());
  // Each chunk's mean, for paired comparisons: one per chunk, the same either way, and (every
  // chunk scores as many tokens) averaging to the whole mean.
  ASSERT_EQ(c["kld"]["chunk_means"].size(), 30u);
  EXPECT_EQ(c["kld"]["chunk_means"], s["kld"]["chunk_means"]);
  double sum = 0;
  for (const auto& v : c["kld"]["chunk_means"]) sum += v.get<double>();
  EXPECT_NEAR(sum / 30, c["kld"]["mean"].get<double>(), 1e-6 * c["kld"]["mean"].get<double>());
  // Q8_0 is close to F32: small but non-zero divergence, high agreement.
  EXPECT_GT(c["kld"]["mean"].get<double>(), 0.0);
  EXPECT_LT(c["kld"]["mean"].get<double>(), 0.01);
  EXPECT_GT(c["kld"]["top1"].get<double>(), 0.95);
}

TEST(EvalTasks, EasyItemsAreAnsweredAndJsonIsComplete) {
  TempDir dir;
  const std::string tasks = dir / "easy.jsonl";
  {
    std::ofstream f(tasks);
    f << R"({"query": "Once upon a time, there was a little", "choices": ["girl named Lily.", "quantum xylophone zebra."], "gold": 0})" "\n"
      << R"({"query": "Lily went to the park with her", "choices": ["zq xv kj pw.", "mom."], "gold": 1})" "\n"
      << "\n"
      << R"({"query": "One day, a little boy named Tim", "choices": ["went to the park.", "qqq zzz xxx."], "gold": 0})" "\n"
      << R"({"query": "The cat was very", "choices": ["xzq jjj.", "happy."], "gold": 1})" "\n";
  }
  RunResult r = gamma("eval " + stories260k() + " --tasks " + tasks + ",arc_easy --limit 40 -t 1 -q -o " + (dir / "t.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = read_json_file(dir / "t.json");
  const json& e = j["tasks"]["easy"];
  EXPECT_EQ(e["n"], 4);
  EXPECT_EQ(e["acc"], 1.0);
  EXPECT_EQ(e["acc_norm"], 1.0);
  EXPECT_EQ(e["delimiter"], " ");
  EXPECT_EQ(e["correct"], "1111");
  EXPECT_EQ(e["correct_norm"], "1111");
  const json& a = j["tasks"]["arc_easy"];
  EXPECT_EQ(a["n"], 40);
  EXPECT_EQ(a["n_in_file"], 2376);
  EXPECT_EQ(a["delimiter"], "\nAnswer: ");
  for (const char* k : {"acc", "acc_norm"}) {
    const double v = a[k].get<double>();
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
    // lm-eval's stderr of a 0/1 mean: sqrt(p(1-p)/(n-1)).
    EXPECT_NEAR(a[std::string(k) + "_stderr"].get<double>(), std::sqrt(v * (1 - v) / 39), 1e-12);
    // The per-item string is the accuracy item by item.
    const std::string c = a[std::string(k) == "acc" ? "correct" : "correct_norm"];
    ASSERT_EQ(c.size(), 40u);
    EXPECT_EQ(c.find_first_not_of("01"), std::string::npos);
    EXPECT_NEAR(double(std::count(c.begin(), c.end(), '1')) / 40, v, 1e-12);
  }
  EXPECT_EQ(j["model"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["model"]["file_bytes"], fs::file_size(stories260k()));
  EXPECT_EQ(j["settings"]["limit"], 40);
}

TEST(EvalBadInput, OneLineErrorAndNothingWritten) {
  TempDir dir;
  const std::string out = dir / "e.json";
  const std::string m = stories260k();
  {
    std::ofstream(dir / "short.txt") << "Once upon a time.\n";
    std::ofstream bad(dir / "bad.jsonl");
    bad << R"({"query": "Q?", "choices": ["a", "b"], "gold": 0})" "\n"
        << R"({"query": "Q?", "choices": ["a", "b"], "gold": 5})" "\n";
    std::ofstream(dir / "notjson.jsonl") << "{\"query\": \"Q?\", \"choices\": [\"a\", \"b\"], \"gold\": 0}\n{oops\n";
    std::ofstream(dir / "garbage.kld") << "this is not a log-prob file";
  }
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"eval " + (dir / "missing.gguf") + " --text " + text(), "missing.gguf"},
      {"eval " + m + " --text " + (dir / "missing.txt"), "missing.txt"},
      {"eval " + m, "nothing to evaluate"},
      {"eval " + m + " --text " + text() + " --ctx 128 --chunks 100000", "--chunks 100000"},
      {"eval " + m + " --text " + (dir / "short.txt") + " --ctx 128", "needs at least 256"},
      {"eval " + m + " --text " + text() + " --teacher " + shared_data("tokenizer-vectors/ggml-vocab-gpt-2.gguf"),
       "vocabulary mismatch"},
      {"eval " + m + " --tasks " + (dir / "bad.jsonl"), "bad.jsonl:2"},
      {"eval " + m + " --tasks " + (dir / "notjson.jsonl"), "notjson.jsonl:2: not valid JSON"},
      {"eval " + m + " --tasks no_such_task", "unknown task 'no_such_task'"},
      {"eval " + m + " --kld-base " + (dir / "garbage.kld"), "garbage.kld"},
      {"eval " + m + " --text " + text() + " --ctx 128 --chunks 2 -o " + (dir / "no/such/dir/e.json"), "does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const bool has_out = c.args.find(" -o ") != std::string::npos;
    RunResult r = run("GAMMA_CACHE=" + (dir / "cache") + " " + gamma_cli() + " " + c.args + " -q" +
                      (has_out ? "" : " -o " + out));
    expect_one_line_error(r, c.needle);
    EXPECT_FALSE(fs::exists(out));
  }
  // Nothing was cached by the failed runs either.
  EXPECT_TRUE(!fs::exists(dir / "cache/eval") || fs::is_empty(dir / "cache/eval"));
}

}  // namespace
}  // namespace gm::testing
