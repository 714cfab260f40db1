#include "eval/compare.h"

#include <cmath>

#include "gguf_model/model.h"

namespace gm::eval {

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
