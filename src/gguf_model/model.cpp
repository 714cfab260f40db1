#include "gguf_model/model.h"

#include "gguf_model/header_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

#include "gguf.h"
#include "llama-arch.h"     // llama.cpp's own list of architectures (its src/, not the public API)
#include "llama-ext.h"      // llama.cpp's rule for which tensors llama-quantize quantizes
#include "llama-hparams.h"  // LLAMA_MAX_LAYERS
#include "llama/log.h"
#include "util/files.h"

namespace gm {

const char* const kLinearKinds[7] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                     "ffn_gate", "ffn_up", "ffn_down"};

const char* const kSharedExpertKinds[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};

int linear_kind_index(const std::string& kind) {
  for (int k = 0; k < 7; ++k)
    if (kind == kLinearKinds[k] || (k >= 4 && kind == std::string(kLinearKinds[k]) + "_exps")) return k;
  for (int k = 0; k < 3; ++k)
    if (kind == kSharedExpertKinds[k]) return 7 + k;
  return -1;
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- types ---------------------------------------------------------------------------------
std::string type_name(ggml_type type) {
  std::string s = ggml_type_name(type);
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Result<ggml_type> parse_type(const std::string& name) {
  for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
    const char* n = ggml_type_name(ggml_type(i));
    if (n && ggml_get_type_traits(ggml_type(i))->blck_size > 0 && strcasecmp(n, name.c_str()) == 0)
      return ggml_type(i);
  }
  return Status::errorf("unknown type '{}' (expected a ggml type such as Q4_K, Q8_0, F16)", name);
}

bool type_admits(ggml_type type, int64_t row_width) {
  // Types ggml_quantize_chunk can write and ggml can read back.
  switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
    case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M:
    case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: break;
    default: return false;
  }
  const int64_t blck = ggml_blck_size(type);
  return row_width > 0 && row_width % blck == 0;
}

bool type_needs_imatrix(ggml_type type) {
  return ggml_quantize_requires_imatrix(type) || type == GGML_TYPE_IQ1_M;
}

uint64_t type_bytes(ggml_type type, int64_t row_width, int64_t n_rows) {
  return uint64_t(ggml_row_size(type, row_width)) * uint64_t(n_rows);
}

// ---- model ---------------------------------------------------------------------------------
Model::~Model() {
  if (ctx_) gguf_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

int64_t Model::find(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return int64_t(i);
  return -1;
}

const TensorInfo& Model::tensor(const std::string& name) const { return tensors_.at(size_t(find(name))); }

static std::string get_str(gguf_context* ctx, const std::string& key) {
  int64_t id = gguf_find_key(ctx, key.c_str());
  if (id < 0 || gguf_get_kv_type(ctx, id) != GGUF_TYPE_STRING) return "";
  return gguf_get_val_str(ctx, id);
}

static int64_t get_int(gguf_context* ctx, const std::string& key) {
  int64_t id = gguf_find_key(ctx, key.c_str());
  if (id < 0) return -1;
  switch (gguf_get_kv_type(ctx, id)) {
    case GGUF_TYPE_UINT32: return gguf_get_val_u32(ctx, id);
    case GGUF_TYPE_INT32: return gguf_get_val_i32(ctx, id);
    case GGUF_TYPE_UINT64: return int64_t(gguf_get_val_u64(ctx, id));
    case GGUF_TYPE_INT64: return gguf_get_val_i64(ctx, id);
    default: return -1;
  }
}

// Which tensors llama-quantize quantizes, by llama.cpp's own rule (llama-ext.h) on a mock model
// made from the architecture alone: no weights are loaded.
static Result<std::vector<bool>> llama_quantizable(const std::string& arch, int n_layer,
                                                   const std::vector<TensorInfo>& ts) {
  llama_quant_model_desc desc{};
  desc.architecture = arch.c_str();
  desc.n_layer = uint32_t(n_layer);
  // llama.cpp's C++ throws for an architecture it lists but has no model for.
  std::unique_ptr<llama_model, void (*)(llama_model*)> mock(nullptr, llama_model_free);
  try {
    mock.reset(llama_quant_model_from_metadata(&desc));
  } catch (const std::exception& e) {
    return Status::errorf("architecture {}: {}", arch, e.what());
  }
  if (!mock) return Status::errorf("llama.cpp cannot describe architecture {}", arch);
  const llama_model_quantize_params params = llama_model_quantize_default_params();
  std::unique_ptr<quantize_state_impl, void (*)(quantize_state_impl*)> qs(llama_quant_init(mock.get(), &params),
                                                                          llama_quant_free);
  ggml_init_params ip{ggml_tensor_overhead() * (ts.size() + 1), nullptr, /*no_alloc=*/true};
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> gc(ggml_init(ip), ggml_free);
  std::vector<bool> out(ts.size(), false);
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    if (t.shape.empty() || t.shape.size() > GGML_MAX_DIMS || t.name.size() >= GGML_MAX_NAME) continue;
    ggml_tensor* x = ggml_new_tensor(gc.get(), t.type, int(t.shape.size()), t.shape.data());
    ggml_set_name(x, t.name.c_str());
    out[i] = llama_quant_tensor_allows_quantization(qs.get(), x);
  }
  return out;
}

