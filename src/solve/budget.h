// Budgets as users write them: file sizes ("900MiB", "1.2GB", "123456" bytes), bits per
// weight of the linear modules, and bpw sweeps ("2.5:4.5:0.05"). A budget is parsed once into a
// Budget; a program that hands it to another (gamma run -> gamma solve) passes Budget::args(),
// the exact text that parses back to the same value.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm::solve {

// The one range rule for bits per weight: finite, in (0, 32] (F32 is the most a weight takes).
Status check_bpw(double bpw);
// A whole-string number checked by check_bpw.
Result<double> parse_bpw(const std::string& text);

struct Budget {
  enum class Kind { kBpw, kFileBytes } kind = Kind::kBpw;
  double bpw = 0;           // kBpw: bits per weight over the linear modules, scales included
  uint64_t file_bytes = 0;  // kFileBytes: the whole GGUF as emit writes it

  static Budget of_bpw(double bpw);
  static Budget of_file_bytes(uint64_t bytes);
  // "3.25 bpw" or "953.7 MiB (1000000000 bytes)".
  std::string describe() const;
  // The command-line form: {"--bpw", "3.25"} (shortest text that reads back exactly) or
  // {"--size", "1000000000"}.
  std::vector<std::string> args() const;
};

// Bytes from "123456", "900MiB", "1.2GB", "4 GiB", "512kB" (decimal kB/MB/GB/TB, binary
// KiB/MiB/GiB/TiB, unit case-insensitive, fractional amounts rounded down to whole bytes).
// Negative, non-finite, unit-less fractions and unknown units are errors.
Result<uint64_t> parse_size(const std::string& text);
// "953.7 MiB (1000000000 bytes)".
std::string format_size(uint64_t bytes);

// START:STOP:STEP in bpw, both ends included (STOP when a whole number of steps away, up to
// rounding); at most 100000 budgets.
Result<std::vector<double>> parse_sweep(const std::string& text);

}  // namespace gm::solve
