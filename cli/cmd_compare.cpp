// gamma compare: two files (or two plans of one pool) on the same chunks against one teacher:
// each one's KLD, their paired per-chunk difference with its error, and the tensors whose types
// differ (src/eval/compare.h).
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "emit/emit.h"
#include "eval/compare.h"
#include "eval/eval.h"
#include "plan/plan.h"
#include "util/files.h"
#include "util/json.h"

namespace gm::cli {
namespace {

struct CompareOpts {
  std::string a, b, teacher, text, pool, kld_base, out;
  int ctx = 512, chunks = 16, threads = 0;
  bool quiet = false;
};

// A scratch directory for emitted plans, removed on every exit path. Beside the output (or in
// the working directory): an emitted model is as large as the files compared.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& near) {
    std::string tmpl = (near.empty() ? std::string(".") : near) + "/.gamma-compare.XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw Failure(fmt::format("cannot create a scratch directory in {}", near));
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool is_plan(const std::string& path) { return path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0; }

// The GGUF of an input: itself, or its plan emitted into `tmp` (removed with it).
std::string gguf_of(const CompareOpts& o, const std::string& input, const std::string& tmp, const char* tag) {
  if (!is_plan(input)) return input;
  if (o.pool.empty()) throw Failure(fmt::format("{} is a plan: give the pool it was made from (--pool)", input));
  const std::string out = tmp + "/" + tag + ".gguf";
  value_or_fail(emit(o.pool, value_or_fail(Plan::load(input)), out, o.threads));
  return out;
}

eval::EvalResult measure(const CompareOpts& o, const std::string& gguf) {
  eval::EvalRequest req;
  req.model = gguf;
  req.teacher = o.teacher;
  req.kld_base = o.kld_base;
  req.text = o.text;
  req.n_ctx = o.ctx;
  req.n_chunks = o.chunks;
  req.n_threads = o.threads;
  req.progress = !o.quiet;
  return value_or_fail(eval::run_eval(req));
}

void run_compare(const CompareOpts& o) {
  if (o.chunks < 2) throw Failure("--chunks must be at least 2 (a paired error needs two chunks)");
  for (const auto& f : {o.a, o.b, o.teacher, o.text})
    if (!file_exists(f)) throw Failure(fmt::format("{}: no such file", f));
  if (!o.out.empty()) fail_if(check_writable_dir(o.out));
  std::string near = o.out.empty() ? "." : std::filesystem::path(o.out).parent_path().string();
  ScratchDir tmp(near.empty() ? "." : near);
  const std::string ga = gguf_of(o, o.a, tmp.path(), "a"), gb = gguf_of(o, o.b, tmp.path(), "b");
  const eval::EvalResult ea = measure(o, ga), eb = measure(o, gb);
  const eval::PairedDiff d = value_or_fail(eval::paired_difference(ea, eb));
  const auto diffs = value_or_fail(eval::type_differences(ga, gb));

  const double sa = *ea.kld->mean, sb = *eb.kld->mean;
  std::printf("%d chunks of %d tokens of %s, KLD vs %s:\n", int(d.n), o.ctx,
              std::filesystem::path(o.text).filename().c_str(), std::filesystem::path(o.teacher).filename().c_str());
  std::printf("  A %-50s %12llu bytes  KLD %.6f ± %.6f\n", o.a.c_str(), (unsigned long long)*ea.model.file_bytes, sa,
              *ea.kld->mean_stderr);
  std::printf("  B %-50s %12llu bytes  KLD %.6f ± %.6f\n", o.b.c_str(), (unsigned long long)*eb.model.file_bytes, sb,
              *eb.kld->mean_stderr);
  const bool tie = std::fabs(d.mean) <= 2 * d.stderr_;
  std::printf("  A - B, paired by chunk: %+.6f ± %.6f (%s)\n", d.mean, d.stderr_,
              tie ? "within 2 errors: a tie" : d.mean < 0 ? "A is lower" : "B is lower");
  std::printf("%zu tensors differ in type:\n", diffs.size());
  for (const auto& t : diffs) std::printf("  %-36s %-8s -> %s\n", t.tensor.c_str(), t.type_a.c_str(), t.type_b.c_str());
  if (o.out.empty()) return;
  json j = json_header("gamma.compare", 1);
  j["text"] = o.text;
  j["teacher"] = o.teacher;
  j["ctx"] = o.ctx;
  j["chunks"] = d.n;
  auto side = [](const std::string& in, const eval::EvalResult& e) {
    return json{{"input", in}, {"file_bytes", *e.model.file_bytes}, {"kld_mean", *e.kld->mean},
                {"kld_stderr", *e.kld->mean_stderr}, {"chunk_means", *e.kld->chunk_means}};
  };
  j["a"] = side(o.a, ea);
  j["b"] = side(o.b, eb);
  j["a_minus_b"] = {{"mean", d.mean}, {"stderr", d.stderr_}, {"tie", tie}};
  j["type_differences"] = json::array();
  for (const auto& t : diffs) j["type_differences"].push_back({{"tensor", t.tensor}, {"a", t.type_a}, {"b", t.type_b}});
  fail_if(write_json(o.out, j));
}

void add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOpts>();
  auto* c = app.add_subcommand("compare",
                               "two files (or plans) on the same chunks: each one's KLD vs the teacher, their paired "
                               "per-chunk difference with its error, and the tensors whose types differ");
  c->add_option("a", o->a, "GGUF, or a plan JSON (with --pool)")->required();
  c->add_option("b", o->b, "GGUF, or a plan JSON (with --pool)")->required();
  c->add_option("--teacher", o->teacher, "teacher GGUF")->required();
  c->add_option("-f,--text", o->text, "text both are measured on")->required();
  c->add_option("-c,--ctx", o->ctx, "tokens per chunk")->capture_default_str();
  c->add_option("--chunks", o->chunks, "chunks (the same for both)")->capture_default_str();
  c->add_option("--pool", o->pool, "pool directory the plans were made from");
  c->add_option("--kld-base", o->kld_base, "the teacher's log-probs (llama-perplexity's base file): read if there, else written");
  c->add_option("-t,--threads", o->threads, "threads (default: all cores)");
  c->add_option("-o,--output", o->out, "comparison JSON (gamma.compare v1)");
  c->add_flag("-q,--quiet", o->quiet, "no progress bars");
  c->callback([o] { run_compare(*o); });
}

}  // namespace
GAMMA_COMMAND(75, add_compare);
}  // namespace gm::cli
