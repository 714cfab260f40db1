// gamma pool: the candidate pool (src/pool).
#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "pool/pool.h"

namespace gm::cli {
namespace {

void add_pool(CLI::App& app) {
  struct Opts { PoolOptions p; std::string only; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("pool", "quantize every linear module at every candidate type (resumable)");
  c->add_option("model", o->p.model_path, "source GGUF (quantized or FP)")->required();
  o->p.types = {"auto"};
  c->add_option("--types", o->p.types,
                "candidate ggml types, comma-separated, or auto: the measured Pareto set (docs/design.md, gamma inspect POOL) that fits the model, "
                "or auto-speed: auto and the types that decode faster than those that dominate them (Q3_K, Q4_0), for a speed budget")
      ->delimiter(',')->capture_default_str();
  c->add_option("--imatrix", o->p.imatrix_path, "llama-imatrix output used as importance (as llama-quantize does)");
  c->add_option("--import", o->p.imports, "add candidates from another GGUF of the same model: PATH[:LABEL]");
  c->add_option("-o,--output", o->p.out_dir, "pool directory")->required();
  c->add_option("--estimate-rows", o->p.estimate_rows,
                "write an estimate instead: exact sizes, errors from N sampled rows per module, no candidate files "
                "(gamma solve and gamma hawq read it; gamma run chooses the real pool's candidates with it)")
      ->check(CLI::PositiveNumber);
  c->add_flag("--stream", o->p.stream,
              "a streamed pool: the estimate's manifest (--estimate-rows, default 128), no candidate files; Stage I, "
              "HAWQ-V2 and emit make each candidate from the source when they need it, the bytes a stored pool holds");
  c->add_option("--only", o->only, "quantize only the candidate types this file lists per module (gamma.pool.only; "
                                   "modules it does not name take every type)");
  c->add_option("-t,--threads", o->p.n_threads, "worker threads (default: all cores)");
  c->add_flag("-q,--quiet", o->p.quiet, "no progress bar");
  c->callback([o] {
    o->p.types.erase(std::remove(o->p.types.begin(), o->p.types.end(), std::string()), o->p.types.end());
    if (!o->only.empty()) o->p.only = value_or_fail(load_only(o->only));
    if (o->p.stream && o->p.estimate_rows == 0) o->p.estimate_rows = 128;
    o->p.save_estimate = o->p.estimate_rows > 0;
    Manifest m = value_or_fail(build_pool(o->p));
    size_t n = 0;
    for (const auto& e : m.modules) n += e.candidates.size();
    std::string types;
    for (const auto& t : m.types) types += (types.empty() ? "" : ",") + t;
    std::printf("%s: %zu modules, %zu candidates%s%s, types %s\n", (m.dir + "/manifest.json").c_str(), m.modules.size(),
                n, m.streamed ? ", streamed" : "",
                m.estimate_rows > 0 ? (" (estimated from " + std::to_string(m.estimate_rows) + " rows each)").c_str() : "",
                types.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(20, add_pool);
}  // namespace gm::cli
