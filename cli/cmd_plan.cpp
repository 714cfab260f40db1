// gamma plan: a plan without learning (--uniform TYPE).
#include <cstdio>

#include "cli/command.h"
#include "plan/plan.h"

namespace gm::cli {
namespace {

void add_plan(CLI::App& app) {
  struct Opts { std::string pool, uniform, from_gguf, out; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("plan", "write a plan without learning: --uniform TYPE, or --from-gguf FILE (its per-tensor types)");
  c->add_option("pool", o->pool, "pool directory")->required();
  auto* u = c->add_option("--uniform", o->uniform, "every linear module at this type");
  auto* g = c->add_option("--from-gguf", o->from_gguf,
                          "the per-tensor types of this GGUF of the same model (e.g. a llama.cpp mix), re-made from the "
                          "pool's candidates: the fair control for gamma's plans");
  u->excludes(g);
  c->add_option("-o,--output", o->out, "plan JSON to write")->required();
  c->callback([o, u, g] {
    if (u->count() + g->count() != 1) throw Failure("give --uniform TYPE or --from-gguf FILE");
    Manifest m = value_or_fail(Manifest::load(o->pool));
    Plan p = value_or_fail(o->uniform.empty() ? plan_from_gguf(m, o->from_gguf) : uniform_plan(m, o->uniform));
    fail_if(p.save(o->out));
    PlanSize s = plan_size(m, p);
    const std::string what = o->uniform.empty() ? "the types of " + o->from_gguf : "uniform " + o->uniform;
    std::printf("%s: %s, linear %.4f bpw, file %llu bytes\n", o->out.c_str(), what.c_str(), s.linear_bpw,
                (unsigned long long)s.file_bytes);
  });
}

}  // namespace
GAMMA_COMMAND(30, add_plan);
}  // namespace gm::cli
