// gamma's ggml never runs ggml's AMX matmul, which segfaults at the first quantized matmul on
// Intel AMX CPUs (llama.cpp #20824): cmake/cpu.cmake compiles no AMX kernel, and
// src/llama/backend.h turns extra buffer types off should a ggml with them be linked. On any
// CPU these tests fail if the AMX kernels are compiled back in (symbols, ggml's own report);
// on an AMX CPU the quantized runs through the built tools and gamma eval would crash too.
// Also: the one thread-count rule every stage uses (util/threads.h).
#include <cmath>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ggml-cpu.h"
#include "llama/backend.h"
#include "testing.h"
#include "util/threads.h"

namespace gm::testing {
namespace {

// Occurrences of `needle` in `text`.
int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Cpu, NoAmxKernelInGammaOrTheTools) {
  for (const std::string bin : {gamma_cli(), llama_tool("llama-perplexity"), llama_tool("llama-quantize"),
                                llama_tool("llama-imatrix"), llama_tool("llama-bench"), llama_tool("llama-completion")}) {
    SCOPED_TRACE(bin);
    const RunResult nm = run("nm " + bin);
    ASSERT_EQ(nm.exit_code, 0) << nm.output.substr(0, 500);
    // The binary's symbols are readable (else "no AMX symbol" would prove nothing) ...
    ASSERT_GT(count(nm.output, "ggml_backend_cpu_reg"), 0);
    // ... and ggml's AMX matmul (amx/amx.cpp, compiled only with __AMX_INT8__) is not among them.
    EXPECT_EQ(count(nm.output, "ggml_backend_amx_mul_mat"), 0);
  }
}

TEST(Cpu, GgmlUsesThisCpusExtensionsButNotAmx) {
  EXPECT_EQ(ggml_cpu_has_amx_int8(), 0);
  EXPECT_FALSE(gm::llama::ggml_offers_amx());
  EXPECT_TRUE(gm::llama::model_params().use_extra_bufts);  // repack stays on where AMX is absent
  const std::string mode = GAMMA_CPU;
  for (const auto& f : gm::llama::cpu_features()) {
    SCOPED_TRACE(f.name + (f.cpu ? " (CPU has it)" : " (CPU lacks it)"));
    if (f.name == "AMX_INT8") continue;                 // checked above
    EXPECT_TRUE(!f.compiled || f.cpu);                  // never an extension this CPU lacks
    if (mode == "auto") EXPECT_EQ(f.compiled, f.cpu);   // and every one it has (AVX2, AVX-512, VNNI ...)
  }
}

TEST(Cpu, QuantizedModelsRunInTheToolsAndInGammaEval) {
  // Q8_0, Q4_0 and Q4_K are AMX kernel types (amx.cpp); stories260K's 64-wide rows take the
  // first two, Q4_K falls back where rows are too narrow, as llama-quantize does for users.
  TempDir dir;
  const std::string text = shared_data("text/tinystories-valid-prefix.txt");
  const std::regex ppl_re(R"(Final estimate: PPL = ([0-9.]+))");
  for (const std::string type : {"Q8_0", "Q4_0"}) {
    SCOPED_TRACE(type);
    const std::string q = dir / ("s-" + type + ".gguf");
    RunResult r = run(llama_tool("llama-quantize") + " " + stories260k() + " " + q + " " + type + " 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    RunResult ref = run_llama_tool(llama_tool("llama-perplexity") + " -m " + q + " -f " + text + " -c 128 --chunks 8 -t 1",
                                   "Final estimate");
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(ref.output, m, ppl_re)) << ref.output;
    const double ppl_tool = std::stod(m[1].str());
    RunResult ev = gamma("eval " + q + " --text " + text + " --ctx 128 --chunks 8 -t 1 -q -o " + (dir / "e.json"));
    ASSERT_EQ(ev.exit_code, 0) << ev.output;
    std::ifstream in(dir / "e.json");
    const double ppl_gamma = nlohmann::json::parse(in)["perplexity"]["ppl"].get<double>();
    EXPECT_TRUE(std::isfinite(ppl_gamma) && ppl_gamma > 1.0) << ppl_gamma;
    EXPECT_NEAR(ppl_gamma, ppl_tool, 1e-3 * ppl_tool);  // the same numbers, as llama-perplexity's
  }
}

}  // namespace
}  // namespace gm::testing

namespace gm::testing {
namespace {

TEST(Threads, OneRuleEverywhereHonouringGammaThreads) {
  const char* old = std::getenv("GAMMA_THREADS");
  const std::string saved = old ? old : "";
  ::unsetenv("GAMMA_THREADS");
  EXPECT_EQ(resolve_threads(3), 3);
  EXPECT_EQ(resolve_threads(0), int(std::max(1u, std::thread::hardware_concurrency())));
  ::setenv("GAMMA_THREADS", "5", 1);
  EXPECT_EQ(resolve_threads(0), 5);
  EXPECT_EQ(resolve_threads(2), 2);  // an explicit -t wins
  ::setenv("GAMMA_THREADS", "junk", 1);
  EXPECT_EQ(resolve_threads(0), int(std::max(1u, std::thread::hardware_concurrency())));
  if (old) ::setenv("GAMMA_THREADS", saved.c_str(), 1);
  else ::unsetenv("GAMMA_THREADS");
}

}  // namespace
}  // namespace gm::testing
