// The GGUF reader without a model load: the header pre-check, gguf.h's parse, the tensor
// directory against the file's size, the linear modules found by name, the fingerprint and
// inspect's description; no tensor data is read, so an input costs microseconds and the
// fuzzer explores layouts (MoE, fused, MLA, gemma3 seeds: fuzz/gguf_seeds.cpp) at speed.
// fuzz_gguf adds the data reads (dequantization) at a far lower rate.
#include "fuzz/fuzz_input.h"
#include "gguf_model/inspect.h"
#include "gguf_model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gm::fuzz::write_input(data, size, "header.gguf");
  auto m = gm::Model::open(path);
  if (m.is_ok()) (void)gm::describe_model(**m, path);
  return 0;
}
