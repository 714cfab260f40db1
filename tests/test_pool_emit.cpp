// pool -> plan -> emit on stories260K, judged by llama.cpp itself: libllama loads what gamma
// writes, llama-quantize reproduces its per-tensor types from the recipe, llama-perplexity
// scores it, and gamma's quantized bytes equal llama-quantize's for the same imatrix.
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "emit/emit.h"
#include "gguf_model/model.h"
#include "llama.h"
#include "plan/plan.h"
#include "pool/pool.h"
#include "scores/scores.h"
#include "solve/allocate.h"
#include "solve/window.h"
#include "testing.h"
#include "util/files.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {

Manifest make_pool(const TempDir& d, const std::string& types, const std::string& imatrix = "") {
  PoolOptions o;
  o.model_path = stories260k();
  std::stringstream ss(types);
  for (std::string t; std::getline(ss, t, ',');) o.types.push_back(t);
  o.imatrix_path = imatrix;
  o.out_dir = d / "pool";
  o.quiet = true;
  auto m = build_pool(o);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.value();
}

bool llama_loads(const std::string& path) {
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  auto p = llama_model_default_params();
  llama_model* m = llama_model_load_from_file(path.c_str(), p);
  if (!m) return false;
  llama_model_free(m);
  return true;
}

std::map<std::string, std::string> types_of(const std::string& path) {
  std::map<std::string, std::string> out;
  auto m = Model::open(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  for (const auto& t : (*m)->tensors()) out[t.name] = type_name(t.type);
  return out;
}

double final_ppl(const std::string& out) {
  std::smatch sm;
  static const std::regex re("Final estimate: PPL = ([0-9.]+)");
  EXPECT_TRUE(std::regex_search(out, sm, re)) << out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
  return sm.empty() ? -1 : std::stod(sm[1]);
}

double llama_ppl(const std::string& model, int chunks) {
  auto r = run_llama_tool(llama_tool("llama-perplexity") + " -m " + model + " -f " +
                              shared_data("text/tinystories-valid-prefix.txt") + " -c 128 -b 128 -t 2 --chunks " +
                              std::to_string(chunks),
                          "Final estimate");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return final_ppl(r.output);
}

}  // namespace

