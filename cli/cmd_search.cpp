// gamma search: the search-based baseline (src/search): an evolutionary search over the pool's
// assignments within a byte budget, fitness = KLD vs the teacher on calibration text.
#include <fmt/format.h>

#include "cli/command.h"
#include "search/search.h"
#include "solve/budget.h"

namespace gm::cli {
namespace {

void add_search(CLI::App& app) {
  struct Opts {
    search::SearchOptions s;
    std::string size;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("search",
                               "search baseline (AMQ/EvoPress style): evolve plans within a byte budget by their KLD vs the "
                               "teacher on calibration text (resumable)");
  c->add_option("pool", o->s.pool, "pool directory")->required();
  c->add_option("--teacher", o->s.teacher, "the F32 teacher GGUF")->required();
  c->add_option("--size", o->size, "budget: the whole file, e.g. 718MiB, 752880576")->required();
  c->add_option("--init", o->s.init, "plan(s) to start from, e.g. gamma solve's static or HAWQ-V2 plan at the size")->required();
  c->add_option("--calib", o->s.text, "calibration text the fitness is measured on (never the report text)")->required();
  c->add_option("--kld-base", o->s.kld_base, "the teacher's log-probs on --calib (default OUT.teacher.kld; written once)");
  c->add_option("-c,--ctx", o->s.n_ctx, "tokens per chunk")->capture_default_str();
  c->add_option("--chunks", o->s.chunks, "chunks the best child of a generation is measured on")->capture_default_str();
  c->add_option("--small-chunks", o->s.small_chunks, "chunks every child is ranked on")->capture_default_str();
  c->add_option("--offspring", o->s.offspring, "children per generation (lambda)")->capture_default_str();
  c->add_option("--max-switches", o->s.max_switches, "modules raised one candidate per mutation, at most")->capture_default_str();
  c->add_option("--generations", o->s.generations, "stop after this many generations in all, resumes included (0: no limit)");
  c->add_option("--wall-time", o->s.wall_seconds, "stop once this many seconds are spent in all, checked before each generation (0: no limit)");
  c->add_option("--seed", o->s.seed, "random seed")->capture_default_str();
  c->add_option("--tmp-dir", o->s.tmp_dir, "where each child GGUF is written and evaluated (default: OUT's directory; /dev/shm saves disk writes)");
  c->add_option("-t,--threads", o->s.threads, "threads (default: all cores)");
  c->add_flag("-q,--quiet", o->s.quiet, "no line per generation");
  c->add_option("-o,--output", o->s.out, "the plan to write; OUT.state.json holds the resumable state")->required();
  c->callback([o] {
    o->s.size = value_or_fail(solve::parse_size(o->size));
    if (o->s.kld_base.empty()) o->s.kld_base = o->s.out + ".teacher.kld";
    const search::SearchResult r = value_or_fail(search::run_search(o->s));
    fmt::print("{}: {} generations ({} accepted, {} evaluations, {:.0f} s{}): KLD {:.6f} on {} chunks of {}; {} bytes, linear {:.4f} bpw\n",
               o->s.out, r.generations, r.accepted, r.evaluations, r.seconds,
               r.resumed_from >= 0 ? fmt::format(", resumed at generation {}", r.resumed_from) : "", r.fitness, o->s.chunks,
               o->s.text, r.plan.info["predicted"]["file_bytes"].get<uint64_t>(), r.plan.info["predicted"]["linear_bpw"].get<double>());
  });
}

}  // namespace
GAMMA_COMMAND(55, add_search);
}  // namespace gm::cli
