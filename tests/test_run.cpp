// gamma run: the whole chain on stories260K (seconds), its resume, its comparison with the
// llama.cpp mix nearest in size, and its refusals.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <unistd.h>

#include <fmt/format.h>

#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/candidate.h"
#include "pool/manifest.h"
#include "pool/pool.h"
#include "run/mixes.h"
#include "run/run.h"
#include "speed/speed.h"
#include "testing.h"
#include "util/files.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {
// gamma run keeps measurements across runs in its cache (mixes, activations): these tests get
// a cache of their own, so each starts from nothing and none sees another's runs.
class PrivateCache : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gamma-test-run-cache-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::setenv("GAMMA_CACHE", dir_.c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

 private:
  fs::path dir_;
};
const auto* const kPrivateCache = ::testing::AddGlobalTestEnvironment(new PrivateCache);
}  // namespace

TEST(RunMixes, ForBudgetTakesThoseThatFitNearItAndTheNearestAbove) {
  const std::map<std::string, uint64_t> p = {{"Q2_K", 600}, {"IQ3_XXS", 700}, {"IQ3_M", 860}, {"Q3_K_M", 900},
                                             {"IQ4_XS", 990}, {"Q4_K_S", 1010}, {"Q4_K_M", 1100}};
  EXPECT_EQ(run::mixes_for_budget(p, 1000), (std::vector<std::string>{"IQ3_M", "Q3_K_M", "IQ4_XS", "Q4_K_S"}));
  EXPECT_EQ(run::mixes_for_budget(p, 1000, 0.85, 1), (std::vector<std::string>{"IQ4_XS", "Q4_K_S"}));
  // none near: the largest below stands in; none above: no upper neighbour
  EXPECT_EQ(run::mixes_for_budget(p, 500), (std::vector<std::string>{"Q2_K"}));
  EXPECT_EQ(run::mixes_for_budget(p, 2000), (std::vector<std::string>{"Q4_K_M"}));
  EXPECT_EQ(run::mixes_for_budget({{"Q8_0", 10}}, 5), (std::vector<std::string>{"Q8_0"}));
  // mixes of one size are one comparison (Gemma-3-270M's IQ3_S, IQ3_XS and Q2_K): all or none
  const std::map<std::string, uint64_t> tied = {{"IQ2_M", 900}, {"IQ3_XS", 950}, {"IQ3_S", 950}, {"Q2_K", 950}, {"Q3_K_M", 1100}};
  EXPECT_EQ(run::mixes_for_budget(tied, 1000, 0.85, 1), (std::vector<std::string>{"IQ3_S", "IQ3_XS", "Q2_K", "Q3_K_M"}));
  EXPECT_EQ(run::mixes_for_budget(tied, 1000, 0.85, 2),
            (std::vector<std::string>{"IQ2_M", "IQ3_S", "IQ3_XS", "Q2_K", "Q3_K_M"}));
  // gamma run's default (no --mix-above): only what fits, unless nothing does
  EXPECT_EQ(run::mixes_for_budget(p, 1000, 0.85, 1, false), (std::vector<std::string>{"IQ4_XS"}));
  EXPECT_EQ(run::mixes_for_budget(p, 500, 0.85, 1, false), (std::vector<std::string>{"Q2_K"}));
  EXPECT_EQ(run::mixes_for_budget({{"Q8_0", 10}}, 5, 0.85, 1, false), (std::vector<std::string>{"Q8_0"}));
}

// llama-quantize's dry run, as gamma run reads it, predicts the file the real run writes.
TEST(RunMixes, DryRunPredictsTheFileLlamaQuantizeWrites) {
  TempDir d;
  const std::string teacher = d / "t.gguf";
  ASSERT_EQ(gamma("dequantize " + stories260k() + " --type f32 -o " + teacher).exit_code, 0);
  auto header = run::gguf_header_bytes(teacher);
  ASSERT_TRUE(header.is_ok()) << header.status().message();
  for (const char* mix : {"Q8_0", "Q4_0", "Q3_K_M"}) {
    auto p = run::predict_mix(llama_tool("llama-quantize"), teacher, "", mix, *header);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    EXPECT_FALSE(p->needs_imatrix) << mix;
    const std::string out = d / (std::string(mix) + ".gguf");
    auto r = run_llama_tool(llama_tool("llama-quantize") + " " + teacher + " " + out + " " + mix + " 1", "");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const double real = double(fs::file_size(out));
    EXPECT_NEAR(double(p->file_bytes), real, 8192) << mix;  // the dry run prints MiB to 2 decimals
  }
}

