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

struct PairedDiff {
  double mean = 0, stderr_ = 0;  // of a - b over the chunks
  size_t n = 0;
};
// a and b: each chunk's mean KLD, the same chunks in the same order (at least two).
Result<PairedDiff> paired_difference(const std::vector<double>& a, const std::vector<double>& b);
// The same from two eval results (gamma.eval with chunk_means), checked to be on the same text,
// context and chunks.
Result<PairedDiff> paired_difference(const EvalResult& a, const EvalResult& b);

struct TypeDiff {
  std::string tensor, type_a, type_b;
};
// Every tensor of `a` whose type in `b` differs (same tensor names and shapes required).
Result<std::vector<TypeDiff>> type_differences(const std::string& a_gguf, const std::string& b_gguf);

}  // namespace gm::eval
