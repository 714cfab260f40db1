#include "run/mixes.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "gguf_model/model.h"
#include "util/proc.h"

namespace gm::run {

const std::vector<std::string>& standard_mixes() {
  static const std::vector<std::string> mixes = {
      "IQ1_S",  "IQ1_M",  "IQ2_XXS", "IQ2_XS", "IQ2_S",  "IQ2_M",  "Q2_K_S", "Q2_K",   "IQ3_XXS",
      "IQ3_XS", "Q3_K_S", "IQ3_S",   "IQ3_M",  "Q3_K_M", "Q3_K_L", "IQ4_XS", "Q4_0",   "Q4_K_S",
      "IQ4_NL", "Q4_K_M", "Q4_1",    "Q5_0",   "Q5_K_S", "Q5_K_M", "Q5_1",   "Q6_K",   "Q8_0"};
  return mixes;
}

bool is_standard_mix(const std::string& name) {
  const auto& m = standard_mixes();
  return std::find(m.begin(), m.end(), name) != m.end();
}

Result<uint64_t> gguf_header_bytes(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(auto t, Model::open(path));
  uint64_t data = 0;
  for (const auto& ti : t->tensors()) data += (ti.nbytes + 31) / 32 * 32;
  return t->file_size() > data ? t->file_size() - data : 0;
}

Result<MixPrediction> predict_mix(const std::string& llama_quantize, const std::string& teacher,
                                  const std::string& imatrix, const std::string& mix, uint64_t teacher_header) {
  std::vector<std::string> argv = {llama_quantize, "--dry-run"};
  if (!imatrix.empty()) argv.insert(argv.end(), {"--imatrix", imatrix});
  argv.insert(argv.end(), {teacher, mix, "1"});
  GAMMA_ASSIGN_OR_RETURN(std::string out, capture(argv));
  static const std::regex re(R"(quant size\s*=\s*([0-9.]+) MiB)");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return Status::errorf("llama-quantize --dry-run {}: no \"quant size\" in its output", mix);
  MixPrediction p;
  p.file_bytes = uint64_t(std::llround(std::stod(m[1].str()) * 1048576.0)) + teacher_header;
  p.needs_imatrix = out.find("will require an imatrix") != std::string::npos;
  return p;
}

std::vector<std::string> mixes_for_budget(const std::map<std::string, uint64_t>& predicted, uint64_t budget, double near,
                                          int max_within) {
  std::vector<std::pair<uint64_t, std::string>> within, below, above;
  for (const auto& [name, bytes] : predicted) {
    if (bytes > budget) above.push_back({bytes, name});
    else if (double(bytes) >= near * double(budget)) within.push_back({bytes, name});
    else below.push_back({bytes, name});
  }
  std::sort(within.rbegin(), within.rend());  // largest (nearest the budget) first
  if (int(within.size()) > max_within) within.resize(size_t(max_within));
  if (within.empty() && !below.empty()) within.push_back(*std::max_element(below.begin(), below.end()));
  if (!above.empty()) within.push_back(*std::min_element(above.begin(), above.end()));
  std::sort(within.begin(), within.end());
  std::vector<std::string> out;
  for (const auto& w : within) out.push_back(w.second);
  return out;
}

}  // namespace gm::run