TEST(RunPipeline, Stories260kEndToEndAndResumes) {
  TempDir d;
  const std::string args = stories260k() + " --bpw 8 -w " + d / "w" +
                           " --imatrix-chunks 2 -c 128 --chunks 4 --steps 6 --layers-per-step 0 --calib-tokens 512 -t 2"
                           " --hawq-samples 1 --max-mixes 2";  // every scorer: the default
  auto r = gamma("run " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* step : {"== llama-imatrix", "== pool", "== hawq", "== learn", "== layers", "== solve + emit",
                           "== llama-quantize", "== eval", "verdict: "})
    EXPECT_NE(r.output.find(step), std::string::npos) << step << "\n" << r.output;
  // stories260K is F32: its own teacher, not copied.
  EXPECT_EQ(r.output.find("== dequantize"), std::string::npos) << r.output;
  // The pool holds only the window HAWQ-V2's plans on the estimate chose (--pool-window 3), and
  // HAWQ-V2's scores reuse the estimate's traces.
  for (const char* step : {"== estimate (128 rows per module)", "== hawq traces (on the estimate)", "== pool window: ",
                           "== hawq (the estimate's traces)"})
    EXPECT_NE(r.output.find(step), std::string::npos) << step << "\n" << r.output;
  auto est = Manifest::load(d / "w/estimate");
  auto pool = Manifest::load(d / "w/pool");
  auto only = load_only(d / "w/pool-only.json");
  ASSERT_TRUE(est.is_ok() && pool.is_ok() && only.is_ok());
  EXPECT_EQ(est->estimate_rows, 128);
  for (const auto& m : pool->modules) {
    std::vector<std::string> types;
    for (const auto& c : m.candidates) types.push_back(c.type);
    auto want = only->at(m.name);
    std::sort(want.begin(), want.end());
    std::sort(types.begin(), types.end());
    EXPECT_EQ(types, want) << m.name;
  }
  auto hw = read_json(d / "w/scores-hawq.json", "gamma.scores", 1);
  ASSERT_TRUE(hw.is_ok());
  EXPECT_EQ((*hw)["traces_from"], d / "w/scores-hawq-estimate.json");
  EXPECT_FALSE(fs::exists(d / "w/teacher-f32.gguf"));
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  // No --calib: one text of prose then code (the first 40,000 bytes of war-and-peace.txt, then
  // 36,000 of python-calib.txt) calibrates the imatrix, HAWQ-V2 and Stage I.
  auto calib = read_text_file(d / "w/calib.txt", "calib");
  auto prose = read_text_file(gm::testing::shared_data("text/war-and-peace.txt"), "prose");
  auto code = read_text_file(gm::testing::shared_data("text/python-calib.txt"), "code");
  ASSERT_TRUE(calib.is_ok() && prose.is_ok() && code.is_ok());
  EXPECT_EQ(*calib, prose->substr(0, 40000) + (prose->substr(0, 40000).back() == '\n' ? "" : "\n") +
                        code->substr(0, 36000));
  EXPECT_EQ((*j)["calibration"], d / "w/calib.txt");
  // The disk after each stage (work directory + what the run added to gamma's cache), and its
  // most: at least the pool it keeps.
  uint64_t most = 0;
  for (const auto& s : (*j)["stages"])
    most = std::max(most, s.at("disk_bytes").get<uint64_t>() + s.at("cache_added_bytes").get<uint64_t>());
  EXPECT_EQ((*j)["peak_disk_bytes"].get<uint64_t>(), most);
  EXPECT_GE(most, dir_bytes(d / "w/pool"));
  EXPECT_GT(dir_bytes(d / "w/pool"), 0u);
  // Every scorer with both head rules was raced on 1 validation chunk (--race's default); the
  // best 3 of that race, and any other within --race-margin of the third, were measured on all 4,
  // and the chosen one is the lowest of those.
  const auto& tried = (*j)["tried"];
  ASSERT_GE(tried.size(), 4u);
  std::set<std::string> scorers;
  std::set<int> head_steps;
  std::vector<double> distinct_race;  // every distinct plan's race score
  double worst_finalist_race = 0, best_other_race = 1e30;
  int finalists = 0;
  for (const auto& t : tried) {
    if (!t.contains("same_plan_as")) distinct_race.push_back(t["race_kld"].get<double>());
    if (!t["valid_kld"].is_null()) {
      ++finalists;
      EXPECT_GE(t["valid_kld"].get<double>(), (*j)["chosen"]["valid_kld"].get<double>());
      worst_finalist_race = std::max(worst_finalist_race, t["race_kld"].get<double>());
    } else if (!t.contains("same_plan_as")) {  // a twin of a finalist stays out (VariantsOfOnePlanAreMeasuredOnce)
      best_other_race = std::min(best_other_race, t["race_kld"].get<double>());
    }
    const std::string stem =
        fs::path(t["plan"].get<std::string>()).parent_path().string() + "/" + t["name"].get<std::string>();
    EXPECT_TRUE(fs::exists(stem + ".valid-wiki.valid-c128-n1.json")) << stem;
    EXPECT_EQ(fs::exists(stem + ".valid-wiki.valid-c128-n4.json"), !t["valid_kld"].is_null()) << stem;
    scorers.insert(t["scorer"].get<std::string>());
    head_steps.insert(t["head_steps"].get<int>());
  }
  ASSERT_GE(distinct_race.size(), 4u);
  std::sort(distinct_race.begin(), distinct_race.end());
  const double cut = distinct_race[2] * (1 + gm::RunOptions{}.race_margin);
  EXPECT_EQ(finalists, std::count_if(distinct_race.begin(), distinct_race.end(), [&](double r) { return r <= cut; }));
  EXPECT_GE(finalists, 3);
  EXPECT_LE(worst_finalist_race, cut);
  EXPECT_GT(best_other_race, cut);
  // The default head (Q8_0 here), one step cheaper (Q5_1) and two (Q4_1).
  EXPECT_EQ(head_steps, (std::set<int>{0, 1, 2}));
  // GAMMA's measured loss changes, raw, fitted (--transform delta, delta-fit) and rescaled to
  // each layer's measured KLD (gamma layers, --layer-scale), and the fitted ones blended with
  // HAWQ-V2's (--blend), are all tried.
  EXPECT_EQ(scorers, (std::set<std::string>{"static", "hawq", "gamma", "gamma-fit", "gamma-cal", "gamma-blend"}));
  auto layers = read_json(d / "w/layers.json", "gamma.layers", 1);
  ASSERT_TRUE(layers.is_ok()) << layers.status().message();
  EXPECT_EQ((*layers)["layers"].size(), 5u);  // stories260K's layers
  const auto& rows = (*j)["rows"];
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0]["file_bytes"].get<uint64_t>(), fs::file_size(rows[0]["path"].get<std::string>()));
  ASSERT_GE((*j)["mixes"].size(), 1u);
  EXPECT_EQ((*j)["mixes"][0]["label"].get<std::string>().rfind("llama.cpp ", 0), 0u);
  // Each mix's GGUF is removed once measured (--keep-mixes keeps it); its figures stay.
  for (const auto& m : (*j)["mixes"]) {
    EXPECT_FALSE(fs::exists(m["path"].get<std::string>())) << m.dump();
    EXPECT_GT(m["kld_mean"].get<double>(), 0.0);
  }
  for (const auto& row : rows) {
    EXPECT_GT(row["kld_mean"].get<double>(), 0.0);
    EXPECT_GT(row["top1"].get<double>(), 0.3);
  }
  EXPECT_TRUE((*j)["verdict"]["winner"] == "gamma" || (*j)["verdict"]["winner"] == "llama.cpp");
  EXPECT_TRUE(fs::exists(d / "w/run.png"));
  // Every model was scored against one teacher base file, and llama-perplexity reads it.
  const std::string base = d / "w/teacher-report-wiki.test-c128-n4.kld";
  ASSERT_TRUE(fs::exists(base));
  // The teacher's log-probs that no later step reads are gone: the validation text's (full and
  // the race's chunk) once the variant is chosen, the calibration chunks' once gamma layers ends.
  for (const char* gone : {"teacher-valid-wiki.valid-c128-n4.kld", "teacher-valid-wiki.valid-c128-n1.kld"})
    EXPECT_FALSE(fs::exists(fs::path(d / "w") / gone)) << gone;
  for (const auto& f : fs::directory_iterator(d / "w"))
    EXPECT_NE(f.path().filename().string().rfind("teacher-calib-", 0), 0u) << f.path();
  auto lp = run_llama_tool(llama_tool("llama-perplexity") + " -m " + rows[0]["path"].get<std::string>() +
                               " --kl-divergence-base " + base + " --kl-divergence -c 128 --chunks 4 -t 2",
                           "Mean    KLD");
  ASSERT_EQ(lp.exit_code, 0) << lp.output;
  EXPECT_NE(lp.output.find(fmt::format("Mean    KLD: {:10.6f}", rows[0]["kld_mean"].get<double>())), std::string::npos)
      << lp.output;

  // A second run does no work again: no teacher, imatrix, learning, quantizing or evaluation.
  auto again = gamma("run " + args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const char* step : {"== dequantize", "== llama-imatrix", "== hawq", "== learn", "== layers", "== solve", "== llama-quantize", "== eval"})
    EXPECT_EQ(again.output.find(step), std::string::npos) << step << "\n" << again.output;
  EXPECT_NE(again.output.find("llama.cpp "), std::string::npos);
  // --race 0 measures the raced-out variants on every chunk too; a raced run after it reuses
  // those measurements (no evaluation), their first chunk as its race: every variant is then a
  // finalist, and the choice is the least of all of them.
  auto full = gamma("run " + args + " --race 0");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("== eval"), std::string::npos) << full.output;
  auto reraced = gamma("run " + args);
  ASSERT_EQ(reraced.exit_code, 0) << reraced.output;
  EXPECT_EQ(reraced.output.find("== eval"), std::string::npos) << reraced.output;
  auto jr = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(jr.is_ok());
  double least = 1e30;
  for (const auto& t : (*jr)["tried"]) {
    ASSERT_FALSE(t["valid_kld"].is_null()) << t.dump();
    least = std::min(least, t["valid_kld"].get<double>());
    const std::string stem =
        fs::path(t["plan"].get<std::string>()).parent_path().string() + "/" + t["name"].get<std::string>();
    auto e = read_json(stem + ".valid-wiki.valid-c128-n4.json", "gamma.eval", 1);
    ASSERT_TRUE(e.is_ok());
    EXPECT_DOUBLE_EQ(t["race_kld"].get<double>(), (*e)["kld"]["chunk_means"][0].get<double>()) << stem;
  }
  EXPECT_EQ((*jr)["chosen"]["valid_kld"].get<double>(), least);
  // Another work directory, the same model and targets: the mixes are not built or measured
  // again (their evaluations are kept in the cache, keyed by teacher, imatrix and llama.cpp).
  auto elsewhere = gamma("run " + stories260k() + " --bpw 8 -w " + d / "w2" +
                         " --imatrix-chunks 2 -c 128 --chunks 4 --steps 6 --layers-per-step 0 --calib-tokens 512 -t 2"
                         " --hawq-samples 1 --max-mixes 2 --scorers static");
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.output;
  EXPECT_EQ(elsewhere.output.find("== llama-quantize"), std::string::npos) << elsewhere.output;
  auto j2 = read_json(d / "w2/run.json", "gamma.run", 2);
  ASSERT_TRUE(j2.is_ok());
  ASSERT_EQ((*j2)["mixes"].size(), (*j)["mixes"].size());
  for (size_t i = 0; i < (*j)["mixes"].size(); ++i) {
    EXPECT_EQ((*j2)["mixes"][i]["valid_kld"], (*j)["mixes"][i]["valid_kld"]);
    EXPECT_EQ((*j2)["mixes"][i]["file_bytes"], (*j)["mixes"][i]["file_bytes"]);
  }
  // gamma layers' measurement stays in the work directory: one of other chunks is refused.
  EXPECT_EQ((*layers)["info"]["config"]["chunks"], 4);
  auto chunks = gamma("run " + args + " --layers-chunks 2");
  EXPECT_NE(chunks.exit_code, 0);
  EXPECT_NE(chunks.output.find("was measured on 4 chunks, not --layers-chunks 2"), std::string::npos) << chunks.output;
  // Another target in the same work directory: its pool was chosen for --bpw 8, said in one line.
  auto other = gamma("run " + stories260k() + " --bpw 6 -w " + d / "w" + " --imatrix-chunks 2 -c 128 --chunks 4 -t 2");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("holds a pool chosen for other targets"), std::string::npos) << other.output;
}

