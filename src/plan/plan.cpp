#include "plan/plan.h"

#include <cmath>

#include "gguf_model/model.h"

namespace gm {

json Plan::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["model_fingerprint"] = model_fingerprint;
  j["method"] = method;
  j["info"] = info;
  j["modules"] = modules;
  j["fixed"] = fixed;
  return j;
}

Result<Plan> Plan::from_json(const json& j) {
  Plan p;
  try {
    p.model_fingerprint = j.at("model_fingerprint").get<std::string>();
    p.method = j.value("method", "");
    if (j.contains("info")) p.info = j["info"];
    p.modules = j.at("modules").get<std::map<std::string, std::string>>();
    if (j.contains("fixed")) p.fixed = j["fixed"].get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    return Status::errorf("malformed plan: {}", e.what());
  }
  return p;
}

Result<Plan> Plan::load(const std::string& path) { return load_typed<Plan>(path); }

Status Plan::save(const std::string& path) const { return write_json(path, to_json()); }

Status Plan::validate(const Manifest& m) const {
  if (model_fingerprint != m.model_fingerprint)
    return Status::errorf("plan is for another model (fingerprint {}…, pool has {}…)", model_fingerprint.substr(0, 12),
                          m.model_fingerprint.substr(0, 12));
  for (const auto& [name, id] : modules) {
    const ModuleEntry* e = m.find(name);
    if (!e) return Status::errorf("plan names unknown module '{}'", name);
    if (!e->find(id)) {
      std::string have;
      for (const auto& c : e->candidates) have += (have.empty() ? "" : ",") + c.id;
      return Status::errorf("module {} has no candidate '{}' in the pool (has {})", name, id, have);
    }
  }
  for (const auto& e : m.modules)
    if (!modules.count(e.name)) return Status::errorf("plan gives no type for module {}", e.name);
  for (const auto& [name, type] : fixed) GAMMA_RETURN_IF_ERROR(check_fixed_type(m, name, type));
  return Status::ok();
}

std::string output_head(const Manifest& m) {
  for (const auto& f : m.fixed)
    if (f.name == "output.weight") return f.name;
  return "token_embd.weight";
}

Status check_fixed_type(const Manifest& m, const std::string& name, const std::string& type) {
  const FixedTensor* f = nullptr;
  for (const auto& x : m.fixed)
    if (x.name == name) f = &x;
  if (!f) return Status::errorf("'{}' is not a non-linear tensor of this model", name);
  auto t = parse_type(type);
  if (!t.is_ok()) return t.status().with_context("tensor " + name);
  if (!type_admits(*t, f->shape.at(0)))
    return Status::errorf("tensor {} (row width {}) cannot hold type {}", name, f->shape.at(0), type);
  return Status::ok();
}

// llama-quantize's fallback for shapes a type cannot hold (tensor_type_fallback).
static ggml_type fallback(ggml_type t, int64_t width) {
  if (type_admits(t, width)) return t;
  switch (t) {
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_IQ4_XS: t = GGML_TYPE_IQ4_NL; break;
    case GGML_TYPE_Q4_K: t = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: t = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: t = GGML_TYPE_Q8_0; break;
    default: t = GGML_TYPE_F16;
  }
  return type_admits(t, width) ? t : GGML_TYPE_F16;
}

// The output head's (or the tied embedding's) type `steps` steps cheaper than `current` that
// its rows fit, or "". Two steps are tried because on Qwen the Q4_K head (two below llama.cpp's
// Q6_K) won validation for every allocator at IQ2_M, Q2_K and IQ3_XXS's sizes
// (results/iq_qwen/table.md): the bytes buy more in the linear modules than in the head.
std::string cheaper_head_type(const Manifest& m, const std::string& head, const std::string& current, int steps) {
  static const std::map<std::string, std::string> kStep = {
      {"Q8_0", "Q5_1"}, {"Q6_K", "Q5_K"}, {"Q5_K", "Q4_K"}, {"Q5_1", "Q4_1"}};
  std::string t = current;
  for (int i = 0; i < steps; ++i) {
    auto it = kStep.find(t);
    if (it == kStep.end() || !check_fixed_type(m, head, it->second).is_ok()) return "";
    t = it->second;
  }
  return t;
}

std::map<std::string, std::string> default_fixed_types(const Manifest& m, double linear_bpw) {
  // The standard k-quant mixes by their linear bpw; token_embd takes the mix's base type,
  // output Q6_K (llama_tensor_get_type_impl), and with tied embeddings token_embd is the
  // output head and takes the output's type.
  ggml_type base = GGML_TYPE_Q2_K;
  if (linear_bpw >= 3.0) base = GGML_TYPE_Q3_K;
  if (linear_bpw >= 4.0) base = GGML_TYPE_Q4_K;
  if (linear_bpw >= 5.0) base = GGML_TYPE_Q5_K;
  if (linear_bpw >= 6.1) base = GGML_TYPE_Q6_K;
  const std::string head = output_head(m);
  std::map<std::string, std::string> out;
  for (const auto& f : m.fixed) {
    ggml_type t = GGML_TYPE_F32;
    const int64_t w = f.shape.at(0);
    const bool is_output = f.name == head;
    if (!f.quantize) {
      out[f.name] = f.source_type;  // llama-quantize leaves it alone (a MoE router, ...)
      continue;
    }
    if (f.shape.size() >= 2) {
      if (is_output) t = w % 256 == 0 ? GGML_TYPE_Q6_K : GGML_TYPE_Q8_0;
      else if (f.name == "token_embd.weight") t = fallback(base, w);
      else t = fallback(base, w);
    }
    out[f.name] = type_name(t);
  }
  return out;
}

