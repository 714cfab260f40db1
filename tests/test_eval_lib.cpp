// Library-level checks of src/eval: the llama-perplexity log-prob format and per-row math,
// chunk arithmetic, and multiple-choice scoring (packed, prefix-shared decoding) against a
// plain one-option-at-a-time computation through libllama.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <tuple>

#include <gtest/gtest.h>

#include "eval/logprobs.h"
#include "eval/perplexity.h"
#include "eval/result.h"
#include "eval/tasks.h"
#include "llama/context.h"
#include "testing.h"
#include "util/files.h"

namespace gm::eval {
namespace {

using gm::testing::TempDir;
using llama::Batch;
using llama::ContextOptions;
using llama::LlamaContext;
using llama::LlamaModel;

TEST(EvalRowMath, NllOfKnownDistribution) {
  // p = softmax(0, ln 3) = (1/4, 3/4).
  const float logits[2] = {0.f, std::log(3.f)};
  EXPECT_NEAR(row_nll(2, logits, 1), std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(row_nll(2, logits, 0), std::log(4.0), 1e-6);
}

TEST(EvalRowMath, QuantizedRowAgainstItselfHasNoDivergence) {
  const int n = 301;  // odd: exercises the padding slot
  std::vector<float> logits(n);
  for (int i = 0; i < n; ++i) logits[i] = std::sin(0.37f * i) * 6.f + (i == 123 ? 9.f : 0.f);
  std::vector<uint16_t> row(logprob_row_len(n));
  const double nll = quantize_row(n, logits.data(), row.data(), 5);
  EXPECT_NEAR(nll, row_nll(n, logits.data(), 5), 1e-5);
  EXPECT_EQ(row[4 + n], 0) << "padding is zeroed";
  KldAccum acc;
  auto [kld, dp] = compare_row(n, logits.data(), row.data(), 5, acc);
  EXPECT_LT(std::fabs(kld), 1e-4);
  EXPECT_LT(std::fabs(dp), 1e-4);
  EXPECT_EQ(acc.n_same_top, 1u);
  // A different distribution: positive divergence, different argmax.
  std::vector<float> other(logits);
  other[7] += 20.f;
  KldAccum acc2;
  auto [kld2, dp2] = compare_row(n, other.data(), row.data(), 5, acc2);
  EXPECT_GT(kld2, 1.0);
  EXPECT_EQ(acc2.n_same_top, 0u);
  (void)dp2;
}

TEST(EvalLogprobFile, RoundTripAndRejectsDamage) {
  TempDir dir;
  LogprobFileInfo info;
  info.n_ctx = 16;
  info.n_vocab = 9;
  info.n_chunk = 2;
  for (int i = 0; i < 32; ++i) info.tokens.push_back(i % 9);
  const size_t per_chunk = size_t(scored_per_chunk(16)) * logprob_row_len(9);
  std::vector<uint16_t> c0(per_chunk, 7), c1(per_chunk, 11);
  const std::string path = dir / "x.kld";
  {
    auto w = LogprobWriter::create(path, info);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    ASSERT_TRUE(w.value()->write_chunk(c0.data()).is_ok());
    // Closing early must fail: the header promises two chunks.
    auto w2 = LogprobWriter::create(dir / "short.kld", info);
    ASSERT_TRUE(w2.value()->write_chunk(c0.data()).is_ok());
    EXPECT_FALSE(w2.value()->close().is_ok());
    ASSERT_TRUE(w.value()->write_chunk(c1.data()).is_ok());
    ASSERT_TRUE(w.value()->close().is_ok());
  }
  auto r = LogprobReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value()->info().n_ctx, 16u);
  EXPECT_EQ(r.value()->info().tokens, info.tokens);
  std::vector<uint16_t> got(per_chunk);
  ASSERT_TRUE(r.value()->read_chunk(got.data()).is_ok());
  EXPECT_EQ(got, c0);
  ASSERT_TRUE(r.value()->read_chunk(got.data()).is_ok());
  EXPECT_EQ(got, c1);
  EXPECT_FALSE(r.value()->read_chunk(got.data()).is_ok());

  // Truncated by one byte, and wrong magic.
  std::filesystem::copy_file(path, dir / "cut.kld");
  std::filesystem::resize_file(dir / "cut.kld", std::filesystem::file_size(path) - 1);
  auto cut = LogprobReader::open(dir / "cut.kld");
  ASSERT_FALSE(cut.is_ok());
  EXPECT_NE(cut.status().message().find("size"), std::string::npos);
  std::ofstream(dir / "magic.kld") << "_logitz_0123456789abcdef";
  EXPECT_FALSE(LogprobReader::open(dir / "magic.kld").is_ok());
  EXPECT_FALSE(LogprobReader::open(dir / "absent.kld").is_ok());
}

TEST(EvalChunks, CountsAndLimits) {
  EXPECT_EQ(chunks_for(1000, 128, -1).value(), 7);
  EXPECT_EQ(chunks_for(1000, 128, 3).value(), 3);
  EXPECT_FALSE(chunks_for(1000, 128, 8).is_ok());
  EXPECT_FALSE(chunks_for(255, 128, -1).is_ok());  // llama-perplexity wants two windows
  EXPECT_TRUE(chunks_for(256, 128, -1).is_ok());
  EXPECT_FALSE(chunks_for(1000, 128, 0).is_ok());
}

TEST(EvalStats, PerplexityFromSums) {
  // nll values 1, 2, 3: mean 2, sample sd of the mean sqrt(((1+4+9)/3 - 4)/2) = sqrt(1/3).
  PplStats s = ppl_stats(6.0, 14.0, 3);
  EXPECT_NEAR(s.ppl, std::exp(2.0), 1e-12);
  EXPECT_NEAR(s.nll_stderr, std::sqrt(1.0 / 3.0), 1e-12);
  EXPECT_NEAR(s.ppl_stderr, std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-12);
  // {1,0,1,1}: sample variance 0.25, stderr sqrt(0.25/4).
  EXPECT_NEAR(mean_stderr({1, 0, 1, 1}), 0.25, 1e-12);
}

TEST(EvalTasksLib, ResolveAndParse) {
  TempDir dir;
  auto p = resolve_task("piqa", default_tasks_dir());
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  auto t = load_task(p.value(), std::nullopt, 7);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->name, "piqa");
  EXPECT_EQ(t->items.size(), 7u);
  EXPECT_EQ(t->n_in_file, 1838u);
  EXPECT_EQ(t->delimiter, "\nAnswer: ");
  EXPECT_EQ(default_delimiter("my_task"), " ");
  std::ofstream(dir / "s.jsonl") << R"({"context_options": ["A b", "C d"], "continuation": "e f", "gold": 1})" "\n";
  auto s = load_task(dir / "s.jsonl", std::string("|"), -1);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->items[0].n_options(), 2);
  EXPECT_EQ(s->items[0].context(1), "C d");
  EXPECT_EQ(s->items[0].continuation(1), "e f");
  EXPECT_EQ(s->delimiter, "|");
  for (const char* bad : {R"({"query": "q", "choices": ["a"], "gold": 0})",
                          R"({"query": "q", "choices": ["a", 3], "gold": 0})",
                          R"({"query": "q", "choices": ["a", "b"], "gold": -1})",
                          R"({"query": "q", "choices": ["a", "b"], "gold": 1.5})",
                          R"({"choices": ["a", "b"], "gold": 0})", R"([1, 2])"}) {
    std::ofstream(dir / "b.jsonl") << bad << "\n";
    auto b = load_task(dir / "b.jsonl", std::nullopt, -1);
    EXPECT_FALSE(b.is_ok()) << bad;
    if (!b.is_ok()) EXPECT_NE(b.status().message().find("b.jsonl:1:"), std::string::npos) << b.status().message();
  }
  std::ofstream(dir / "empty.jsonl") << "\n\n";
  EXPECT_FALSE(load_task(dir / "empty.jsonl", std::nullopt, -1).is_ok());
}