TEST(Pool, AutoTakesTheDefaultTypesThatFitAndRecordsTheirTime) {
  // stories260K's 64-wide rows fit only the 32-wide defaults; without an imatrix the IQ2
  // types that need one are left out rather than refused (they fit no module here anyway).
  TempDir d;
  Manifest m = make_pool(d, "auto");
  std::vector<std::string> want;
  for (const auto& t : default_candidate_types())
    if (type_admits(parse_type(t).value(), 64)) want.push_back(t);
  EXPECT_EQ(m.types, want);
  EXPECT_EQ(want, (std::vector<std::string>{"IQ4_NL", "Q4_1", "Q5_1", "Q8_0"}));
  for (const auto& t : want) {  // each part's sidecar records its time (not the manifest: resumes stay identical)
    auto side = read_json(d / ("pool/cand-" + t + ".json"), "gamma.pool.part", 1);
    ASSERT_TRUE(side.is_ok()) << side.status().message();
    EXPECT_GT(side->value("seconds", 0.0), 0.0) << t;
  }
  // A type that fits nothing, asked for by name, is refused in one line, and nothing is written.
  auto r = gamma("pool " + stories260k() + " --types Q4_K -o " + (d / "k"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("Q4_K fits no linear module of this model"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(d / "k"));
}

// Under a speed budget gamma run asks for auto-speed: auto and the types that decode fast for
// their bytes. stories260K's 64-wide rows take Q4_0 (Q3_K's 256-wide blocks fit none of them).
TEST(Pool, AutoSpeedAddsTheFastDecodeTypesThatFit) {
  TempDir d;
  PoolOptions po;
  po.model_path = stories260k();
  po.preview = true;
  po.types = {"auto"};
  auto plain = build_pool(po);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  po.types = {"auto-speed"};
  auto fast = build_pool(po);
  ASSERT_TRUE(fast.is_ok()) << fast.status().message();
  std::vector<std::string> want = plain->types;
  want.push_back("Q4_0");
  EXPECT_EQ(fast->types, want);
  EXPECT_EQ(fast_decode_types(), (std::vector<std::string>{"Q3_K", "Q4_0"}));
  int with_q40 = 0;  // every module whose rows hold 32-wide blocks (ffn_down's 172 do not)
  for (const auto& m : fast->modules) {
    EXPECT_EQ(m.find("Q4_0") != nullptr, m.shape[0] % 32 == 0) << m.name;
    with_q40 += m.find("Q4_0") != nullptr;
  }
  EXPECT_GT(with_q40, 0);
}

// The preview (sizes without quantizing: gamma run's target check and --dry-run) holds
// exactly the candidates and bytes the real pool writes.
TEST(Pool, PreviewPredictsTheRealPoolsBytes) {
  TempDir d;
  Manifest real = make_pool(d, "auto");
  PoolOptions po;
  po.model_path = stories260k();
  po.types = {"auto"};
  po.preview = true;
  auto prev = build_pool(po);
  ASSERT_TRUE(prev.is_ok()) << prev.status().message();
  EXPECT_EQ(prev->types, real.types);
  EXPECT_EQ(prev->header_bytes, real.header_bytes);
  ASSERT_EQ(prev->modules.size(), real.modules.size());
  for (size_t i = 0; i < real.modules.size(); ++i) {
    ASSERT_EQ(prev->modules[i].candidates.size(), real.modules[i].candidates.size()) << real.modules[i].name;
    for (size_t k = 0; k < real.modules[i].candidates.size(); ++k) {
      EXPECT_EQ(prev->modules[i].candidates[k].id, real.modules[i].candidates[k].id);
      EXPECT_EQ(prev->modules[i].candidates[k].bytes, real.modules[i].candidates[k].bytes);
      EXPECT_EQ(prev->modules[i].candidates[k].file_bytes, real.modules[i].candidates[k].file_bytes);
    }
  }
}

// The sampled-row estimate (gamma inspect --errors): with every row it is the pool's own
// error, exactly (ggml quantizes rows independently); with a few rows each type's error is
// near the pool's, on the same rows for every type, and nothing is written.
TEST(Pool, EstimateFromRowsIsThePoolsErrorWithEveryRowAndNearItWithFew) {
  TempDir d;
  const std::string types = "Q4_0,Q5_1,Q8_0";
  Manifest real = make_pool(d, types);
  for (int64_t rows : {int64_t(1) << 30, int64_t(24)}) {
    PoolOptions po;
    po.model_path = stories260k();
    po.types = {"Q4_0", "Q5_1", "Q8_0"};
    po.estimate_rows = rows;
    po.out_dir = d / "not-written";
    auto est = build_pool(po);
    ASSERT_TRUE(est.is_ok()) << est.status().message();
    EXPECT_FALSE(fs::exists(d / "not-written"));
    ASSERT_EQ(est->modules.size(), real.modules.size());
    double sum_est = 0, sum_real = 0;
    for (size_t i = 0; i < real.modules.size(); ++i) {
      ASSERT_EQ(est->modules[i].candidates.size(), real.modules[i].candidates.size());
      for (size_t k = 0; k < real.modules[i].candidates.size(); ++k) {
        const auto& a = est->modules[i].candidates[k];
        const auto& b = real.modules[i].candidates[k];
        EXPECT_EQ(a.bytes, b.bytes);
        if (rows > 1000) EXPECT_EQ(a.rel_err, b.rel_err) << real.modules[i].name << " " << a.id;
        sum_est += a.rel_err, sum_real += b.rel_err;
      }
    }
    EXPECT_NEAR(sum_est / sum_real, 1.0, rows > 1000 ? 1e-12 : 0.15) << rows << " rows";
  }
}

// What gamma run quantizes when it prunes the pool: solve's window around the plans given
// holds each plan's own candidates (0 steps), their neighbours by bytes (1 step), and with two
// plans every candidate between theirs;
// `--only` quantizes exactly the listed types, each candidate byte for byte the full pool's.
TEST(Pool, WindowHoldsThePlansAndOnlyQuantizesItByteForByte) {
  TempDir d;
  Manifest full = make_pool(d, "Q4_0,Q5_0,Q5_1,Q8_0");
  auto st = scores::Scores::from_manifest(full);
  ASSERT_TRUE(st.is_ok());
  auto alloc = solve::Allocator::create(full, *st, {});
  ASSERT_TRUE(alloc.is_ok()) << alloc.status().message();
  auto plan = alloc->solve(solve::Budget::of_bpw(8.0));
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  auto w0 = solve::candidate_window(full, {plan->plan}, {0});
  auto w1 = solve::candidate_window(full, {plan->plan}, {1});
  ASSERT_TRUE(w0.is_ok() && w1.is_ok()) << w0.status().message();
  size_t n0 = 0, n1 = 0;
  for (const auto& e : full.modules) {
    const auto& id = plan->plan.modules.at(e.name);
    EXPECT_EQ(w0->at(e.name), std::vector<std::string>{id}) << e.name;
    size_t i = 0;
    while (e.candidates[i].id != id) ++i;
    std::vector<std::string> want;
    for (size_t k = i > 0 ? i - 1 : 0; k <= std::min(i + 1, e.candidates.size() - 1); ++k) want.push_back(e.candidates[k].type);
    EXPECT_EQ(w1->at(e.name), want) << e.name;
    n0 += w0->at(e.name).size(), n1 += w1->at(e.name).size();
  }
  EXPECT_LT(n0, n1);
  // Two plans: per module the candidates from the lighter plan's to the heavier's, by bytes.
  auto light = alloc->solve(solve::Budget::of_bpw(alloc->min_bpw()));
  ASSERT_TRUE(light.is_ok()) << light.status().message();
  auto both = solve::candidate_window(full, {plan->plan, light->plan}, {0});
  ASSERT_TRUE(both.is_ok()) << both.status().message();
  size_t wider = 0;
  for (const auto& e : full.modules) {
    auto index = [&](const solve::Allocation& a) {
      size_t i = 0;
      while (e.candidates[i].id != a.plan.modules.at(e.name)) ++i;
      return i;
    };
    const size_t lo = std::min(index(*plan), index(*light)), hi = std::max(index(*plan), index(*light));
    std::vector<std::string> want;
    for (size_t k = lo; k <= hi; ++k) want.push_back(e.candidates[k].type);
    EXPECT_EQ(both->at(e.name), want) << e.name;
    wider += hi > lo;
  }
  EXPECT_GT(wider, 0u);
  // The rule's costly types (gamma run: the IQ2 ones) only within its near steps below the plans:
  // 3 steps either side, Q4_0 and Q5_0 only 1 below. Above the plans they stay (the window's
  // ceiling is the plans' own reach, not their cost).
  const solve::WindowRule narrow{3, {"Q4_0", "Q5_0"}, 1};
  auto wn = solve::candidate_window(full, {plan->plan}, narrow);
  auto w3 = solve::candidate_window(full, {plan->plan}, {3});
  ASSERT_TRUE(wn.is_ok() && w3.is_ok()) << wn.status().message();
  size_t dropped = 0;
  for (const auto& e : full.modules) {
    size_t i = 0;
    while (e.candidates[i].id != plan->plan.modules.at(e.name)) ++i;
    std::vector<std::string> want;
    for (size_t k = i >= 3 ? i - 3 : 0; k <= std::min(i + 3, e.candidates.size() - 1); ++k)
      if (k + 1 >= i || !narrow.near_only.count(e.candidates[k].type)) want.push_back(e.candidates[k].type);
    EXPECT_EQ(wn->at(e.name), want) << e.name;
    dropped += w3->at(e.name).size() - want.size();
  }
  EXPECT_GT(dropped, 0u) << "the test's plan must sit 2+ steps above some Q4_0 or Q5_0 candidate";
  EXPECT_FALSE(solve::candidate_window(full, {plan->plan}, {3, {"Q4_0"}, -1}).is_ok());
  // A plan of another pool is refused, not read as indices.
  solve::Allocation other = *plan;
  other.plan.modules.begin()->second = "no-such-candidate";
  EXPECT_FALSE(solve::candidate_window(full, {other.plan}, {0}).is_ok());
  // The window as gamma pool --only reads it, through its file.
  const std::string only = d / "only.json";
  ASSERT_TRUE(write_json(only, only_to_json(*w1)).is_ok());
  auto lists = load_only(only);
  ASSERT_TRUE(lists.is_ok()) << lists.status().message();
  EXPECT_EQ(*lists, *w1);
  PoolOptions po;
  po.model_path = stories260k();
  po.types = {"Q4_0", "Q5_0", "Q5_1", "Q8_0"};
  po.only = *lists;
  po.out_dir = d / "pruned";
  po.quiet = true;
  auto pruned = build_pool(po);
  ASSERT_TRUE(pruned.is_ok()) << pruned.status().message();
  for (const auto& e : pruned->modules) {
    std::vector<std::string> got;
    for (const auto& c : e.candidates) got.push_back(c.type);
    EXPECT_EQ(got, w1->at(e.name)) << e.name;
    for (const auto& c : e.candidates) {
      const Candidate* f = full.find(e.name)->find(c.id);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(c.bytes, f->bytes);
      EXPECT_EQ(c.rel_err, f->rel_err) << e.name << " " << c.id;
      auto a = TensorFile::open(d / "pruned" + "/" + c.file), b = TensorFile::open(d / "pool" + "/" + f->file);
      ASSERT_TRUE(a.is_ok() && b.is_ok());
      const TensorInfo* ta = (*a)->find(e.name);
      const TensorInfo* tb = (*b)->find(e.name);
      ASSERT_TRUE(ta && tb);
      std::vector<uint8_t> ba(ta->nbytes), bb(tb->nbytes);
      ASSERT_TRUE((*a)->read_raw(*ta, ba.data()).is_ok() && (*b)->read_raw(*tb, bb.data()).is_ok());
      EXPECT_EQ(ba, bb) << e.name << " " << c.id;
    }
  }
  po.only = {{"blk.0.no_such.weight", {"Q4_0"}}};
  po.out_dir = d / "bad";
  auto bad = build_pool(po);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("not a linear module"), std::string::npos) << bad.status().message();
}

// `auto` on SmolLM2: IQ4_NL for the 576-wide rows only; its 1536-wide ffn_down rows take the
// 256-wide types instead (IQ4_XS: the same error in fewer bytes, results/iq_qwen/types.md).
TEST(Pool, AutoGivesIq4NlOnlyToRowsNo256WideTypeFits) {
  if (smollm2().empty()) GTEST_SKIP() << "SmolLM2 not fetched";
  PoolOptions po;
  po.model_path = smollm2();
  po.types = {"auto"};
  po.imatrix_path = "will-exist.gguf";
  po.preview = true;
  auto m = build_pool(po);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  int wide = 0;
  for (const auto& e : m->modules) {
    const bool nl = e.find("IQ4_NL") != nullptr;
    EXPECT_EQ(nl, e.shape[0] % 256 != 0) << e.name;
    if (e.shape[0] % 256 == 0) {
      ++wide;
      EXPECT_NE(e.find("IQ4_XS"), nullptr) << e.name;
    }
  }
  EXPECT_EQ(wide, 30);
}

TEST(Pool, ManifestFiguresAreRealBytesAndErrors) {
  TempDir d;
  Manifest m = make_pool(d, "Q4_0,Q8_0");
  ASSERT_EQ(m.modules.size(), 35u);
  EXPECT_EQ(m.types, (std::vector<std::string>{"Q4_0", "Q8_0"}));
  for (const auto& e : m.modules) {
    if (e.kind == "ffn_down") {
      // 172-wide rows fit no 32-wide block: the F16 fallback, as llama-quantize does.
      ASSERT_EQ(e.candidates.size(), 1u);
      EXPECT_EQ(e.candidates[0].id, "F16");
      continue;
    }
    ASSERT_EQ(e.candidates.size(), 2u) << e.name;
    const auto& q4 = e.candidates[0];
    const auto& q8 = e.candidates[1];
    EXPECT_EQ(q4.id, "Q4_0");
    EXPECT_EQ(q4.bytes, type_bytes(GGML_TYPE_Q4_0, e.shape[0], e.shape[1]));
    EXPECT_DOUBLE_EQ(q4.bpw, 4.5);
    EXPECT_DOUBLE_EQ(q8.bpw, 8.5);
    EXPECT_EQ(q8.file_bytes % m.alignment, 0u);
    EXPECT_GT(q4.rel_err, 10 * q8.rel_err);
    EXPECT_GT(q8.rel_err, 0);
    EXPECT_LT(q4.rel_err, 0.05);
  }
  auto again = Manifest::load(m.dir);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->to_json(), m.to_json());
}

