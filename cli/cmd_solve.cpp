// gamma solve: Stage II. Scores + pool + budget -> the plan with the highest total score
// that fits, proven optimal (or with its gap reported); --sweep writes one plan per budget
// and the Pareto front.
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "solve/request.h"
#include "speed/memory.h"
#include "util/files.h"
#include "util/threads.h"

namespace gm::cli {
namespace {

struct SolveOpts {
  std::string pool, scores, out, bpw, size, sweep;
  bool from_manifest = false, require_optimal = false;
  std::vector<std::string> allow, pin, fixed;
  double time_limit = 60;
  double fill = 0;
  std::string transform = "score";
  std::string layer_scale;
  std::string blend;
  std::string choose_head;
  std::string speed;
  std::string min_decode, min_prefill;
  std::string memory, kv_type, memory_source;
  int ctx = 0, threads = 0;
};

void report(const solve::Allocation& a, const std::string& path, bool require_optimal) {
  const auto& s = a.solution;
  std::printf("%s: %s -> linear %.4f bpw, file %s; score %.9g, %s (gap %.3g) in %.2f ms\n", path.c_str(),
              a.budget.describe().c_str(), a.size.linear_bpw, solve::format_size(a.size.file_bytes).c_str(), s.score,
              s.optimal ? "optimal" : "NOT proven optimal", s.gap(), s.seconds * 1e3);
  if (a.plan.info.contains("speed"))
    std::printf("%s: predicted tg128 %.2f tok/s, pp512 %.2f tok/s on this machine\n", path.c_str(),
                a.plan.info["speed"].value("predicted_tg128", 0.0), a.plan.info["speed"].value("predicted_pp512", 0.0));
  if (!s.optimal && !require_optimal)
    std::fprintf(stderr, "gamma: warning: %s: not proven optimal within the limits; best found %.9g, upper bound %.9g\n",
                 path.c_str(), s.score, s.upper_bound);
}

void run_solve(const SolveOpts& o) {
  if (o.pool.empty()) throw Failure("give the pool directory (gamma solve POOL ...)");
  const int budgets = !o.bpw.empty() + (!o.size.empty() || !o.memory.empty()) + !o.sweep.empty();
  if (budgets != 1) throw Failure("give exactly one budget: --bpw X, --size BYTES (and/or --memory BYTES --ctx N) or --sweep START:STOP:STEP");
  if (!o.memory.empty() != (o.ctx > 0))
    throw Failure("--memory and --ctx go together: the memory holds the weights and the KV cache of --ctx tokens");
  if (!o.memory_source.empty() && o.memory.empty()) throw Failure("--memory-source goes with --memory");
  if (o.scores.empty() == !o.from_manifest) throw Failure("give exactly one of --scores FILE or --score-from-manifest");

  // Everything is parsed and checked before anything is solved or written.
  solve::Request r;
  r.scores = o.scores;
  r.transform = o.transform;
  r.blend = o.blend;
  r.layer_scale = o.layer_scale;
  r.choose_head = o.choose_head;
  r.fill = o.fill;
  r.speed = o.speed;
  r.min_decode = o.min_decode;
  r.min_prefill = o.min_prefill;
  r.knapsack.max_seconds = o.time_limit;
  uint64_t memory = 0;
  if (!o.memory.empty()) {
    auto m = solve::parse_size(o.memory);
    if (!m.is_ok()) fail_if(m.status().with_context("--memory"));
    memory = *m;
  }
  r.memory_bytes = memory;
  if (!o.bpw.empty()) r.budget = solve::Budget::of_bpw(value_or_fail(solve::parse_bpw(o.bpw)));
  else if (!o.size.empty()) r.budget = solve::Budget::of_file_bytes(value_or_fail(solve::parse_size(o.size)));
  // --memory alone: the file is at most the memory (the memory budget is the real bound).
  else if (memory) r.budget = solve::Budget::of_file_bytes(memory);
  else r.sweep = value_or_fail(solve::parse_sweep(o.sweep));
  fail_if(r.check());
  for (const auto& s : o.allow) r.constraints.push_back(value_or_fail(solve::parse_constraint(solve::Constraint::Kind::kAllow, s)));
  for (const auto& s : o.pin) r.constraints.push_back(value_or_fail(solve::parse_constraint(solve::Constraint::Kind::kPin, s)));
  for (const auto& f : o.fixed) {
    const auto eq = f.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == f.size())
      throw Failure(fmt::format("--fixed '{}': expected TENSOR=TYPE, e.g. token_embd.weight=Q6_K", f));
    r.fixed[f.substr(0, eq)] = f.substr(eq + 1);
  }
  std::string out = o.out;
  while (!r.sweep.empty() && out.size() > 1 && out.back() == '/') out.pop_back();
  fail_if(check_writable_dir(out));

