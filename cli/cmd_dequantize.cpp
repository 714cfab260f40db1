// gamma dequantize: the FP teacher (F32/F16) of a quantized GGUF; with --dither, a
// de-gridded one (a full-precision pre-image of the quantized file: emit/dequantize.h).
#include <cstdio>

#include "cli/command.h"
#include "emit/dequantize.h"

namespace gm::cli {
namespace {

void add_dequantize(CLI::App& app) {
  struct Opts { std::string in, out; DequantizeOptions d; uint64_t seed = 0; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("dequantize", "write the FP teacher (F32/F16) of a quantized GGUF");
  c->add_option("model", o->in, "quantized GGUF")->required();
  c->add_option("-o,--output", o->out, "teacher GGUF to write")->required();
  c->add_option("--type", o->d.type, "f32 or f16")->check(CLI::IsMember({"f32", "f16", "F32", "F16"}));
  auto* dither = c->add_option("--dither", o->seed,
                               "de-grid with this seed: each weight drawn inside its quantization bin, so no GGUF "
                               "type holds the teacher exactly (a stand-in for the full-precision model)");
  c->add_option("--dither-width", o->d.dither_width, "share of each bin the dither draws from, centred (0, 1]")
      ->capture_default_str();
  c->callback([o, dither] {
    if (dither->count()) o->d.dither_seed = o->seed;
    auto r = dequantize_model(o->in, o->out, o->d);
    fail_if(r.status());
    if (o->d.dither_seed) {
      std::printf("de-gridded with seed %llu; quantized back to the source's type (no imatrix):\n",
                  (unsigned long long)o->seed);
      for (const auto& [type, c] : r->by_type)
        std::printf("  %-6s %12llu weights, %8.4f %% at the source's code (the source itself: %8.4f %%)\n",
                    type.c_str(), (unsigned long long)c.dithered, 100.0 * double(c.codes_returned) / double(c.dithered),
                    100.0 * double(c.grid_returned) / double(c.dithered));
    }
    std::printf("%s\n", o->out.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(12, add_dequantize);
}  // namespace gm::cli
