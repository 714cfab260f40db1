// gamma search (the search baseline) on stories260K, in seconds: the plan it writes fits the
// budget, its recorded fitness is the KLD gamma eval measures for the emitted file and is no
// worse than the plan it started from; a stopped search resumed equals one run straight
// through; bad inputs are one-line errors that leave nothing behind.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "plan/plan.h"
#include "pool/manifest.h"
#include "testing.h"
#include "util/json.h"

namespace fs = std::filesystem;
using gm::testing::gamma;
using gm::testing::TempDir;

namespace {

struct Fixture {
  TempDir d;
  std::string pool = d / "pool", text = gm::testing::shared_data("text/wiki.valid.tokens");
  std::string init = d / "static.json";
  static constexpr uint64_t kSize = 320000;  // between all-Q4_0 (277,184 bytes) and all-Q8_0
  Fixture() {
    auto r = gamma("pool " + gm::testing::stories260k() + " --types Q4_0,Q5_0,Q8_0 -q -o " + pool);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = gamma(fmt::format("solve {} --score-from-manifest --size {} -o {}", pool, kSize, init));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  std::string search(const std::string& out, int generations, const std::string& size = std::to_string(kSize),
                     int small_chunks = 1, int offspring = 3) {
    return fmt::format("search {} --teacher {} --size {} --init {} --calib {} -c 128 --chunks 2 --small-chunks {} "
                       "--offspring {} --generations {} -t 2 -q -o {}",
                       pool, gm::testing::stories260k(), size, init, text, small_chunks, offspring, generations, out);
  }
  // gamma eval's KLD of a plan's file on the search's chunks.
  double kld_of(const std::string& plan) { return gm::testing::stories_plan_kld(pool, plan, text, 128, 2); }
};

}  // namespace

TEST(Search, PlanFitsItsFitnessIsMeasuredAndNoWorseThanItsStart) {
  Fixture f;
  const std::string out = f.d / "s.json";
  auto r = gamma(f.search(out, 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = gm::Manifest::load(f.pool);
  auto p = gm::Plan::load(out);
  ASSERT_TRUE(m.is_ok() && p.is_ok());
  ASSERT_TRUE(p->validate(*m).is_ok());
  EXPECT_LE(gm::plan_size(*m, *p).file_bytes, Fixture::kSize);
  const double fit = p->info["fitness"]["kld_mean"].get<double>();
  EXPECT_NEAR(fit, f.kld_of(out), 1e-9);
  EXPECT_LE(fit, f.kld_of(f.init));
  EXPECT_EQ(p->info["generations"].get<int>(), 3);
  EXPECT_EQ(p->info["evaluations"].get<int>(), 2 + 3 * 4);  // the start (full + small), then 3 small + 1 full each
  EXPECT_FALSE(fs::exists(out + ".lock"));
  EXPECT_FALSE(fs::exists(out + ".child.gguf"));
}

TEST(Search, AStoppedSearchResumedEqualsOneRunStraightThrough) {
  Fixture f;
  const std::string a = f.d / "a.json", b = f.d / "b.json";
  ASSERT_EQ(gamma(f.search(a, 1)).exit_code, 0);
  auto r = gamma(f.search(a, 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed at generation 1"), std::string::npos) << r.output;
  ASSERT_EQ(gamma(f.search(b, 3)).exit_code, 0);
  auto pa = gm::Plan::load(a), pb = gm::Plan::load(b);
  ASSERT_TRUE(pa.is_ok() && pb.is_ok());
  EXPECT_EQ(pa->modules, pb->modules);
  EXPECT_EQ(pa->info["fitness"]["kld_mean"].get<double>(), pb->info["fitness"]["kld_mean"].get<double>());
  EXPECT_EQ(pa->info["evaluations"].get<int>(), pb->info["evaluations"].get<int>());
}

TEST(Search, BadInputsAreOneLineErrorsAndLeaveNothing) {
  Fixture f;
  auto fails = [&](const std::string& args, const std::string& what) {
    const std::string out = f.d / "bad.json";
    auto r = gamma(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(r.output.rfind("gamma: error: ", 0), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
    for (const char* ext : {"", ".lock", ".state.json", ".child.gguf", ".teacher.kld"}) EXPECT_FALSE(fs::exists(out + ext)) << ext;
  };
  const std::string out = f.d / "bad.json";
  fails(f.search(out, 2, "300000"), "makes a 319616-byte file, above the budget of 300000 bytes");
  fails(f.search(out, 2, "320000", 3), "--small-chunks (3) must be in [1, --chunks (2)]");
  fails(f.search(out, 0), "give a limit");
  fails(f.search(out, 2, "12XB"), "12XB");
  // A state from another search is not resumed under different settings.
  ASSERT_EQ(gamma(f.search(f.d / "s.json", 1)).exit_code, 0);
  auto r = gamma(f.search(f.d / "s.json", 2, "320000", 1, 2));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is from another search (offspring differs)"), std::string::npos) << r.output;
}
