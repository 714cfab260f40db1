// gamma eval: perplexity / KL divergence vs a teacher / zero-shot multiple choice of a GGUF,
// through libllama, figures as llama-perplexity computes them; results as gamma.eval JSON.
#include <cstdio>

#include "cli/command.h"
#include "eval/eval.h"
#include "gguf_model/model.h"
#include "util/files.h"

namespace gm::cli {
namespace {

void add_eval(CLI::App& app) {
  struct Opts {
    eval::EvalRequest req;
    std::string out;
    bool no_cache = false, quiet = false;
    std::string delimiter;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand(
      "eval", "perplexity, KL divergence vs a teacher, and zero-shot multiple choice of a GGUF (via libllama)");
  auto* model = c->add_option("model", o->req.model, "GGUF to evaluate");
  model->excludes(c->add_option("-m,--model", o->req.model, "GGUF to evaluate (llama.cpp's spelling)"));
  c->add_option("-f,--text", o->req.text, "text for perplexity/KLD (tokenized as llama-perplexity -f does)");
  c->add_option("--teacher", o->req.teacher, "teacher GGUF: adds KL divergence, top-1 agreement, delta-p");
  c->add_option("--kld-base,--kl-divergence-base", o->req.kld_base,
                "llama-perplexity --kl-divergence-base file: read if it exists, else written from --teacher");
  c->add_option("-c,--ctx", o->req.n_ctx, "tokens per chunk (default 512, or the --kld-base file's)");
  c->add_option("--chunks", o->req.n_chunks, "chunks to evaluate (default: all the text holds)");
  c->add_option("-b,--batch-size,--batch", o->req.n_batch, "tokens per decode (default 2048 = 4 chunks of 512)");
  c->add_option("--ubatch", o->req.n_ubatch,
                "physical batch (default 512 as llama-perplexity; 2048 is faster on small models)");
  c->add_option("-t,--threads", o->req.n_threads, "threads (default: all cores)");
  c->add_flag("--no-cache", o->no_cache, "do not cache/reuse the teacher's log-probs (run side by side)");
  c->add_option("--tasks", o->req.tasks, "multiple-choice tasks: names in --tasks-dir or .jsonl paths")
      ->delimiter(',');
  c->add_option("--tasks-dir", o->req.tasks_dir, "where task names are looked up (default ../shared/data/tasks)");
  c->add_option("--limit", o->req.limit, "first N items of each task");
  c->add_option("--delimiter", o->delimiter, "continuation delimiter (default: llm-foundry's per task)");
  c->add_option("-o,--output", o->out, "results JSON (gamma.eval v1)");
  c->add_flag("-q,--quiet", o->quiet, "no progress bar");
  c->callback([o, c] {
    if (o->req.model.empty()) fail_if(Status::error("give the model to evaluate (gamma eval MODEL.gguf or -m MODEL.gguf)"));
    eval::EvalRequest req = o->req;
    req.cache = !o->no_cache;
    req.progress = !o->quiet;
    if (c->count("--delimiter")) req.delimiter = o->delimiter;
    if (c->count("--limit") && req.limit < 1) fail_if(Status::error("--limit must be positive"));
    // Fail on an unwritable output before spending minutes evaluating.
    if (!o->out.empty()) fail_if(check_writable_dir(o->out));
    eval::EvalResult r = value_or_fail(eval::run_eval(req));
    // gamma's own model identity (header + tensor directory), to match pools and plans.
    if (auto m = Model::open(req.model); m.is_ok()) r.model.fingerprint = m.value()->fingerprint();
    if (!o->out.empty()) fail_if(r.save(o->out));
    std::fputs(eval::summarize(r).c_str(), stdout);
  });
}

}  // namespace
GAMMA_COMMAND(70, add_eval);
}  // namespace gm::cli
