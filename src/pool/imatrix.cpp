#include "pool/imatrix.h"

#include <cmath>

#include "gguf_model/header_check.h"
#include "imatrix-loader.h"
#include "log.h"
#include "util/files.h"

namespace gm {

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
  common_imatrix loaded;
  // llama.cpp's loader prints its own complaint on stderr; gamma's one line below says it.
  const int thold = common_log_get_verbosity_thold();
  common_log_set_verbosity_thold(-1);
  const bool ok = common_imatrix_load(path, loaded);
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