std::vector<ArchitectureInfo> llama_architectures() {
  std::vector<ArchitectureInfo> out;
  for (int a = 0; a < int(LLM_ARCH_UNKNOWN); ++a) {
    const std::string name = llm_arch_name(llm_arch(a));
    out.push_back({name, llama_quantizable(name, 1, {}).is_ok()});
  }
  return out;
}

// Opens `path` as a GGUF: checks the magic, parses the header through gguf.h, and lists the
// tensors with absolute offsets, refusing any tensor that extends past the end of the file.
static Status open_gguf(const std::string& path, int& fd, gguf_context*& ctx, uint64_t& size,
                        std::vector<TensorInfo>& tensors) {
  fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::errorf("cannot open {}: {}", path, std::strerror(errno));
  GAMMA_ASSIGN_OR_RETURN(size, file_size(path));
  char magic[4] = {0, 0, 0, 0};
  if (::pread(fd, magic, 4, 0) != 4 || std::memcmp(magic, "GGUF", 4) != 0)
    return Status::errorf("{} is not a GGUF file (bad magic)", path);
  GAMMA_RETURN_IF_ERROR(check_gguf_enums(path));  // values gguf.cpp would load into an enum unchecked
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  llama::capture_logs();  // gguf.h reports through ggml's log
  llama::clear_errors();
  ctx = gguf_init_from_file(path.c_str(), params);
  if (!ctx) {
    std::string why = llama::last_error();
    return Status::errorf("{} is a corrupt or truncated GGUF{}{}", path, why.empty() ? "" : ": ", why);
  }
  const uint64_t data_off = gguf_get_data_offset(ctx);
  const int64_t n = gguf_get_n_tensors(ctx);
  for (int64_t i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = gguf_get_tensor_name(ctx, i);
    t.type = gguf_get_tensor_type(ctx, i);
    const int64_t* ne = gguf_get_tensor_ne(ctx, i);
    int nd = GGML_MAX_DIMS;
    while (nd > 1 && ne[nd - 1] == 1) --nd;
    t.shape.assign(ne, ne + nd);
    t.offset = data_off + gguf_get_tensor_offset(ctx, i);
    t.nbytes = gguf_get_tensor_size(ctx, i);
    if (t.offset + t.nbytes > size)
      return Status::errorf("{} is truncated: tensor {} ends at byte {} but the file has {}", path, t.name,
                            t.offset + t.nbytes, size);
    tensors.push_back(std::move(t));
  }
  return Status::ok();
}

static Status pread_all(int fd, const TensorInfo& t, void* dst, const std::string& path) {
  char* p = static_cast<char*>(dst);
  uint64_t left = t.nbytes, off = t.offset;
  while (left > 0) {
    ssize_t r = ::pread(fd, p, left, off);
    if (r <= 0)
      return Status::errorf("cannot read tensor {} from {}: {}", t.name, path,
                            r == 0 ? "unexpected end of file" : std::strerror(errno));
    p += r;
    left -= uint64_t(r);
    off += uint64_t(r);
  }
  return Status::ok();
}

Result<std::unique_ptr<TensorFile>> TensorFile::open(const std::string& path) {
  std::unique_ptr<TensorFile> f(new TensorFile());
  f->path_ = path;
  uint64_t size = 0;
  GAMMA_RETURN_IF_ERROR(open_gguf(path, f->fd_, f->ctx_, size, f->tensors_));
  return f;
}
TensorFile::~TensorFile() {
  if (ctx_) gguf_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}
const TensorInfo* TensorFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}
Status TensorFile::read_raw(const TensorInfo& t, void* dst) const { return pread_all(fd_, t, dst, path_); }

