// gamma emit: the mixed-precision GGUF of a plan (+ OUT.tensor-types.txt).
#include <cstdio>

#include "cli/command.h"
#include "emit/emit.h"

namespace gm::cli {
namespace {

void add_emit(CLI::App& app) {
  struct Opts { std::string pool, plan, out; int threads = 0; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("emit", "write the mixed-precision GGUF of a plan (+ OUT.tensor-types.txt)");
  c->add_option("pool", o->pool, "pool directory")->required();
  c->add_option("plan", o->plan, "plan JSON")->required();
  c->add_option("-o,--output", o->out, "GGUF to write")->required();
  c->add_option("-t,--threads", o->threads, "worker threads (default: all cores)");
  c->callback([o] {
    Plan p = value_or_fail(Plan::load(o->plan));
    EmitResult r = value_or_fail(emit(o->pool, p, o->out, o->threads));
    std::printf("%s: %llu bytes, linear %.4f bpw; recipe %s\n", o->out.c_str(), (unsigned long long)r.file_bytes,
                r.linear_bpw, r.tensor_types_path.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(80, add_emit);
}  // namespace gm::cli
