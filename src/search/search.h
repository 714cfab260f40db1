// gamma search: the search-based baseline (AMQ / EvoPress style) that GAMMA is compared with at
// equal wall time and equal bytes. A (1+λ) evolutionary search over assignments of the pool's
// candidates: each generation mutates the parent λ times by level switches that keep the file
// within the byte budget (raise 1..max_switches random modules one candidate, then lower random
// others one candidate until the file fits), ranks the children by KLD vs the teacher on the
// first `small_chunks` chunks of the calibration text, measures the best on `chunks` chunks and
// keeps it when that beats the parent. Fitness is the real thing: each child is emitted (a GGUF
// in tmp_dir) and evaluated through libllama against the teacher's cached log-probs.
//
// Resumable: OUT.state.json (gamma.search.state v1) holds the parent, its fitness, the
// generation and the seconds spent, written atomically after every generation; a rerun with the
// same inputs continues (raise --generations / --wall-time to go further). Each generation's
// random numbers come from (seed, generation), so a resumed search equals an uninterrupted one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "util/status.h"

namespace gm::search {

struct SearchOptions {
  std::string pool;
  std::string teacher;   // F32 teacher GGUF
  std::string text;      // calibration text (never the report text)
  std::string kld_base;  // the teacher's log-probs on `text` (written on first use)
  std::string out;       // the plan; OUT.state.json beside it
  std::string tmp_dir;   // where children are emitted (one file at a time); default: OUT's dir
  std::vector<std::string> init;  // plans to start from; the best on the full fitness is the parent
  uint64_t size = 0;              // the budget: the whole file, bytes
  int n_ctx = 512, chunks = 4, small_chunks = 1, offspring = 8, max_switches = 3;
  int generations = 0;      // stop after this many generations in all (0: no limit)
  double wall_seconds = 0;  // stop once this many seconds are spent in all (0: no limit)
  uint64_t seed = 0;
  int threads = 0;
  bool quiet = false;
};

struct SearchResult {
  Plan plan;
  double fitness = 0;  // mean KLD on `chunks` chunks
  int generations = 0, accepted = 0, evaluations = 0;
  double seconds = 0;
  int resumed_from = -1;  // the generation a state file resumed from, -1 when none
};

Result<SearchResult> run_search(const SearchOptions& o);

}  // namespace gm::search
