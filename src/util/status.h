// Namespace gm, not gamma: glibc declares a function gamma() in <math.h>.
// Errors as values (LevelDB style): library code never prints or exits; the CLI turns a
// failed Status into one line on stderr and a non-zero exit.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace gm {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) { return Status(std::move(msg)); }
  template <typename... Args>
  static Status errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...));
  }
  bool is_ok() const { return !msg_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { static const std::string none; return msg_ ? *msg_ : none; }
  // Prefix context: "reading plan.json: " + message.
  Status with_context(const std::string& ctx) const {
    return is_ok() ? *this : Status(ctx + ": " + *msg_);
  }

 private:
  explicit Status(std::string msg) : msg_(std::move(msg)) {}
  std::optional<std::string> msg_;
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
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
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
