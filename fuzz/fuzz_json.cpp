// Every versioned JSON reader, one per binary (FUZZ_READER picks it at compile time): the
// pool manifest, a plan, scores, an eval result (gamma.eval), a Stage I checkpoint. Each must accept the
// file or refuse it with one Status, whatever the bytes.
#include "fuzz/fuzz_input.h"
#include "eval/result.h"
#include "learn/checkpoint.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "scores/scores.h"
#include "util/json.h"

namespace {
#define READER_manifest 1
#define READER_plan 2
#define READER_scores 3
#define READER_checkpoint 4
#define READER_eval 5
#define CAT(a, b) a##b
#define READER(x) CAT(READER_, x)

void read_one(const uint8_t* data, size_t size) {
#if READER(FUZZ_READER) == READER_manifest
  const std::string path = gm::fuzz::write_input(data, size, "manifest.json");
  (void)gm::Manifest::load(std::filesystem::path(path).parent_path().string());
#elif READER(FUZZ_READER) == READER_plan
  (void)gm::Plan::load(gm::fuzz::write_input(data, size, "plan.json"));
#elif READER(FUZZ_READER) == READER_scores
  (void)gm::scores::Scores::load(gm::fuzz::write_input(data, size, "scores.json"));
#elif READER(FUZZ_READER) == READER_checkpoint
  const std::string path = gm::fuzz::write_input(data, size, "scores.json.ckpt");
  auto j = gm::read_json(path, gm::Checkpoint::kSchema, gm::Checkpoint::kVersion);
  if (j.is_ok()) (void)gm::Checkpoint::from_json(*j, path);
#elif READER(FUZZ_READER) == READER_eval
  (void)gm::eval::EvalResult::load(gm::fuzz::write_input(data, size, "eval.json"));
#else
#error "FUZZ_READER must be manifest, plan, scores, checkpoint or eval"
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read_one(data, size);
  return 0;
}
