// Budgets as users write them: file sizes ("900MiB", "1.2GB", "123456" bytes) and bpw
// sweeps ("2.5:4.5:0.05").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm::solve {

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
