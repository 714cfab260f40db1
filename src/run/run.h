// `gamma run`: the whole job on one model, as a chain of gamma's own commands (each a child
// process, so every stage prints and fails exactly as when run alone) and llama.cpp's tools:
//   fetch -> dequantize (the F32 teacher) -> llama-imatrix -> pool -> learn -> solve -> emit
//   -> llama-quantize the llama.cpp standard mixes nearest in size below and above (same
//      teacher and imatrix)
//   -> gamma eval of both against the teacher on the same chunks -> a side-by-side table.
// Every step leaves its output in the work directory and is skipped when that output exists
// (pool and learn also resume mid-way), so an interrupted run continues where it stopped.
#pragma once
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct RunOptions {
  std::string model = "smollm2-135m";  // registry name (gamma fetch) or a GGUF path
  double bpw = 4.75;                   // target bits per weight of the linear modules
  std::string work = "gamma-run";      // work directory
  std::vector<std::string> types;      // pool candidates; empty: gamma pool's default set (auto)
  std::string imatrix = "auto";        // auto (llama-imatrix on the calibration text), none, or a file
  int imatrix_chunks = 32;
  std::string scores;                  // reuse a SCORES.json instead of learning
  int steps = 300, layers_per_step = 6, calib_tokens = 8192;
  std::string compare = "auto";        // auto (nearest llama.cpp mix in size), none, or a mix name
  std::string eval_text;               // default ../shared/data/text/wiki.test.raw
  std::string valid_text;              // chooses the plan; default ../shared/data/text/wiki.valid.tokens
  int eval_ctx = 512, eval_chunks = 8;
  int threads = 0;                     // 0: all cores
  std::string gamma_exe;               // this program
  std::string llama_bin;               // directory of llama-imatrix and llama-quantize
  std::string data_dir;                // ../shared/data (calibration and evaluation text)
};

// llama-quantize's standard mixes, K, legacy and IQ, with their nominal bits per weight from
// the table llama-quantize prints: where `auto` starts looking.
struct StandardMix {
  const char* name;
  double nominal_bpw;
  bool needs_imatrix;  // llama-quantize refuses it without one
};
const std::vector<StandardMix>& standard_mixes();

// The mix nearest `file_bpw` by nominal size: the first one `auto` quantizes. Then, given
// the real file sizes of the mixes quantized so far (bpw by index into standard_mixes(),
// negative = not made yet), the next to make (-1: done): until one real mix lies on each
// side of gamma's size, the nominally nearest untried mix on the side still missing.
// `gamma run` shows the nearest mix below and the nearest above, in real bytes.
// Mixes that need an imatrix are skipped when `have_imatrix` is false.
int nearest_mix(double file_bpw, bool have_imatrix = true);
int next_mix_to_try(double file_bpw, const std::vector<double>& made_bpw, bool have_imatrix = true);

Status run_pipeline(const RunOptions& opt);

}  // namespace gm
