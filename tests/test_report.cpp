// gamma report: table numbers, plots (valid PNGs of the expected size with real content),
// the analyses (cosine, Pearson) and bad-input errors, on a synthetic but realistic sweep: a
// pool manifest for a 6-layer model, GAMMA plans at four budgets with their scores, uniform
// plans, and evals (including llama.cpp mixes without a plan).
#include <cairo.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "report/report.h"
#include "tests/testing.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;
using gm::json;
using gm::testing::TempDir;

namespace {

const std::vector<std::string> kTypes = {"Q2_K", "Q3_K", "Q4_K", "Q6_K"};
constexpr int kLayers = 6;

gm::Manifest make_manifest(const std::string& dir) {
  gm::Manifest m;
  m.dir = dir;
  m.model_path = "/models/tiny.gguf";
  m.model_fingerprint = "f00dfeed0123456789abcdef";
  m.arch = "qwen2";
  m.n_layer = kLayers;
  m.types = kTypes;
  m.alignment = 32;
  m.header_bytes = 123456;
  const int64_t d = 256, ff = 512, kv = 256;
  for (int l = 0; l < kLayers; ++l)
    for (const char* kind : gm::kLinearKinds) {
      gm::ModuleEntry e;
      e.name = fmt::format("blk.{}.{}.weight", l, kind);
      e.layer = l;
      e.kind = kind;
      const std::string k = kind;
      if (k == "ffn_down") e.shape = {ff, d};
      else if (k == "ffn_gate" || k == "ffn_up") e.shape = {d, ff};
      else if (k == "attn_k" || k == "attn_v") e.shape = {d, kv};
      else e.shape = {d, d};
      e.n_params = e.shape[0] * e.shape[1];
      e.source_type = "Q8_0";
      for (size_t t = 0; t < kTypes.size(); ++t) {
        gm::Candidate c;
        c.id = c.type = kTypes[t];
        c.bytes = gm::type_bytes(gm::parse_type(c.type).value(), e.shape[0], e.shape[1]);
        c.file_bytes = (c.bytes + 31) / 32 * 32;
        c.bpw = 8.0 * double(c.bytes) / double(e.n_params);
        c.rel_err = 0.1 / std::pow(4.0, double(t));
        c.file = "cand-" + c.type + ".gguf";
        e.candidates.push_back(c);
      }
      m.modules.push_back(e);
    }
  m.fixed.push_back({"token_embd.weight", {d, 1000}, "Q8_0"});
  m.fixed.push_back({"output_norm.weight", {d}, "F32"});
  m.fixed.push_back({"output.weight", {d, 1000}, "Q8_0"});
  return m;
}

// A GAMMA-like plan: module i takes type level(i) from a pattern that rises with the budget.
gm::Plan gamma_plan(const gm::Manifest& m, double budget, const std::string& scores) {
  gm::Plan p;
  p.model_fingerprint = m.model_fingerprint;
  p.method = "gamma";
  for (size_t i = 0; i < m.modules.size(); ++i) {
    const auto& e = m.modules[i];
    int lvl = int(std::floor((budget - 2.5) * 2 + ((i * 7) % 5) * 0.3));
    if (e.kind == "ffn_down" || e.kind == "attn_v") ++lvl;
    lvl = std::clamp(lvl, 0, 3);
    p.modules[e.name] = kTypes[lvl];
  }
  gm::PlanSize s = gm::plan_size(m, p);
  p.info = {{"budget", {{"bpw", budget}}},
            {"scores", {{"source", scores}, {"method", "gamma"}}},
            {"predicted", {{"linear_bytes", s.linear_bytes}, {"linear_bpw", s.linear_bpw}, {"file_bytes", s.file_bytes}}}};
  return p;
}

// Stage I-like p: most mass on the chosen candidate, the rest spread unevenly.
json scores_json(const gm::Manifest& m, const gm::Plan& p, double target) {
  json j = gm::json_header("gamma.scores", 1);
  j["model_fingerprint"] = m.model_fingerprint;
  j["method"] = "gamma";
  j["target_bpw"] = target;
  json mods = json::object();
  uint32_t rng = 12345;
  for (const auto& e : m.modules) {
    json pj = json::object(), sj = json::object();
    double rest = 1.0;
    std::vector<double> v(kTypes.size());
    for (size_t t = 0; t < kTypes.size(); ++t) {
      rng = rng * 1664525u + 1013904223u;
      v[t] = kTypes[t] == p.modules.at(e.name) ? 0.5 + double(rng % 1000) / 4000.0 : double(rng % 1000) / 10000.0;
    }
    double sum = 0;
    for (double x : v) sum += x;
    for (size_t t = 0; t < kTypes.size(); ++t) pj[kTypes[t]] = v[t] / sum, sj[kTypes[t]] = v[t] / sum;
    (void)rest;
    mods[e.name] = {{"score", sj}, {"p", pj}};
  }
  j["modules"] = mods;
  return j;
}

json eval_json(const std::string& model_path, uint64_t file_bytes, double kld, double ppl, double top1, double arc,
               double piqa) {
  json j = gm::json_header("gamma.eval", 1);
  j["model"] = {{"path", model_path}, {"sha256", "00"}, {"file_bytes", file_bytes}, {"bpw", 4.0}};
  j["teacher"] = {{"path", "/models/teacher.gguf"}, {"sha256", "11"}, {"file_bytes", 999}};
  j["perplexity"] = {{"ppl", ppl}, {"ppl_stderr", ppl * 0.01}, {"chunks", 20}};
  j["kld"] = {{"mean", kld}, {"stderr", kld * 0.02}, {"top1", top1}, {"top1_stderr", 0.003}, {"ppl", ppl}};
  j["tasks"] = {{"arc_easy", {{"acc", arc}, {"acc_stderr", 0.01}, {"acc_norm", arc - 0.02}, {"acc_norm_stderr", 0.01}, {"n", 500}}},
                {"piqa", {{"acc", piqa}, {"acc_stderr", 0.01}, {"acc_norm", piqa + 0.01}, {"acc_norm_stderr", 0.01}, {"n", 500}}}};
  j["settings"] = {{"ctx", 512}, {"chunks", 20}, {"text", {{"path", "wiki.test.raw"}, {"sha256", "abcdef0123456789"}}}};
  return j;
}

void write(const std::string& path, const json& j) { ASSERT_TRUE(gm::write_json(path, j).is_ok()) << path; }

double kld_for(double bpw) { return 0.6 * std::exp(-1.8 * (bpw - 2.5)); }

// The sweep on disk: DIR/pool, DIR/plans, DIR/evals, DIR/scores, DIR/runs.json.
struct Sweep {
  gm::Manifest m;
  std::vector<double> budgets = {2.75, 3.0, 3.5, 4.0};
  std::map<double, gm::Plan> plans;
  std::map<double, json> scores;
  std::map<double, uint64_t> sizes;
  gm::PlanSize q3, q4;
};

Sweep make_sweep(const TempDir& t) {
  Sweep s;
  for (const char* d : {"pool", "plans", "evals", "scores"}) fs::create_directories(t / d);
  s.m = make_manifest(t / "pool");
  EXPECT_TRUE(s.m.save().is_ok());
  json runs = json::array();
  for (double b : s.budgets) {
    const std::string tag = fmt::format("{:.2f}", b);
    // Solve records the scores path as given on its command line (relative to its cwd).
    gm::Plan p = gamma_plan(s.m, b, "scores/gamma-" + tag + ".json");
    EXPECT_TRUE(p.save(t / ("plans/gamma-" + tag + ".json")).is_ok());
    s.scores[b] = scores_json(s.m, p, b);
    write(t / ("scores/gamma-" + tag + ".json"), s.scores[b]);
    const gm::PlanSize ps = gm::plan_size(s.m, p);
    s.sizes[b] = ps.file_bytes;
    write(t / ("evals/gamma-" + tag + ".json"),
          eval_json("/out/gamma-" + tag + ".gguf", ps.file_bytes, kld_for(ps.linear_bpw), 10 + kld_for(ps.linear_bpw) * 5,
                    0.95 - kld_for(ps.linear_bpw) * 0.3, 0.60 + 0.01 * b, 0.70 + 0.01 * b));
    runs.push_back({{"method", "gamma"}, {"budget_bpw", b}, {"plan", "plans/gamma-" + tag + ".json"},
                    {"eval", "evals/gamma-" + tag + ".json"}});
    s.plans[b] = p;
  }
  for (const char* ty : {"Q3_K", "Q4_K"}) {
    gm::Plan p = gm::uniform_plan(s.m, ty).value();
    EXPECT_TRUE(p.save(t / fmt::format("plans/uniform-{}.json", ty)).is_ok());
    const gm::PlanSize ps = gm::plan_size(s.m, p);
    (std::string(ty) == "Q3_K" ? s.q3 : s.q4) = ps;
    write(t / fmt::format("evals/uniform-{}.json", ty),
          eval_json(fmt::format("/out/uniform-{}.gguf", ty), ps.file_bytes, kld_for(ps.linear_bpw) * 1.3, 11, 0.9, 0.6, 0.7));
    runs.push_back({{"method", "uniform"}, {"plan", fmt::format("plans/uniform-{}.json", ty)},
                    {"eval", fmt::format("evals/uniform-{}.json", ty)}});
  }
  // llama.cpp's mixes: evals only.
  const std::vector<std::pair<std::string, double>> mixes = {{"Q3_K_M", 3.3}, {"Q4_K_M", 4.1}};
  for (const auto& [name, bpw] : mixes) {
    write(t / ("evals/" + name + ".json"),
          eval_json("/out/" + name + ".gguf", uint64_t(s.q3.file_bytes * bpw / 3.4), kld_for(bpw) * 1.1, 10.5, 0.92, 0.61, 0.71));
    runs.push_back({{"method", "llama.cpp"}, {"label", name}, {"eval", "evals/" + name + ".json"}});
  }
  json d = gm::json_header("gamma.runs", 1);
  d["pool"] = "pool";
  d["runs"] = runs;
  write(t / "runs.json", d);
  return s;
}

struct Png {
  int w = 0, h = 0;
  std::set<uint32_t> colors;
};
Png read_png(const std::string& path) {
  Png p;
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    p.w = cairo_image_surface_get_width(s), p.h = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* d = cairo_image_surface_get_data(s);
    for (int y = 0; y < p.h; ++y)
      for (int x = 0; x < p.w; ++x) p.colors.insert(reinterpret_cast<const uint32_t*>(d + y * stride)[x]);
  }
  cairo_surface_destroy(s);
  return p;
}

