#include "eval/compare.h"

#include <cmath>

#include "gguf_model/model.h"

namespace gm::eval {

Result<PairedDiff> paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return Status::errorf("paired chunks: {} against {} chunks", a.size(), b.size());
  if (a.size() < 2) return Status::error("paired chunks: at least two chunks are needed for an error");
  PairedDiff d;
  d.n = a.size();
  for (size_t i = 0; i < d.n; ++i) d.mean += a[i] - b[i];
  d.mean /= double(d.n);
  double ss = 0;
  for (size_t i = 0; i < d.n; ++i) ss += (a[i] - b[i] - d.mean) * (a[i] - b[i] - d.mean);
  d.stderr_ = std::sqrt(ss / double(d.n - 1)) / std::sqrt(double(d.n));
  return d;
}

Result<PairedDiff> paired_difference(const EvalResult& a, const EvalResult& b) {
  if (!a.kld || !a.kld->chunk_means || !b.kld || !b.kld->chunk_means)
    return Status::error("paired chunks: both evaluations need each chunk's KLD (gamma eval --teacher)");
  const auto& x = a.settings;
  const auto& y = b.settings;
  const bool same_text = x.text && y.text && x.text->sha256 && y.text->sha256 && *x.text->sha256 == *y.text->sha256;
  if (!same_text || x.ctx != y.ctx)
    return Status::error("paired chunks: the two evaluations are not on the same text and context");
  return paired_difference(*a.kld->chunk_means, *b.kld->chunk_means);
}

Result<std::vector<TypeDiff>> type_differences(const std::string& a_gguf, const std::string& b_gguf) {
  GAMMA_ASSIGN_OR_RETURN(auto a, TensorFile::open(a_gguf));
  GAMMA_ASSIGN_OR_RETURN(auto b, TensorFile::open(b_gguf));
  std::vector<TypeDiff> out;
  if (a->tensors().size() != b->tensors().size())
    return Status::errorf("{} and {} are not the same model ({} against {} tensors)", a_gguf, b_gguf, a->tensors().size(),
                          b->tensors().size());
  for (const auto& x : a->tensors()) {
    const TensorInfo* y = b->find(x.name);
    if (!y || y->shape != x.shape)
      return Status::errorf("{} and {} are not the same model (tensor {})", a_gguf, b_gguf, x.name);
    if (x.type != y->type) out.push_back({x.name, type_name(x.type), type_name(y->type)});
  }
  return out;
}

}  // namespace gm::eval