// Log-likelihood of one option, decoded alone with every logit: the plain computation the
// packed scorer must reproduce.
double direct_loglik(const LlamaModel& m, LlamaContext& ctx, std::string context, std::string cont) {
  size_t keep = context.size();
  while (keep > 0 && std::isspace((unsigned char)context[keep - 1])) --keep;
  cont = context.substr(keep) + cont;
  context.resize(keep);
  auto whole = m.tokenize(context + cont, true).value();
  const size_t start = m.tokenize(context, true).value().size();
  EXPECT_GT(whole.size(), start);
  ctx.clear_memory();
  Batch b(int(whole.size()), 1);
  for (size_t i = 0; i < whole.size(); ++i) b.add(whole[i], int(i), 0, true);
  EXPECT_TRUE(ctx.decode(b.get()).is_ok());
  double ll = 0;
  for (size_t p = start; p < whole.size(); ++p) {
    const float* row = llama_get_logits_ith(ctx.get(), int(p - 1));
    ll -= row_nll(m.n_vocab(), row, whole[p]);
  }
  return ll;
}

TEST(EvalTasksLib, PackedScoringEqualsDirectScoring) {
  auto m = LlamaModel::load(gm::testing::stories260k());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ContextOptions co;
  co.n_ctx = 1024;
  co.n_batch = 1024;
  co.n_threads = 1;
  auto ctx = LlamaContext::create(*m.value(), co);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  TempDir dir;
  std::ofstream(dir / "schema.jsonl")
      << R"({"context_options": ["Tom had a red ball.", "The sky was blue and"], "continuation": "He played with it.", "gold": 0})"
      << "\n";
  for (const std::string& name : std::vector<std::string>{"arc_easy", "piqa", dir / "schema.jsonl"}) {
    SCOPED_TRACE(name);
    auto path = resolve_task(name, default_tasks_dir());
    ASSERT_TRUE(path.is_ok()) << path.status().message();
    McTask task = load_task(path.value(), std::nullopt, 12).value();
    McOptions opt;
    opt.n_threads = 1;
    opt.n_batch = 300;  // several decodes, items packed several to a batch
    opt.n_seq = 16;
    auto res = score_task(*m.value(), task, opt, nullptr);
    ASSERT_TRUE(res.is_ok()) << res.status().message();
    ASSERT_EQ(res->loglik.size(), task.items.size());
    int correct = 0;
    for (size_t i = 0; i < task.items.size(); ++i) {
      const McItem& it = task.items[i];
      int best = 0;
      for (int o = 0; o < it.n_options(); ++o) {
        const double ref =
            direct_loglik(*m.value(), *ctx.value(), it.context(o) + task.delimiter, it.continuation(o));
        // llama.cpp's flash attention over a shared (unified) KV cache rounds slightly differently
        // with a cell's offset (~1e-5/token); a wrong row or sequence would be off by nats.
        EXPECT_NEAR(res->loglik[i][o], ref, 5e-3 + 1e-3 * std::fabs(ref)) << "item " << i << " option " << o;
        EXPECT_LT(res->loglik[i][o], 0.0);
        if (res->loglik[i][o] > res->loglik[i][best]) best = o;
      }
      correct += best == it.gold;
    }
    EXPECT_DOUBLE_EQ(res->acc, double(correct) / task.items.size());
  }
}

