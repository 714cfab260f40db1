// Speed as a budget end to end on stories260K, judged by llama-bench: `gamma speed` predicts the
// reference file exactly as llama-bench measured it when calibrating (the rest is calibrated
// there), puts each type right by its probe, and measures nothing the second time; `gamma speed --pool` prices every candidate; `gamma solve --speed
// --min-decode` keeps the plan at least that fast by the table, never scores above the plan
// without the budget, and an unreachable speed is one line naming the fastest plan.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "speed/kernels.h"
#include "tests/testing.h"
#include "util/files.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;

TEST(Speed, PredictsTheReferenceAndSolvesWithinADecodeBudget) {
  TempDir dir;
  const std::string d = dir.str(), env = "GAMMA_CACHE=" + d + "/cache GAMMA_LLAMA_BIN=" + llama_tool("") + " ";
  auto g = [&](const std::string& args) { return run(env + gamma_cli() + " " + args); };

  // The reference is predicted as llama-bench measured it when the rest was calibrated, to rounding.
  // One thread: ggml's threads meet at a barrier after every node, and under a parallel ctest a
  // second thread waiting for a descheduled one made a 16 s measurement take minutes.
  auto r = g("speed " + stories260k() + " --bench --rounds 1 -t 1 -o " + d + "/check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Kernels timed while other jobs held the cores (a parallel ctest) are not cached: a later
  // process times them again, and its figures may differ. Said on stderr.
  auto loaded = [](const RunResult& x) { return x.output.find("are not cached") != std::string::npos; };
  const bool first_loaded = loaded(r);
  auto check = read_json(d + "/check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(check.is_ok()) << check.status().message();
  const json& row = check.value()["files"][0];
  const json& cal = check.value()["reference_calibrated"];
  EXPECT_NEAR(row["predicted_tg128"].get<double>(), cal["tg128"].get<double>(), 1e-6 * cal["tg128"].get<double>());
  EXPECT_NEAR(row["predicted_pp512"].get<double>(), cal["pp512"].get<double>(), 1e-6 * cal["pp512"].get<double>());
  EXPECT_DOUBLE_EQ(row["tg128"].get<double>(), cal["tg128"].get<double>());  // the check's rounds are the calibration's
  // A second prediction measures nothing: the same numbers from the cache.
  r = g("speed " + stories260k() + " -t 1 -o " + d + "/again.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto again = read_json(d + "/again.json", "gamma.speed.check", 1);
  ASSERT_TRUE(again.is_ok());
  if (!first_loaded)
    EXPECT_DOUBLE_EQ(again.value()["files"][0]["predicted_tg128"].get<double>(), row["predicted_tg128"].get<double>());

  // The pool's table prices every candidate.
  r = g("pool " + stories260k() + " --types Q4_0,Q5_0,Q8_0 -q -o " + d + "/pool");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // A llama.cpp Q4_1 file of the model, predicted once before the table: its type is probed on
  // the reference, and the table's calibration probes it again with the pool's types.
  const std::string q41 = d + "/q41.gguf";
  r = run_llama_tool(llama_tool("llama-quantize") + " " + stories260k() + " " + q41 + " Q4_1 1", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = g("speed " + q41 + " --reference " + stories260k() + " -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const bool first_q41_loaded = loaded(r);
  r = g("speed --pool " + d + "/pool --reference " + stories260k() + " -t 1 -o " + d + "/speed.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto table = read_json(d + "/speed.json", "gamma.speed", 1);
  ASSERT_TRUE(table.is_ok()) << table.status().message();

  // Without a budget: the plan and its predicted speed.
  const std::string size = "--size 330000";  // between the smallest file (277184) and all-Q8_0 (379328)
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed.json -o " + d + "/free.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto free_plan = read_json(d + "/free.json", "gamma.plan", 1);
  ASSERT_TRUE(free_plan.is_ok());
  const double free_tg = free_plan.value()["info"]["speed"]["predicted_tg128"].get<double>();
  const double free_score = free_plan.value()["info"]["objective"].get<double>();
  ASSERT_GT(free_tg, 0);

  // "As fast as this file": a GGUF of the model as the budget, its speed by the same table. The
  // free plan's own file asks for exactly the free plan's speed, which the free plan meets.
  r = g("emit " + d + "/pool " + d + "/free.json -o " + d + "/free.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed.json --min-decode " + d +
        "/free.gguf -o " + d + "/as-fast.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto as_fast = read_json(d + "/as-fast.json", "gamma.plan", 1);
  ASSERT_TRUE(as_fast.is_ok());
  EXPECT_NEAR(as_fast.value()["info"]["speed"]["min_decode_tps"].get<double>(), free_tg, 1e-9 * free_tg);
  EXPECT_EQ(as_fast.value()["info"]["speed"]["min_decode_given"], d + "/free.gguf");
  // A file of a type no candidate has (llama.cpp's Q4_1, a Q4_0/Q5_0/Q8_0 pool): gamma solve
  // times its weights into the table (as gamma run does), with the probe factors the table was
  // calibrated with (Q4_1's: probed above, before the table), so its speed by the table is then
  // what gamma speed predicts for it on its own (the same kernels, factors and rest).
  std::filesystem::copy_file(d + "/speed.json", d + "/speed-q41.json");
  auto has_q41 = [&] {
    auto t = read_json(d + "/speed-q41.json", "gamma.speed", 1);
    return t.is_ok() && t.value()["cost"]["blk.0.attn_q.weight"].contains("Q4_1");
  };
  ASSERT_FALSE(has_q41());
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed-q41.json --min-decode " + q41 +
        " -o " + d + "/q41-plan.json");
  EXPECT_TRUE(has_q41()) << r.output;
  bool q41_loaded = first_q41_loaded || loaded(r);
  const int q41_exit = r.exit_code;
  const std::string q41_out = r.output;
  r = g("speed " + q41 + " --reference " + stories260k() + " -t 1 -o " + d + "/q41-check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  q41_loaded = q41_loaded || loaded(r);
  const double q41_tol = q41_loaded ? 0.5 : 1e-9;  // timed twice under load: the same kernels, other figures
  auto q41_check = read_json(d + "/q41-check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(q41_check.is_ok());
  double q41_tg = 0;
  for (const auto& f : q41_check.value()["files"])
    if (f["file"] == q41) q41_tg = f["predicted_tg128"].get<double>();
  ASSERT_GT(q41_tg, 0);
  if (q41_exit == 0) {
    auto q41_plan = read_json(d + "/q41-plan.json", "gamma.plan", 1);
    ASSERT_TRUE(q41_plan.is_ok());
    EXPECT_NEAR(q41_plan.value()["info"]["speed"]["min_decode_tps"].get<double>(), q41_tg, q41_tol * q41_tg);
  } else {  // a Q4_1 file faster than any plan of this size: the one line names the target it missed
    EXPECT_NEAR(number_after(q41_out, R"(at ([0-9.]+) tok/s here)"), q41_tg, q41_loaded ? q41_tol * q41_tg : 0.006)
        << q41_out;
  }
  // A table measured on another machine is not extended with this machine's times.
  auto table_here = read_json(d + "/speed.json", "gamma.speed", 1);
  ASSERT_TRUE(table_here.is_ok());
  json other = table_here.value();
  other["machine"] = "another CPU";
  ASSERT_TRUE(write_json(d + "/speed-other.json", other).is_ok());
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed-other.json --min-decode " + q41 +
        " -o " + d + "/q41-other.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("measured on another machine"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d + "/q41-other.json"));
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed.json --min-decode fast -o " + d +
        "/bad.json");
  EXPECT_EQ(r.output, "gamma: error: --min-decode: fast: neither tokens/s nor a GGUF file\n");

  // An unreachable speed names the fastest plan of that size...
  r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed.json --min-decode 1e9 -o " + d +
        "/never.json");
  EXPECT_NE(r.exit_code, 0);
  const double fastest = number_after(r.output, R"(the fastest ([0-9.]+) tok/s)");
  ASSERT_GT(fastest, 0) << r.output;
  EXPECT_FALSE(file_exists(d + "/never.json"));
  // ...and a budget between the free plan's speed and the fastest is met, at no higher score.
  if (fastest > free_tg * 1.0001) {
    const double want = free_tg + 0.5 * (fastest - free_tg);
    r = g("solve " + d + "/pool --score-from-manifest " + size + " --speed " + d + "/speed.json --min-decode " +
          std::to_string(want) + " -o " + d + "/fast.json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto fast = read_json(d + "/fast.json", "gamma.plan", 1);
    ASSERT_TRUE(fast.is_ok());
    EXPECT_GE(fast.value()["info"]["speed"]["predicted_tg128"].get<double>(), want * (1 - 1e-9));
    EXPECT_LE(fast.value()["info"]["objective"].get<double>(), free_score + 1e-12);
    EXPECT_GE(fast.value()["info"]["upper_bound"].get<double>(), fast.value()["info"]["objective"].get<double>());
  }
}

namespace {
// A stand-in llama-bench whose speed is a function of the file alone, so what the probes must
// reproduce is known: a token takes 100 us + 1e-8 us a byte (the differences between files stay
// below the kernels' own prices, as on a real model), a batch 4x less; with `probe_tps`, every file
// is at 1 tok/s and a probe at that speed; with `drift`, the machine slows by that share of its
// speed at every call (a slow phase setting in).
std::string fake_bench(const std::string& dir, const std::string& probe_tps = "", double drift = 0) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/llama-bench";
  std::string sh = "#!/bin/sh\necho \"$*\" >> " + dir + "/calls\n"
                   "while [ $# -gt 0 ]; do [ \"$1\" = -m ] && f=\"$2\"; shift; done\n"
                   "b=$(wc -c < \"$f\")\nn=$(wc -l < " + dir + "/calls)\n"
                   "case \"$f\" in *probe-*) ls \"$(dirname \"$f\")\" | grep -c probe- >> " + dir + "/probes_on_disk;; esac\n"
                   "s=$(awk -v n=\"$n\" 'BEGIN{printf \"%.12g\", 1-" + std::to_string(drift) + "*n}')\n"
                   "tg=$(awk -v b=\"$b\" -v s=\"$s\" 'BEGIN{printf \"%.12g\", s*1e6/(100+1e-8*b)}')\n"
                   "pp=$(awk -v b=\"$b\" -v s=\"$s\" 'BEGIN{printf \"%.12g\", s*4e6/(100+1e-8*b)}')\n";
  if (!probe_tps.empty())
    sh += "tg=1; pp=1\ncase \"$f\" in *probe-*) tg=" + probe_tps + "; pp=" + probe_tps + ";; esac\n";
  sh += "echo '['\necho \"{\\\"n_prompt\\\": 512, \\\"n_gen\\\": 0, \\\"samples_ts\\\": [$pp]},\"\n"
        "echo \"{\\\"n_prompt\\\": 0, \\\"n_gen\\\": 128, \\\"samples_ts\\\": [$tg]}\"\necho ']'\n";
  EXPECT_TRUE(write_file_atomic(path, sh).is_ok());
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return dir;
}
size_t lines_of(const std::string& path) {
  auto t = read_file(path);
  return t.is_ok() ? static_cast<size_t>(std::count(t.value().begin(), t.value().end(), '\n')) : 0;
}
}  // namespace

// The probes: each type's prices are scaled so the reference with every module that type can hold
// at that type is predicted as llama-bench measures it, in llama.cpp's own path. Judged with a
// stand-in llama-bench whose speed is a function of the file's bytes, on which the kernels timed in
// ggml say nothing: a file of the Q8_0 probe's types made by llama-quantize (other bytes, other
// metadata) is predicted as the stand-in measures it. Where no positive factor fits, the kernels
// alone price the types (a warning), and no probe file is left either way.
TEST(Speed, ProbesPutEachTypeRightAsLlamaBenchMeasuresIt) {
  TempDir dir;
  const std::string d = dir.str();
  const std::string q8 = d + "/q8.gguf";
  auto r = run_llama_tool(llama_tool("llama-quantize") + " --pure --tensor-type ffn_down=f32 --token-embedding-type f32 "
                          "--output-tensor-type f32 " + stories260k() + " " + q8 + " Q8_0 1", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string bin = fake_bench(d + "/bin");
  const std::string g = "GAMMA_CACHE=" + d + "/cache " + gamma_cli() + " speed " + stories260k() + " " + q8 +
                        " --llama-bin " + bin + " -t 1";
  r = run(g + " --bench --rounds 1 -o " + d + "/check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto check = read_json(d + "/check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(check.is_ok()) << check.status().message();
  const json& files = check.value()["files"];
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files)
    for (const char* k : {"tg128", "pp512"}) {
      const std::string pred = std::string("predicted_") + k;
      ASSERT_TRUE(f.contains(pred)) << f.dump();
      EXPECT_NEAR(f[pred].get<double>(), f[k].get<double>(), 1e-6 * f[k].get<double>()) << f["file"] << " " << k;
    }
  const json& factors = check.value()["probe_factors"];
  // The reference's own type has a factor of its own too; the rest is pinned where both are
  // nearest 1, each at least 0.25.
  ASSERT_TRUE(factors.contains("F32") && factors.contains("Q8_0")) << factors.dump();
  for (const char* t : {"F32", "Q8_0"})
    for (const char* k : {"decode", "prefill"}) EXPECT_GE(factors[t][k].get<double>(), 0.25) << t << " " << k;
  EXPECT_NE(factors["Q8_0"]["decode"].get<double>(), factors["F32"]["decode"].get<double>());
  EXPECT_TRUE(std::filesystem::is_empty(d + "/cache/speed-probes"));
  // Measured once: a second prediction runs no llama-bench and says the same.
  const size_t calls = lines_of(bin + "/calls");
  EXPECT_EQ(calls, 4u);  // one round: the reference, the Q8_0 probe, the checked file, the reference again
  r = run(g + " -o " + d + "/again.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines_of(bin + "/calls"), calls);
  auto again = read_json(d + "/again.json", "gamma.speed.check", 1);
  ASSERT_TRUE(again.is_ok());
  EXPECT_DOUBLE_EQ(again.value()["files"][1]["predicted_tg128"].get<double>(), files[1]["predicted_tg128"].get<double>());

  // A probe measured faster than its type could make it (the reference at 1 tok/s, the probe at
  // 1e12): no factors within the bounds fit it. Said, and the nearest fit kept: the probe as fast
  // as the bounds let it be, its factor at the least, 0.25.
  const std::string bad = fake_bench(d + "/bad", "1e12");
  r = run("GAMMA_CACHE=" + d + "/cache2 " + gamma_cli() + " speed " + stories260k() + " " + q8 + " --llama-bin " + bad +
          " -t 1 -o " + d + "/bad.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gamma: warning: no factors fit every probe exactly (Q8_0's probe 1000000000000.0 tok/s "
                          "against the reference's 1.0 in tg128, fitted "), std::string::npos) << r.output;
  auto bad_check = read_json(d + "/bad.json", "gamma.speed.check", 1);
  ASSERT_TRUE(bad_check.is_ok());
  for (const char* k : {"decode", "prefill"})
    EXPECT_NEAR(bad_check.value()["probe_factors"]["Q8_0"][k].get<double>(), 0.25, 1e-9) << k;
  EXPECT_TRUE(std::filesystem::is_empty(d + "/cache2/speed-probes"));
}

// A check on a machine that slows down while it measures: each file is measured against the
// reference measured beside it, so the files' speeds over the reference's are what the machine
// gives them at one moment (here exactly: the slowing is linear in the calls, and interpolated).
// Each file's fastest over the rounds instead, as before 2026-12-07's seventh session, puts the
// files measured late in a round a few percent slow here and 10-25 % on SmolLM2.
TEST(Speed, ACheckMeasuresEachFileBesideTheReference) {
  TempDir dir;
  const std::string d = dir.str();
  const std::string q8 = d + "/q8.gguf", f16 = d + "/f16.gguf";
  for (const auto& [out, type] : {std::pair{q8, "Q8_0"}, std::pair{f16, "F16"}}) {
    auto r = run_llama_tool(llama_tool("llama-quantize") + " " + stories260k() + " " + out + " " + type + " 1", "");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const std::string bin = fake_bench(d + "/bin", "", 0.01);
  auto r = run("GAMMA_CACHE=" + d + "/cache " + gamma_cli() + " speed " + stories260k() + " " + q8 + " " + f16 +
               " --llama-bin " + bin + " -t 1 --bench --rounds 2 -o " + d + "/check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto check = read_json(d + "/check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(check.is_ok()) << check.status().message();
  const json& files = check.value()["files"];
  ASSERT_EQ(files.size(), 3u);
  auto tps = [](const std::string& f) { return 1e6 / (100 + 1e-8 * static_cast<double>(std::filesystem::file_size(f))); };
  for (size_t i = 1; i < 3; ++i) {
    const std::string f = files[i]["file"].get<std::string>();
    EXPECT_NEAR(files[i]["tg128"].get<double>() / files[0]["tg128"].get<double>(), tps(f) / tps(stories260k()), 1e-6) << f;
    EXPECT_NEAR(files[i]["pp512"].get<double>() / files[0]["pp512"].get<double>(), tps(f) / tps(stories260k()), 1e-6) << f;
  }
  // Two rounds of the reference, the probes (F16, Q8_0) and the two files: 1 + 4 + 2 calls each.
  EXPECT_EQ(lines_of(bin + "/calls"), 14u);
  // Each probe was on disk alone while it was measured (written before, removed after).
  auto on_disk = read_file(bin + "/probes_on_disk");
  ASSERT_TRUE(on_disk.is_ok());
  EXPECT_EQ(on_disk.value(), "1\n1\n1\n1\n");
}

// A reference measured faster in llama-bench than its kernels timed alone (seen: Qwen's F32
// teacher on an AMD EPYC, a rest of -22.6 ms a token when the rest was the reference's time less
// its kernels) gave a negative rest, and a file with cheaper weights no positive prediction. The
// rest is now held at 0 or above and the factors at 0.25 or above, the nearest fit kept with a
// warning: every file is predicted, with and without --bench. Here the stand-in llama-bench
// measures every file at 1e9 tokens/s, faster than any of stories260K's kernels.
TEST(Speed, ABenchFasterThanTheKernelsKeepsTheRestAtZeroOrAbove) {
  TempDir dir;
  const std::string d = dir.str();
  std::filesystem::create_directories(d + "/bin");
  const std::string fake = d + "/bin/llama-bench";
  ASSERT_TRUE(write_file_atomic(fake,
                                "#!/bin/sh\necho '['\necho '{\"n_prompt\": 512, \"n_gen\": 0, \"samples_ts\": [1e9]},'\n"
                                "echo '{\"n_prompt\": 0, \"n_gen\": 128, \"samples_ts\": [1e9]}'\necho ']'\n")
                  .is_ok());
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const std::string f16 = d + "/f16.gguf";
  auto r = run_llama_tool(llama_tool("llama-quantize") + " " + stories260k() + " " + f16 + " F16 1", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string g = "GAMMA_CACHE=" + d + "/cache " + gamma_cli() + " speed " + stories260k() + " " + f16 +
                        " --llama-bin " + d + "/bin -t 1";
  r = run(g + " --bench --rounds 1 -o " + d + "/check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gamma: warning: no factors fit every probe exactly (F16's probe 1000000000.0 tok/s against "
                          "the reference's 1000000000.0 in tg128, fitted "), std::string::npos) << r.output;
  auto check = read_json(d + "/check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(check.is_ok()) << check.status().message();
  EXPECT_GE(check.value()["rest_decode_us"].get<double>(), 0);
  EXPECT_GE(check.value()["rest_prefill_us"].get<double>(), 0);
  for (const auto& [t, f] : check.value()["probe_factors"].items())
    for (const char* k : {"decode", "prefill"}) EXPECT_GE(f[k].get<double>(), 0.25) << t << " " << k;
  const json& files = check.value()["files"];
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) {
    EXPECT_DOUBLE_EQ(f["tg128"].get<double>(), 1e9);
    ASSERT_TRUE(f.contains("predicted_tg128")) << f.dump();
    EXPECT_GT(f["predicted_tg128"].get<double>(), 0);
    EXPECT_GT(f["predicted_pp512"].get<double>(), 0);
  }
  // Without --bench (the calibration now cached): a positive prediction too, where a negative rest
  // made this an error. (Not compared with the above: kernels timed under a parallel ctest's load
  // are not cached, so this run may time them again.)
  r = run(g + " -o " + d + "/predict.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto again = read_json(d + "/predict.json", "gamma.speed.check", 1);
  ASSERT_TRUE(again.is_ok());
  for (const auto& f : again.value()["files"]) EXPECT_GT(f["predicted_tg128"].get<double>(), 0) << f.dump();
}

// The weights the kernel chains and the probes are timed on: valid blocks of the type (ggml's own
// row check), every row its tile row's blocks in some order (the values the kernels see are a
// quantized matrix's), and no 4 KiB page twice (the 19 % fast tiled Q8_0 of the tile check).
TEST(Speed, ProbeWeightsAreValidBlocksAndRepeatNoPage) {
  struct Case { ggml_type type; int64_t n_in, n_out; };
  for (const Case c : {Case{GGML_TYPE_Q8_0, 1536, 512}, Case{GGML_TYPE_Q4_K, 1536, 300},
                       Case{GGML_TYPE_IQ2_XXS, 512, 256}, Case{GGML_TYPE_F16, 256, 200}}) {
    SCOPED_TRACE(ggml_type_name(c.type));
    const std::vector<uint8_t> w = speed::tiled_weight(c.type, c.n_in, c.n_out);
    const size_t row = ggml_row_size(c.type, c.n_in);
    ASSERT_EQ(w.size(), row * static_cast<size_t>(c.n_out));
    EXPECT_TRUE(ggml_validate_row_data(c.type, w.data(), w.size()));
    std::set<std::string> pages;
    size_t n_pages = 0;
    for (size_t at = 0; at + 4096 <= w.size(); at += 4096, ++n_pages)
      pages.insert(std::string(reinterpret_cast<const char*>(w.data() + at), 4096));
    EXPECT_EQ(pages.size(), n_pages);
    const size_t unit = ggml_blck_size(c.type) > 1 ? ggml_type_size(c.type) : 32 * ggml_type_size(c.type);
    auto units = [&](int64_t r) {
      std::multiset<std::string> u;
      for (size_t at = 0; at < row; at += unit)
        u.insert(std::string(reinterpret_cast<const char*>(w.data() + r * row + at), unit));
      return u;
    };
    for (int64_t r = 64; r < c.n_out; r += 37) EXPECT_EQ(units(r), units(r % 64)) << "row " << r;
  }
}

// The device budget: `gamma speed --ctx` reads llama.cpp's own allocation (weights with their
// repacked copies, KV cache, compute buffers) and predicts it from the reference; `gamma solve
// --memory --ctx` keeps the plan's predicted allocation within the budget, and the emitted file,
// loaded by libllama with that context, is within it; a context that alone overflows the memory,
// or a size no plan fits, is one line.
TEST(Memory, SolvedWithinTheBudgetAsLlamaCppAllocatesIt) {
  TempDir dir;
  const std::string d = dir.str(), env = "GAMMA_CACHE=" + d + "/cache GAMMA_LLAMA_BIN=" + llama_tool("") + " ";
  auto g = [&](const std::string& args) { return run(env + gamma_cli() + " " + args); };
  auto r = g("pool " + stories260k() + " --types Q4_0,Q5_0,Q8_0 -q -o " + d + "/pool");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string size = " --size 330000 --ctx 2048";
  // The free plan's allocation and the least any plan of the size takes bracket a binding budget.
  r = g("solve " + d + "/pool --score-from-manifest" + size + " --memory 64MiB -o " + d + "/free.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto free_plan = read_json(d + "/free.json", "gamma.plan", 1);
  ASSERT_TRUE(free_plan.is_ok());
  const double free_total = free_plan.value()["info"]["memory"]["predicted_total"].get<double>();
  r = g("solve " + d + "/pool --score-from-manifest" + size + " --memory 1000 -o " + d + "/never.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --memory 0.0 MiB: the context alone takes "), std::string::npos) << r.output;
  const json& src = free_plan.value()["info"]["memory"]["source"];
  const uint64_t ctx_only = src["context"].get<uint64_t>() + src["compute"].get<uint64_t>();
  r = g("solve " + d + "/pool --score-from-manifest" + size + " --memory " + std::to_string(ctx_only + 1000) + " -o " + d +
        "/never.json");
  EXPECT_NE(r.exit_code, 0);
  const size_t least = r.output.find("here: the least it takes is ");
  ASSERT_NE(least, std::string::npos) << r.output;
  EXPECT_FALSE(file_exists(d + "/never.json"));
  const double min_total = std::stod(r.output.substr(r.output.find('(', least) + 1));
  ASSERT_LT(min_total, free_total);
  const uint64_t budget = uint64_t(0.5 * (min_total + free_total));
  r = g("solve " + d + "/pool --score-from-manifest" + size + " --memory " + std::to_string(budget) + " -o " + d + "/mem.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto mem = read_json(d + "/mem.json", "gamma.plan", 1);
  ASSERT_TRUE(mem.is_ok());
  EXPECT_LE(mem.value()["info"]["memory"]["predicted_total"].get<double>(), double(budget));
  EXPECT_LE(mem.value()["info"]["objective"].get<double>(), free_plan.value()["info"]["objective"].get<double>() + 1e-12);
  // llama.cpp's own allocation for the emitted file, with that context: within the budget, and
  // as predicted to 1 %.
  ASSERT_EQ(g("emit " + d + "/pool " + d + "/mem.json -o " + d + "/mem.gguf").exit_code, 0);
  r = g("speed " + d + "/mem.gguf --reference " + stories260k() + " --ctx 2048 --memory-only -o " + d + "/check.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto check = read_json(d + "/check.json", "gamma.speed.check", 1);
  ASSERT_TRUE(check.is_ok());
  for (const auto& f : check.value()["files"]) {
    SCOPED_TRACE(f["file"].get<std::string>());
    EXPECT_LT(std::fabs(f["memory"]["predicted_error_pct"].get<double>()), 1.0);
    if (f["file"] == d + "/mem.gguf") EXPECT_LE(f["memory"]["total"].get<double>(), double(budget) * 1.01);
  }
  r = g("solve " + d + "/pool --score-from-manifest --size 330000 --memory 4MiB -o " + d + "/x.json");
  EXPECT_EQ(r.output, "gamma: error: --memory and --ctx go together: the memory holds the weights and the KV cache of --ctx tokens\n");
}