TEST(Pool, InterruptedBuildResumes) {
  TempDir d;
  Manifest first = make_pool(d, "Q4_0,Q5_0,Q8_0");
  const auto q4_time = fs::last_write_time(d / "pool/cand-Q4_0.gguf");
  fs::remove(d / "pool/cand-Q8_0.gguf");       // as if killed while writing Q8_0
  fs::remove(d / "pool/manifest.json");
  std::ofstream(d / "pool/cand-Q8_0.gguf.tmp-1-2.partial") << "junk";  // a dead temp file
  Manifest second = make_pool(d, "Q4_0,Q5_0,Q8_0");
  EXPECT_EQ(fs::last_write_time(d / "pool/cand-Q4_0.gguf"), q4_time);  // reused, not redone
  EXPECT_TRUE(fs::exists(d / "pool/cand-Q8_0.gguf"));
  EXPECT_EQ(second.to_json(), first.to_json());
}

TEST(Emit, UniformQ8MatchesPredictionLoadsAndKeepsF32Perplexity) {
  TempDir d;
  Manifest m = make_pool(d, "Q4_0,Q8_0");
  Plan p = uniform_plan(m, "Q8_0").value();
  ASSERT_TRUE(p.save(d / "plan.json").is_ok());
  auto r = emit(m.dir, Plan::load(d / "plan.json").value(), d / "q8.gguf");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(file_size(d / "q8.gguf").value(), r->file_bytes);
  EXPECT_EQ(plan_size(m, p).file_bytes, r->file_bytes);
  EXPECT_TRUE(llama_loads(d / "q8.gguf"));
  auto types = types_of(d / "q8.gguf");
  EXPECT_EQ(types["blk.2.attn_q.weight"], "Q8_0");
  EXPECT_EQ(types["blk.2.ffn_down.weight"], "F16");
  EXPECT_EQ(types["token_embd.weight"], "Q8_0");  // base Q6_K falls back to Q8_0 at 64 wide
  EXPECT_EQ(types["output.weight"], "Q8_0");
  EXPECT_EQ(types["blk.2.attn_norm.weight"], "F32");
  // Q8_0 is near-lossless: a uniform Q8_0 stories260K reproduces the F32 PPL within 1% (llama-perplexity on both).
  const double ref = llama_ppl(stories260k(), 60), q8 = llama_ppl(d / "q8.gguf", 60);
  EXPECT_NEAR(q8 / ref, 1.0, 0.01) << "F32 " << ref << " Q8_0 " << q8;
}

