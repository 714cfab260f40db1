// A GGUF model as gamma sees it: architecture, layers, and the linear modules whose types
// gamma allocates. Read through llama.cpp's gguf.h; tensor data is read on demand (pread),
// so opening a 1 GB model costs only its header.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ggml.h"
#include "util/status.h"

struct gguf_context;

namespace gm {

struct TensorInfo {
  std::string name;
  ggml_type type;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row width (ne0)
  uint64_t offset = 0;         // absolute file offset of the data
  uint64_t nbytes = 0;
  int64_t n_elements() const;
  int64_t row_width() const { return shape.empty() ? 0 : shape[0]; }
  int64_t n_rows() const { return n_elements() / (row_width() ? row_width() : 1); }
};

// The seven linear kinds of a llama/qwen2/qwen3/gemma3 decoder layer, in llama.cpp tensor names (the
// report's heatmaps; other architectures have other kinds: attn_qkv, ffn_up_exps, ...).
extern const char* const kLinearKinds[7];  // attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down
// A MoE layer's shared expert (qwen2moe): a dense SwiGLU beside the routed experts.
extern const char* const kSharedExpertKinds[3];  // ffn_gate_shexp ffn_up_shexp ffn_down_shexp
// The index of `kind` in kLinearKinds, a MoE layer's experts under theirs (ffn_gate_exps is
// ffn_gate's), the shared expert's after them (7, 8, 9: the decoder's LinearKind); -1 if none.
int linear_kind_index(const std::string& kind);

struct LinearModule {
  std::string name;  // e.g. "blk.3.ffn_down.weight"
  int layer = -1;
  std::string kind;  // llama.cpp's tensor kind: attn_q, ..., attn_qkv, ffn_up_exps (3-D: experts), ...
  size_t tensor;     // index into Model::tensors
};

// The layer of a tensor named blk.N.rest, or -1 for a tensor outside the layers.
int tensor_layer(const std::string& name);

class Model {
 public:
  // Fails (one line) on a missing/short/corrupt file, wrong magic, or an architecture llama.cpp
  // does not know. The linear modules are the blk.N.*.weight tensors llama-quantize quantizes.
  static Result<std::unique_ptr<Model>> open(const std::string& path);
  ~Model();

  const std::string& path() const { return path_; }
  const std::string& arch() const { return arch_; }
  const std::string& name() const { return name_; }
  int n_layer() const { return n_layer_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<LinearModule>& linear() const { return linear_; }
  // Whether llama-quantize quantizes tensor i (llama.cpp's own rule for this architecture).
  bool quantizable(size_t i) const { return quantizable_.at(i); }
  // Index of a tensor by name, or -1.
  int64_t find(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // must exist
  gguf_context* gguf() const { return ctx_; }
  // True when no output.weight exists (the token embedding doubles as the output head).
  bool tied_embeddings() const { return find("output.weight") < 0; }

  // Raw tensor bytes as stored, and the tensor dequantized to F32 via ggml's type traits.
  Status read_raw(const TensorInfo& t, void* dst) const;
  Result<std::vector<float>> read_f32(const TensorInfo& t) const;
  // Some rows of a tensor (any order, each < n_rows), dequantized to F32: [rows.size() x width].
  Result<std::vector<float>> read_rows_f32(const TensorInfo& t, const std::vector<int64_t>& rows) const;
  // Refuses, in one line, a tensor whose stored and F32 forms together exceed this machine's
  // memory (a hostile or truncated-then-extended GGUF claiming a huge shape) before anything
  // that size is allocated. read_f32 checks it itself; raw readers call it first.
  Status check_fits_memory(const TensorInfo& t) const;

  // Identity cheaper than a full-file hash: sha256 over the header and tensor directory
  // (names, types, shapes, offsets) and the file size. Used to match pools/plans to models.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;
  std::string path_, arch_, name_, fingerprint_;
  int n_layer_ = 0;
  uint64_t file_size_ = 0;
  int fd_ = -1;
  gguf_context* ctx_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::vector<LinearModule> linear_;
  std::vector<bool> quantizable_;
};

// Any GGUF (e.g. a pool's candidate file) as a directory of tensors readable by name.
class TensorFile {
 public:
  static Result<std::unique_ptr<TensorFile>> open(const std::string& path);
  ~TensorFile();
  const TensorInfo* find(const std::string& name) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  Status read_raw(const TensorInfo& t, void* dst) const;
  const std::string& path() const { return path_; }
  gguf_context* gguf() const { return ctx_; }

 private:
  TensorFile() = default;
  std::string path_;
  int fd_ = -1;
  gguf_context* ctx_ = nullptr;
  std::vector<TensorInfo> tensors_;
};

// Every architecture llama.cpp knows (its llama-arch.h), and whether it has a model for it
// that gamma can find the linear modules of (false: llama.cpp lists it but builds no model).
struct ArchitectureInfo { std::string name; bool has_model; };
std::vector<ArchitectureInfo> llama_architectures();

// The type's name as llama.cpp users write it: upper case ("Q4_K", "F16", "IQ4_NL").
std::string type_name(ggml_type type);
// Parses a type name as llama.cpp prints it ("Q4_K", "q4_k", "F16"); error if unknown.
Result<ggml_type> parse_type(const std::string& name);
// True when `type` can hold rows of `row_width` (width divisible by the block size) and
// gamma can quantize to it without extra data (IQ types that need an imatrix require one).
bool type_admits(ggml_type type, int64_t row_width);
// Types gamma quantizes only with an importance matrix: ggml_quantize_requires_imatrix's,
// plus IQ1_M, which llama-quantize refuses too (its grid search without weights is useless).
bool type_needs_imatrix(ggml_type type);
// Bytes of `n_rows` rows of `row_width` at `type` (block scales included).
uint64_t type_bytes(ggml_type type, int64_t row_width, int64_t n_rows);

}  // namespace gm

namespace gm {
// The quantized types gamma can make (ggml_quantize_chunk) that rows of `row_width` admit,
// from low to high bits; IQ types that need an imatrix only when `have_imatrix`.
std::vector<ggml_type> admissible_types(int64_t row_width, bool have_imatrix = false);
}  // namespace gm
