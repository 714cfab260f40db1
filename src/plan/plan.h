// A plan (schema "gamma.plan", version 1): one candidate per linear module plus a type for
// each non-linear tensor. Produced by `gamma plan` (uniform), `gamma solve` (Stage II), or
// by hand; consumed by `gamma emit`.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "pool/manifest.h"
#include "util/json.h"
#include "util/status.h"

namespace gm {

struct Plan {
  static constexpr const char* kSchema = "gamma.plan";
  static constexpr int kVersion = 1;

  std::string model_fingerprint;
  std::string method;                          // "uniform", "gamma", "static", ...
  json info = json::object();                  // producer's details (budget, scores file, ...)
  std::map<std::string, std::string> modules;  // linear module name -> candidate id
  std::map<std::string, std::string> fixed;    // non-linear tensor name -> ggml type name

  static Result<Plan> load(const std::string& path);
  Status save(const std::string& path) const;  // atomic
  json to_json() const;
  static Result<Plan> from_json(const json& j);

  // Every module and fixed tensor of the manifest named exactly once with a candidate it
  // has / a type it admits; same model. Error names the first offender.
  Status validate(const Manifest& m) const;
};

// Sizes a plan would have once emitted (exact: emit asserts the written file matches).
struct PlanSize {
  uint64_t linear_bytes = 0;  // sum of candidate bytes over linear modules
  int64_t linear_params = 0;
  double linear_bpw = 0;      // 8 * linear_bytes / linear_params
  uint64_t file_bytes = 0;    // the whole GGUF
};
PlanSize plan_size(const Manifest& m, const Plan& p);

// The tensor that is the output head: output.weight, or token_embd.weight when they are tied.
std::string output_head(const Manifest& m);
// `type` is a ggml type that non-linear tensor `name` of the manifest can hold; error names why not.
Status check_fixed_type(const Manifest& m, const std::string& name, const std::string& type);

// Default types of the non-linear tensors: what llama-quantize's nearest standard k-quant
// mix (by linear bpw) gives token_embd and output; norms and other 1-D tensors stay F32.
std::map<std::string, std::string> default_fixed_types(const Manifest& m, double linear_bpw);
// The output head's (or the tied embedding's) type `steps` steps cheaper than `current` that
// its rows fit, or "": the head rules gamma run tries beside the default (run/target.cpp) and
// the head types the speed table prices (speed/speed.h).
std::string cheaper_head_type(const Manifest& m, const std::string& head, const std::string& current, int steps = 1);
// The type each fixed tensor gets in `p`: its own entry, else the default at the plan's linear bpw.
std::map<std::string, std::string> plan_fixed_types(const Manifest& m, const Plan& p);
// Bytes of the fixed tensors at the given types (padded to alignment) + header.
uint64_t fixed_file_bytes(const Manifest& m, const std::map<std::string, std::string>& fixed);

// Every module at `type` (error if a module cannot hold it); fixed tensors by default.
Result<Plan> uniform_plan(const Manifest& m, const std::string& type);

// The per-tensor types of any GGUF of the same model (e.g. a llama.cpp mix) as a plan over the
// pool: each module at the pool's candidate of the type the file holds, each fixed tensor at
// the file's type. Emitting it re-makes that allocation from the pool's candidates, the fair
// control beside gamma's plans (the same candidates on both sides). A type the pool lacks for
// a module is an error naming both.
Result<Plan> plan_from_gguf(const Manifest& m, const std::string& gguf_path);

}  // namespace gm
