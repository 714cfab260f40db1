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
  std::vector<std::string> types;      // pool candidates; empty: by the model's row widths
  std::string imatrix = "auto";        // auto (llama-imatrix on the calibration text), none, or a file
  int imatrix_chunks = 32;
  std::string scores;                  // reuse a SCORES.json instead of learning
  int steps = 300, layers_per_step = 6, calib_tokens = 8192;
  std::string compare = "auto";        // auto (nearest llama.cpp mix in size), none, or a mix name
  std::string eval_text;               // default ../shared/data/text/wiki.test.raw
  int eval_ctx = 512, eval_chunks = 8;
  int threads = 0;                     // 0: all cores
  std::string gamma_exe;               // this program
  std::string llama_bin;               // directory of llama-imatrix and llama-quantize
  std::string data_dir;                // ../shared/data (calibration and evaluation text)
};

// llama-quantize's standard mixes with their nominal bits per weight, from the size table
// llama-quantize prints (GiB at Llama-3-8B's 8.03e9 weights): where `auto` starts looking.
struct StandardMix {
  const char* name;
  double nominal_bpw;
};
const std::vector<StandardMix>& standard_mixes();

// The mix nearest `file_bpw` by nominal size: the first one `auto` quantizes. Then, given
// the real file sizes of the mixes quantized so far (bpw by index into standard_mixes(),
// negative = not made yet), the next to make (-1: done): until one real mix lies on each
// side of gamma's size, the nominally nearest untried mix on the side still missing.
// `gamma run` shows the nearest mix below and the nearest above, in real bytes.
int nearest_mix(double file_bpw);
int next_mix_to_try(double file_bpw, const std::vector<double>& made_bpw);

// Candidate types for a model: Q2_K..Q6_K when every linear row width is a multiple of 256,
// else the 32-wide Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
Result<std::vector<std::string>> default_types(const std::string& model_path);

Status run_pipeline(const RunOptions& opt);

}  // namespace gm