uint64_t fixed_file_bytes(const Manifest& m, const std::map<std::string, std::string>& fixed) {
  uint64_t total = m.header_bytes;
  for (const auto& f : m.fixed) {
    auto it = fixed.find(f.name);
    ggml_type t = it == fixed.end() ? GGML_TYPE_F32 : parse_type(it->second).value();
    int64_t rows = 1;
    for (size_t d = 1; d < f.shape.size(); ++d) rows *= f.shape[d];
    const uint64_t b = type_bytes(t, f.shape.at(0), rows);
    total += (b + m.alignment - 1) / m.alignment * m.alignment;
  }
  return total;
}

PlanSize plan_size(const Manifest& m, const Plan& p) {
  PlanSize s;
  uint64_t linear_file = 0;
  for (const auto& e : m.modules) {
    auto it = p.modules.find(e.name);
    const Candidate* c = it == p.modules.end() ? nullptr : e.find(it->second);
    if (!c) continue;
    s.linear_bytes += c->bytes;
    linear_file += c->file_bytes;
    s.linear_params += e.n_params;
  }
  s.linear_bpw = s.linear_params ? 8.0 * double(s.linear_bytes) / double(s.linear_params) : 0;
  auto fixed = default_fixed_types(m, s.linear_bpw);
  for (const auto& [k, v] : p.fixed) fixed[k] = v;
  s.file_bytes = fixed_file_bytes(m, fixed) + linear_file;
  return s;
}

std::map<std::string, std::string> plan_fixed_types(const Manifest& m, const Plan& p) {
  auto fixed = default_fixed_types(m, plan_size(m, p).linear_bpw);
  for (const auto& [k, v] : p.fixed) fixed[k] = v;
  return fixed;
}

Result<Plan> uniform_plan(const Manifest& m, const std::string& type) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(type));
  Plan p;
  p.model_fingerprint = m.model_fingerprint;
  p.method = "uniform";
  p.info = {{"type", type_name(t)}};
  for (const auto& e : m.modules) {
    const Candidate* c = e.find(type_name(t));
    if (!c) {
      // A module that cannot hold the type takes its fallback candidate (F16), as
      // llama-quantize would; any other gap means the pool was built without this type.
      if (type_admits(t, e.shape.at(0)) || !(c = e.find("F16")))
        return Status::errorf("the pool has no {} candidate for module {} (build the pool with --types including {})",
                              type_name(t), e.name, type_name(t));
    }
    p.modules[e.name] = c->id;
  }
  p.fixed = default_fixed_types(m, plan_size(m, p).linear_bpw);
  return p;
}

Result<Plan> plan_from_gguf(const Manifest& m, const std::string& gguf_path) {
  GAMMA_ASSIGN_OR_RETURN(auto file, TensorFile::open(gguf_path));
  Plan p;
  p.model_fingerprint = m.model_fingerprint;
  p.method = "from-gguf";
  p.info = {{"gguf", gguf_path}};
  auto type_of = [&](const std::string& name, const std::vector<int64_t>& shape) -> Result<std::string> {
    const TensorInfo* t = file->find(name);
    if (!t) return Status::errorf("{} has no tensor {} (not the pool's model?)", gguf_path, name);
    if (t->shape != shape) return Status::errorf("{}: tensor {} has another shape than the pool's model", gguf_path, name);
    return type_name(t->type);
  };
  std::map<std::string, int> counts;
  for (const auto& e : m.modules) {
    GAMMA_ASSIGN_OR_RETURN(std::string type, type_of(e.name, e.shape));
    const Candidate* c = e.find(type);  // the candidate named after its type (not an import)
    for (size_t i = 0; !c && i < e.candidates.size(); ++i)
      if (e.candidates[i].type == type) c = &e.candidates[i];
    if (!c)
      return Status::errorf("the pool has no {} candidate for module {}, which {} holds at {} (build the pool with --types "
                            "including {})", type, e.name, gguf_path, type, type);
    p.modules[e.name] = c->id;
    ++counts[type];
  }
  for (const auto& f : m.fixed) {
    GAMMA_ASSIGN_OR_RETURN(std::string type, type_of(f.name, f.shape));
    GAMMA_RETURN_IF_ERROR(check_fixed_type(m, f.name, type).with_context(gguf_path));
    p.fixed[f.name] = type;
  }
  p.info["module_types"] = counts;
  return p;
}

}  // namespace gm
