// Writes a GGUF whose size is known before the first byte: metadata (copied from a source
// and/or set here), a tensor directory, then each tensor's data padded to the alignment.
// Data is produced tensor by tensor by a callback, so nothing holds the whole model in RAM.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ggml.h"
#include "util/status.h"

struct gguf_context;

namespace gm {

struct OutTensor {
  std::string name;
  ggml_type type;
  std::vector<int64_t> shape;  // ggml order
  uint64_t nbytes() const;
};

class GgufWriter {
 public:
  // `kv_source` (may be null): its key/values are copied into the new file.
  explicit GgufWriter(const gguf_context* kv_source = nullptr);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  gguf_context* gguf() { return ctx_; }  // to set further key/values
  void add(const OutTensor& t);
  const std::vector<OutTensor>& tensors() const { return tensors_; }

  uint64_t alignment() const;
  uint64_t meta_bytes() const;                  // header + key/values + directory, padded
  uint64_t padded(uint64_t nbytes) const;       // nbytes rounded up to the alignment
  uint64_t predicted_size() const;              // meta_bytes + sum of padded tensor bytes

  // Produces tensor i's bytes (exactly tensors()[i].nbytes()) into `buf`.
  using Produce = std::function<Status(size_t i, std::vector<uint8_t>& buf)>;
  // Atomic (temp + rename); fails, leaving nothing, if any tensor's bytes are off or the
  // written size differs from predicted_size().
  Status write(const std::string& path, const Produce& produce) const;

 private:
  gguf_context* ctx_;
  ggml_context* meta_;  // holds the ggml_tensor headers gguf_add_tensor needs
  std::vector<OutTensor> tensors_;
};

}  // namespace gm

namespace gm {
class Model;
struct TensorInfo;

// The writer for a model gamma emits: the source's key/values (minus its quantize.* keys,
// which describe the source's own quantization), gamma's keys at fixed sizes, and every
// source tensor in source order at type_of(tensor). Its meta_bytes() does not depend on the
// types, which is what lets the pool predict emitted sizes to the byte. With `rename`, each
// tensor under the name it returns, and left out where that is empty (emit's first_layer).
std::unique_ptr<GgufWriter> model_writer(const Model& m, const std::function<ggml_type(const TensorInfo&)>& type_of,
                                         const std::function<std::string(const TensorInfo&)>& rename = nullptr);
}  // namespace gm
