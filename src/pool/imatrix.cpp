#include "pool/imatrix.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "gguf.h"
#include "gguf_model/header_check.h"
#include "imatrix-loader.h"
#include "log.h"
#include "util/files.h"

namespace gm {
namespace {

// llama.cpp's loader falls back to the legacy .dat reader whenever gguf cannot open the file,
// and that reader sizes buffers from lengths in the file unchecked (a negative name length
// threw std::length_error out of it, found by fuzz_imatrix; a huge one allocates gigabytes).
// This walks the same layout with every length bounded by the bytes left; false: not one.
bool legacy_layout_ok(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f || std::fseek(f.get(), 0, SEEK_END) != 0) return false;
  long left = std::ftell(f.get());
  std::rewind(f.get());
  auto i32 = [&](int32_t& v) { return left >= 4 && std::fread(&v, 4, 1, f.get()) == 1 && (left -= 4, true); };
  auto skip = [&](int64_t n) { return n >= 0 && n <= left && std::fseek(f.get(), long(n), SEEK_CUR) == 0 && (left -= long(n), true); };
  int32_t n_entries = 0;
  if (!i32(n_entries) || n_entries < 1) return false;
  for (int32_t i = 0; i < n_entries; ++i) {
    int32_t len = 0, ncall = 0, nval = 0;
    if (!i32(len) || !skip(len) || !i32(ncall) || !i32(nval) || nval < 1 || !skip(int64_t(nval) * 4)) return false;
  }
  int32_t n_calls = 0, len = 0;  // optional trailer: chunk count and dataset name
  if (left == 0 || !i32(n_calls) || !i32(len) || len <= 0) return true;
  return skip(len);
}

}  // namespace

const std::vector<float>* Imatrix::find(const std::string& tensor) const {
  auto it = values.find(tensor);
  return it == values.end() ? nullptr : &it->second;
}

Result<Imatrix> load_imatrix(const std::string& path) {
  Imatrix im;
  im.path = path;
  GAMMA_ASSIGN_OR_RETURN(im.sha256, sha256_file(path));
  if (Status st = check_gguf_enums(path); !st.is_ok())  // legacy .dat files pass: no GGUF magic
    return Status::errorf("{}: not a readable imatrix file ({})", path, st.message());
  {
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* g = gguf_init_from_file(path.c_str(), params);
    const bool is_gguf = g != nullptr;
    if (g) gguf_free(g);
    if (!is_gguf && !legacy_layout_ok(path)) return Status::errorf("{}: not a readable imatrix file", path);
  }
  common_imatrix loaded;
  // llama.cpp's loader prints its own complaint on stderr; gamma's one line below says it.
  const int thold = common_log_get_verbosity_thold();
  common_log_set_verbosity_thold(-1);
  bool ok = false;
  try {
    ok = common_imatrix_load(path, loaded);
  } catch (const std::exception&) {  // a length it trusted; nothing of it is kept
    ok = false;
  }
  common_log_set_verbosity_thold(thold);
  if (!ok) return Status::errorf("{}: not a readable imatrix file", path);
  if (!loaded.is_legacy && !loaded.has_metadata) return Status::errorf("{}: imatrix has no metadata", path);
  for (const auto& [name, entry] : loaded.entries) {
    std::vector<float> e(entry.sums.size());
    if (!loaded.is_legacy) {
      // Same normalisation as tools/quantize: per-expert counts; unseen columns weigh 1.
      if (entry.counts.empty()) return Status::errorf("{}: entry {} has no counts", path, name);
      const int64_t nc = int64_t(entry.counts.size());
      const int64_t ne0 = int64_t(entry.sums.size()) / nc;
      for (int64_t j = 0; j < nc; ++j)
        for (int64_t i = 0; i < ne0; ++i)
          e[j * ne0 + i] = entry.counts[j] > 0 ? entry.sums[j * ne0 + i] / float(entry.counts[j]) : 1.0f;
    } else {
      const int64_t ncall = entry.counts.empty() ? 0 : entry.counts[0];
      for (size_t i = 0; i < e.size(); ++i) e[i] = ncall > 0 ? entry.sums[i] / float(ncall) : entry.sums[i];
    }
    for (float v : e)
      if (!std::isfinite(v)) return Status::errorf("{}: entry {} holds NaN or infinity", path, name);
    im.values.emplace(name, std::move(e));
  }
  if (im.values.empty()) return Status::errorf("{}: imatrix has no entries", path);
  return im;
}

}  // namespace gm