TEST(Emit, RandomMixedPlanIsReproducedByLlamaQuantizeFromTheRecipe) {
  TempDir d;
  Manifest m = make_pool(d, "Q4_0,Q4_1,Q5_0,Q8_0");
  Plan p = uniform_plan(m, "Q4_0").value();
  p.method = "random";
  std::mt19937 rng(7);
  for (const auto& e : m.modules) p.modules[e.name] = e.candidates[rng() % e.candidates.size()].id;
  p.fixed["token_embd.weight"] = "Q5_0";
  auto r = emit(m.dir, p, d / "mix.gguf");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(file_size(d / "mix.gguf").value(), r->file_bytes);
  EXPECT_TRUE(llama_loads(d / "mix.gguf"));
  auto got = types_of(d / "mix.gguf");
  for (const auto& [name, id] : p.modules) EXPECT_EQ(got[name], id) << name;
  EXPECT_EQ(got["token_embd.weight"], "Q5_0");

  // The recipe, fed to the vendored llama-quantize with the FP source, gives the same types.
  auto q = run(llama_tool("llama-quantize") + " --tensor-type-file " + r->tensor_types_path + " " + stories260k() +
               " " + (d / "lq.gguf") + " Q4_0 2");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_EQ(types_of(d / "lq.gguf"), got);

  // The embedding at Q5_0 (not the model's type) was quantized once and kept in POOL/fixed/: a
  // second emit reads it and writes the same bytes; a torn cache file is not read.
  std::vector<fs::path> kept;  // and output.weight at Q8_0 (stories260K's is F32)
  for (const auto& e : fs::directory_iterator(m.dir + "/fixed"))
    if (e.path().filename().string().rfind("token_embd.weight.Q5_0.", 0) == 0) kept.push_back(e.path());
  ASSERT_EQ(kept.size(), 1u);
  const std::string first = read_file(d / "mix.gguf").value();
  ASSERT_TRUE(emit(m.dir, p, d / "again.gguf").is_ok());
  EXPECT_TRUE(read_file(d / "again.gguf").value() == first);
  ASSERT_TRUE(write_file_atomic(kept[0].string(), "torn").is_ok());
  ASSERT_TRUE(emit(m.dir, p, d / "torn.gguf").is_ok());
  EXPECT_TRUE(read_file(d / "torn.gguf").value() == first);
  EXPECT_GT(fs::file_size(kept[0]), 4u) << "rewritten whole";
}