// gamma.eval as earlier gammas wrote it (results/ in this repository): read and written again,
// byte for byte, for a KLD + perplexity eval and a tasks-only one.
TEST(EvalResultFormat, RoundTripsFilesOfEarlierVersions) {
  const std::string repo = std::filesystem::path(__FILE__).parent_path().parent_path().string();
  for (const char* f : {"results/iq_qwen/evals/llama-IQ3_XS.wiki.json", "results/sweep_qwen/evals/gammasl-size-Q4_K_M.mc100.json",
                        "results/zeroshot_qwen/evals/teacher.boolq.json",  // with per-item results
                        "results/iq_qwen/evals/gammad-size-Q3_K_S-fit-hc.wv.json"}) {  // with per-chunk KLD
    const std::string path = repo + "/" + f;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
    auto r = EvalResult::load(path);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->to_json().dump(1) + "\n", read_file(path).value()) << f;
    auto again = EvalResult::from_json(r->to_json());
    ASSERT_TRUE(again.is_ok()) << again.status().message();
    EXPECT_EQ(again->to_json(), r->to_json());
  }
  const EvalResult kl = EvalResult::load(repo + "/results/iq_qwen/evals/llama-IQ3_XS.wiki.json").value();
  ASSERT_TRUE(kl.kld && kl.kld->mean && kl.perplexity && kl.settings.text);
  EXPECT_GT(*kl.kld->mean, 0.0);
  EXPECT_FALSE(kl.tasks);
  const EvalResult pc = EvalResult::load(repo + "/results/iq_qwen/evals/gammad-size-Q3_K_S-fit-hc.wv.json").value();
  ASSERT_TRUE(pc.kld && pc.kld->chunk_means && pc.settings.chunks);
  EXPECT_EQ(pc.kld->chunk_means->size(), *pc.settings.chunks);
  EXPECT_NEAR(std::accumulate(pc.kld->chunk_means->begin(), pc.kld->chunk_means->end(), 0.0) / double(*pc.settings.chunks),
              *pc.kld->mean, 1e-6 * *pc.kld->mean);
  EXPECT_FALSE(kl.kld->chunk_means);  // written by earlier gammas: absent, and written back absent
  const EvalResult zs = EvalResult::load(repo + "/results/zeroshot_qwen/evals/teacher.boolq.json").value();
  const EvalResult::Task* bq = zs.task("boolq");
  ASSERT_TRUE(bq && bq->correct && bq->n && bq->acc);
  EXPECT_EQ(bq->correct->size(), *bq->n);
  EXPECT_DOUBLE_EQ(double(std::count(bq->correct->begin(), bq->correct->end(), '1')) / double(*bq->n), *bq->acc);
}

