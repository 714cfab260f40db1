// gamma plan: a plan without learning (--uniform TYPE).
#include <cstdio>

#include "cli/command.h"
#include "plan/plan.h"

namespace gm::cli {
namespace {

void add_plan(CLI::App& app) {
  struct Opts { std::string pool, uniform, out; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("plan", "write a plan without learning (--uniform TYPE)");
  c->add_option("pool", o->pool, "pool directory")->required();
  c->add_option("--uniform", o->uniform, "every linear module at this type")->required();
  c->add_option("-o,--output", o->out, "plan JSON to write")->required();
  c->callback([o] {
    Manifest m = value_or_fail(Manifest::load(o->pool));
    Plan p = value_or_fail(uniform_plan(m, o->uniform));
    fail_if(p.save(o->out));
    PlanSize s = plan_size(m, p);
    std::printf("%s: uniform %s, linear %.4f bpw, file %llu bytes\n", o->out.c_str(), o->uniform.c_str(), s.linear_bpw,
                (unsigned long long)s.file_bytes);
  });
}

}  // namespace
GAMMA_COMMAND(30, add_plan);
}  // namespace gm::cli
