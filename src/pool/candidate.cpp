#include "pool/candidate.h"

#include <unistd.h>

#include <filesystem>

#include "pool/quantize.h"
#include "util/files.h"

namespace gm {

int64_t rows_per_imatrix(const TensorInfo& t, const std::vector<float>* v) {
  if (!v || int64_t(v->size()) == t.row_width() || t.shape.size() != 3) return 0;
  return t.shape[1];
}

Result<std::vector<uint8_t>> candidate_bytes(const Model& m, const TensorInfo& t, ggml_type type,
                                             const std::vector<float>* ref, const std::vector<float>* imatrix,
                                             int n_threads) {
  if (t.type == type) {  // the source's own bytes are the exact candidate
    std::vector<uint8_t> buf(t.nbytes);
    GAMMA_RETURN_IF_ERROR(m.read_raw(t, buf.data()));
    return buf;
  }
  std::vector<float> read;
  if (!ref) {
    GAMMA_ASSIGN_OR_RETURN(read, m.read_f32(t));
    ref = &read;
  }
  return quantize_rows(type, ref->data(), t.n_rows(), t.row_width(), imatrix ? imatrix->data() : nullptr, n_threads,
                       rows_per_imatrix(t, imatrix));
}

std::string made_bytes_path(const Manifest& man, const std::string& kind, const std::string& tensor, ggml_type t) {
  const std::string key = man.model_fingerprint + "/" + man.imatrix_sha256;
  return man.dir + "/" + kind + "/" + tensor + "." + type_name(t) + "." + sha256_hex(key.data(), key.size()).substr(0, 16);
}

Status cached_bytes(const std::string& path, uint64_t nbytes, std::vector<uint8_t>& buf,
                    const std::function<Result<std::vector<uint8_t>>()>& make, bool* on_disk) {
  if (on_disk) *on_disk = false;
  buf.resize(nbytes);
  if (read_file_exact(path, buf.data(), nbytes).is_ok()) {
    if (on_disk) *on_disk = true;
    return Status::ok();
  }
  GAMMA_ASSIGN_OR_RETURN(buf, make());
  if (buf.size() == nbytes) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (!ec && write_file_atomic_nosync(path, buf.data(), buf.size()).is_ok() && on_disk) *on_disk = true;
  }
  return Status::ok();
}

uint64_t stream_keep_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 4 : 0;
}

}  // namespace gm