TEST(Pool, ImatrixWeightsLikeLlamaQuantizeAndImportsCopyBytes) {
  TempDir d;
  // A real imatrix from the vendored llama-imatrix.
  auto im = run(llama_tool("llama-imatrix") + " -m " + stories260k() + " -f " +
                shared_data("text/tinystories-valid-prefix.txt") + " -c 128 --chunks 20 -t 2 -o " + (d / "im.gguf"));
  ASSERT_EQ(im.exit_code, 0) << im.output;
  Manifest m = make_pool(d, "Q4_0", d / "im.gguf");
  EXPECT_FALSE(m.imatrix_sha256.empty());
  // llama-quantize --pure Q4_0 with the same imatrix writes the very same bytes.
  auto q = run(llama_tool("llama-quantize") + " --pure --imatrix " + (d / "im.gguf") + " " + stories260k() + " " +
               (d / "lq.gguf") + " Q4_0 2");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  auto lq = TensorFile::open(d / "lq.gguf").value();
  auto cand = TensorFile::open(d / "pool/cand-Q4_0.gguf").value();
  const auto* a = lq->find("blk.1.attn_v.weight");
  const auto* b = cand->find("blk.1.attn_v.weight");
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> x(a->nbytes), y(b->nbytes);
  ASSERT_TRUE(lq->read_raw(*a, x.data()).is_ok());
  ASSERT_TRUE(cand->read_raw(*b, y.data()).is_ok());
  EXPECT_EQ(x, y);

  // --import: llama-quantize's tensors become candidates TYPE@LABEL, bytes copied as is.
  PoolOptions o;
  o.model_path = stories260k();
  o.types = {"Q8_0"};
  o.imports = {d / "lq.gguf:lq"};
  o.out_dir = d / "pool2";
  o.quiet = true;
  auto m2 = build_pool(o);
  ASSERT_TRUE(m2.is_ok()) << m2.status().message();
  const Candidate* c = m2->find("blk.1.attn_v.weight")->find("Q4_0@lq");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->bytes, a->nbytes);
  Plan p = uniform_plan(*m2, "Q8_0").value();
  p.modules["blk.1.attn_v.weight"] = "Q4_0@lq";
  ASSERT_TRUE(emit(m2->dir, p, d / "imp.gguf").is_ok());
  auto out = TensorFile::open(d / "imp.gguf").value();
  std::vector<uint8_t> z(out->find("blk.1.attn_v.weight")->nbytes);
  ASSERT_TRUE(out->read_raw(*out->find("blk.1.attn_v.weight"), z.data()).is_ok());
  EXPECT_EQ(z, x);
}

