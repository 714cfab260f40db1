#include "solve/budget.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace gm::solve {
namespace {

// Whole-string strtold: no trailing junk, finite.
template <typename T>
bool parse_number(const std::string& s, T* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  long double v = std::strtold(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = static_cast<T>(v);
  return true;
}

}  // namespace

Status check_bpw(double bpw) {
  if (!std::isfinite(bpw) || bpw <= 0 || bpw > 32)
    return Status::errorf("--bpw must be a number of bits per weight in (0, 32], not {}", bpw);
  return Status::ok();
}

Result<double> parse_bpw(const std::string& text) {
  double v = 0;
  if (!parse_number(text, &v)) v = NAN;
  GAMMA_RETURN_IF_ERROR(check_bpw(v));
  return v;
}

Budget Budget::of_bpw(double bpw) {
  Budget b;
  b.bpw = bpw;
  return b;
}

Budget Budget::of_file_bytes(uint64_t bytes) {
  Budget b;
  b.kind = Kind::kFileBytes;
  b.file_bytes = bytes;
  return b;
}

std::string Budget::describe() const {
  return kind == Kind::kBpw ? fmt::format("{:g} bpw", bpw) : format_size(file_bytes);
}

std::vector<std::string> Budget::args() const {
  if (kind == Kind::kFileBytes) return {"--size", std::to_string(file_bytes)};
  return {"--bpw", fmt::format("{}", bpw)};  // fmt's shortest round-trip form
}

Result<uint64_t> parse_size(const std::string& text) {
  size_t split = text.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(text[split - 1]))) --split;
  std::string num = text.substr(0, split), unit;
  while (!num.empty() && num.back() == ' ') num.pop_back();
  for (char c : text.substr(split)) unit += char(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, long double> kUnits[] = {
      {"", 1},         {"b", 1},           {"kb", 1e3L},        {"mb", 1e6L},          {"gb", 1e9L},
      {"tb", 1e12L},   {"kib", 1024.0L},   {"mib", 1048576.0L}, {"gib", 1073741824.0L}, {"tib", 1099511627776.0L}};
  long double mult = 0;
  for (const auto& [name, m] : kUnits)
    if (unit == name) mult = m;
  long double v = 0;
  if (mult == 0 || !parse_number(num, &v))
    return Status::errorf("size '{}' is not a byte count like 123456, 900MiB or 1.2GB", text);
  if (v < 0) return Status::errorf("size '{}' is negative", text);
  // 1.2GB is 1200000000 bytes although 1.2 has no exact binary value: a product within
  // 1e-6 of a whole number is that number.
  long double x = v * mult, bytes = std::round(x);
  if (std::fabs(x - bytes) > 1e-6L) {
    if (mult == 1) return Status::errorf("size '{}' is not a whole number of bytes", text);
    bytes = std::floor(x);
  }
  if (bytes >= 18446744073709551615.0L) return Status::errorf("size '{}' is too large", text);
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t bytes) {
  return fmt::format("{:.1f} MiB ({} bytes)", double(bytes) / 1048576.0, bytes);
}

Result<std::vector<double>> parse_sweep(const std::string& text) {
  double v[3] = {0, 0, 0};
  size_t start = 0;
  for (int k = 0; k < 3; ++k) {
    size_t colon = text.find(':', start);
    if ((k < 2) != (colon != std::string::npos) ||
        !parse_number(text.substr(start, k < 2 ? colon - start : std::string::npos), &v[k]))
      return Status::errorf("--sweep '{}': expected START:STOP:STEP in bpw, e.g. 2.5:4.5:0.05", text);
    start = colon + 1;
  }
  if (v[0] <= 0 || v[1] < v[0] || v[2] <= 0)
    return Status::errorf("--sweep '{}': needs 0 < START <= STOP and STEP > 0", text);
  double n = std::floor((v[1] - v[0]) / v[2] + 1e-9);
  if (n >= 100000) return Status::errorf("--sweep '{}': more than 100000 budgets", text);
  std::vector<double> out;
  for (int i = 0; i <= int(n); ++i) {
    // Rounded to 1e-9 bpw so that 2.5 + 7 * 0.05 prints and names files as 2.85.
    out.push_back(std::round((v[0] + i * v[2]) * 1e9) / 1e9);
  }
  return out;
}

}  // namespace gm::solve
