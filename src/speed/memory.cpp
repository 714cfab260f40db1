#include "speed/memory.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include "llama-ext.h"  // llama_get_memory_breakdown: the sizes llama.cpp prints when it loads
#include "llama/context.h"
#include "llama/model.h"
#include "gguf_model/model.h"
#include "speed/kernels.h"
#include "speed/speed.h"

namespace gm::speed {

json MemoryUse::to_json() const {
  return {{"model", model},           {"context", context},   {"compute", compute},
          {"total", total()},         {"file_bytes", file_bytes}, {"repacked", repacked}};
}

Status save_memory_use(const std::string& path, const MemoryUse& u, int n_ctx, const std::string& kv_type) {
  json j = json_header("gamma.memory", 1);
  j["ctx"] = n_ctx;
  j["kv_type"] = kv_type.empty() ? "f16" : kv_type;
  j["use"] = u.to_json();
  return write_json(path, j);
}

Result<MemoryUse> load_memory_use(const std::string& path, int n_ctx, const std::string& kv_type, uint64_t source_bytes) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, "gamma.memory", 1));
  MemoryUse u;
  try {
    const std::string kv = kv_type.empty() ? "f16" : kv_type;
    if (j.at("ctx").get<int>() != n_ctx || j.at("kv_type").get<std::string>() != kv)
      return Status::errorf("{}: measured at {} tokens ({} KV cache), not {} ({})", path, j.at("ctx").get<int>(),
                            j.at("kv_type").get<std::string>(), n_ctx, kv);
    const json& x = j.at("use");
    u.model = x.at("model").get<uint64_t>();
    u.context = x.at("context").get<uint64_t>();
    u.compute = x.at("compute").get<uint64_t>();
    u.file_bytes = x.at("file_bytes").get<uint64_t>();
    u.repacked = x.at("repacked").get<uint64_t>();
  } catch (const json::exception& e) {
    return Status::errorf(Status::Code::kCorrupt, "{}: {}", path, e.what());
  }
  if (u.file_bytes != source_bytes)
    return Status::errorf("{}: measured on a file of {} bytes, the pool's source has {}", path, u.file_bytes, source_bytes);
  return u;
}

uint64_t repacked_bytes(const std::vector<Weight>& ws) {
  uint64_t n = 0;
  for (const auto& w : ws) {
    // The embedding is loaded for row lookups (get_rows), which no repacked layout serves: a tied
    // head stays in the mapped file.
    if (w.name == "token_embd.weight" || !repacked(w.type, w.n_in, w.n_out)) continue;
    auto t = parse_type(w.type);
    if (t.is_ok()) n += ggml_row_size(*t, w.n_in) * uint64_t(w.n_out);
  }
  return n;
}

double predicted_total(const MemoryUse& source, uint64_t file_bytes, uint64_t repacked) {
  return double(source.context + source.compute) + double(file_bytes) + double(repacked) - double(source.metadata());
}

Result<MemoryUse> memory_use(const std::string& gguf, int n_ctx, const std::string& kv_type, int threads) {
  if (n_ctx < 1) return Status::error("--ctx must be a positive number of tokens");
  llama::ContextOptions opt;
  opt.n_ctx = n_ctx;
  opt.n_threads = threads;
  if (!kv_type.empty()) {
    ggml_type t = GGML_TYPE_COUNT;
    for (int i = 0; i < GGML_TYPE_COUNT; ++i)
      if (const char* n = ggml_type_name(ggml_type(i)); n && kv_type == n) t = ggml_type(i);
    if (t == GGML_TYPE_COUNT) return Status::errorf("--kv-type {}: not a ggml type (f16, q8_0, q4_0, ...)", kv_type);
    opt.kv_type = t;
  }
  struct stat st {};
  if (::stat(gguf.c_str(), &st) != 0) return Status::errorf("{}: no such file", gguf);
  GAMMA_ASSIGN_OR_RETURN(auto model, llama::LlamaModel::load(gguf));
  GAMMA_ASSIGN_OR_RETURN(auto ctx, llama::LlamaContext::create(*model, opt));
  MemoryUse u;
  u.file_bytes = uint64_t(st.st_size);
  {
    GAMMA_ASSIGN_OR_RETURN(auto m, Model::open(gguf));
    GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(*m));
    u.repacked = repacked_bytes(ws);
  }
  for (const auto& [buft, d] : llama_get_memory_breakdown(ctx->get())) {
    (void)buft;
    u.model += d.model;
    u.context += d.context;
    u.compute += d.compute;
  }
  return u;
}

Result<uint64_t> weights_room(const MemoryUse& source, uint64_t memory) {
  const uint64_t rest = source.context + source.compute;
  const double room = double(memory) - double(rest) + double(source.metadata());
  if (!(room > 0) || memory <= rest)
    return Status::errorf("--memory {:.1f} MiB: the context alone takes {:.1f} MiB (KV cache {:.1f}, compute buffers {:.1f}) "
                          "at this --ctx",
                          memory / 1048576.0, rest / 1048576.0, source.context / 1048576.0, source.compute / 1048576.0);
  return uint64_t(room);
}

}  // namespace gm::speed