std::string slurp(const std::string& p) { return gm::read_file(p).value(); }

// The table row whose first cells are `method` and `label` (run column).
std::string row_of(const std::string& md, const std::string& method, const std::string& label) {
  std::istringstream in(md);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("| " + method + " |", 0) == 0 && line.find("| " + label + " |") != std::string::npos) return line;
  return "";
}

}  // namespace

TEST(Report, Analyses) {
  EXPECT_NEAR(gm::report::pearson({1, 2, 3, 4}, {2, 4, 6, 8}), 1.0, 1e-12);
  EXPECT_NEAR(gm::report::pearson({1, 2, 3, 4}, {8, 6, 4, 2}), -1.0, 1e-12);
  EXPECT_NEAR(gm::report::pearson({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(gm::report::pearson({1, 1, 1}, {1, 2, 3})));
  EXPECT_NEAR(gm::report::cosine_similarity({1, 0}, {1, 1}), std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(gm::report::cosine_similarity({2, 3, 4}, {4, 6, 8}), 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(gm::report::cosine_similarity({0, 0}, {1, 1})));
  // Type bpw without a pool: from ggml's block sizes; imported candidates by their type.
  EXPECT_NEAR(gm::report::candidate_bpw(nullptr, "m", "Q4_K").value(), 4.5, 1e-12);
  EXPECT_NEAR(gm::report::candidate_bpw(nullptr, "m", "Q6_K@unsloth").value(), 6.5625, 1e-12);
  EXPECT_FALSE(gm::report::candidate_bpw(nullptr, "m", "Q9_Z").is_ok());
  // One module, chose B: p = (0.2, 0.7, 0.1) vs (0, 1, 0).
  gm::Plan p;
  p.modules["m"] = "B";
  gm::report::ProbMap pm = {{"m", {{"A", 0.2}, {"B", 0.7}, {"C", 0.1}}}};
  EXPECT_NEAR(gm::report::choice_correlation(p, pm), gm::report::pearson({0.2, 0.7, 0.1}, {0, 1, 0}), 1e-12);
  EXPECT_GT(gm::report::choice_correlation(p, pm), 0.9);
  // Nothing drawable is an error, not an empty image.
  gm::report::LineChart c;
  c.log_y = true;
  c.series.push_back({"s", {1, 2}, {-1, 0}, {}, {}});
  EXPECT_FALSE(gm::report::draw_line_chart(c).is_ok());
}

TEST(Report, SweepTableAndPlots) {
  TempDir t;
  Sweep s = make_sweep(t);
  const std::string out = t / "report";
  auto r = gm::testing::gamma(fmt::format("report {} -o {}", t / "runs.json", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const std::string md = slurp(out + "/table.md");
  for (const char* col : {"| method |", "budget (bpw)", "file (MiB)", "linear bpw", "KLD vs teacher", "PPL",
                          "top-1 agree (%)", "arc_easy acc", "piqa acc_norm", "r(p, choice)"})
    EXPECT_NE(md.find(col), std::string::npos) << col << "\n" << md;
  EXPECT_NE(md.find("KLD and PPL over 20 chunks of 512 tokens"), std::string::npos) << md;

  // GAMMA at 3.00: every number as the inputs give it.
  const double lin = gm::plan_size(s.m, s.plans[3.0]).linear_bpw;
  const std::string g3 = row_of(md, "gamma", "3.00");
  ASSERT_FALSE(g3.empty()) << md;
  EXPECT_NE(g3.find(fmt::format("| {:.2f} |", double(s.sizes[3.0]) / 1048576.0)), std::string::npos) << g3;
  EXPECT_NE(g3.find(fmt::format("| {:.3f} |", lin)), std::string::npos) << g3;
  EXPECT_NE(g3.find(fmt::format("| {:.5f} ± {:.5f} |", kld_for(lin), kld_for(lin) * 0.02)), std::string::npos) << g3;
  EXPECT_NE(g3.find(fmt::format("| {:.2f} ± 0.30 |", 100 * (0.95 - kld_for(lin) * 0.3))), std::string::npos) << g3;
  EXPECT_NE(g3.find(fmt::format("| {:.4f} ± 0.0100 |", 0.63)), std::string::npos) << g3;  // arc_easy acc
  // Uniform plans: no budget, label = type, linear bpw exactly the type's.
  const std::string u4 = row_of(md, "uniform", "Q4_K");
  ASSERT_FALSE(u4.empty()) << md;
  EXPECT_NE(u4.find("| 4.500 |"), std::string::npos) << u4;
  EXPECT_NE(u4.find("| uniform | – | Q4_K |"), std::string::npos) << u4;
  // llama.cpp's mixes: no plan, size measured, linear bpw unknown here (no GGUF on disk).
  const std::string mix = row_of(md, "llama.cpp", "Q4_K_M");
  ASSERT_FALSE(mix.empty()) << md;
  EXPECT_NE(mix.find(fmt::format("| {:.2f} |", double(uint64_t(s.q3.file_bytes * 4.1 / 3.4)) / 1048576.0)),
            std::string::npos) << mix;
  // Rows: GAMMA sorted by budget, then uniform, then llama.cpp (first-seen order).
  EXPECT_LT(md.find(row_of(md, "gamma", "2.75")), md.find(g3));
  EXPECT_LT(md.find(g3), md.find(u4));
  EXPECT_LT(md.find(u4), md.find(mix));

  // The summary: Pearson r(p, choice) recomputed here from the scores and plan.
  json rep = gm::read_json(out + "/report.json", "gamma.report", 1).value();
  ASSERT_EQ(rep["runs"].size(), 8u);
  std::vector<double> x, y;
  for (const auto& [mod, e] : s.scores[3.0]["modules"].items())
    for (const auto& [cand, v] : e["p"].items())
      x.push_back(v.get<double>()), y.push_back(s.plans[3.0].modules.at(mod) == cand ? 1 : 0);
  const double r3 = gm::report::pearson(x, y);
  EXPECT_GT(r3, 0.8);
  EXPECT_NEAR(rep["runs"][1]["pearson_p_choice"].get<double>(), r3, 1e-12);
  EXPECT_NE(md.find(fmt::format("| {:.4f} |", r3)), std::string::npos);
  // Cosine: symmetric, 1 on the diagonal; two uniform plans are parallel vectors (cos 1)
  // while GAMMA's mixed allocations are not parallel to them.
  const auto& cm = rep["cosine"]["matrix"];
  ASSERT_EQ(cm.size(), 6u);  // 4 GAMMA + 2 uniform plans
  for (size_t a = 0; a < 6; ++a)
    for (size_t b = 0; b < 6; ++b) {
      EXPECT_NEAR(cm[a][b].get<double>(), cm[b][a].get<double>(), 1e-12);
      if (a == b) EXPECT_NEAR(cm[a][b].get<double>(), 1.0, 1e-12);
    }
  EXPECT_NEAR(cm[4][5].get<double>(), 1.0, 1e-12);
  EXPECT_LT(cm[0][4].get<double>(), 0.999);

  // Plots: valid PNGs of the expected size with real content.
  Png k = read_png(out + "/kld_vs_size.png");
  EXPECT_EQ(k.w, 960);
  EXPECT_EQ(k.h, 640);
  EXPECT_GT(k.colors.size(), 50u);  // three series' colours, anti-aliased text and lines
  for (const char* f : {"cosine.png", "pearson_p_choice.png", "types-gamma-2.75.png", "types-gamma-4.00.png",
                        "types-uniform-Q3_K.png"}) {
    Png p = read_png(out + "/" + f);
    EXPECT_GT(p.w, 300) << f;
    EXPECT_GT(p.h, 200) << f;
    EXPECT_GT(p.colors.size(), 20u) << f;
  }
  // Heatmaps: the legend lists all four types in every plan's image, so each shows the same
  // palette; GAMMA's plans differ from each other.
  EXPECT_NE(slurp(out + "/types-gamma-2.75.png"), slurp(out + "/types-gamma-4.00.png"));
  EXPECT_FALSE(fs::exists(out + "/types-llama.cpp-Q4_K_M.png"));  // no plan, no heatmap

  // --log-y changes the KLD plot, nothing else required.
  auto r2 = gm::testing::gamma(fmt::format("report {} -o {} --log-y --no-heatmaps", t / "runs.json", t / "report2"));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_NE(slurp(out + "/kld_vs_size.png"), slurp(t / "report2/kld_vs_size.png"));
  EXPECT_FALSE(fs::exists(t / "report2/types-gamma-3.00.png"));
  EXPECT_EQ(slurp(out + "/table.md"), slurp(t / "report2/table.md"));
}

TEST(Report, LooseFilesInADirectory) {
  // No descriptor: plans and evals joined by stem, scores found through info.scores.source,
  // sizes predicted from info when no pool is given.
  TempDir t;
  Sweep s = make_sweep(t);
  fs::create_directories(t / "loose");
  fs::copy_file(t / "plans/gamma-3.00.json", t / "loose/gamma-3.00.plan.json");
  fs::copy_file(t / "evals/gamma-3.00.json", t / "loose/gamma-3.00.eval.json");
  fs::copy_file(t / "scores/gamma-3.00.json", t / "loose/gamma-3.00.json");  // basename of info.scores.source
  fs::copy_file(t / "evals/Q4_K_M.json", t / "loose/Q4_K_M.json");
  const std::string out = t / "out";
  auto r = gm::testing::gamma(fmt::format("report {} -o {}", t / "loose", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = slurp(out + "/table.md");
  const std::string g3 = row_of(md, "gamma", "3.00");
  ASSERT_FALSE(g3.empty()) << md;
  const double lin = gm::plan_size(s.m, s.plans[3.0]).linear_bpw;
  EXPECT_NE(g3.find(fmt::format("| {:.3f} |", lin)), std::string::npos) << g3;  // info.predicted
  EXPECT_NE(g3.find(fmt::format("{:.5f}", kld_for(lin))), std::string::npos) << g3;
  EXPECT_NE(row_of(md, "gguf", "Q4_K_M"), "") << md;
  json rep = gm::read_json(out + "/report.json", "gamma.report", 1).value();
  ASSERT_EQ(rep["runs"].size(), 2u);
  EXPECT_TRUE(rep["runs"][0]["pearson_p_choice"].is_number()) << rep.dump();
  EXPECT_TRUE(fs::exists(out + "/types-gamma-3.00.png"));
  EXPECT_TRUE(fs::exists(out + "/pearson_p_choice.png"));
  EXPECT_FALSE(fs::exists(out + "/cosine.png"));  // one plan: nothing to compare

  // JSON that is no gamma file is skipped; a truncated one is flagged, not silently dropped.
  { std::ofstream(t / "loose/notes.json") << "{\"hello\": 1}"; }
  ASSERT_EQ(gm::testing::gamma(fmt::format("report {} -o {}", t / "loose", t / "out2")).exit_code, 0);
  { std::ofstream(t / "loose/Q3_K_M.json") << "{\"schema\": \"gamma.eval\", \"vers"; }
  r = gm::testing::gamma(fmt::format("report {} -o {}", t / "loose", t / "out3"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("Q3_K_M.json: not valid JSON"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(t / "out3/table.md"));
}

TEST(Report, BadInputFailsWithOneLineAndWritesNothing) {
  TempDir t;
  Sweep s = make_sweep(t);
  auto expect_fail = [&](const std::string& args, const std::string& needle) {
    const std::string out = t / "out";
    auto r = gm::testing::gamma("report " + args + " -o " + out);
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  expect_fail(t / "missing.json", "no such file");
  expect_fail(t / "pool/manifest.json", "schema 'gamma.pool'");
  {
    std::ofstream(t / "junk.json") << "{not json";
    expect_fail(t / "junk.json", "not valid JSON");
  }
  {
    json d = gm::read_json(t / "runs.json", "gamma.runs", 1).value();
    d["runs"][0]["pln"] = "x.json";
    write(t / "typo.json", d);
    expect_fail(t / "typo.json", "runs[0]: unknown field 'pln'");
    d = gm::read_json(t / "runs.json", "gamma.runs", 1).value();
    d["runs"][1].erase("method");
    write(t / "nomethod.json", d);
    expect_fail(t / "nomethod.json", "runs[1]: no \"method\"");
    d = gm::read_json(t / "runs.json", "gamma.runs", 1).value();
    d["runs"][2]["eval"] = "evals/nope.json";
    write(t / "noeval.json", d);
    expect_fail(t / "noeval.json", "nope.json");
  }
  {
    json e = gm::read_json(t / "evals/gamma-3.00.json", "gamma.eval", 1).value();
    e["kld"]["mean"] = "small";
    write(t / "evals/gamma-3.00.json", e);
    expect_fail(t / "runs.json", "field 'kld.mean' is not a number");
    e["kld"]["mean"] = 0.1;
    write(t / "evals/gamma-3.00.json", e);
  }
  {
    // A plan naming a candidate the pool does not have.
    gm::Plan p = s.plans[3.5];
    p.modules["blk.0.attn_q.weight"] = "Q5_K";
    ASSERT_TRUE(p.save(t / "plans/gamma-3.50.json").is_ok());
    expect_fail(t / "runs.json", "no candidate 'Q5_K'");
    ASSERT_TRUE(s.plans[3.5].save(t / "plans/gamma-3.50.json").is_ok());
  }
  {
    // Scores with a p that is not a number.
    json sc = s.scores[2.75];
    sc["modules"]["blk.1.ffn_up.weight"]["p"]["Q3_K"] = nullptr;
    write(t / "scores/gamma-2.75.json", sc);
    expect_fail(t / "runs.json", "p[Q3_K] is not a finite number");
    write(t / "scores/gamma-2.75.json", s.scores[2.75]);
  }
  fs::create_directories(t / "empty");
  expect_fail(t / "empty", "no runs.json and no plan");
  // Output path that is a file.
  std::ofstream(t / "afile") << "x";
  auto r = gm::testing::gamma(fmt::format("report {} -o {}", t / "runs.json", t / "afile"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is not a directory"), std::string::npos) << r.output;
  // After restoring every input the report succeeds again (the failures were the inputs').
  auto ok = gm::testing::gamma(fmt::format("report {} -o {}", t / "runs.json", t / "ok"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST(Report, WarnsWhenEvalsAreNotComparable) {
  TempDir t;
  Sweep s = make_sweep(t);
  json e = gm::read_json(t / "evals/gamma-3.50.json", "gamma.eval", 1).value();
  e["teacher"]["sha256"] = "another";
  e["settings"]["chunks"] = 10;
  e["tasks"]["piqa"]["n"] = 100;
  write(t / "evals/gamma-3.50.json", e);
  auto r = gm::testing::gamma(fmt::format("report {} -o {}", t / "runs.json", t / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = slurp(t / "out/table.md");
  EXPECT_NE(md.find("different texts or chunk settings"), std::string::npos) << md;
  EXPECT_NE(md.find("different teachers"), std::string::npos) << md;
  EXPECT_NE(md.find("task piqa was scored on different numbers of items"), std::string::npos) << md;
  EXPECT_EQ(md.find("task arc_easy was scored"), std::string::npos) << md;
  EXPECT_NE(r.output.find("gamma: note: the KLDs were measured against different teachers"), std::string::npos);
}

TEST(Report, ReadsWhatGammaEvalWrites) {
  // The contract with src/eval: a real `gamma eval` result (stories260K against itself).
  if (!fs::exists(gm::testing::stories260k())) GTEST_SKIP() << "no stories260K";
  std::string text;
  for (const auto& f : fs::directory_iterator(gm::testing::shared_data("text"))) text = f.path().string();
  if (text.empty()) GTEST_SKIP() << "no text in shared data";
  TempDir t;
  const std::string m = gm::testing::stories260k();
  auto ev = gm::testing::gamma(fmt::format("eval {} --teacher {} --text {} --chunks 2 -c 128 --tasks arc_easy --limit 5 "
                                           "--no-cache -q -t 2 -o {}", m, m, text, t / "ev.json"));
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  auto r = gm::testing::gamma(fmt::format("report {} -o {}", t / "ev.json", t / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json e = gm::read_json(t / "ev.json", "gamma.eval", 1).value();
  const std::string md = slurp(t / "out/table.md");
  const std::string row = row_of(md, "gguf", "stories260K");
  ASSERT_FALSE(row.empty()) << md;
  EXPECT_NE(row.find(fmt::format("| {:.3f} ± {:.3f} |", e["perplexity"]["ppl"].get<double>(),
                                 e["perplexity"]["ppl_stderr"].get<double>())), std::string::npos) << row;
  EXPECT_NE(row.find(fmt::format("| {:.2f} |", e["model"]["file_bytes"].get<double>() / 1048576.0)), std::string::npos)
      << row;
  EXPECT_NE(row.find(fmt::format("| {:.4f}", e["tasks"]["arc_easy"]["acc"].get<double>())), std::string::npos) << row;
  // Linear bpw read from the GGUF's header: stories260K's linear modules are F32.
  EXPECT_NE(row.find("| 32.000 |"), std::string::npos) << row;
  EXPECT_TRUE(fs::exists(t / "out/kld_vs_size.png"));
}