// --teacher-type f16: a quantized source's teacher at half the disk, every matrix F16, the one
// every scorer and measurement uses, and within a hair of the F32 dequantization (llama.cpp's
// KLD between the two).
// Variants whose plans are the same file (every scorer at the pool's largest size takes each
// module's heaviest candidate) are emitted and measured once: the twin's race score, its
// validation and its report are the first one's, the race's finalists are distinct plans, and
// --each-scorer's best of the other scorer, a twin of gamma's file, is not measured again.
TEST(RunPipeline, VariantsOfOnePlanAreMeasuredOnce) {
  TempDir d;
  const std::string args = stories260k() + " --bpw 30 -w " + d / "w" +
                           " --imatrix-chunks 2 -c 128 --chunks 2 --valid-chunks 3 --calib-tokens 512 -t 2"
                           " --hawq-samples 1 --max-mixes 1 --scorers static,hawq --each-scorer";
  auto r = gamma("run " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  std::map<std::string, json> by_name;
  for (const auto& t : (*j)["tried"]) by_name[t["name"].get<std::string>()] = t;
  ASSERT_EQ(by_name.size(), 6u);  // 2 scorers x 3 head rules
  int twins = 0, finalists = 0;
  for (const auto& [name, t] : by_name) {
    const std::string dir = fs::path(t["plan"].get<std::string>()).parent_path().string();
    if (!t["valid_kld"].is_null()) {
      ++finalists;
      EXPECT_FALSE(t.contains("same_plan_as")) << t.dump();
    }
    if (!t.contains("same_plan_as")) continue;
    ++twins;
    const std::string first = t["same_plan_as"].get<std::string>();
    ASSERT_TRUE(by_name.count(first)) << first;
    // The same tensors: the plans name the same candidates and types.
    auto a = Plan::load(t["plan"].get<std::string>()), b = Plan::load(by_name[first]["plan"].get<std::string>());
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a->modules, b->modules);
    EXPECT_EQ(a->fixed, b->fixed);
    EXPECT_EQ(t["race_kld"].get<double>(), by_name[first]["race_kld"].get<double>()) << name;
    EXPECT_EQ(read_file(dir + "/" + name + ".valid-wiki.valid-c128-n1.json").value(),
              read_file(dir + "/" + first + ".valid-wiki.valid-c128-n1.json").value());
    EXPECT_NE(r.output.find("   " + name + ": the plan of " + first + ", measured once"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("== eval " + name + ".gguf"), std::string::npos) << r.output;
  }
  EXPECT_EQ(twins, 3);      // HAWQ-V2's three are static's
  EXPECT_EQ(finalists, 3);  // the three distinct plans, each on every validation chunk
  // HAWQ-V2's best is gamma's file: the same figures on the report text, a zero paired difference.
  const auto& rows = (*j)["rows"];
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[1]["scorer"], "hawq");
  EXPECT_EQ(rows[1]["kld_mean"].get<double>(), rows[0]["kld_mean"].get<double>());
  EXPECT_EQ(rows[1]["paired_gamma_minus"][0]["mean"].get<double>(), 0.0);
  // Resumed: nothing solved, emitted or measured again.
  auto again = gamma("run " + args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const char* step : {"== solve", "== eval", "== emit"}) EXPECT_EQ(again.output.find(step), std::string::npos) << again.output;
}

TEST(RunPipeline, F16TeacherIsHalfTheDiskAndTheSameReference) {
  TempDir d;
  const std::string q8 = d / "q8.gguf", f32 = d / "teacher-f32.gguf";
  ASSERT_EQ(run_llama_tool(llama_tool("llama-quantize") + " " + stories260k() + " " + q8 + " Q8_0 1", "").exit_code, 0);
  // F16 is the default teacher type (--teacher-type auto) ...
  const std::string opts = " --bpw 8 --imatrix-chunks 2 -c 128 --chunks 4 --calib-tokens 512 -t 2 --hawq-samples 1"
                           " --scorers static,hawq --max-mixes 1";
  const std::string args = q8 + opts + " -w " + d / "w";
  auto dry = gamma("run " + args + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("dequantize -> teacher (F16)"), std::string::npos) << dry.output;
  // ... except in a work directory an earlier run gave an F32 teacher: it resumes on that one,
  // and --teacher-type f32 asks for one.
  fs::create_directories(d / "old");
  ASSERT_EQ(gamma("dequantize " + q8 + " --type f32 -o " + d / "old/teacher-f32.gguf").exit_code, 0);
  for (const std::string& run : {q8 + opts + " -w " + d / "old", q8 + opts + " --teacher-type f32 -w " + d / "new"}) {
    auto r32 = gamma("run " + run + " --dry-run");
    ASSERT_EQ(r32.exit_code, 0) << r32.output;
    EXPECT_NE(r32.output.find("dequantize -> teacher (F32)"), std::string::npos) << r32.output;
  }
  auto r = gamma("run " + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string teacher = d / "w/teacher-f16.gguf";
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["teacher"], teacher);
  auto hw = read_json(d / "w/scores-hawq.json", "gamma.scores", 1);
  ASSERT_TRUE(hw.is_ok());
  auto tm = Model::open(teacher);
  ASSERT_TRUE(tm.is_ok()) << tm.status().message();
  for (const auto& t : (*tm)->tensors())
    if (t.shape.size() >= 2) EXPECT_EQ(t.type, GGML_TYPE_F16) << t.name;
  ASSERT_EQ(gamma("dequantize " + q8 + " --type f32 -o " + f32).exit_code, 0);
  EXPECT_NEAR(double(fs::file_size(teacher)), double(fs::file_size(f32)) / 2, 0.05 * double(fs::file_size(f32)));
  auto ev = gamma("eval " + teacher + " --teacher " + f32 + " --text " + shared_data("text/wiki.test.raw") +
                  " --ctx 128 --chunks 4 -t 2 -q -o " + d / "f16-vs-f32.json");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  auto e = read_json(d / "f16-vs-f32.json", "gamma.eval", 1);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_LT((*e)["kld"]["mean"].get<double>(), 1e-4);
}

// A pool that can only make Q4_0 files against a budget that fits llama.cpp's Q8_0: the mix
// wins, and run says so, with the command, and exits 0.
TEST(RunPipeline, VerdictNamesTheMixThatBeatsGamma) {
  TempDir d;
  // stories260K is F32: it is its own teacher (no copy in the work directory).
  const std::string teacher = stories260k();
  auto q8 = run::predict_mix(llama_tool("llama-quantize"), teacher, "", "Q8_0", run::gguf_header_bytes(teacher).value());
  ASSERT_TRUE(q8.is_ok()) << q8.status().message();
  auto r = gamma("run " + stories260k() + " -w " + d / "w" + " --size " + std::to_string(q8->file_bytes + 16384) +
                 " --types Q4_0 --scorers static --imatrix none --compare Q8_0 -c 128 --chunks 2 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("verdict: llama.cpp's Q8_0 fits the budget and beats gamma's file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("llama-quantize " + teacher + " OUT.gguf Q8_0"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "w/teacher-f32.gguf"));
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["verdict"]["winner"], "llama.cpp");
  EXPECT_EQ((*j)["verdict"]["mix"], "Q8_0");
}

// --max-kld: the smallest file whose validation KLD meets it; an unreachable one names the range.
TEST(RunPipeline, MaxKldFindsTheSmallestFileThatMeetsIt) {
  TempDir d;
  const std::string common = stories260k() + " -w " + d / "w" + " --types Q4_0,Q8_0 --scorers static --imatrix none "
                             "--compare none -c 128 --chunks 2 -t 2";
  auto r = gamma("run " + common + " --max-kld 1e-9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --max-kld 1e-09: no file reaches it; the largest"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("so the feasible range is KLD >= "), std::string::npos) << r.output;
  r = gamma("run " + common + " --max-kld 0.05");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_LE((*j)["chosen"]["valid_kld"].get<double>(), 0.05);
  // Every probe below the chosen size missed the target.
  const uint64_t chosen = (*j)["budget_bytes"].get<uint64_t>();
  int below = 0;
  for (const auto& p : (*j)["max_kld_probes"])
    if (p["size"].get<uint64_t>() < chosen) {
      EXPECT_GT(p["best"]["valid_kld"].get<double>(), 0.05);
      ++below;
    }
  EXPECT_GE(below, 1);
}

TEST(RunPipeline, BadInputFailsWithOneLine) {
  TempDir d;
  auto r = gamma("run no-such-model -w " + d / "w");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: unknown model"), std::string::npos) << r.output;
  // A path is a path: a missing file is said as such, not looked up among the registry's names.
  r = gamma("run " + d / "no/such/model.gguf" + " -w " + d / "w");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output, "gamma: error: model " + d / "no/such/model.gguf" + ": no such file\n");
  r = gamma("run missing.gguf -w " + d / "w");
  EXPECT_EQ(r.output, "gamma: error: model missing.gguf: no such file\n");
  r = gamma("run " + stories260k() + " --compare Q9_X --bpw 8 -w " + d / "w2" +
            " --imatrix none --steps 2 --calib-tokens 256 -c 128 --chunks 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --compare Q9_X: not a llama.cpp standard mix"), std::string::npos) << r.output;
  r = gamma("run " + stories260k() + " --bpw -1 -w " + d / "w3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bpw must be"), std::string::npos) << r.output;
  // Targets: malformed, below the smallest file (checked before any work), two at once.
  r = gamma("run " + stories260k() + " --size 12XB -w " + d / "w4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --size: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; the feasible range is "), std::string::npos) << r.output;
  r = gamma("run " + stories260k() + " --size 1KB --imatrix none -w " + d / "w5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("gamma: error: --size 1KB is below the smallest file this pool can make: the feasible range is "),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "w5/teacher-f32.gguf"));
  r = gamma("run " + stories260k() + " --size 1MB --bpw 4 -w " + d / "w6");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  r = gamma("run " + stories260k() + " --scorers static,magic -w " + d / "w7");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--scorers: unknown scorer magic"), std::string::npos) << r.output;
}

