// Namespace gm, not gamma: glibc declares a function gamma() in <math.h>.
// Errors as values (LevelDB style): library code never prints or exits; the CLI turns a
// failed Status into one line on stderr and a non-zero exit.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace gm {

class Status {
 public:
  // The kind of an error, for callers that branch on it (a missing cache file is rebuilt, a
  // corrupt one too, an I/O error is not); the message stays the user's one line.
  enum class Code { kOk = 0, kInvalidArgument, kNotFound, kCorrupt, kIo };

  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg, Code code = Code::kInvalidArgument) { return Status(std::move(msg), code); }
  template <typename... Args>
  static Status errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...), Code::kInvalidArgument);
  }
  template <typename... Args>
  static Status errorf(Code code, fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...), code);
  }
  bool is_ok() const { return !msg_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { static const std::string none; return msg_ ? *msg_ : none; }
  // Prefix context: "reading plan.json: " + message (the code is kept).
  Status with_context(const std::string& ctx) const {
    return is_ok() ? *this : Status(ctx + ": " + *msg_, code_);
  }

 private:
  Status(std::string msg, Code code) : msg_(std::move(msg)), code_(code) {}
  std::optional<std::string> msg_;
  Code code_ = Code::kOk;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  // Reading the value of an error is a bug in the caller: it aborts with the error's message
  // (never undefined behaviour). On a temporary Result the value is moved out, not referred
  // to, so `for (auto& x : load().value().items)` does not outlive the Result (ASan found one).
  T& value() & { return checked(); }
  const T& value() const& { return checked(); }
  T value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &checked(); }
  T& operator*() { return checked(); }
  const T& operator*() const { return checked(); }

 private:
  T& checked() const {
    if (!value_) {
      std::fprintf(stderr, "gamma: fatal: the value of an error was read: %s\n", status_.message().c_str());
      std::abort();
    }
    return const_cast<T&>(*value_);
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace gm

// Early-return helpers: keep call sites one line.
#define GAMMA_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::gm::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;            \
  } while (0)

#define GAMMA_CONCAT_INNER(a, b) a##b
#define GAMMA_CONCAT(a, b) GAMMA_CONCAT_INNER(a, b)
#define GAMMA_ASSIGN_OR_RETURN(lhs, expr) \
  GAMMA_ASSIGN_OR_RETURN_IMPL(GAMMA_CONCAT(_res_, __LINE__), lhs, expr)
#define GAMMA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