TEST(EvalResultFormat, BadFieldIsCorruptAndNamed) {
  TempDir t;
  json j = json_header(EvalResult::kSchema, EvalResult::kVersion);
  j["model"] = {{"path", "m.gguf"}, {"file_bytes", 100}};
  j["kld"] = {{"mean", 0.01}, {"delta_p", {{"mean", 0.0}}}};
  EXPECT_TRUE(EvalResult::from_json(j).is_ok());
  for (auto [field, bad, needle] : {std::tuple{"/kld/mean", json("small"), "field 'kld.mean' is not a number"},
                                    {"/kld/delta_p/mean", json(true), "field 'kld.delta_p.mean' is not a number"},
                                    {"/model/file_bytes", json(-5), "field 'model.file_bytes' is negative"},
                                    {"/model/path", json(3), "field 'model.path' is not a string"},
                                    {"/kld/chunk_means", json::array({0.1, "x"}), "field 'kld.chunk_means' holds an element that is not a finite number"},
                                    {"/tasks", json(1), "field 'tasks' is not an object"}}) {
    json b = j;
    b[json::json_pointer(field)] = bad;
    const std::string path = t / "bad.json";
    ASSERT_TRUE(write_json(path, b).is_ok());
    auto r = EvalResult::load(path);
    ASSERT_FALSE(r.is_ok()) << field;
    EXPECT_EQ(r.status().code(), Status::Code::kCorrupt) << field;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind(path, 0), 0u) << r.status().message();
  }
}

}  // namespace
}  // namespace gm::eval
