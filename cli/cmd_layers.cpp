// gamma layers: each layer's measured sensitivity (src/layers), for gamma solve --layer-scale.
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "layers/layers.h"

namespace gm::cli {
namespace {

void add_layers(CLI::App& app) {
  auto o = std::make_shared<layers::LayersOptions>();
  auto* c = app.add_subcommand("layers",
                               "measure each layer's sensitivity: KLD vs the teacher with one layer at a low type, the rest "
                               "at the source's (for gamma solve --layer-scale; resumable)");
  c->add_option("pool", o->pool, "pool directory")->required();
  c->add_option("--teacher", o->teacher, "the F32 teacher GGUF")->required();
  c->add_option("--calib", o->text, "calibration text the KLD is measured on (never the report or validation text)")->required();
  c->add_option("--kld-base", o->kld_base, "the teacher's log-probs on --calib (default OUT.teacher.kld; written once)");
  c->add_option("--low", o->low, "the candidate each layer is taken to (auto: Q2_K where a module has it, else the module's cheapest; a module without it stays at the source's type)")
      ->capture_default_str();
  c->add_option("--head", o->heads, "TENSOR=TYPE[,TYPE...]: also measure this non-linear tensor (output.weight, token_embd.weight) alone at each TYPE, the rest at the source's types (for gamma solve --choose-head)");
  c->add_option("-c,--ctx", o->n_ctx, "tokens per chunk")->capture_default_str();
  c->add_option("--chunks", o->chunks, "chunks of --calib per file")->capture_default_str();
  c->add_option("--tmp-dir", o->tmp_dir, "where each layer's GGUF is written and evaluated (default: OUT's directory)");
  c->add_option("-t,--threads", o->threads, "threads (default: all cores)");
  c->add_flag("-q,--quiet", o->quiet, "no line per layer");
  c->add_option("-o,--output", o->out, "LAYERS.json to write (gamma.layers); OUT.partial.json holds the progress")->required();
  c->callback([o] {
    if (o->kld_base.empty()) o->kld_base = o->out + ".teacher.kld";
    const layers::LayersResult r = value_or_fail(layers::measure_layers(*o));
    const auto& s = r.sensitivity;
    double lo = 1e300, hi = -1e300;
    for (const auto& [l, k] : s.kld) lo = std::min(lo, k - s.base_kld), hi = std::max(hi, k - s.base_kld);
    std::set<std::string> lows;
    for (const auto& [name, id] : s.low)
      if (id != s.ref.at(name)) lows.insert(id);
    fmt::print("{}: {} layers at {} (base KLD {:.6f}; each layer adds {:.6f} to {:.6f}); {} files evaluated{} in {:.0f} s\n",
               o->out, s.kld.size(), fmt::join(lows, "/"), s.base_kld, lo, hi, r.measured,
               r.resumed_from >= 0 ? fmt::format(" (resumed after {})", r.resumed_from) : "", r.seconds);
    for (const auto& [tensor, row] : s.head_kld) {
      std::vector<std::string> parts;
      for (const auto& [type, k] : row) parts.push_back(fmt::format("{} {:+.6f}", type, k - s.base_kld));
      fmt::print("  {} (source {}): {}\n", tensor, s.head_ref.at(tensor), fmt::join(parts, ", "));
    }
  });
}

}  // namespace
GAMMA_COMMAND(52, add_layers);
}  // namespace gm::cli
