// The importance-matrix reader (pool --imatrix): llama.cpp's common_imatrix_load behind
// gamma's checks. Any input must give an imatrix or one error.
#include "fuzz/fuzz_input.h"
#include "pool/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)gm::load_imatrix(gm::fuzz::write_input(data, size, "imatrix.gguf"));
  return 0;
}
