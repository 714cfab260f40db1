// Two files measured on the same chunks, compared pair by pair (`gamma compare`): the mean of
// the per-chunk KLD differences and its standard error (the chunks' own difficulty cancels, so
// a difference far smaller than either file's error can be told apart), and the tensors whose
// types differ between the two files.
#pragma once
#include <string>
#include <vector>

#include "eval/result.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::eval {

// paired_difference: eval/result.h (gamma run's summary pairs its rows too).

struct TypeDiff {
  std::string tensor, type_a, type_b;
};
// Every tensor of `a` whose type in `b` differs (same tensor names and shapes required).
Result<std::vector<TypeDiff>> type_differences(const std::string& a_gguf, const std::string& b_gguf);

}  // namespace gm::eval