  Manifest m = value_or_fail(Manifest::load(o.pool));
  speed::MemoryUse source_memory;
  if (memory) {
    // The device budget: what llama.cpp allocates beside the weights at --ctx, measured on the
    // pool's source (speed/memory.h), solved as one more budget beside the bytes; or as a caller
    // measured it once for many solves (gamma run).
    if (!o.memory_source.empty()) {
      const uint64_t source_bytes = value_or_fail(file_size(m.model_path));
      auto u = speed::load_memory_use(o.memory_source, o.ctx, o.kv_type, source_bytes);
      if (!u.is_ok()) fail_if(u.status().with_context("--memory-source"));
      source_memory = *u;
    } else {
      source_memory = value_or_fail(speed::memory_use(m.model_path, o.ctx, o.kv_type, resolve_threads(o.threads)));
    }
    r.memory_source = &source_memory;
    std::printf("memory %s at %d tokens of context: KV cache %s, compute buffers %s (llama.cpp's, on the source)\n",
                solve::format_size(memory).c_str(), o.ctx, solve::format_size(source_memory.context).c_str(),
                solve::format_size(source_memory.compute).c_str());
  }
  solve::Outcome res = value_or_fail(solve::solve_request(m, r));
  for (const auto& a : res.plans)
    if (o.require_optimal && !a.solution.optimal)
      throw Failure(fmt::format("{}: not proven optimal within --time-limit (gap {:.3g}); nothing written",
                                a.budget.describe(), a.solution.gap()));
  if (r.sweep.empty()) {
    const auto& a = res.plans.front();
    fail_if(a.plan.save(out));
    report(a, out, o.require_optimal);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw Failure(fmt::format("cannot create {}: {}", out, ec.message()));
  for (size_t k = 0; k < res.plans.size(); ++k) fail_if(res.plans[k].plan.save(out + "/" + res.names[k]));
  const std::string front = out + "/pareto.json";
  fail_if(write_json(front, res.pareto));
  double total = 0;
  size_t optimal = 0;
  for (const auto& a : res.plans) total += a.solution.seconds, optimal += a.solution.optimal;
  std::printf("%s: %zu plans (%zu proven optimal) from %.4g to %.4g bpw in %.1f ms; Pareto front %s\n", out.c_str(),
              res.plans.size(), optimal, r.sweep.front(), r.sweep.back(), total * 1e3, front.c_str());
  for (const auto& a : res.plans)
    if (!a.solution.optimal)
      std::fprintf(stderr, "gamma: warning: %s: not proven optimal; best found %.9g, upper bound %.9g\n",
                   a.budget.describe().c_str(), a.solution.score, a.solution.upper_bound);
}

void add_solve(CLI::App& app) {
  auto o = std::make_shared<SolveOpts>();
  auto* c = app.add_subcommand("solve", "Stage II: the best plan within a budget (exact knapsack over the scores)");
  // The pool is positional, as in plan, emit, learn and hawq; --pool stays as its alias.
  auto* pos = c->add_option("pool", o->pool, "pool directory");
  auto* flag = c->add_option("--pool", o->pool, "pool directory (same as the positional)");
  pos->excludes(flag);
  c->add_option("--scores", o->scores, "SCORES.json (gamma.scores): score[module][candidate], higher is better");
  c->add_flag("--score-from-manifest", o->from_manifest, "score = -rel_err from the pool manifest");
  c->add_option("--bpw", o->bpw, "budget: bits per weight over the linear modules (scales included)");
  c->add_option("--size", o->size, "budget: the whole GGUF file, e.g. 900MiB, 1.2GB, 123456");
  c->add_option("--sweep", o->sweep, "budgets START:STOP:STEP in bpw; -o is then a directory of plans + pareto.json");
  c->add_option("--allow", o->allow, "PATTERN=ID[,ID...]: modules matching PATTERN (regex) use only these candidates");
  c->add_option("--pin", o->pin, "PATTERN=ID: modules matching PATTERN (regex) use this candidate");
  c->add_option("--fixed", o->fixed, "TENSOR=TYPE: a non-linear tensor (token_embd.weight, output.weight) at TYPE instead of llama.cpp's default; the budget pays for it");
  c->add_option("--time-limit", o->time_limit, "seconds per budget before giving up the proof (gap reported)");
  c->add_option("--transform", o->transform, "score, log, size-log, delta or delta-fit: solve on log p or size-weighted log p of probability scores (Stage I's p), on -delta, Stage I's measured loss change (gamma learn --measure-every), or on delta-fit, each module's measured deltas fitted as a line in the pool's rel_err (the slope is the module's sensitivity)")->capture_default_str();
  c->add_option("--blend", o->blend, "SCORES.json of a second scorer (e.g. gamma hawq): after --transform, each candidate's cost is the geometric mean of the two scorers' costs above their module's best candidate");
  c->add_option("--layer-scale", o->layer_scale, "LAYERS.json (gamma layers): after --transform, rescale each layer's scores so that taking it from the source's types to the measured low type costs its measured KLD");
  c->add_option("--choose-head", o->choose_head, "LAYERS.json (gamma layers --head): choose the output head and embedding among the types it measured, each combination solved exactly, the least predicted KLD kept (its measured cost plus the body's scores in KLD units, by the same file's layers); with --size");
  c->add_option("--fill", o->fill, "spend at least this fraction of the budget (e.g. 0.995): scores reused away from their learned target");
  c->add_option("--speed", o->speed, "SPEED.json (gamma speed --pool): record each plan's predicted tokens/s on the machine it was measured on; with --size");
  c->add_option("--min-decode", o->min_decode, "tokens/s the plan must decode at (llama-bench tg128, as the speed table predicts it), or a GGUF of the model: at least as fast as that file by the same table");
  c->add_option("--min-prefill", o->min_prefill, "tokens/s the plan must process prompts at (llama-bench pp512, as the speed table predicts it), or a GGUF of the model");
  c->add_option("--memory", o->memory, "device budget: the memory llama.cpp may take to run the file (weights, KV cache at --ctx, compute buffers), e.g. 2GiB; with or instead of --size");
  c->add_option("--ctx,--memory-ctx", o->ctx, "with --memory: the context the file must run with (tokens)");
  c->add_option("--kv-type", o->kv_type, "with --memory: the KV cache's type (f16, llama.cpp's default; q8_0, q4_0, ...)");
  c->add_option("-t,--threads", o->threads, "with --memory: threads of the context measured (default: all cores)");
  c->add_option("--memory-source", o->memory_source, "with --memory: the source's allocation as measured before (gamma.memory JSON, e.g. gamma run's), instead of measuring it again");
  c->add_flag("--require-optimal", o->require_optimal, "fail (write nothing) unless every plan is proven optimal");
  c->add_option("-o,--output", o->out, "plan JSON to write (a directory with --sweep)")->required();
  c->callback([o] { run_solve(*o); });
}

}  // namespace
GAMMA_COMMAND(50, add_solve);
}  // namespace gm::cli
