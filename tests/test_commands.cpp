// The commands that look at and compare what gamma makes: `gamma plan --from-gguf` (a llama.cpp
// mix's allocation re-made from the pool), `gamma inspect POOL` (the per-type table) and
// `gamma compare` (paired per-chunk KLD and the tensors whose types differ), each judged
// against llama-quantize's files, gamma eval's figures and the pool's manifest.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "gguf_model/model.h"
#include "pool/manifest.h"
#include "testing.h"
#include "util/files.h"
#include "util/json.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {

// A pool of stories260K at Q4_0 and Q8_0, its teacher, and llama-quantize's Q4_0 and Q8_0 of it.
struct Commands : ::testing::Test {
  TempDir d;
  std::string teacher, pool;
  void SetUp() override {
    teacher = d / "t.gguf";
    pool = d / "pool";
    ASSERT_EQ(gamma("dequantize " + stories260k() + " --type f32 -o " + teacher).exit_code, 0);
    auto r = gamma("pool " + teacher + " --types Q4_0,Q8_0 -q -o " + pool);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* mix : {"Q4_0", "Q8_0"}) {
      r = run_llama_tool(llama_tool("llama-quantize") + " " + teacher + " " + mix_path(mix) + " " + mix + " 1", "");
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }
  std::string mix_path(const std::string& mix) const { return d / ("llama-" + mix + ".gguf"); }
};

// Every tensor's type and bytes.
std::map<std::string, std::pair<std::string, std::string>> tensors_of(const std::string& path) {
  auto f = TensorFile::open(path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& t : (*f)->tensors()) {
    std::string bytes(t.nbytes, '\0');
    EXPECT_TRUE((*f)->read_raw(t, bytes.data()).is_ok());
    out[t.name] = {type_name(t.type), bytes};
  }
  return out;
}

}  // namespace

// The mix's per-tensor types as a plan, emitted from the pool: the same types everywhere, and
// (the pool quantizes as llama-quantize does, both without an imatrix) the same bytes.
TEST_F(Commands, PlanFromGgufRemakesTheMixFromThePool) {
  const std::string plan = d / "mix.json", out = d / "remade.gguf";
  auto r = gamma("plan " + pool + " --from-gguf " + mix_path("Q4_0") + " -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gamma("emit " + pool + " " + plan + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto want = tensors_of(mix_path("Q4_0")), got = tensors_of(out);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, tb] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).first, tb.first) << name;
    EXPECT_TRUE(got.at(name).second == tb.second) << name << " differs from llama-quantize's bytes";
  }
  // A pool without the mix's types: one line naming the module and the type.
  auto r2 = gamma("pool " + teacher + " --types Q8_0 -q -o " + d / "pool8");
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  r = gamma("plan " + d / "pool8" + " --from-gguf " + mix_path("Q4_0") + " -o " + d / "x.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("the pool has no Q4_0 candidate for module blk."), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "x.json"));
}

// The per-type table: the manifest's figures, parameter-weighted; Q8_0 (more bytes, less error)
// and Q4_0 dominate neither the other, so both are the Pareto set.
TEST_F(Commands, InspectPoolPrintsThePerTypeTable) {
  auto r = gamma("inspect " + pool + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  const Manifest m = Manifest::load(pool).value();
  ASSERT_EQ(j["types"].size(), 2u);
  for (const auto& row : j["types"]) {
    const std::string type = row["type"];
    double params = 0, bytes = 0, err = 0;
    int modules = 0;
    for (const auto& e : m.modules)
      if (const Candidate* c = e.find(type)) {  // rows that do not hold it have only the F16 fallback
        ++modules;
        params += double(e.n_params), bytes += double(c->bytes), err += c->rel_err * double(e.n_params);
      }
    EXPECT_GT(modules, 0) << type;
    EXPECT_EQ(row["modules"].get<int>(), modules) << type;
    EXPECT_NEAR(row["bpw"].get<double>(), 8 * bytes / params, 1e-9) << type;
    EXPECT_NEAR(row["rel_err_mean"].get<double>(), err / params, 1e-12) << type;
    EXPECT_TRUE(row["dominated_by"].empty()) << type;
  }
  EXPECT_EQ(j["types"][0]["type"], "Q4_0");  // by bpw
  EXPECT_EQ(j["pareto"], json::array({"Q4_0", "Q8_0"}));
  r = gamma("inspect " + pool);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| Q8_0 | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Pareto set: Q4_0,Q8_0"), std::string::npos) << r.output;
}

// Paired by chunk: the difference of the means is gamma eval's, and the tensors that differ are
// (at least) the linear ones.
TEST_F(Commands, CompareGivesThePairedDifferenceAndTheTypesThatDiffer) {
  const std::string text = shared_data("text/wiki.valid.tokens");
  const std::string common = " --teacher " + teacher + " --text " + text + " -c 128 --chunks 6 -t 2 -q";
  auto r = gamma("compare " + mix_path("Q4_0") + " " + mix_path("Q8_0") + common + " -o " + d / "cmp.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto c = read_json(d / "cmp.json", "gamma.compare", 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  double mean[2];
  int i = 0;
  for (const char* mix : {"Q4_0", "Q8_0"}) {
    const std::string ev = d / (std::string(mix) + ".eval.json");
    r = gamma("eval " + mix_path(mix) + common + " -o " + ev);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    mean[i++] = read_json(ev, "gamma.eval", 1).value()["kld"]["mean"].get<double>();
  }
  const json& diff = (*c)["a_minus_b"];
  // The mean of the chunks' means is the mean over tokens (equal chunks), up to rounding.
  EXPECT_NEAR(diff["mean"].get<double>(), mean[0] - mean[1], 1e-7);
  EXPECT_GT(diff["mean"].get<double>(), 0);  // Q4_0 is further from the teacher than Q8_0
  EXPECT_GT(diff["stderr"].get<double>(), 0);
  EXPECT_EQ((*c)["a"]["chunk_means"].size(), 6u);
  // Every module whose rows hold Q4_0 differs; the others are F16 in both files.
  const Manifest m = Manifest::load(pool).value();
  std::set<std::string> differ;
  for (const auto& t : (*c)["type_differences"]) differ.insert(t["tensor"].get<std::string>());
  size_t q4 = 0;
  for (const auto& e : m.modules) {
    q4 += e.find("Q4_0") != nullptr;
    EXPECT_EQ(differ.count(e.name) == 1, e.find("Q4_0") != nullptr) << e.name;
  }
  EXPECT_GT(q4, m.modules.size() / 2);
  // A plan against the file it makes: the same file, a difference of exactly zero.
  ASSERT_EQ(gamma("plan " + pool + " --from-gguf " + mix_path("Q8_0") + " -o " + d / "p8.json").exit_code, 0);
  r = gamma("compare " + d / "p8.json" + " " + mix_path("Q8_0") + " --pool " + pool + common + " -o " + d / "same.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto s = read_json(d / "same.json", "gamma.compare", 1);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)["a_minus_b"]["mean"].get<double>(), 0.0);
  EXPECT_TRUE((*s)["type_differences"].empty());
  // Bad input: one line each, nothing written.
  r = gamma("compare " + d / "p8.json" + " " + mix_path("Q8_0") + common);
  EXPECT_NE(r.output.find("is a plan: give the pool it was made from (--pool)"), std::string::npos) << r.output;
  r = gamma("compare " + d / "missing.gguf" + " " + mix_path("Q8_0") + common);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("missing.gguf: no such file"), std::string::npos) << r.output;
}
