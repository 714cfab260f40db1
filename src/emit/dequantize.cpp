#include "emit/dequantize.h"

#include <cstring>

#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "llama.h"
#include "pool/quantize.h"
#include "util/threads.h"

namespace gm {

Status dequantize_model(const std::string& in, const std::string& out, const std::string& type) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(type));
  if (t != GGML_TYPE_F32 && t != GGML_TYPE_F16) return Status::errorf("--type must be f32 or f16, not {}", type);
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(in));
  auto type_of = [&](const TensorInfo& x) { return x.shape.size() >= 2 ? t : x.type; };
  auto w = model_writer(*model, type_of);
  gguf_set_val_u32(w->gguf(), "general.file_type", t == GGML_TYPE_F32 ? LLAMA_FTYPE_ALL_F32 : LLAMA_FTYPE_MOSTLY_F16);
  const auto& ts = model->tensors();
  return w->write(out, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
    const TensorInfo& x = ts[i];
    const ggml_type want = type_of(x);
    GAMMA_RETURN_IF_ERROR(model->check_fits_memory(x));
    if (x.type == want) {
      buf.resize(x.nbytes);
      return model->read_raw(x, buf.data());
    }
    GAMMA_ASSIGN_OR_RETURN(std::vector<float> f, model->read_f32(x));
    if (want == GGML_TYPE_F32) {
      buf.resize(f.size() * sizeof(float));
      std::memcpy(buf.data(), f.data(), buf.size());
    } else {
      buf = quantize_rows(want, f.data(), x.n_rows(), x.row_width(), nullptr, resolve_threads());
    }
    return Status::ok();
  });
}

}  // namespace gm