// --dry-run: the plan of work with its time and disk, nothing written.
TEST(RunPipeline, DryRunPrintsThePlanOfWorkAndWritesNothing) {
  TempDir d;
  // The stored pool: a line per type it quantizes.
  auto r = gamma("run " + stories260k() + " --dry-run --size 1MB --stored-pool -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"gamma run --dry-run: ", "files gamma can make from the pool (auto types)", "target: --size 1MB", "teacher: the model itself",
                        "pool Q8_0", "hawq", "layers (6 files", "total (estimate"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  EXPECT_FALSE(fs::exists(d / "w"));
  // A speed budget adds the speed table and the llama-bench of the reported files.
  r = gamma("run " + stories260k() + " --dry-run --size 1MB --min-decode 10 -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"speed table (kernels per type and shape)", "llama-bench of the reported files (2 rounds)",
                        "files gamma can make from the pool (auto-speed types)"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  EXPECT_FALSE(fs::exists(d / "w"));
  // A streamed pool (the default): one line for its manifest, none per type (no candidate file
  // is written).
  r = gamma("run " + stories260k() + " --dry-run --size 1MB -w " + d / "w");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pool (streamed: the estimate's manifest, no files)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("pool Q8_0"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "w"));
}

// The dry run prices this machine: two probes (quantizing, a forward pass) against the reference
// machine's figures, measured once per model, CPU and thread count and kept in gamma's cache; the
// forward passes' stages scale with the measured ratio.
TEST(RunPipeline, DryRunPricesThisMachineOnceAndScalesByIt) {
  TempDir d;
  const std::string env = "GAMMA_CACHE=" + d / "cache" + " ";
  const std::string cmd = env + gamma_cli() + " run " + stories260k() + " --dry-run --size 1MB -c 128 -w " + d / "w";
  auto r = gm::testing::run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("this machine: quantizing "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(probes: "), std::string::npos) << r.output;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(d / "cache/machine"))
    if (f.path().extension() == ".json") files.push_back(f.path());
  ASSERT_EQ(files.size(), 1u);
  auto j = read_json(files[0].string(), "gamma.machine", 1);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  for (const char* k : {"quantize_scale", "forward_scale"}) EXPECT_GT((*j)[k].get<double>(), 0) << j->dump();
  EXPECT_GT((*j)["forward_probe"]["seconds"].get<double>(), 0);
  // The llama-imatrix line's seconds at a forward scale of 1, then of 30: 30 times as long.
  auto imatrix_seconds = [](const std::string& out) {
    const size_t at = out.find("llama-imatrix (");
    EXPECT_NE(at, std::string::npos) << out;
    std::string line = out.substr(at, out.find('\n', at) - at);
    std::smatch m;
    EXPECT_TRUE(std::regex_search(line, m, std::regex(" (?:([0-9]+)m)?([0-9]+)s "))) << line;
    return (m[1].matched ? 60 * std::stod(m[1]) : 0) + std::stod(m[2]);
  };
  double secs[2];
  for (int i = 0; i < 2; ++i) {
    (*j)["forward_scale"] = i == 0 ? 1.0 : 30.0;
    (*j)["quantize_scale"] = 2.0;
    ASSERT_TRUE(write_json(files[0].string(), *j).is_ok());
    r = gm::testing::run(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(i == 0 ? "quantizing 2.00x, ggml passes 1.00x" : "quantizing 2.00x, ggml passes 30.00x"),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("(measured before"), std::string::npos) << r.output;
    secs[i] = imatrix_seconds(r.output);
  }
  EXPECT_GT(secs[0], 0);
  EXPECT_NEAR(secs[1] / secs[0], 30.0, 30.0 * 0.5 / secs[0] + 0.5);  // hms rounds to the second
  // Stages of earlier runs price their kind instead of the probe: a forward stage that took 3x
  // the reference's figure (its estimate 200 s at the scale 2 it ran under, 300 s taken) and a
  // LibTorch one (Stage I) that took 0.5x; each weighted by the reference's figure. HAWQ-V2's
  // traces, without a stage of their own, take Stage I's scale.
  (*j)["forward_scale"] = 30.0;
  (*j)["stages"] = json::array({{{"stage", "llama-imatrix"}, {"kind", "forward"}, {"seconds", 300.0},
                                 {"estimate_seconds", 200.0}, {"scale", 2.0}},
                                {{"stage", "learn at 3 bpw"}, {"kind", "torch"}, {"seconds", 50.0},
                                 {"estimate_seconds", 100.0}, {"scale", 1.0}}});
  ASSERT_TRUE(write_json(files[0].string(), *j).is_ok());
  r = gm::testing::run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("quantizing 2.00x, ggml passes 3.00x, LibTorch passes 0.50x (HAWQ-V2's 0.50x)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", 2 stages of earlier runs"), std::string::npos) << r.output;
  // A HAWQ-V2 stage prices HAWQ-V2 alone, also one an earlier gamma filed under "torch" (by its
  // name): it ran at 0.25x here, and Stage I's 0.5x stays.
  (*j)["stages"].push_back({{"stage", "hawq traces (4 probes)"}, {"kind", "torch"}, {"seconds", 25.0},
                            {"estimate_seconds", 100.0}, {"scale", 1.0}});
  ASSERT_TRUE(write_json(files[0].string(), *j).is_ok());
  r = gm::testing::run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("LibTorch passes 0.50x (HAWQ-V2's 0.25x)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "w"));
}

// The streamed pool (the default; --stored-pool the other way): the pool is the estimate's
// manifest and nothing else; Stage I makes the candidates it reads, so its plan is the stored pool's run's, and the run's peak disk is lower;
// what it made is cut back to what the variants' plans take before they are emitted.
TEST(RunPipeline, StreamedPoolRunStoresNoCandidateAndLearnsTheSamePlan) {
  TempDir d;
  const std::string common = stories260k() + " --size 330000 --types Q4_0,Q5_0,Q8_0 --scorers gamma --imatrix none "
                             "--compare none --no-front -c 128 --chunks 2 -t 2 --steps 6";
  auto r = gamma("run " + common + " --stored-pool -w " + d / "stored");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("pool (streamed) "), std::string::npos) << r.output;
  r = gamma("run " + common + " -w " + d / "streamed");  // streamed: the default
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pool (streamed) "), std::string::npos) << r.output;
  for (const auto& f : fs::directory_iterator(d / "streamed/pool"))
    EXPECT_EQ(f.path().extension() == ".gguf", false) << f.path();
  EXPECT_TRUE(Manifest::load(d / "streamed/pool").value().streamed);
  json runs[2];
  for (int i = 0; i < 2; ++i) runs[i] = read_json(d / (i ? "streamed" : "stored") + "/run.json", "gamma.run", 2).value();
  auto plan = [](const json& run) {
    for (const auto& v : run["tried"])
      if (v["name"] == "gamma") return read_json(v["plan"].get<std::string>(), "gamma.plan", 1).value()["modules"];
    return json();
  };
  EXPECT_FALSE(plan(runs[0]).is_null());
  EXPECT_EQ(plan(runs[0]), plan(runs[1]));
  EXPECT_LT(runs[1]["peak_disk_bytes"].get<uint64_t>(), runs[0]["peak_disk_bytes"].get<uint64_t>());
  // Stage I left the window in POOL/stream/; once the scorers were ready it was cut back to what
  // the variants' plans take, and the emits after it made nothing else: the directory holds
  // exactly their candidates (the source's own type never).
  const Manifest man = Manifest::load(d / "streamed/pool").value();
  std::set<std::string> want, have;
  size_t plans = 0;
  for (const auto& at : fs::directory_iterator(d / "streamed"))
    if (at.path().filename().string().rfind("at-", 0) == 0)
      for (const auto& f : fs::directory_iterator(at.path()))
        if (f.path().filename().string().rfind("plan-", 0) == 0) {
          ++plans;
          const json p = read_json(f.path().string(), "gamma.plan", 1).value();
          for (const auto& m : man.modules) {
            const Candidate* c = m.find(p["modules"][m.name].get<std::string>());
            ASSERT_NE(c, nullptr) << m.name;
            if (c->type != m.source_type) want.insert(made_bytes_path(man, "stream", m.name, parse_type(c->type).value()));
          }
        }
  for (const auto& f : fs::directory_iterator(d / "streamed/pool/stream")) have.insert(f.path().string());
  EXPECT_EQ(have, want);
  const json kept = read_json(d / "streamed/stream-kept.json", "gamma.run.stream_kept", 1).value();
  EXPECT_EQ(kept["plans"].get<size_t>(), plans);
  EXPECT_EQ(kept["kept"].get<size_t>(), want.size());
  size_t window = 0;
  for (const auto& m : man.modules)
    for (const auto& c : m.candidates) window += c.type != m.source_type;
  EXPECT_GT(kept["removed"].get<size_t>(), 0u);
  EXPECT_EQ(kept["kept"].get<size_t>() + kept["removed"].get<size_t>(), window);
  EXPECT_NE(r.output.find("== POOL/stream: the "), std::string::npos) << r.output;
}

// Several sizes in one work directory: each chosen on validation by the same rule (the sum of
// the validation texts' KLDs), one run-BYTES.json each and sweep.json; "python" validates on
// python-calib.txt's held-back end.
TEST(RunPipeline, SeveralSizesEachChosenOnTheSameValidation) {
  TempDir d;
  const std::string teacher = d / "t.gguf";
  ASSERT_EQ(gamma("dequantize " + stories260k() + " --type f32 -o " + teacher).exit_code, 0);
  const uint64_t header = run::gguf_header_bytes(teacher).value();
  std::vector<uint64_t> sizes;
  for (const char* mix : {"Q4_0", "Q8_0"})
    sizes.push_back(run::predict_mix(llama_tool("llama-quantize"), teacher, "", mix, header).value().file_bytes + 16384);
  auto r = gamma("run " + stories260k() + " -w " + d / "w" + " --size " + std::to_string(sizes[0]) + "," +
                 std::to_string(sizes[1]) + " --types Q4_0,Q8_0 --scorers static --imatrix none --compare none" +
                 " --valid-text wiki,python -c 128 --chunks 2 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(d / "w/run.json"));
  auto sweep = read_json(d / "w/sweep.json", "gamma.run.sweep", 1);
  ASSERT_TRUE(sweep.is_ok()) << sweep.status().message();
  ASSERT_EQ((*sweep)["sizes"].size(), 2u);
  // The held-back text is python-calib.txt from byte 480,000, byte for byte.
  const std::string py = read_text_file(shared_data("text/python-calib.txt"), "text").value();
  EXPECT_EQ(read_text_file(d / "w/python-valid.txt", "text").value(), py.substr(480000));
  double kld[2];
  for (int i = 0; i < 2; ++i) {
    auto j = read_json(d / ("w/run-" + std::to_string(sizes[i]) + ".json"), "gamma.run", 2);
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    EXPECT_EQ((*j)["budget_bytes"].get<uint64_t>(), sizes[i]);
    EXPECT_LE((*j)["rows"][0]["file_bytes"].get<uint64_t>(), sizes[i]);
    EXPECT_TRUE(fs::exists(d / ("w/run-" + std::to_string(sizes[i]) + ".png")));
    // Each variant's validation score is the sum of its two texts' mean KLDs (gamma eval's files).
    for (const auto& v : (*j)["tried"]) {
      const std::string stem =
          fs::path(v["plan"].get<std::string>()).parent_path().string() + "/" + v["name"].get<std::string>();
      double sum = 0;
      for (const char* t : {".valid-wiki.valid-c128-n2.json", ".valid-python-valid-c128-n2.json"}) {
        auto e = read_json(stem + t, "gamma.eval", 1);
        ASSERT_TRUE(e.is_ok()) << e.status().message();
        sum += (*e)["kld"]["mean"].get<double>();
      }
      EXPECT_DOUBLE_EQ(v["valid_kld"].get<double>(), sum) << stem;
    }
    kld[i] = (*j)["rows"][0]["kld_mean"].get<double>();
  }
  EXPECT_LT(kld[1], kld[0]);  // more bytes, less KLD

  // A second report text: the same run again adds each chosen file's KLD on python-eval.txt (the
  // same chunks gamma eval measures), choosing nothing anew.
  r = gamma("run " + stories260k() + " -w " + d / "w" + " --size " + std::to_string(sizes[0]) + "," +
            std::to_string(sizes[1]) + " --types Q4_0,Q8_0 --scorers static --imatrix none --compare none" +
            " --valid-text wiki,python --text wiki,python -c 128 --chunks 2 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("python-eval.txt: "), std::string::npos) << r.output;
  for (int i = 0; i < 2; ++i) {
    auto j = read_json(d / ("w/run-" + std::to_string(sizes[i]) + ".json"), "gamma.run", 2).value();
    EXPECT_DOUBLE_EQ(j["rows"][0]["kld_mean"].get<double>(), kld[i]);
    const json& also = j["rows"][0]["also"];
    ASSERT_EQ(also.size(), 1u) << j["rows"][0].dump();
    EXPECT_EQ(fs::path(also[0]["text"].get<std::string>()).filename(), "python-eval.txt");
    const std::string path = j["rows"][0]["path"].get<std::string>();
    auto ev = read_json(path.substr(0, path.size() - 5) + ".report-python-eval-c128-n2.json", "gamma.eval", 1);
    ASSERT_TRUE(ev.is_ok()) << ev.status().message();
    EXPECT_DOUBLE_EQ(also[0]["kld_mean"].get<double>(), (*ev)["kld"]["mean"].get<double>());
  }
}

// --size MIX: the size of the file llama-quantize makes of that mix here (its name in any case):
// predicted once the imatrix exists, then the real file's bytes once the mix is built; that mix
// is the one compared, and it fits.
TEST(RunPipeline, SizeByMixNameIsThatMixsFile) {
  TempDir d;
  auto r = gamma("run " + stories260k() + " -w " + d / "w" + " --size q8_0 --types Q4_0,Q8_0 --scorers static" +
                 " --imatrix-chunks 2 -c 128 --chunks 2 -t 2 --no-front");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("== --size q8_0: llama.cpp's Q8_0 of this model, "), std::string::npos) << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["target"]["size"], "q8_0");
  const json* q8 = nullptr;
  for (const auto& m : (*j)["mixes"])
    if (m["label"] == "llama.cpp Q8_0") q8 = &m;
  ASSERT_NE(q8, nullptr) << (*j)["mixes"].dump();
  EXPECT_EQ((*j)["budget_bytes"], (*q8)["file_bytes"]);
  EXPECT_LE((*j)["rows"][0]["file_bytes"].get<uint64_t>(), (*q8)["file_bytes"].get<uint64_t>());
  EXPECT_GT((*j)["rows"][0]["file_bytes"].get<double>(), 0.99 * (*q8)["file_bytes"].get<double>());
}

// --each-scorer: each other scorer's best variant on validation, reported beside gamma's file
// on the same report chunks. With one finalist the race leaves the other scorer without one:
// its race-best is then measured on every validation chunk before it is compared.
TEST(RunPipeline, EachScorerReportsEveryScorersBestOnTheSameChunks) {
  TempDir d;
  auto r = gamma("run " + stories260k() + " -w " + d / "w" + " --size q8_0 --types Q4_0,Q8_0 --scorers static,hawq" +
                 " --hawq-samples 1 --imatrix-chunks 2 -c 128 --chunks 2 --valid-chunks 3 --race 1 --race-keep 1" +
                 " --each-scorer --text wiki,python -t 2 --no-front");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  const std::string chosen = (*j)["chosen"]["scorer"].get<std::string>();
  const auto& bests = (*j)["scorer_bests"];
  ASSERT_EQ(bests.size(), 1u) << bests.dump();
  const json& b = bests[0];
  EXPECT_EQ(b["scorer"], chosen == "static" ? "hawq" : "static");
  // Its validation is on every chunk, and it is the least of its scorer's measured variants.
  ASSERT_TRUE(b["variant"]["valid_kld"].is_number()) << b.dump();
  const std::string plan = b["variant"]["plan"].get<std::string>();
  const std::string stem = fs::path(plan).parent_path().string() + "/" + b["variant"]["name"].get<std::string>();
  auto full = read_json(stem + ".valid-wiki.valid-c128-n3.json", "gamma.eval", 1);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  EXPECT_DOUBLE_EQ(b["variant"]["valid_kld"].get<double>(), (*full)["kld"]["mean"].get<double>());
  for (const auto& t : (*j)["tried"])
    if (t["scorer"] == b["scorer"] && t["valid_kld"].is_number())
      EXPECT_GE(t["valid_kld"].get<double>(), b["variant"]["valid_kld"].get<double>()) << t.dump();
  // Reported on both report texts, the same chunks as gamma's file, and in the table's rows.
  auto ev = read_json(stem + ".report-wiki.test-c128-n2.json", "gamma.eval", 1);
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  EXPECT_DOUBLE_EQ(b["kld_mean"].get<double>(), (*ev)["kld"]["mean"].get<double>());
  ASSERT_EQ(b["also"].size(), 1u);
  EXPECT_TRUE(fs::exists(stem + ".report-python-eval-c128-n2.json"));
  EXPECT_NE(r.output.find("best " + b["scorer"].get<std::string>() + " ("), std::string::npos) << r.output;
  // Paired against gamma's file on both texts: the mean of the chunks' differences.
  ASSERT_EQ(b["paired_gamma_minus"].size(), 2u) << b.dump();
  const auto g = read_json(fs::path((*j)["rows"][0]["path"].get<std::string>()).replace_extension().string() +
                               ".report-wiki.test-c128-n2.json", "gamma.eval", 1);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  double diff = 0;
  for (int c = 0; c < 2; ++c)
    diff += (*g)["kld"]["chunk_means"][c].get<double>() - (*ev)["kld"]["chunk_means"][c].get<double>();
  EXPECT_NEAR(b["paired_gamma_minus"][0]["mean"].get<double>(), diff / 2, 1e-12);
  EXPECT_NE(r.output.find("gamma's file minus best "), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(stem + ".gguf"));

  // A second size in the same work directory (Q8_0's resumed): a sweep, and its goal table
  // W/sweep.md, a row per size with each file's KLD on both texts as run-BYTES.json has them, the
  // mix the size names, the paired differences, and "yes" only where every one is below zero by
  // two errors.
  r = gamma("run " + stories260k() + " -w " + d / "w" + " --size q4_0,q8_0 --types Q4_0,Q8_0 --scorers static,hawq" +
            " --hawq-samples 1 --imatrix-chunks 2 -c 128 --chunks 2 --valid-chunks 3 --race 1 --race-keep 1" +
            " --each-scorer --text wiki,python -t 2 --no-front");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto sweep = read_json(d / "w/sweep.json", "gamma.run.sweep", 1);
  auto md = read_text_file(d / "w/sweep.md", "sweep.md");
  ASSERT_TRUE(sweep.is_ok() && md.is_ok());
  EXPECT_NE(r.output.find(*md), std::string::npos) << r.output;
  const std::string other = b["scorer"].get<std::string>();
  EXPECT_NE(md->find("| size | gamma (chosen on validation) | best " + other + " | llama.cpp mix | gamma below all on both texts? |"),
            std::string::npos) << *md;
  for (const auto& s : (*sweep)["sizes"]) {
    const std::string size = s["target"]["size"].get<std::string>();
    const size_t at = md->find("\n| " + size + " | ");
    ASSERT_NE(at, std::string::npos) << size << "\n" << *md;
    const std::string line = md->substr(at + 1, md->find('\n', at + 1) - at - 1);
    auto klds = [](const json& row) {
      return fmt::format("{:.4f} / {:.4f}", row["kld_mean"].get<double>(), row["also"][0]["kld_mean"].get<double>());
    };
    EXPECT_NE(line.find("| " + klds(s["rows"][0]) + " (" + s["chosen"]["name"].get<std::string>()), std::string::npos) << line;
    ASSERT_EQ(s["scorer_bests"].size(), 1u);
    EXPECT_NE(line.find("| " + klds(s["scorer_bests"][0]) + " |"), std::string::npos) << line;
    const std::string named = run::mix_size_name(size);  // q4_0: Q4_0
    const json* mix = nullptr;
    for (const auto& m : s["mixes"])
      if (m["label"] == "llama.cpp " + named) mix = &m;
    ASSERT_NE(mix, nullptr) << s["mixes"].dump();
    EXPECT_NE(line.find("| " + klds(*mix) + " (" + named + ") |"), std::string::npos) << line;
    bool below = true;
    for (const json* row : {&s["scorer_bests"][0], mix}) {
      ASSERT_EQ((*row)["paired_gamma_minus"].size(), 2u) << row->dump();
      for (const auto& p : (*row)["paired_gamma_minus"]) {
        below = below && p["mean"].get<double>() + 2 * p["stderr"].get<double>() < 0;
        EXPECT_NE(md->find(fmt::format("{:+.4f} ± {:.4f}", p["mean"].get<double>(), p["stderr"].get<double>())),
                  std::string::npos) << *md;
      }
    }
    EXPECT_EQ(line.find("| yes |") != std::string::npos, below) << line;
  }
}

namespace {
// A GGUF's predicted decode tokens/s by a run's speed table (W/speed.json), or the reason it has none.
Result<double> decode_by_table(const std::string& table_path, const std::string& gguf) {
  GAMMA_ASSIGN_OR_RETURN(speed::CostTable table, speed::CostTable::load(table_path));
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(gguf));
  GAMMA_ASSIGN_OR_RETURN(speed::Speed s, table.predict(*model));
  return s.decode_tps;
}
}  // namespace

// A speed budget (--min-decode): a speed no plan of the size reaches is one line naming the
// fastest, before any pool is quantized; a reachable one binds every variant's plan by the speed
// table, and the report measures gamma's file and the mix with llama-bench beside the prediction.
TEST(RunPipeline, SpeedBudgetBindsThePlanAndTheReportMeasuresIt) {
  TempDir d;
  const std::string common = stories260k() + " --size 330000 --types Q4_0,Q5_0,Q8_0 --scorers static --imatrix none "
                             "--compare Q4_0 -c 128 --chunks 2 -t 1 --bench-rounds 1 --speed-retries 0";  // -t 1: see test_speed.cpp
  // One work directory for both runs: the second reads the first's speed table (W/speed.json),
  // so "the fastest" it is given is the same prediction, not a second noisy measurement.
  auto r = gamma("run " + common + " -w " + d / "w" + " --min-decode 1e9");
  EXPECT_NE(r.exit_code, 0);
  const size_t at = r.output.find("gamma: error: no plan of at most 0.3 MiB (330000 bytes) decodes at ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n', at), r.output.size() - 1) << r.output;  // the last line, and one line
  const size_t f = r.output.find("the fastest ", at);
  ASSERT_NE(f, std::string::npos) << r.output;
  const double fastest = std::stod(r.output.substr(f + 12));
  EXPECT_GT(fastest, 0);
  EXPECT_FALSE(fs::exists(d / "w/pool"));
  ASSERT_TRUE(fs::exists(d / "w/speed.json"));

  // Reachable: the plan's predicted decode speed is at least the budget, and every reported file
  // carries llama-bench's tg128/pp512 and the prediction.
  const double want = 0.999 * fastest;
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode " + std::to_string(want));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  for (const auto& v : (*j)["tried"]) EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), want * (1 - 1e-9)) << v.dump();
  EXPECT_DOUBLE_EQ((*j)["speed"]["min_decode_tps"].get<double>(), want);
  ASSERT_EQ((*j)["mixes"].size(), 1u);
  for (const json* row : {&(*j)["rows"][0], &(*j)["mixes"][0]})
    for (const char* k : {"tg128", "pp512", "predicted_tg128", "predicted_pp512"})
      EXPECT_GT((*row)[k].get<double>(), 0) << k << " " << row->dump();
  // Every prediction in the one unit the budget is in: the mix's types timed into the run's table
  // (its head's type is no candidate), and the source's, whose pair (table, llama-bench) the
  // summary keeps as the table's scale on this machine.
  for (const auto& row : (*j)["rows"])
    if (row.contains("tg128")) EXPECT_EQ(row["predicted_by"], "speed table") << row.dump();
  {
    const std::string mix = (*j)["mixes"][0]["path"].get<std::string>();
    auto by_table = decode_by_table(d / "w/speed.json", mix);
    ASSERT_TRUE(by_table.is_ok()) << by_table.status().message();
    EXPECT_NEAR((*j)["mixes"][0]["predicted_tg128"].get<double>(), *by_table, 1e-9 * *by_table);
    const json& ref = (*j)["speed"]["reference"];
    EXPECT_GT(ref["predicted_tg128"].get<double>(), 0) << (*j)["speed"].dump();
    EXPECT_GT(ref["tg128"].get<double>(), 0) << (*j)["speed"].dump();
    EXPECT_NE(r.output.find("the table predicts the source at tg128 "), std::string::npos) << r.output;
  }
  EXPECT_TRUE((*j)["verdict"].contains("gamma_meets_budgets_measured"));
  EXPECT_NE(r.output.find("tg128 (pred)"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(d / "w/run.png"));
  // The chosen plan's file records the budget it was solved under.
  auto plan = read_json((*j)["chosen"]["plan"].get<std::string>(), "gamma.plan", 1);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_DOUBLE_EQ((*plan)["info"]["speed"]["min_decode_tps"].get<double>(), want);
  // gamma's file of this size and its prediction, for "as fast as this file" below.
  const std::string fast_file = (*j)["rows"][0]["path"].get<std::string>();
  const double fast_pred = (*j)["rows"][0]["predicted_tg128"].get<double>();
  ASSERT_TRUE(fs::exists(fast_file)) << fast_file;

  // Measured below its budget, gamma's file is solved again with the budget raised by the
  // shortfall the table did not see (1 % more). The shortfall is made: the report's check of its
  // files resumes from its file, where gamma's file is set to have measured just under the budget.
  {
    const double b = 0.85 * fastest;
    const std::string w2 = d / "retry", retry = common.substr(0, common.size() - std::string(" --speed-retries 0").size());
    fs::create_directories(w2);
    fs::copy_file(d / "w/speed.json", w2 + "/speed.json");
    r = gamma("run " + common + " -w " + w2 + " --min-decode " + fmt::format("{}", b));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto first = read_json(w2 + "/run.json", "gamma.run", 2);
    ASSERT_TRUE(first.is_ok()) << first.status().message();
    const json g = (*first)["rows"][0];
    const double pred = g["predicted_tg128"].get<double>();
    const std::string check_path = (*first)["speed"]["check"].get<std::string>();
    json check = read_json(check_path, "gamma.speed.check", 1).value();
    const std::string mix_path = (*first)["mixes"][0]["path"].get<std::string>();
    for (auto& f : check["files"]) {
      if (f["file"] == g["path"]) f["tg128"] = 0.999 * b;
      if (f["file"] == mix_path) f["tg128"] = 2 * b;
    }
    ASSERT_TRUE(write_json(check_path, check).is_ok());
    // Without a retry, gamma's file that measured below the budget gives way to the mix that
    // measured within it, though gamma's is better on validation; the verdict names both.
    r = gamma("run " + common + " -w " + w2 + " --min-decode " + fmt::format("{}", b));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    {
      auto missed = read_json(w2 + "/run.json", "gamma.run", 2);
      ASSERT_TRUE(missed.is_ok()) << missed.status().message();
      const json& v = (*missed)["verdict"];
      EXPECT_FALSE(v["gamma_meets_budgets_measured"].get<bool>()) << v.dump();
      EXPECT_EQ(v["winner"], "llama.cpp") << v.dump();
      EXPECT_EQ(v["file"], mix_path) << v.dump();
      EXPECT_EQ(v["gamma_file"], g["path"]) << v.dump();
      EXPECT_NE(r.output.find("which measured within the budgets where gamma's file did not"), std::string::npos) << r.output;
    }
    r = gamma("run " + retry + " -w " + w2 + " --min-decode " + fmt::format("{}", b) + " --speed-retries 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto second = read_json(w2 + "/run.json", "gamma.run", 2);
    ASSERT_TRUE(second.is_ok()) << second.status().message();
    // Solved again at 1 % over what would have measured the budget; or, when no plan of the size
    // reaches that, the first answer kept and said so.
    const double raised = 1.01 * b * pred / (0.999 * b);
    if ((*second)["speed"].contains("tries")) {
      ASSERT_EQ((*second)["speed"]["tries"].size(), 2u) << r.output;
      EXPECT_DOUBLE_EQ((*second)["speed"]["tries"][0]["tg128"].get<double>(), 0.999 * b);
      EXPECT_DOUBLE_EQ((*second)["speed"]["tries"][0]["measured_budget_tg128"].get<double>(), b);
      EXPECT_DOUBLE_EQ((*second)["speed"]["asked"]["decode_tps"].get<double>(), b);
      EXPECT_NEAR((*second)["speed"]["min_decode_tps"].get<double>(), raised, 1e-9 * raised);
      for (const auto& v : (*second)["tried"]) EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), raised * (1 - 1e-9));
    } else {
      EXPECT_NE(r.output.find(fmt::format("no plan of this size reaches the raised budget (no plan of at most 0.3 MiB "
                                          "(330000 bytes) decodes at {:.2f} tok/s", raised)),
                std::string::npos) << r.output;
      EXPECT_DOUBLE_EQ((*second)["speed"]["min_decode_tps"].get<double>(), b);
    }
  }

  // A list of speeds at the one size: a target per speed (the speed/quality front), each solved
  // under its own budget, and sweep.png draws them against their measured speed.
  const std::vector<double> front = {0.9 * fastest, 0.95 * fastest, want};
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode " + fmt::format("{},{},{}", front[0], front[1], front[2]));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto sweep = read_json(d / "w/sweep.json", "gamma.run.sweep", 1);
  ASSERT_TRUE(sweep.is_ok()) << sweep.status().message();
  ASSERT_EQ((*sweep)["sizes"].size(), front.size());
  for (size_t i = 0; i < front.size(); ++i) {
    const json& one = (*sweep)["sizes"][i];
    EXPECT_NEAR(one["speed"]["min_decode_tps"].get<double>(), front[i], 1e-9 * front[i]);
    for (const auto& v : one["tried"]) EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), front[i] * (1 - 1e-9));
    EXPECT_GT(one["rows"][0]["tg128"].get<double>(), 0);
  }
  EXPECT_TRUE(fs::exists(d / "w/sweep.png"));

  // "As fast as this file": the budget is the file's speed by the same table. gamma's own file
  // of this size (the reachable run's): a plan of the size reaches it by construction, so the
  // run must succeed (a llama.cpp mix need not be reachable at another size: below).
  const std::string own = d / "own.gguf";
  fs::copy_file(fast_file, own);
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode " + own);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = read_json(d / "w/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["speed"]["min_decode_given"], own);
  EXPECT_NEAR((*j)["speed"]["min_decode_tps"].get<double>(), fast_pred, 1e-9 * fast_pred);
  for (const auto& v : (*j)["tried"])
    EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), (*j)["speed"]["min_decode_tps"].get<double>() * (1 - 1e-9));

  // "As fast as llama.cpp's Q4_0 of this model", by name: the mix is built from the teacher before
  // the pool (once: the comparison reuses the file), and the budget is the file form's by the
  // run's table (its types timed into it where the pool's are not). Another work directory with
  // the first one's speed table, so the budgets share one measurement. The plans of this size
  // need not reach the mix's speed (once in CI the mix was 0.02 % faster than the fastest plan by
  // the table: kernel timings decide the order): then one line naming it.
  fs::create_directories(d / "byname");
  fs::copy_file(d / "w/speed.json", d / "byname/speed.json");
  r = gamma("run " + common + " -w " + d / "byname" + " --min-decode q4_0");
  const size_t q = r.output.find("== llama-quantize Q4_0");
  ASSERT_NE(q, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("== llama-quantize Q4_0", q + 1), std::string::npos) << r.output;
  {
    auto as_mix = decode_by_table(d / "byname/speed.json", d / "byname/llama-Q4_0.gguf");
    ASSERT_TRUE(as_mix.is_ok()) << as_mix.status().message();
    EXPECT_NEAR(number_after(r.output, R"(speed budget: decode >= ([0-9.]+))"), *as_mix, 0.006) << r.output;
    if (r.exit_code == 0) {
      EXPECT_LT(q, r.output.find("== pool")) << r.output;
      j = read_json(d / "byname/run.json", "gamma.run", 2);
      ASSERT_TRUE(j.is_ok()) << j.status().message();
      EXPECT_EQ((*j)["speed"]["min_decode_given"], "q4_0");
      EXPECT_NEAR((*j)["speed"]["min_decode_tps"].get<double>(), *as_mix, 1e-9 * *as_mix);
      for (const auto& v : (*j)["tried"]) EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), *as_mix * (1 - 1e-9));
    } else {  // unreachable: refused before any pool is quantized, in one line naming the speed
      EXPECT_EQ(r.output.find("== pool"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(fmt::format("gamma: error: no plan of at most 0.3 MiB (330000 bytes) decodes at {:.2f} tok/s",
                                          *as_mix)),
                std::string::npos) << r.output;
    }
  }
  // A mix of a type no candidate has (Q4_1, this pool has Q4_0, Q5_0, Q8_0): its types are timed
  // into the run's table, and the budget is its speed by that table, not a refusal.
  r = gamma("run " + common + " -w " + d / "byname" + " --min-decode Q4_1");
  EXPECT_EQ(r.output.find("does not price"), std::string::npos) << r.output;
  auto priced = read_json(d / "byname/speed.json", "gamma.speed", 1);
  ASSERT_TRUE(priced.is_ok());
  EXPECT_TRUE((*priced)["cost"]["blk.0.attn_q.weight"].contains("Q4_1")) << (*priced)["cost"]["blk.0.attn_q.weight"].dump();
  if (r.exit_code == 0) {
    j = read_json(d / "byname/run.json", "gamma.run", 2);
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    EXPECT_EQ((*j)["speed"]["min_decode_given"], "Q4_1");
    for (const auto& v : (*j)["tried"])
      EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), (*j)["speed"]["min_decode_tps"].get<double>() * (1 - 1e-9));
  } else {  // the Q4_1 file decodes faster than any plan of this size: the one line says so
    EXPECT_NE(r.output.find("gamma: error: no plan of at most 0.3 MiB (330000 bytes) decodes at "), std::string::npos)
        << r.output;
  }

  // A rest measured negative on the run's model (seen: Qwen's F32 teacher on an AMD EPYC) is
  // measured again on the budget's own file, so the table predicts that file as llama-bench
  // measured it there, and the budget is that measurement.
  {
    const fs::path w3 = d / "negrest";
    fs::create_directories(w3);
    json t = read_json(d / "byname/speed.json", "gamma.speed", 1).value();
    t["rest"]["decode_us"] = -1e6;
    ASSERT_TRUE(write_json(w3 / "speed.json", t).is_ok());
    r = gamma("run " + common + " -w " + w3.string() + " --min-decode q4_0");
    EXPECT_NE(r.output.find("   speed table: the rest measured on " + (w3 / "llama-Q4_0.gguf").string()), std::string::npos)
        << r.output;
    auto after = read_json(w3 / "speed.json", "gamma.speed", 1);
    ASSERT_TRUE(after.is_ok()) << after.status().message();
    const json& rest = (*after)["rest"];
    EXPECT_GT(rest["decode_us"].get<double>(), 0) << rest.dump();
    EXPECT_EQ(fs::path(rest["reference"].get<std::string>()).filename(), "llama-Q4_0.gguf") << rest.dump();
    auto as_mix = decode_by_table(w3 / "speed.json", w3 / "llama-Q4_0.gguf");
    ASSERT_TRUE(as_mix.is_ok()) << as_mix.status().message();
    EXPECT_NEAR(*as_mix, rest["reference_tg128"].get<double>(), 1e-6 * *as_mix) << rest.dump();
    EXPECT_NEAR(number_after(r.output, R"(speed budget: decode >= ([0-9.]+))"), *as_mix, 0.006) << r.output;
  }

  // "mix": at each size named by a mix, as fast as that mix (one run, a goal table's speed column):
  // each size's budget is its own mix's speed by the table, and each size's plans meet it.
  r = gamma("run " + stories260k() + " --size Q4_0,Q8_0 --min-decode mix --compare Q8_0 --types Q4_0,Q5_0,Q8_0 "
            "--scorers static --imatrix none -c 128 --chunks 2 -t 1 --bench-rounds 1 --speed-retries 0 -w " + d / "byname");
  std::set<double> budgets;
  for (size_t i = 0; i < 2; ++i) {
    const std::string mix = i == 0 ? "Q4_0" : "Q8_0";
    auto want = decode_by_table(d / "byname/speed.json", d / ("byname/llama-" + mix + ".gguf"));
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    budgets.insert(*want);
    // Each size's budget, as printed once resolved.
    EXPECT_NEAR(number_after(r.output, fmt::format(R"(speed budget {} of 2: decode >= ([0-9.]+))", i + 1)), *want, 0.006)
        << r.output;
    // The plans at a mix's size need not reach that mix's speed by the table (the mix's head types are
    // not the pool's, and its kernels are timed anew here): then the run is one line naming the size.
    if (r.exit_code != 0) continue;
    auto sweep_one = read_json(d / "byname/sweep.json", "gamma.run.sweep", 1);
    ASSERT_TRUE(sweep_one.is_ok()) << sweep_one.status().message();
    ASSERT_EQ((*sweep_one)["sizes"].size(), 2u);
    const json& one = (*sweep_one)["sizes"][i];
    EXPECT_NEAR(one["speed"]["min_decode_tps"].get<double>(), *want, 1e-9 * *want) << mix;
    for (const auto& v : one["tried"])
      EXPECT_GE(v["speed"]["predicted_tg128"].get<double>(), *want * (1 - 1e-9)) << mix << " " << v.dump();
  }
  if (r.exit_code != 0)
    EXPECT_NE(r.output.find("gamma: error: --size Q"), std::string::npos) << r.output;
  EXPECT_EQ(budgets.size(), 2u);  // two mixes, two budgets

  // A memory budget: every variant solved within it, and the report loads each file with that
  // context to read llama.cpp's own allocation.
  r = gamma("run " + common + " -w " + d / "mem" + " --memory 64MiB --memory-ctx 2048");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = read_json(d / "mem/run.json", "gamma.run", 2);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ((*j)["memory"]["ctx"], 2048);
  for (const json* row : {&(*j)["rows"][0], &(*j)["mixes"][0]}) {
    ASSERT_TRUE(row->contains("memory")) << row->dump();
    EXPECT_LE((*row)["memory"]["total"].get<uint64_t>(), 64ull << 20);
    EXPECT_GT((*row)["memory"]["context"].get<uint64_t>(), 0u);
  }
  EXPECT_TRUE((*j)["verdict"]["gamma_meets_budgets_measured"].get<bool>());
  EXPECT_NE(r.output.find("memory budget: 64.0 MiB"), std::string::npos) << r.output;
  // The run measured the source's allocation once; each solve read it: the chosen plan solved
  // again here from that file is the same plan, and a file of another context is refused.
  const std::string src_mem = d / "mem/memory-source-c2048.json";
  ASSERT_TRUE(fs::exists(src_mem));
  const std::string chosen = (*j)["chosen"]["plan"].get<std::string>();
  const auto chosen_plan = read_json(chosen, "gamma.plan", 1).value();
  r = gamma("solve " + d / "mem/pool --score-from-manifest --size 330000 --memory 64MiB --ctx 2048 --memory-source " +
            src_mem + " -o " + d / "again.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(d / "again.json", "gamma.plan", 1).value()["info"]["memory"]["source"],
            chosen_plan["info"]["memory"]["source"]);
  r = gamma("solve " + d / "mem/pool --score-from-manifest --size 330000 --memory 64MiB --ctx 1024 --memory-source " +
            src_mem + " -o " + d / "other.json");
  EXPECT_EQ(r.output, "gamma: error: --memory-source: " + src_mem + ": measured at 2048 tokens (f16 KV cache), not 1024 (f16)\n");
  EXPECT_FALSE(fs::exists(d / "other.json"));
  r = gamma("run " + common + " -w " + d / "w4" + " --memory 64MiB");
  EXPECT_EQ(r.output, "gamma: error: --memory and --memory-ctx go together: the memory holds the weights and the KV cache of "
                      "that many tokens\n");

  // Bad speed budgets: one line each.
  r = gamma("run " + stories260k() + " --min-decode 10 -w " + d / "w2");
  EXPECT_EQ(r.output, "gamma: error: --min-decode and --min-prefill need --size: the speed budget is solved beside a file size\n");
  r = gamma("run " + common + " --min-decode -3 -w " + d / "w3");
  EXPECT_EQ(r.output, "gamma: error: --min-decode: -3: tokens/s must be a non-negative number\n");
  r = gamma("run " + common + " --min-decode fast.gguf -w " + d / "w3");
  EXPECT_EQ(r.output, "gamma: error: --min-decode: fast.gguf: neither tokens/s nor a GGUF file\n");
  EXPECT_FALSE(fs::exists(d / "w3"));
}

