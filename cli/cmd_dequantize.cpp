// gamma dequantize: the FP teacher (F32/F16) of a quantized GGUF.
#include <cstdio>

#include "cli/command.h"
#include "emit/dequantize.h"

namespace gm::cli {
namespace {

void add_dequantize(CLI::App& app) {
  struct Opts { std::string in, out, type = "f32"; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("dequantize", "write the FP teacher (F32/F16) of a quantized GGUF");
  c->add_option("model", o->in, "quantized GGUF")->required();
  c->add_option("-o,--output", o->out, "teacher GGUF to write")->required();
  c->add_option("--type", o->type, "f32 or f16")->check(CLI::IsMember({"f32", "f16", "F32", "F16"}));
  c->callback([o] {
    fail_if(dequantize_model(o->in, o->out, o->type));
    std::printf("%s\n", o->out.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(12, add_dequantize);
}  // namespace gm::cli
