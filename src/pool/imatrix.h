// Importance matrices as llama-quantize uses them: read with llama.cpp's own loader
// (common_imatrix_load: the GGUF format llama-imatrix writes, or the legacy .dat), each
// entry normalised the way tools/quantize does (sum of squared activations / count).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct Imatrix {
  std::string path, sha256;
  std::map<std::string, std::vector<float>> values;  // tensor name -> per-column importance
  const std::vector<float>* find(const std::string& tensor) const;
};

Result<Imatrix> load_imatrix(const std::string& path);

}  // namespace gm