// Under a speed budget the pool is still pruned (issue 44's window), and the window also holds
// HAWQ-V2's plans on the estimate held to the budget: at --pool-window 0 it is exactly their
// candidates, so the budget's window holds candidates the free plans' window lacks, and the
// run reaches the budget from the pruned pool.
TEST(RunPipeline, SpeedBudgetWindowHoldsThePlansHeldToIt) {
  TempDir d;
  const std::string common = stories260k() + " --size 330000 --scorers static,hawq --hawq-samples 1 --imatrix none "
                             "--compare none --no-front --pool-window 0 -c 128 --chunks 2 -t 1 --bench-rounds 1 "
                             "--speed-retries 0";
  auto r = gamma("run " + common + " -w " + d / "free");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode 1e9");  // the speed table, and the fastest plan's speed
  ASSERT_NE(r.exit_code, 0);
  const size_t f = r.output.find("the fastest ");
  ASSERT_NE(f, std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "w/pool-only.json"));  // refused before the window is made
  const double fastest = std::stod(r.output.substr(f + 12));
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode " + std::to_string(0.999 * fastest));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held to the speed or memory budgets)"), std::string::npos) << r.output;
  auto free_only = load_only(d / "free/pool-only.json");
  auto only = load_only(d / "w/pool-only.json");
  ASSERT_TRUE(free_only.is_ok() && only.is_ok());
  size_t added = 0;
  for (const auto& [name, types] : *free_only) {
    const auto& held = only->at(name);
    for (const auto& t : types) EXPECT_NE(std::find(held.begin(), held.end(), t), held.end()) << name << " " << t;
    added += held.size() - types.size();
  }
  EXPECT_GT(added, 0u);
  auto pool = Manifest::load(d / "w/pool");
  ASSERT_TRUE(pool.is_ok());
  for (const auto& m : pool->modules) EXPECT_EQ(m.candidates.size(), only->at(m.name).size()) << m.name;
  // What the window was made for names the budget: a rerun with another speed is refused.
  auto j = read_json(d / "w/pool-only.json", "gamma.pool.only", 1);
  ASSERT_TRUE(j.is_ok());
  EXPECT_NEAR((*j)["targets"]["budgets"][0]["decode_tps"].get<double>(), 0.999 * fastest, 1e-3 * fastest);
  r = gamma("run " + common + " -w " + d / "w" + " --min-decode " + std::to_string(0.5 * fastest));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("holds a pool chosen for other targets"), std::string::npos) << r.output;
}