Result<std::unique_ptr<Model>> Model::open(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  GAMMA_RETURN_IF_ERROR(open_gguf(path, m->fd_, m->ctx_, m->file_size_, m->tensors_));
  gguf_context* ctx = m->ctx_;
  m->arch_ = get_str(ctx, "general.architecture");
  m->name_ = get_str(ctx, "general.name");
  // Any architecture llama.cpp knows: the pool, the static proxy, gamma layers, search, solve,
  // emit and eval all go through gguf.h and libllama. Only HAWQ-V2 and Stage I need gamma's own
  // LibTorch decoder, which says itself which it has (decoder/hparams.h).
  if (m->arch_.empty() || llm_arch_from_string(m->arch_) == LLM_ARCH_UNKNOWN)
    return Status::errorf("{}: unsupported architecture '{}' (not one llama.cpp knows)", path,
                          m->arch_.empty() ? "<none>" : m->arch_);
  m->n_layer_ = int(get_int(ctx, m->arch_ + ".block_count"));
  if (m->n_layer_ <= 0) return Status::errorf("{}: missing {}.block_count", path, m->arch_);
  if (m->n_layer_ > LLAMA_MAX_LAYERS)
    return Status::errorf("{}: {} layers, more than llama.cpp's {}", path, m->n_layer_, LLAMA_MAX_LAYERS);

  // Linear modules: every blk.N.<kind>.weight tensor llama-quantize would quantize (2-D, or
  // 3-D: a MoE layer's experts, one type for all of them as GGUF stores them), by llama.cpp's
  // own rule for this architecture; what it leaves alone (norms, routers, ...) is left alone.
  GAMMA_ASSIGN_OR_RETURN(m->quantizable_, llama_quantizable(m->arch_, m->n_layer_, m->tensors_));
  const std::vector<bool>& quantizable = m->quantizable_;
  for (size_t i = 0; i < m->tensors_.size(); ++i) {
    const auto& t = m->tensors_[i];
    int layer = -1;
    char kind[64] = {0};
    if (!quantizable[i] || std::sscanf(t.name.c_str(), "blk.%d.%63[^.].weight", &layer, kind) != 2) continue;
    if (t.name != "blk." + std::to_string(layer) + "." + kind + ".weight") continue;
    if (layer < 0 || layer >= m->n_layer_ || t.shape.size() > 3) continue;
    m->linear_.push_back({t.name, layer, kind, i});
  }
  if (m->linear_.empty()) return Status::errorf("{}: no linear modules (blk.N.attn_q.weight ...) found", path);

  // Fingerprint: header + tensor directory + size (cheap, and changes with any re-quantization).
  std::vector<char> head(gguf_get_data_offset(ctx));
  if (::pread(m->fd_, head.data(), head.size(), 0) != ssize_t(head.size()))
    return Status::errorf("cannot read {}", path);
  head.insert(head.end(), reinterpret_cast<const char*>(&m->file_size_),
              reinterpret_cast<const char*>(&m->file_size_) + sizeof(m->file_size_));
  m->fingerprint_ = sha256_hex(head.data(), head.size());
  return m;
}

Status Model::read_raw(const TensorInfo& t, void* dst) const { return pread_all(fd_, t, dst, path_); }

Status Model::check_fits_memory(const TensorInfo& t) const {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return Status::ok();  // unknown: let the allocator decide
  const long double need = (long double)t.nbytes + 4.0L * (long double)t.n_elements();
  const long double have = (long double)pages * (long double)page;
  if (need > have)
    return Status::errorf("{}: tensor {} needs {:.1f} GiB of memory to read (stored + F32) but this machine has {:.1f} GiB",
                          path_, t.name, double(need / 1073741824.0L), double(have / 1073741824.0L));
  return Status::ok();
}

Result<std::vector<float>> Model::read_f32(const TensorInfo& t) const {
  GAMMA_RETURN_IF_ERROR(check_fits_memory(t));
  std::vector<uint8_t> raw(t.nbytes);
  GAMMA_RETURN_IF_ERROR(read_raw(t, raw.data()));
  std::vector<float> out(size_t(t.n_elements()));
  if (t.type == GGML_TYPE_F32) {
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  const auto* tr = ggml_get_type_traits(t.type);
  if (!tr->to_float) return Status::errorf("tensor {}: type {} cannot be dequantized", t.name, type_name(t.type));
  tr->to_float(raw.data(), out.data(), int64_t(out.size()));
  return out;
}

Result<std::vector<float>> Model::read_rows_f32(const TensorInfo& t, const std::vector<int64_t>& rows) const {
  const int64_t w = t.row_width();
  const uint64_t row_bytes = ggml_row_size(t.type, w);
  const auto* tr = ggml_get_type_traits(t.type);
  if (t.type != GGML_TYPE_F32 && !tr->to_float)
    return Status::errorf("tensor {}: type {} cannot be dequantized", t.name, type_name(t.type));
  std::vector<uint8_t> raw(row_bytes);
  std::vector<float> out(rows.size() * size_t(w));
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= t.n_rows())
      return Status::errorf("tensor {}: row {} of {}", t.name, rows[k], t.n_rows());
    TensorInfo row = t;
    row.offset = t.offset + uint64_t(rows[k]) * row_bytes;
    row.nbytes = row_bytes;
    GAMMA_RETURN_IF_ERROR(read_raw(row, raw.data()));
    if (t.type == GGML_TYPE_F32) std::memcpy(out.data() + k * size_t(w), raw.data(), row_bytes);
    else tr->to_float(raw.data(), out.data() + k * size_t(w), w);
  }
  return out;
}

}  // namespace gm

namespace gm {
std::vector<ggml_type> admissible_types(int64_t row_width, bool have_imatrix) {
  static const ggml_type kTypes[] = {
      GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_Q2_K,
      GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_0, GGML_TYPE_IQ4_NL,
      GGML_TYPE_Q4_K, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K, GGML_TYPE_Q5_1, GGML_TYPE_Q6_K,
      GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32};
  std::vector<ggml_type> out;
  for (ggml_type t : kTypes)
    if (type_admits(t, row_width) && (have_imatrix || !type_needs_imatrix(t))) out.push_back(t);
  return out;
}
int tensor_layer(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t i = 4;
  int n = 0;
  while (i < name.size() && i < 13 && std::isdigit(static_cast<unsigned char>(name[i]))) n = n * 10 + (name[i++] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? n : -1;
}

}  // namespace gm