// The same budget solved twice gives plans that differ only in their solve time; the files
// emitted from them are byte-identical (the GGUF's plan sha256 leaves the time out), so a
// resumed `gamma run`, which re-solves, emits what an uninterrupted run emits.
TEST(Emit, SamePlanSolvedTwiceGivesTheSameBytes) {
  TempDir d;
  auto r = gamma("pool " + stories260k() + " --types Q4_0,Q8_0 -q -o " + d / "pool");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string bytes[2];
  for (int i = 0; i < 2; ++i) {
    const std::string plan = d / ("plan" + std::to_string(i) + ".json"), out = d / ("m" + std::to_string(i) + ".gguf");
    r = gamma("solve --pool " + d / "pool" + " --score-from-manifest --bpw 8.5 -o " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = gamma("emit " + d / "pool" + " " + plan + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    bytes[i] = read_file(out).value();
  }
  EXPECT_FALSE(bytes[0].empty());
  EXPECT_TRUE(bytes[0] == bytes[1]);
}

// A streamed pool emits the stored pool's file byte for byte, for a uniform and a solved mixed
// plan: each candidate made from the source once and kept in POOL/stream/, which a second emit
// reads. --stream makes no files, so an import (a file) is refused with it.
TEST(Pool, StreamedPoolEmitsTheStoredPoolsBytes) {
  TempDir d;
  auto r = gamma("pool " + stories260k() + " --types Q4_0,Q5_0,Q8_0 -q -o " + d / "stored");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = gamma("pool " + stories260k() + " --types Q4_0,Q5_0,Q8_0 --stream -q -o " + d / "streamed");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("streamed (estimated from 128 rows each)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "streamed/cand-Q4_0.gguf"));
  r = gamma("solve --pool " + d / "stored" + " --score-from-manifest --bpw 7.5 -o " + d / "mixed.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto stored = Manifest::load(d / "stored").value();
  ASSERT_TRUE(uniform_plan(stored, "Q5_0").value().save(d / "uniform.json").is_ok());
  for (const std::string plan : {"uniform", "mixed"}) {
    r = gamma("emit " + d / "stored" + " " + d / (plan + ".json") + " -o " + d / (plan + "-a.gguf"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const std::string pass : {"b", "c"}) {  // c: from the cache b left
      r = gamma("emit " + d / "streamed" + " " + d / (plan + ".json") + " -o " + d / (plan + "-" + pass + ".gguf"));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_TRUE(read_file(d / (plan + "-a.gguf")).value() == read_file(d / (plan + "-" + pass + ".gguf")).value())
          << plan << " " << pass;
    }
  }
  EXPECT_TRUE(fs::exists(d / "streamed/stream"));
  r = gamma("pool " + stories260k() + " --types Q8_0 --stream --import " + d / "uniform-a.gguf" + " -q -o " + d / "bad");
  EXPECT_EQ(r.output, "gamma: error: --stream makes no candidate files, and an import's candidates are one: build it "
                      "without --stream\n");
  EXPECT_FALSE(fs::exists(d / "bad/manifest.json"));
}
