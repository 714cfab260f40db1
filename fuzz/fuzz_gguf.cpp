// The GGUF reader as gamma uses it (inspect, pool, learn, emit open models this way): open,
// describe (inspect's totals and candidate types), and read every small tensor dequantized.
// Any input must give a model or one error, never a crash or a read outside the file.
#include "fuzz/fuzz_input.h"
#include "gguf_model/inspect.h"
#include "gguf_model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gm::fuzz::write_input(data, size, "model.gguf");
  auto m = gm::Model::open(path);
  if (!m.is_ok()) return 0;
  (void)gm::describe_model(**m, path);
  for (const auto& t : (*m)->tensors())
    if (t.nbytes <= (1u << 20)) (void)(*m)->read_f32(t);
  return 0;
}
