#include "emit/emit.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "llama.h"
#include "pool/candidate.h"
#include "pool/imatrix.h"
#include "pool/quantize.h"
#include "util/files.h"
#include "util/threads.h"

namespace gm {

std::string tensor_types_text(const std::map<std::string, std::string>& types) {
  std::string out;
  for (const auto& [name, type] : types) {
    std::string re = "^";
    for (char c : name) {
      if (std::string(".[]{}()\\*+?^$|").find(c) != std::string::npos) re += '\\';
      re += c;
    }
    std::string t = type;
    for (char& c : t) c = char(std::tolower(static_cast<unsigned char>(c)));
    out += re + "$=" + t + "\n";
  }
  return out;
}

// general.file_type: the llama_ftype of the type holding most linear bytes.
static uint32_t ftype_of(ggml_type t) {
  switch (t) {
    case GGML_TYPE_F32: return LLAMA_FTYPE_ALL_F32;
    case GGML_TYPE_F16: return LLAMA_FTYPE_MOSTLY_F16;
    case GGML_TYPE_Q4_0: return LLAMA_FTYPE_MOSTLY_Q4_0;
    case GGML_TYPE_Q4_1: return LLAMA_FTYPE_MOSTLY_Q4_1;
    case GGML_TYPE_Q5_0: return LLAMA_FTYPE_MOSTLY_Q5_0;
    case GGML_TYPE_Q5_1: return LLAMA_FTYPE_MOSTLY_Q5_1;
    case GGML_TYPE_Q8_0: return LLAMA_FTYPE_MOSTLY_Q8_0;
    case GGML_TYPE_Q2_K: return LLAMA_FTYPE_MOSTLY_Q2_K;
    case GGML_TYPE_Q3_K: return LLAMA_FTYPE_MOSTLY_Q3_K_M;
    case GGML_TYPE_Q4_K: return LLAMA_FTYPE_MOSTLY_Q4_K_M;
    case GGML_TYPE_Q5_K: return LLAMA_FTYPE_MOSTLY_Q5_K_M;
    case GGML_TYPE_Q6_K: return LLAMA_FTYPE_MOSTLY_Q6_K;
    case GGML_TYPE_IQ4_NL: return LLAMA_FTYPE_MOSTLY_IQ4_NL;
    case GGML_TYPE_IQ4_XS: return LLAMA_FTYPE_MOSTLY_IQ4_XS;
    default: return LLAMA_FTYPE_GUESSED;
  }
}

bool starts_at_any_layer(const std::string& arch) { return arch == "llama" || arch == "qwen2" || arch == "qwen3"; }

// The metadata of a file cut before `first_layer`: its block count, after checking that no key
// of the architecture holds one value per layer (which the cut would have to slice).
static Status cut_metadata(const Model& model, int first_layer, gguf_context* ctx) {
  const std::string arch = model.arch();
  if (!starts_at_any_layer(arch))
    return Status::errorf("{}: a {} model cannot be cut before a layer (its layers are not all alike in llama.cpp)",
                          model.path(), arch);
  if (first_layer >= model.n_layer())
    return Status::errorf("first layer {} is past the model's {} layers", first_layer, model.n_layer());
  for (int64_t k = 0; k < gguf_get_n_kv(ctx); ++k) {
    const std::string key = gguf_get_key(ctx, k);
    if (key.rfind(arch + ".", 0) == 0 && gguf_get_kv_type(ctx, k) == GGUF_TYPE_ARRAY &&
        gguf_get_arr_n(ctx, k) == size_t(model.n_layer()))
      return Status::errorf("{}: {} holds a value per layer; a cut file would need it sliced", model.path(), key);
  }
  gguf_set_val_u32(ctx, (arch + ".block_count").c_str(), uint32_t(model.n_layer() - first_layer));
  return Status::ok();
}

Result<EmitResult> emit(const std::string& pool_dir, const Plan& plan, const std::string& out_path, int n_threads,
                        int first_layer) {
  if (first_layer < 0) return Status::errorf("first layer {} is negative", first_layer);
  const int nt = resolve_threads(n_threads);
  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(pool_dir));
  GAMMA_RETURN_IF_ERROR(man.needs_candidates());
  GAMMA_RETURN_IF_ERROR(plan.validate(man));
  GAMMA_RETURN_IF_ERROR(check_writable_dir(out_path));
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(man.model_path));
  Imatrix im;
  if (!man.imatrix_path.empty()) {
    GAMMA_ASSIGN_OR_RETURN(im, load_imatrix(man.imatrix_path));
  }
  GAMMA_RETURN_IF_ERROR(man.check_source(model->fingerprint(), im.sha256));

  const PlanSize size = plan_size(man, plan);
  const std::map<std::string, std::string> fixed = plan_fixed_types(man, plan);

  // Per tensor: its output type and, for linear modules, where its bytes live.
  std::map<std::string, ggml_type> out_type;
  std::map<std::string, const Candidate*> cand;
  std::map<std::string, uint64_t> bytes_by_type;
  for (const auto& e : man.modules) {
    const Candidate* c = e.find(plan.modules.at(e.name));
    cand[e.name] = c;
    out_type[e.name] = parse_type(c->type).value();
    bytes_by_type[c->type] += c->bytes;
  }
  for (const auto& f : man.fixed) out_type[f.name] = parse_type(fixed.at(f.name)).value();

  std::map<std::string, std::unique_ptr<TensorFile>> files;
  for (const auto& [name, c] : cand)
    if (!(man.streamed && c->file.empty()) && !files.count(c->file)) {
      GAMMA_ASSIGN_OR_RETURN(files[c->file], TensorFile::open(man.dir + "/" + c->file));
      const int64_t k = gguf_find_key(files[c->file]->gguf(), "gamma.model.fingerprint");
      if (k >= 0 && std::string(gguf_get_val_str(files[c->file]->gguf(), k)) != man.model_fingerprint)
        return Status::errorf("{}/{} belongs to another model's pool", man.dir, c->file);
    }

  // Source tensor of each written one (all of them, in order, unless the file is cut).
  std::vector<size_t> src;
  auto rename = [&](const TensorInfo& t) -> std::string {
    const int l = tensor_layer(t.name);
    if (l >= 0 && l < first_layer) return "";
    src.push_back(size_t(&t - model->tensors().data()));
    if (l < 0 || first_layer == 0) return t.name;
    return fmt::format("blk.{}{}", l - first_layer, t.name.substr(t.name.find('.', 4)));
  };
  auto writer = model_writer(*model, [&](const TensorInfo& t) { return out_type.at(t.name); }, rename);
  if (first_layer > 0) GAMMA_RETURN_IF_ERROR(cut_metadata(*model, first_layer, writer->gguf()));
  ggml_type major = GGML_TYPE_F32;
  uint64_t best = 0;
  for (const auto& [t, b] : bytes_by_type)
    if (b > best) { best = b; major = parse_type(t).value(); }
  gguf_set_val_u32(writer->gguf(), "general.file_type", ftype_of(major));
  // The plan's identity, less its solve time: the same plan gives a byte-identical file
  // (a resumed `gamma run` re-solves it and must emit what an uninterrupted run emits).
  json pj = plan.to_json();
  if (pj.contains("info") && pj["info"].is_object()) pj["info"].erase("seconds");
  const std::string pdump = pj.dump();
  const std::string plan_sha = sha256_hex(pdump.data(), pdump.size());
  gguf_set_val_str(writer->gguf(), "gamma.plan_sha256", plan_sha.c_str());

  EmitResult res;
  res.file_bytes = writer->predicted_size();
  res.linear_bpw = size.linear_bpw;
  if (first_layer == 0 && res.file_bytes != size.file_bytes)
    return Status::errorf("internal: emitted size {} differs from the plan's predicted {}", res.file_bytes, size.file_bytes);

  const auto& tensors = model->tensors();
  GAMMA_RETURN_IF_ERROR(writer->write(out_path, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
    const TensorInfo& t = tensors[src.at(i)];
    const ggml_type want = out_type.at(t.name);
    if (auto it = cand.find(t.name); it != cand.end() && man.streamed && it->second->file.empty()) {
      GAMMA_RETURN_IF_ERROR(model->check_fits_memory(t));
      auto make = [&]() -> Result<std::vector<uint8_t>> { return candidate_bytes(*model, t, want, nullptr, im.find(t.name), nt); };
      if (t.type == want) {  // the source's own bytes: a copy, not worth a second one on disk
        GAMMA_ASSIGN_OR_RETURN(buf, make());
      } else {
        GAMMA_RETURN_IF_ERROR(cached_bytes(made_bytes_path(man, "stream", t.name, want), it->second->bytes, buf, make));
      }
      if (buf.size() != it->second->bytes)
        return Status::errorf("{} at {}: {} bytes made, the manifest says {}", t.name, type_name(want), buf.size(),
                              it->second->bytes);
      return Status::ok();
    }
    if (auto it = cand.find(t.name); it != cand.end()) {
      const TensorFile& f = *files.at(it->second->file);
      const TensorInfo* ct = f.find(t.name);
      if (!ct || ct->type != want || ct->nbytes != it->second->bytes)
        return Status::errorf("{}/{} does not hold {} as the manifest says; rebuild the pool", man.dir, it->second->file, t.name);
      buf.resize(ct->nbytes);
      return f.read_raw(*ct, buf.data());
    }
    GAMMA_RETURN_IF_ERROR(model->check_fits_memory(t));
    if (t.type == want) {
      buf.resize(t.nbytes);
      return model->read_raw(t, buf.data());
    }
    const uint64_t nbytes = uint64_t(ggml_row_size(want, t.row_width())) * uint64_t(t.n_rows());
    if (want == GGML_TYPE_F32) {
      GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model->read_f32(t));
      buf.assign(reinterpret_cast<uint8_t*>(ref.data()), reinterpret_cast<uint8_t*>(ref.data() + ref.size()));
      return Status::ok();
    }
    return cached_bytes(made_bytes_path(man, "fixed", t.name, want), nbytes, buf, [&]() -> Result<std::vector<uint8_t>> {
      GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model->read_f32(t));
      const auto* iv = im.find(t.name);
      return quantize_rows(want, ref.data(), t.n_rows(), t.row_width(), iv ? iv->data() : nullptr, nt);
    });
  }));

  if (first_layer > 0) return res;  // a cut file is no recipe's output
  // The llama-quantize recipe: every tensor llama-quantize would quantize (2-D and up).
  std::map<std::string, std::string> recipe;
  for (const auto& t : tensors)
    if (t.shape.size() >= 2) recipe[t.name] = type_name(out_type.at(t.name));
  std::string base = out_path;  // OUT.gguf -> OUT.tensor-types.txt
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
  res.tensor_types_path = base + ".tensor-types.txt";
  GAMMA_RETURN_IF_ERROR(write_file_atomic(res.tensor_types_path, tensor_types_text(recipe)));
  return res;
}

}  // namespace gm