// The teacher's calibration activations (gamma's cache) are read by HAWQ-V2 and Stage I only:
// once the scorers are ready the job drops the entries it made, and keeps those that were in
// the cache when it first started (another run's). A private cache, so no other test's entries.
TEST(RunPipeline, DropsTheActivationsItMadeOnceTheScorersAreReady) {
  TempDir d;
  ASSERT_EQ(::setenv("GAMMA_CACHE", (d / "cache").c_str(), 1), 0);
  const std::string common = stories260k() + " --bpw 8 --types Q4_0,Q8_0 --scorers hawq --hawq-samples 1 --imatrix none "
                             "--compare none --no-front -c 128 --chunks 2 -t 2";
  auto key_of = [&](const std::string& w, const std::string& scores = "scores-hawq.json") {
    auto j = read_json(w + "/" + scores, "gamma.scores", 1);
    return j.is_ok() ? (*j)["hyperparameters"]["activations"]["key"].get<std::string>() : std::string();
  };
  auto r = gamma("run " + common + " -w " + d / "made");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string key = key_of(d / "made");
  ASSERT_FALSE(key.empty());
  EXPECT_NE(r.output.find("the scorers' calibration activations dropped"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / ("cache/activations/" + key)));
  auto before = read_json(d / "made/activations-before.json", "gamma.run.activations", 1);
  ASSERT_TRUE(before.is_ok()) << before.status().message();
  EXPECT_TRUE((*before)["keys_before"].empty());
  // The same entry there before the job (its directory, which the job then fills): kept.
  fs::create_directories(d / ("cache/activations/" + key));
  r = gamma("run " + common + " -w " + d / "kept");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(key_of(d / "kept"), key);
  EXPECT_EQ(r.output.find("activations dropped"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(d / ("cache/activations/" + key + "/meta.json")));
  // With Stage I after it on as many tokens (the default), Stage I reads the very entry HAWQ-V2
  // made (one teacher forward), which goes as soon as Stage I is done (`gamma layers` ran before
  // Stage I, so the job's disk peak holds no layer file). On other token counts HAWQ-V2's own
  // entry goes before Stage I starts, and Stage I's after it. Either way nothing is left.
  for (const char* tokens : {"", " --calib-tokens 2048"}) {
    const bool shared = *tokens == '\0';
    const std::string w = d / (shared ? "shared" : "apart");
    fs::remove_all(d / "cache/activations");
    r = gamma("run " + common + " --scorers hawq,gamma --steps 2" + tokens + " -w " + w);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(key_of(w, "scores-gamma-8-c0.2.json") == key_of(w), shared) << tokens;
    const size_t dropped = r.output.find("activations dropped"), learn = r.output.find("== learn at");
    ASSERT_NE(dropped, std::string::npos) << r.output;
    ASSERT_NE(learn, std::string::npos) << r.output;
    if (shared) EXPECT_GT(dropped, learn) << r.output;
    else EXPECT_LT(dropped, learn) << r.output;
    const size_t dropped_after = r.output.find("activations dropped", learn), layers = r.output.find("== layers");
    ASSERT_NE(dropped_after, std::string::npos) << r.output;
    ASSERT_NE(layers, std::string::npos) << r.output;
    EXPECT_LT(layers, learn) << r.output;
    for (const auto& f : fs::directory_iterator(d / "cache/activations")) EXPECT_NE(f.path().extension(), "") << f.path();
  }
  ::unsetenv("GAMMA_CACHE");
}
