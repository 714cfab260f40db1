// gamma run: the main job end to end (src/run/run.h): fetch, teacher, imatrix, pool, learn,
// solve, emit, then gamma's model beside the llama.cpp standard mix nearest in size.
#include <filesystem>

#include "cli/command.h"
#include "run/run.h"
#include "util/files.h"

namespace gm::cli {
namespace {

void add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* c = app.add_subcommand("run", "the whole job: fetch -> pool -> learn -> solve -> emit -> compare with llama.cpp's mix (resumable)");
  c->add_option("model", o->model, "registry name (see gamma fetch) or a GGUF path")->capture_default_str();
  c->add_option("--bpw", o->bpw, "target bits per weight of the linear modules")->capture_default_str();
  c->add_option("-w,--work", o->work, "work directory (every step resumes from its files there)")->capture_default_str();
  c->add_option("--types", o->types, "pool candidate types (default: gamma pool's auto, the measured Pareto set)")
      ->delimiter(',');
  c->add_option("--imatrix", o->imatrix, "auto (llama-imatrix on war-and-peace), none, or an imatrix file")->capture_default_str();
  c->add_option("--imatrix-chunks", o->imatrix_chunks, "llama-imatrix chunks for --imatrix auto")->capture_default_str();
  c->add_option("--scores", o->scores, "reuse SCORES.json (learned at any budget) instead of learning");
  c->add_option("--steps", o->steps, "gamma learn steps")->capture_default_str();
  c->add_option("--layers-per-step", o->layers_per_step, "gamma learn layers sampled per step (0: all)")->capture_default_str();
  c->add_option("--calib-tokens", o->calib_tokens, "gamma learn calibration tokens")->capture_default_str();
  c->add_option("--compare", o->compare, "auto (llama.cpp mix nearest in size), none, or a mix such as Q3_K_M")->capture_default_str();
  c->add_option("--text", o->eval_text, "evaluation text (default: wiki.test.raw of the shared data)");
  c->add_option("--valid-text", o->valid_text, "text that chooses among the solved plans (default: wiki.valid.tokens)");
  c->add_option("-c,--ctx", o->eval_ctx, "evaluation (and imatrix) chunk length")->capture_default_str();
  c->add_option("--chunks", o->eval_chunks, "evaluation chunks")->capture_default_str();
  c->add_option("-t,--threads", o->threads, "threads (default: all cores)");
  c->callback([o] {
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw Failure("cannot locate the gamma executable");
    o->gamma_exe = exe;
    if (o->llama_bin.empty()) {
      const char* env = std::getenv("GAMMA_LLAMA_BIN");
      o->llama_bin = env && *env ? env : exe_dir() + "/../bin";  // build/cli/gamma, build/bin/llama-*
    }
    if (!(o->bpw > 0 && o->bpw < 32)) throw Failure("--bpw must be between 0 and 32");
    if (o->eval_chunks < 1 || o->eval_ctx < 8 || o->imatrix_chunks < 1 || o->steps < 1)
      throw Failure("--chunks, --ctx, --imatrix-chunks and --steps must be positive");
    fail_if(run_pipeline(*o));
  });
}

}  // namespace
GAMMA_COMMAND(5, add_run);
}  // namespace gm::cli
