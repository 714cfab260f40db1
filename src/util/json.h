// Versioned JSON files between stages: every file carries {"schema": NAME, "version": N}.
#pragma once
#include <limits>
#include <stdexcept>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace gm {

using json = nlohmann::ordered_json;

// Parses `path`, checks schema name and version (a newer major version is refused).
Result<json> read_json(const std::string& path, const std::string& schema, int max_version);
// Pretty-prints and writes atomically.
Status write_json(const std::string& path, const json& j);

// j.at(key) as an integer type T, thrown as std::invalid_argument unless the JSON value is an
// integer that T holds. nlohmann's get<T>() casts a float such as 4e52 or -1.5 straight to T
// (undefined behaviour; found by fuzz/fuzz_manifest): readers of integer fields use this.
template <typename T>
T int_value(const json& v, const char* what) {
  const bool ok = v.is_number_unsigned()  ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                  : v.is_number_integer() ? v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                                                (v.get<int64_t>() < 0 || uint64_t(v.get<int64_t>()) <= uint64_t(std::numeric_limits<T>::max()))
                                          : false;
  if (!ok) throw std::invalid_argument(std::string("\"") + what + "\" is not an integer in range: " + v.dump());
  return v.get<T>();
}
template <typename T>
T int_at(const json& j, const char* key) { return int_value<T>(j.at(key), key); }
// The same for an array of integers.
template <typename T>
std::vector<T> ints_at(const json& j, const char* key) {
  const json& a = j.at(key);
  if (!a.is_array()) throw std::invalid_argument(std::string("\"") + key + "\" is not an array");
  std::vector<T> out;
  for (const auto& v : a) out.push_back(int_value<T>(v, key));
  return out;
}
json json_header(const std::string& schema, int version);

// Reads the fields of a typed format (EvalResult, RunList, ...) one by one: a missing or null
// field leaves its value unset; one of another type records an error naming its path ("field
// 'kld.mean' is not a number", code corrupt). Readers of nested objects share the first error,
// so a from_json reads every field and checks the Status once.
class FieldReader {
 public:
  FieldReader(const json& j, Status* status, std::string path = "");
  bool present() const { return j_ != nullptr; }  // the object exists (not missing or null)
  bool has(const char* key) const;                // the field exists and is not null
  // The object at `key`: a reader over nothing when missing or null.
  FieldReader object(const char* key) const;
  // The elements of the array at `key` ("runs[0]", ...); none when missing or null.
  std::vector<FieldReader> elements(const char* key) const;
  // The members of this object, in file order; readers over nothing for those not objects.
  std::vector<std::pair<std::string, FieldReader>> members() const;
  void get(const char* key, std::optional<double>* out) const;  // a finite number
  void get(const char* key, std::optional<uint64_t>* out) const;  // a whole number >= 0
  void get(const char* key, std::optional<std::string>* out) const;
  void get(const char* key, std::optional<bool>* out) const;
  void get(const char* key, std::optional<std::vector<double>>* out) const;  // an array of finite numbers
  template <typename T>
  std::optional<T> opt(const char* key) const {
    std::optional<T> v;
    get(key, &v);
    return v;
  }
  // Refuses any field not in `known` (typos fail loudly).
  void only(std::initializer_list<const char*> known) const;
  // Records "PATH: what" (or "what" at the top level) unless an error came first.
  void fail(const std::string& what) const;

 private:
  const json* field(const char* key) const;  // nullptr when missing or null
  std::string where(const char* key) const;
  void bad(const char* key, const char* what) const;
  const json* j_;
  Status* st_;
  std::string path_;
};

// A typed format's file: T::from_json of read_json(path, T::kSchema, T::kVersion), its errors
// naming the file.
template <typename T>
Result<T> load_typed(const std::string& path) {
  auto j = read_json(path, T::kSchema, T::kVersion);
  if (!j.is_ok()) return j.status();
  auto r = T::from_json(j.value());
  if (!r.is_ok()) return r.status().with_context(path);
  return r;
}

// An optional value as JSON: null when unset.
template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace gm
