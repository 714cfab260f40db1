#include "gguf_model/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf.h"
#include "util/files.h"

namespace gm {

uint64_t OutTensor::nbytes() const {
  int64_t rows = 1;
  for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
  return uint64_t(ggml_row_size(type, shape.at(0))) * uint64_t(rows);
}

GgufWriter::GgufWriter(const gguf_context* kv_source) : ctx_(gguf_init_empty()) {
  if (kv_source) gguf_set_kv(ctx_, kv_source);
  ggml_init_params p{/*mem_size=*/ggml_tensor_overhead() * 4096, /*mem_buffer=*/nullptr, /*no_alloc=*/true};
  meta_ = ggml_init(p);
}

GgufWriter::~GgufWriter() {
  gguf_free(ctx_);
  ggml_free(meta_);
}

void GgufWriter::add(const OutTensor& t) {
  int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
  for (size_t d = 0; d < t.shape.size() && d < GGML_MAX_DIMS; ++d) ne[d] = t.shape[d];
  ggml_tensor* x = ggml_new_tensor(meta_, t.type, int(t.shape.size()), ne);
  ggml_set_name(x, t.name.c_str());
  gguf_add_tensor(ctx_, x);
  tensors_.push_back(t);
}

uint64_t GgufWriter::alignment() const { return gguf_get_alignment(ctx_); }
uint64_t GgufWriter::meta_bytes() const { return gguf_get_meta_size(ctx_); }
uint64_t GgufWriter::padded(uint64_t n) const {
  const uint64_t a = alignment();
  return (n + a - 1) / a * a;
}
uint64_t GgufWriter::predicted_size() const {
  uint64_t s = meta_bytes();
  for (const auto& t : tensors_) s += padded(t.nbytes());
  return s;
}

Status GgufWriter::write(const std::string& path, const Produce& produce) const {
  const uint64_t want = predicted_size();
  return write_atomic(path, [&](const std::string& tmp) -> Status {
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return Status::errorf("cannot write {}: {}", path, std::strerror(errno));
    auto fail = [&](const std::string& why) {
      std::fclose(f);
      return Status::errorf("cannot write {}: {}", path, why);
    };
    std::vector<uint8_t> buf(meta_bytes());
    gguf_get_meta_data(ctx_, buf.data());
    if (std::fwrite(buf.data(), 1, buf.size(), f) != buf.size()) return fail(std::strerror(errno));
    static const uint8_t zeros[64] = {0};
    for (size_t i = 0; i < tensors_.size(); ++i) {
      buf.clear();
      Status st = produce(i, buf);
      if (!st.is_ok()) { std::fclose(f); return st; }
      if (buf.size() != tensors_[i].nbytes())
        return fail(fmt::format("tensor {} has {} bytes, expected {}", tensors_[i].name, buf.size(), tensors_[i].nbytes()));
      if (std::fwrite(buf.data(), 1, buf.size(), f) != buf.size()) return fail(std::strerror(errno));
      const uint64_t pad = padded(buf.size()) - buf.size();
      if (pad && std::fwrite(zeros, 1, pad, f) != pad) return fail(std::strerror(errno));
    }
    if (std::fflush(f) != 0) return fail(std::strerror(errno));
    const long got = std::ftell(f);
    if (std::fclose(f) != 0) return Status::errorf("cannot write {}: {}", path, std::strerror(errno));
    if (uint64_t(got) != want)
      return Status::errorf("internal: wrote {} bytes to {}, predicted {}", got, path, want);
    return Status::ok();
  });
}

}  // namespace gm

#include "gguf_model/model.h"

namespace gm {

std::unique_ptr<GgufWriter> model_writer(const Model& m, const std::function<ggml_type(const TensorInfo&)>& type_of,
                                         const std::function<std::string(const TensorInfo&)>& rename) {
  auto w = std::make_unique<GgufWriter>(m.gguf());
  gguf_context* ctx = w->gguf();
  for (int64_t k = gguf_get_n_kv(ctx) - 1; k >= 0; --k) {
    const std::string key = gguf_get_key(ctx, k);
    if (key.rfind("quantize.", 0) == 0) gguf_remove_key(ctx, key.c_str());
  }
  gguf_set_val_u32(ctx, "general.quantization_version", GGML_QNT_VERSION);
  gguf_set_val_u32(ctx, "general.file_type", 0);  // set by emit; fixed size either way
  gguf_set_val_str(ctx, "general.quantized_by", "gamma");
  gguf_set_val_str(ctx, "gamma.plan_sha256", std::string(64, '0').c_str());
  for (const auto& t : m.tensors()) {
    std::string name = rename ? rename(t) : t.name;
    if (!name.empty()) w->add({std::move(name), type_of(t), t.shape});
  }
  return w;
}

}  // namespace gm
