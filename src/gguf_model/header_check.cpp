#include "gguf_model/header_check.h"

#include <cstdint>
#include <cstdio>
#include <memory>

#include "ggml.h"
#include "gguf.h"

namespace gm {
namespace {

// Sequential reads that report whether the bytes were there.
struct Reader {
  FILE* f;
  uint64_t left;
  bool read(void* dst, uint64_t n) {
    if (n > left || std::fread(dst, 1, size_t(n), f) != n) return false;
    left -= n;
    return true;
  }
  bool skip(uint64_t n) {
    if (n > left || std::fseek(f, long(n), SEEK_CUR) != 0) return false;
    left -= n;
    return true;
  }
  template <typename T>
  bool get(T& v) { return read(&v, sizeof v); }
  bool string(std::string* s) {
    uint64_t n = 0;
    if (!get(n) || n > left) return false;
    if (!s) return skip(n);
    s->resize(size_t(n));
    return read(s->data(), n);
  }
};

// Bytes of one scalar of a fixed-size GGUF type; 0 for string and array.
uint64_t scalar_size(uint32_t t) {
  switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

Status bad(const std::string& path, const std::string& what) {
  return Status::errorf(Status::Code::kCorrupt, "{} is a corrupt GGUF: {}", path, what);
}

}  // namespace

Status check_gguf_enums(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f || std::fseek(f.get(), 0, SEEK_END) != 0) return Status::ok();  // gguf.cpp says why
  const long size = std::ftell(f.get());
  std::rewind(f.get());
  const uint64_t file_bytes = size < 0 ? 0 : uint64_t(size);
  Reader r{f.get(), file_bytes};
  char magic[4];
  uint32_t version = 0;
  int64_t n_tensors = 0, n_kv = 0;
  if (!r.read(magic, 4) || std::string(magic, 4) != "GGUF" || !r.get(version) || (version != 2 && version != 3) ||
      !r.get(n_tensors) || !r.get(n_kv) || n_tensors < 0 || n_kv < 0)
    return Status::ok();
  for (int64_t i = 0; i < n_kv; ++i) {
    std::string key;
    uint32_t type = 0;
    if (!r.string(&key)) return Status::ok();
    // gguf.cpp compares the type it failed to read (its enum holding -1): refused here instead
    // (found by fuzz/fuzz_gguf_header; results/fuzz_gguf_header.md).
    if (!r.get(type)) return bad(path, fmt::format("the header ends inside key '{}' (truncated)", key));
    if (type >= GGUF_TYPE_COUNT) return bad(path, fmt::format("key '{}' has invalid GGUF type {}", key, type));
    uint64_t n = 1;
    if (type == GGUF_TYPE_ARRAY) {
      if (!r.get(type)) return Status::ok();
      if (type >= GGUF_TYPE_COUNT) return bad(path, fmt::format("array '{}' has invalid GGUF type {}", key, type));
      if (type == GGUF_TYPE_ARRAY || !r.get(n)) return Status::ok();  // nested arrays: gguf.cpp refuses them
    }
    if (type == GGUF_TYPE_STRING) {
      if (n > r.left / 8) return Status::ok();  // each string needs at least its length
      for (uint64_t k = 0; k < n; ++k)
        if (!r.string(nullptr)) return Status::ok();
    } else if (const uint64_t sz = scalar_size(type); sz == 0 || n > r.left / sz || !r.skip(n * sz)) {
      return Status::ok();
    }
  }
  for (int64_t i = 0; i < n_tensors; ++i) {
    std::string name;
    uint32_t n_dims = 0, type = 0;
    int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    if (!r.string(&name) || !r.get(n_dims) || n_dims > GGML_MAX_DIMS) return Status::ok();
    for (uint32_t d = 0; d < n_dims; ++d)
      if (!r.get(ne[d])) return Status::ok();
    if (!r.get(type)) return bad(path, fmt::format("the header ends inside tensor '{}' (truncated)", name));
    if (type >= GGML_TYPE_COUNT) return bad(path, fmt::format("tensor '{}' has invalid ggml type {}", name, type));
    if (!r.skip(8)) return Status::ok();  // the offset
    // No tensor is larger than the file holding it. llama.cpp's imatrix loader allocates every
    // tensor (no_alloc = false) before it checks the data against the file: a 14 KB imatrix
    // claiming 2^36 floats made it abort (found by fuzz/fuzz_imatrix; results/fuzz.md).
    const int64_t blck = ggml_blck_size(ggml_type(type));
    if (blck <= 0 || ne[0] < 0 || ne[1] < 0 || ne[2] < 0 || ne[3] < 0) continue;  // gguf.cpp's own checks
    long double bytes = (long double)ggml_type_size(ggml_type(type)) * ((long double)ne[0] / (long double)blck);
    for (int d = 1; d < GGML_MAX_DIMS; ++d) bytes *= (long double)ne[d];
    if (bytes > (long double)file_bytes)
      return bad(path, fmt::format("tensor '{}' claims {:.0f} bytes but the file has {}", name, double(bytes), file_bytes));
  }
  return Status::ok();
}

}  // namespace gm
