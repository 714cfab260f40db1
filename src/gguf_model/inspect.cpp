#include "gguf_model/inspect.h"

#include <map>

namespace gm {

json describe_model(const Model& m, const std::string& path) {
  json j = {{"path", path}, {"arch", m.arch()}, {"name", m.name()}, {"n_layer", m.n_layer()},
            {"file_bytes", m.file_size()}, {"fingerprint", m.fingerprint()}};
  json mods = json::array();
  int64_t lin_params = 0, all_params = 0;
  uint64_t lin_bytes = 0, all_bytes = 0;
  std::map<std::string, uint64_t> by_type;
  for (const auto& lm : m.linear()) {
    const auto& t = m.tensors()[lm.tensor];
    json cands = json::array();
    for (ggml_type ct : admissible_types(t.row_width())) cands.push_back(type_name(ct));
    mods.push_back({{"name", lm.name}, {"layer", lm.layer}, {"kind", lm.kind}, {"shape", t.shape},
                    {"type", type_name(t.type)}, {"bytes", t.nbytes},
                    {"bpw", 8.0 * double(t.nbytes) / double(t.n_elements())}, {"candidates", cands}});
    lin_params += t.n_elements();
    lin_bytes += t.nbytes;
    by_type[type_name(t.type)] += t.nbytes;
  }
  json all = json::array();
  for (const auto& t : m.tensors()) {
    all_params += t.n_elements();
    all_bytes += t.nbytes;
    all.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"shape", t.shape}, {"bytes", t.nbytes}});
  }
  j["linear"] = mods;
  j["tensors"] = all;
  j["totals"] = {{"linear_modules", m.linear().size()}, {"linear_params", lin_params}, {"linear_bytes", lin_bytes},
                 {"linear_bpw", lin_params ? 8.0 * double(lin_bytes) / double(lin_params) : 0.0},
                 {"tensors", m.tensors().size()}, {"params", all_params}, {"tensor_bytes", all_bytes},
                 {"linear_bytes_by_type", by_type}};
  return j;
}

}  // namespace gm
