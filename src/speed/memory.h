// The device budget (--memory BYTES --ctx N): what llama.cpp allocates to run a GGUF with a
// context of N tokens, read from libllama's own accounting (llama_get_memory_breakdown) after
// it created that context, the way llama-cli and llama-server would (n_batch 2048, n_ubatch 512,
// flash attention auto, mmap):
//   model    the weights' buffers (mapped file, repacked copies)
//   context  the KV cache at N tokens, in the K/V type asked for
//   compute  the graph's work buffers
// Only the model part depends on a plan's types: llama.cpp counts the mapped file's tensor data
// and, again, each weight it repacks (kernels.h, repacked()). Measured on Qwen2.5-1.5B at 8192
// tokens: Q4_K_M's model part is 1.48x its file (Q4_K and Q6_K repacked), uniform IQ3_S's 0.95x
// (nothing repacked). So a file's model part is its size plus its repacked weights' bytes less
// the metadata llama.cpp does not keep (the same for every file of the model: measured on the
// source). The context and compute parts do not depend on the types: measured on the source once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm::speed {

struct Weight;

struct MemoryUse {
  uint64_t model = 0, context = 0, compute = 0;
  uint64_t file_bytes = 0;  // the GGUF's size
  uint64_t repacked = 0;    // bytes of its weights llama.cpp repacks (held twice)
  uint64_t total() const { return model + context + compute; }
  // The file bytes llama.cpp does not keep in the model part (header, tokenizer metadata).
  int64_t metadata() const { return int64_t(file_bytes) + int64_t(repacked) - int64_t(model); }
  json to_json() const;
};

// A measured allocation kept as a file (schema gamma.memory), with what it was measured for, so
// the processes of one `gamma run` share one measurement: load fails in one line when the file
// was measured for another context, KV type or source size.
Status save_memory_use(const std::string& path, const MemoryUse& u, int n_ctx, const std::string& kv_type);
Result<MemoryUse> load_memory_use(const std::string& path, int n_ctx, const std::string& kv_type, uint64_t source_bytes);

// Bytes of the weights llama.cpp would repack.
uint64_t repacked_bytes(const std::vector<Weight>& ws);
// What llama.cpp allocates for a file of the source's model of `file_bytes` whose repacked
// weights take `repacked` bytes, at the source's context: the device budget's prediction.
double predicted_total(const MemoryUse& source, uint64_t file_bytes, uint64_t repacked);

// llama.cpp's allocation for `gguf` at `n_ctx` tokens of context (`kv_type`: a ggml type name,
// "" for llama.cpp's default F16). Loads the model (mmap) and creates a context.
Result<MemoryUse> memory_use(const std::string& gguf, int n_ctx, const std::string& kv_type, int threads);

// What `memory` bytes leave for the file and its repacked copies (file bytes + repacked bytes)
// at the source's context. Fails when not even the context fits, naming what it takes.
Result<uint64_t> weights_room(const MemoryUse& source, uint64_t memory);

}  // namespace gm::speed
